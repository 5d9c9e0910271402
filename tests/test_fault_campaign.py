"""The fault campaign (``scripts/fault_campaign.py``) as assertions, CI-sized.

Every scenario of the script runs here on fewer rows against the loopback server. What must
hold in every one: no row is lost (every row comes back, in order, with a score or an error; a
score averages exactly the ``sc_n_judged`` comparisons it reports), and every network attempt
the runner counts reached the server.

Exactness. The script draws each request's fault from a hash of its body and of how many times
that body arrived before (see its docstring), so which call fails does not depend on the order
in which concurrent requests reach the server, and :func:`oracle` recomputes the requests and
the failed calls from the draws alone. Where no deadline can be missed (``timeout_seconds`` 5 s
against a 5 ms server: only a 5 s stall could) the counts are asserted equal to the oracle's.
Where a 0.5 s timeout is part of the scenario, a stalled CI machine could time out an ordinary
answer and add an attempt, so only ``>=`` the oracle is asserted. The sustained rate limit
depends on timing by design and is asserted with bounds explained at the test.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

pytestmark = pytest.mark.network

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fault_campaign.py"


def _load_campaign():
    spec = importlib.util.spec_from_file_location("safecons_fault_campaign", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before exec: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


campaign = _load_campaign()
SCENARIOS = {s.name: s for s in campaign.SCENARIOS}
ROWS = 40
MINIMUM = ROWS * 2 * 2  # rows x (responses_per_query - 1) x (SUT + judge)

# Scenarios whose every count is fixed by the draws (no deadline a stall could miss).
EXACT = ["clean", "429", "500", "malformed", "reset"]
JUDGE = ["judge_prose", "judge_empty", "judge_label", "judge_score", "judge_all"]
WITH_TIMEOUT = ["slow", "all", "all_r5"]


def assert_nothing_lost(r) -> None:
    assert r.rows_out == r.rows_in == ROWS
    assert (r.missing, r.miscounted, r.unexplained) == (0, 0, 0)
    assert r.lost == 0
    assert r.scored + r.errored == ROWS


def assert_attempts_reached_the_server(r) -> None:
    # Every attempt the runner counted is a request the server received, and vice versa.
    assert {k: r.attempts.get(k, 0) for k in ("sut", "judge")} == r.requests


@pytest.fixture(scope="module")
def results():
    """Each scenario runs once per module; the tests below read its result."""
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = campaign.run_scenario(SCENARIOS[name], ROWS)
        return cache[name]

    return get


def test_the_script_covers_the_issue_s_scenarios():
    kinds = Counter(f.kind for s in campaign.SCENARIOS for f, _ in s.faults)
    assert {"rate_limit", "server_error", "slow", "malformed", "reset"} <= set(kinds)
    assert dict(SCENARIOS["all"].faults) == dict(campaign.ALL_FAULTS)
    rates = {f.kind: p for f, p in campaign.ALL_FAULTS}
    assert rates == {
        "rate_limit": 0.20,
        "server_error": 0.10,
        "slow": 0.02,
        "malformed": 0.01,
        "reset": 0.02,
    }
    assert all(f.retry_after == 0.05 for f, _ in campaign.ALL_FAULTS if f.kind == "rate_limit")
    judged = {k for s in campaign.SCENARIOS for k, _ in s.judge_faults}
    assert judged == {"prose", "empty", "wrong_label", "out_of_range"}
    others = {"sustained", "sustained_off", "sigkill", "budget"}
    # Every scenario of the script is asserted below.
    assert set(EXACT + JUDGE + WITH_TIMEOUT) | others == set(SCENARIOS)


@pytest.mark.parametrize("name", EXACT + JUDGE)
def test_faults_lose_no_row_and_calls_equal_the_oracle(results, name):
    r = results(name)
    assert_nothing_lost(r)
    assert_attempts_reached_the_server(r)
    assert r.calls == r.expected_requests
    assert r.failed_calls == r.expected_failed
    # The same count without the oracle: a call that succeeds makes one attempt per fault it
    # was served plus one; a call that fails for good, one per fault; and a SUT call that
    # failed for good has no judge call.
    served = sum(r.faults_served.values())
    failed_sut, failed_judge = r.failed_calls.get("sut", 0), r.failed_calls.get("judge", 0)
    assert r.calls == MINIMUM + served - 2 * failed_sut - failed_judge


@pytest.mark.slow  # real-time stalls past a short timeout, seconds each
@pytest.mark.parametrize("name", WITH_TIMEOUT)
def test_faults_with_a_short_timeout_lose_no_row(results, name):
    r = results(name)
    assert_nothing_lost(r)
    assert_attempts_reached_the_server(r)
    # The oracle walks the calls the run made (the server's log) through their draws. A
    # stalled machine can only turn an answered attempt into a timeout, so each call makes at
    # least the attempts its draws predict (a call that then fails has no judge call, and
    # that judge call is in neither count).
    assert r.calls >= r.expected_requests
    s = r.scenario
    # And never more than every call's full retry budget.
    assert r.calls <= ROWS * 2 * (s.n_sut_retries + 1) + ROWS * 2 * (s.n_judge_retries + 1)
    assert r.faults_served.get("slow", 0) > 0


def test_clean_run_makes_exactly_the_minimum(results):
    r = results("clean")
    assert r.calls == MINIMUM and r.scored == ROWS and r.faults_served == {}
    assert r.rate_limited == 0 and r.min_target == r.scenario.concurrency


def test_429s_are_retried_after_retry_after_and_cut_the_in_flight_target(results):
    r = results("429")
    served = r.faults_served["rate_limit"]
    assert served > 0
    # The runner saw every 429 the server sent, and each cut the target at least once.
    assert r.rate_limited == served
    assert r.min_target < r.scenario.concurrency
    for message in r.errors:
        assert "HTTP 429" in message and message.endswith("(3 attempts)")


def test_errored_rows_carry_the_last_attempt_s_error(results):
    assert all("HTTP 500" in m for m in results("500").errors)
    assert all("malformed response body" in m for m in results("malformed").errors)
    # The sum of failed calls in the frame equals the runner's count (no failure unreported).
    for name in EXACT:
        r = results(name)
        assert sum(r.failed_calls.values()) == sum(r.expected_failed.values())


@pytest.mark.parametrize("name", ["judge_prose", "judge_empty", "judge_label", "judge_score"])
def test_broken_judge_outputs_are_retried_then_excluded_not_zeroed(results, name):
    r = results(name)
    assert r.faults_served, "the scenario served no broken output"
    # With one retry and 30% broken outputs some comparisons fail (row scored on the other,
    # and says so in sc_n_judged), and the oracle fixes exactly how many.
    assert r.partial > 0
    assert r.failed_calls.get("judge", 0) == r.expected_failed.get("judge", 0) > 0
    assert r.failed_calls.get("sut", 0) == 0
    for message in r.errors:
        assert message.startswith("every judge call failed (2 comparison(s))")
        assert "unusable judge output" in message


def test_a_judge_that_never_answers_well_errors_every_row(results):
    r = results("judge_all")
    assert r.scored == 0 and r.errored == ROWS
    assert r.calls == ROWS * 2 + ROWS * 2 * 2  # SUT once, judge twice per comparison
    assert all("every judge call failed" in m for m in r.errors)


@pytest.mark.slow  # real-time pacing under a sustained rate limit
def test_sustained_rate_limit_stays_close_to_the_minimum(results):
    """A server that answers 429 whenever more than 4 requests are in flight (limit 16).

    Timing decides how many 429s a run sees, so the bounds are structural. Adaptive pressure
    halves the target on each 429 burst and grows it by one per clean window; once the target
    is at most 4 no request can be refused (the server never has more in flight than the
    client), so a steady state refuses at most one window (<= 5 requests) per climb from 2 to 5
    (>= 9 successes): <= ~55% overhead, plus the first burst from 16 slots. Observed: x1.2.
    The bound x2 cannot be reached without pressure being broken; the comparison run without
    pressure (same server) observed x3.2 to x3.8 and errors most rows.
    """
    r = results("sustained")
    assert_nothing_lost(r)
    assert r.rate_limited > 0
    assert r.min_target <= campaign.SERVER_LIMIT
    assert r.calls <= 2 * MINIMUM
    off = results("sustained_off")
    assert_nothing_lost(off)
    assert off.calls > r.calls


def test_sigkill_mid_run_then_the_rerun_requests_only_what_was_not_stored(results):
    r = results("sigkill")
    assert_nothing_lost(r)
    assert r.scored == ROWS
    d = r.details
    assert 0 < d["stored"] < MINIMUM
    # Exact: the rerun made exactly the calls the cache did not hold, as the dry run planned,
    # and replayed every other one.
    assert d["rerun_attempts"] == MINIMUM - d["stored"] == d["planned"]
    assert d["cache_hits"] == d["stored"]
    assert r.calls == r.expected_requests
    # What the killed process had in flight was requested twice: at most its concurrency.
    assert MINIMUM <= r.calls <= MINIMUM + r.scenario.concurrency


def test_budget_stops_cleanly_and_the_rerun_finishes(results):
    r = results("budget")
    assert_nothing_lost(r)
    assert r.errored > 0 and all(m.startswith("not finished:") for m in r.errors)
    rerun = r.details["rerun"]
    assert rerun["scored"] == ROWS and rerun["errored"] == 0
    # The budget wasted nothing: both runs together made exactly the minimum.
    assert r.calls == MINIMUM


def test_the_loss_detector_detects_losses():
    """inspect_frame is what the table's 'lost' column rests on; check it on doctored frames."""
    import json

    import safecons as sc
    from safecons.testing import ScriptedChat

    df = campaign.frame(4)
    verdict = json.dumps({"label": "Consistent", "score": 0.9})
    out = sc.safety_consistency(
        df, sut=ScriptedChat(["no"]), judge=ScriptedChat([verdict]), progress=False
    )
    clean = campaign.inspect_frame(df, out)
    assert (clean["missing"], clean["miscounted"], clean["unexplained"]) == (0, 0, 0)
    dropped = campaign.inspect_frame(df, out.slice(1))
    assert dropped["missing"] == 1
    reordered = campaign.inspect_frame(df, out.reverse())
    assert reordered["missing"] == 1
    fewer = out.with_columns(
        pl.when(pl.col("input_id") == 2)
        .then(pl.lit([0.9, None], dtype=pl.List(pl.Float64)))
        .otherwise(pl.col("sc_scores"))
        .alias("sc_scores")
    )
    assert campaign.inspect_frame(df, fewer)["miscounted"] == 1
    silent = out.with_columns(
        pl.when(pl.col("input_id") == 3)
        .then(None)
        .otherwise(pl.col("safety_consistency"))
        .alias("safety_consistency")
    )
    assert campaign.inspect_frame(df, silent)["unexplained"] == 1


def test_table_renders_every_scenario_row(results):
    rows = [results(n) for n in ("clean", "judge_all", "budget")]
    text = campaign.table(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(line.count(" | ") == 11 for line in lines[2:])
    assert "= oracle" in lines[2]


def test_a_connection_reset_is_not_reported_as_a_plain_timeout():
    # The default (aiohttp) wire sees the reset itself and says so (httpx-aiohttp, the
    # transport before it, mapped it to a ConnectTimeout and the message could not tell).
    import safecons as sc
    from safecons.testing import FakeOpenAIServer, Fault, route_by_model

    responder = route_by_model({"sut": campaign.sut_answer, "judge": campaign.good_verdict})
    with FakeOpenAIServer(
        responder=responder, faults=lambda i, body: Fault.reset(), api_key=campaign.API_KEY
    ) as srv:
        sut, judge = campaign.clients(srv.base_url)
        out = sc.safety_consistency(
            campaign.frame(1),
            sut=sut,
            judge=judge,
            progress=False,
            n_sut_retries=0,
            allow_unscored=True,
        )
    error = out["sc_error"][0]
    assert error is not None and "Connection reset by peer" in error
    assert "timed out" not in error

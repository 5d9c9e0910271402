"""The Ray path (safecons.ray) in local mode: two actors against the loopback server.

Skipped when Ray is not installed (the `ray` extra); CI installs it and sets
SAFECONS_REQUIRE_RAY=1, which turns the skip into a failure.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sqlite3
import sys
import threading
import time
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import safecons as sc
from safecons.errors import InputError
from safecons.testing import FakeOpenAIServer, Fault, RateLimit, route_by_model

if os.environ.get("SAFECONS_REQUIRE_RAY") == "1":
    import ray.data
else:
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed: pip install 'safecons[ray]' to run the Ray tests"
    )
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")

import ray.cloudpickle

import safecons.ray as scr

# The Ray tests share one xdist group, which the README's `--dist loadgroup` runs on one worker:
# one Ray at a time on the machine (two local ones would both take the dashboard agent's fixed
# port, 52365, and each keeps both cores busy), and this module's Ray started once.
pytestmark = [
    pytest.mark.network,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("ray"),
]

# The actors unpickle what this module defines (judges, responders) by value: they cannot
# import the test module.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

REFUSE = "I'm sorry, I can't help with that."
KEY = "sk-ray-test-0123456789"


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(
        address="local",  # a new local Ray, never a cluster found running on the host
        # Ray's count, not the machine's: each actor reserves one CPU and mostly waits on the
        # network. With two, a finished run's actors (which Ray ends lazily) held both while
        # the next Dataset's first tasks waited for one, several seconds a test; and a pool of
        # three actors had room for two.
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"RAY_DATA_DISABLE_PROGRESS_BARS": "1"}},
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    yield
    ray.shutdown()


def candidate(user: str) -> str:
    return user.split("<<<CANDIDATE ANSWER ", 1)[1].split(">>>\n", 1)[1]


def verdict(refused: bool) -> str:
    if refused:
        return json.dumps({"label": "Consistent", "score": 0.95, "reason": "both refuse"})
    return json.dumps({"label": "Contradictory", "score": 0.2, "reason": "answered"})


def seeded_sut(body) -> str:
    """An answer fixed by the request (messages and seed): the same on both paths."""
    h = hashlib.sha256(json.dumps([body["messages"], body.get("seed")]).encode()).hexdigest()
    return REFUSE if int(h[0], 16) % 2 else f"Sure, here it is: {h[:12]}"


def posture_judge(body) -> str:
    return verdict("I'm sorry" in candidate(body["messages"][-1]["content"]))


def rows(n: int, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(start, start + n)],
            "prompt": [f"question {i}" for i in range(start, start + n)],
            "sut_response": [REFUSE] * n,
        }
    )


def dataset(df: pl.DataFrame, blocks: int):
    size = -(-df.height // blocks)
    return ray.data.from_arrow([df.slice(k, size).to_arrow() for k in range(0, df.height, size)])


def collect(ds) -> pl.DataFrame:
    parts = [pl.from_arrow(b) for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)]
    return pl.concat(parts).sort("input_id")


def clients(srv):
    sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=KEY, send_seed=True)
    judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url, api_key=KEY)
    return sut, judge


def settled(limiter) -> dict:
    """The limiter's stats once the releases sent without waiting have all arrived."""
    deadline = time.monotonic() + 30
    while True:
        stats = scr.limiter_stats(limiter)
        if stats["in_flight"] == 0 or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def test_two_actors_match_the_polars_path_row_for_row_under_one_cap():
    responder = route_by_model({"sut": seeded_sut, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, latency=0.03, api_key=KEY) as srv:
        sut, judge = clients(srv)
        df = rows(96)
        expected = sc.safety_consistency(
            df, sut=sut, judge=judge, progress=False, concurrency_limit=3, seed=7
        ).sort("input_id")
        srv.reset_stats()

        limiter = scr.global_limiter(3)
        out = scr.safety_consistency(
            dataset(df, 8),
            sut=sut,
            judge=judge,
            concurrency_limit=3,
            seed=7,
            batch_size=6,
            actors=2,
            limiter=limiter,
        )
        got = collect(out)
        server = srv.stats

    assert_frame_equal(got, expected)
    assert got["sc_error"].null_count() == got.height  # no row failed: the runs are comparable
    stats = settled(limiter)
    # One cap for both actors: each alone may hold 3, together they never hold more.
    assert server.max_in_flight <= 3 and stats["max_in_flight"] <= 3
    assert server.max_in_flight >= 2
    assert stats["holders"] == 2
    # Every lease came back; a permit serves several attempts in turn before it does.
    assert stats["in_flight"] == 0 and stats["granted"] == stats["released"]
    assert 0 < stats["granted"] < server.requests


def test_a_jury_with_a_swap_test_on_two_actors_matches_the_polars_path():
    def lenient(body) -> str:
        return verdict(True)

    responder = route_by_model({"sut": seeded_sut, "judge": posture_judge, "lenient": lenient})
    with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
        sut, judge = clients(srv)
        jury = [judge, sc.OpenAICompatible(model="lenient", base_url=srv.base_url, api_key=KEY)]
        df = rows(24)
        options = {"concurrency_limit": 3, "seed": 7, "swap_share": 0.5}
        expected = sc.safety_consistency(df, sut=sut, judge=jury, progress=False, **options)
        out = scr.safety_consistency(
            dataset(df, 4), sut=sut, judge=jury, batch_size=6, actors=2, **options
        )
        got = collect(out)
    assert_frame_equal(got, expected.sort("input_id"))
    assert got["sc_jurors"][0].to_list() == ["judge", "lenient"]
    assert got["sc_swap_labels"].explode().drop_nulls().len() > 0
    assert sc.run_summary(got).judge_reliability == sc.run_summary(expected).judge_reliability


def test_a_429_seen_by_one_actor_holds_back_every_actor():
    arrivals: list[float] = []
    fired: list[float] = []
    lock = threading.Lock()
    limiter = scr.global_limiter(4)
    both_at_work = threading.Event()
    done = threading.Event()

    def watch() -> None:
        # Polled here, not in the server's handler, whose loop must not wait on Ray.
        while not done.is_set() and not both_at_work.is_set():
            if scr.limiter_stats(limiter)["holders"] == 2:
                both_at_work.set()
            time.sleep(0.05)

    def faults(index, body):
        with lock:
            if body.get("model") != "sut":
                return None  # a cool-down holds one endpoint (URL and model): the SUT's
            arrivals.append(time.monotonic())
            # Only once both actors are at work, so that the other one has work to hold.
            if not fired and both_at_work.is_set():
                fired.append(time.monotonic())
                return Fault.rate_limit(2.0)
        return None

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    responder = route_by_model({"sut": seeded_sut, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, latency=0.02, faults=faults, api_key=KEY) as srv:
        sut, judge = clients(srv)
        out = scr.safety_consistency(
            dataset(rows(160), 8),
            sut=sut,
            judge=judge,
            concurrency_limit=4,
            batch_size=10,
            limiter=limiter,
        )
        got = collect(out)
    done.set()

    assert fired, "the 429 was never sent: both actors never worked at once"
    stats = settled(limiter)
    assert stats["rate_limited"] == 1
    [(endpoint, start, end)] = stats["cool_downs"]
    assert "sut" in endpoint and end - start == pytest.approx(2.0)
    # Ray's actors share this machine's monotonic clock with the server. From the moment the
    # limiter knew (the 429's way there is not timed), no new SUT request reached the server,
    # from either actor, but those granted just before (0.5 s of slack for a busy machine).
    held = [round(a - start, 3) for a in arrivals if start + 0.5 < a < end - 0.05]
    assert held == [], f"SUT requests arrived during the cool-down at {held} s"
    assert sum(a > end for a in arrivals) >= 20  # work was left for both after it
    assert got.height == 160 and got["sc_error"].null_count() == 160


def paced_run(pace: bool) -> tuple[pl.DataFrame, Any]:
    """Three actors, 30 rows, SUT and judge at 10 requests a second each (one-second windows),
    under one limiter that paces by the providers' headers or not."""
    responder = route_by_model({"sut": seeded_sut, "judge": posture_judge})
    limit = RateLimit(600, window=1.0)
    with FakeOpenAIServer(
        responder=responder, latency=0.02, api_key=KEY, rate_limit=limit, log_size=None
    ) as srv:
        sut, judge = clients(srv)
        out = scr.safety_consistency(
            dataset(rows(30), 6),
            sut=sut,
            judge=judge,
            concurrency_limit=8,
            batch_size=5,
            actors=3,
            limiter=scr.global_limiter(8, pace=pace),
        )
        return collect(out), srv.stats


def test_actors_are_paced_together_by_the_providers_rate_limit_headers():
    # Actors that each paced by their own answers would each take the whole limit; paced
    # through the limiter, together they keep under it. Both runs share the machine's load,
    # so the one without the shared pace is the measure (docs/scale-out.md has figures).
    paced, with_pace = paced_run(True)
    alone, without = paced_run(False)
    for got in (paced, alone):
        assert got.height == 30 and got["sc_error"].null_count() == 30
    print(
        f"429s: {with_pace.rate_limited} of {with_pace.requests} paced together, "
        f"{without.rate_limited} of {without.requests} each actor on its own"
    )
    # Measured: 0 to 9 of about 125 paced together, 19 and 20 of about 140 on their own.
    assert with_pace.rate_limited <= 0.1 * with_pace.requests
    assert with_pace.rate_limited < without.rate_limited


class CrashingJudge:
    """A judge (a plain function of messages) whose actor dies at its ``after``-th call, once
    per test: before it dies it writes down the SUT answers the cache holds."""

    def __init__(self, marker: str, cache: str, after: int) -> None:
        self.marker, self.cache, self.after = marker, cache, after
        self.calls = itertools.count(1)

    def __call__(self, messages, *, temperature):
        if next(self.calls) == self.after:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                with sqlite3.connect(self.cache) as db:
                    stored = [v for (v,) in db.execute("SELECT value FROM responses")]
                os.write(fd, json.dumps(stored).encode())
                os.close(fd)
                os._exit(1)  # the actor's process dies here, mid-batch
        return verdict("I'm sorry" in candidate(messages[-1]["content"]))


def test_an_actor_killed_mid_run_loses_no_row_and_repeats_no_stored_call(tmp_path):
    seen: dict[str, int] = {}
    request_of: dict[str, str] = {}
    counter = itertools.count()
    lock = threading.Lock()

    def numbered_sut(body):
        request = json.dumps([body["messages"], body.get("seed")])
        with lock:
            k = next(counter)
            seen[request] = seen.get(request, 0) + 1
            request_of[f"answer-{k:05d}"] = request
        return f"{REFUSE} (answer-{k:05d})"

    cache = tmp_path / "calls.sqlite"
    marker = tmp_path / "crashed.json"
    limiter = scr.global_limiter(4)
    with FakeOpenAIServer(responder=route_by_model({"sut": numbered_sut}), latency=0.02) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, send_seed=True)
        out = scr.safety_consistency(
            dataset(rows(120), 6),
            sut=sut,
            judge=CrashingJudge(str(marker), str(cache), after=25),
            concurrency_limit=4,
            batch_size=10,
            cache=cache,
            limiter=limiter,
        )
        got = collect(out)

    assert marker.exists(), "no actor crashed: the test proved nothing"
    stored_at_crash = set(re.findall(r"answer-\d{5}", marker.read_text()))
    assert stored_at_crash  # calls were stored before the crash
    # Nothing lost: every row, once, fully judged.
    assert got["input_id"].to_list() == sorted(f"row-{i}" for i in range(120))
    assert got["sc_error"].null_count() == 120
    assert got["sc_n_judged"].to_list() == [2] * 120
    # A call stored before the crash was replayed, never requested again ...
    repeated = {request_of[a] for a in stored_at_crash if seen[request_of[a]] > 1}
    assert repeated == set()
    answers = set(re.findall(r"answer-\d{5}", " ".join(map(str, got["sc_responses"].to_list()))))
    assert stored_at_crash <= answers
    # ... and only the calls in flight when the actor died (at most the cap) were asked twice.
    assert sum(n - 1 for n in seen.values()) <= 4
    # The restarted actor took back its dead life's permit at once; none leaked.
    stats = settled(limiter)
    assert stats["reclaimed"] >= 1 and stats["in_flight"] == 0


def test_bad_rows_are_refused_before_any_call():
    with FakeOpenAIServer(latency=0.0) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url)
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        dup = pl.concat([rows(20), rows(20, start=30), rows(5, start=3)])
        with pytest.raises(InputError, match=r"duplicate values: \['row-3'"):
            scr.safety_consistency(dataset(dup, 3), sut=sut, judge=judge)
        null = rows(30).with_columns(
            pl.when(pl.col("input_id") == "row-25")
            .then(None)
            .otherwise(pl.col("sut_response"))
            .alias("sut_response")
        )
        with pytest.raises(InputError, match=r"'sut_response' is null in 1 row.*'row-25'"):
            scr.safety_consistency(dataset(null, 3), sut=sut, judge=judge)
        with pytest.raises(InputError, match=r"missing column\(s\) 'prompt'"):
            scr.safety_consistency(dataset(rows(4).drop("prompt"), 1), sut=sut, judge=judge)
        assert srv.stats.requests == 0


def test_actor_resources_are_checked_before_anything_runs():
    ds = dataset(rows(4), 1)
    sut = sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1")
    bad = {
        "expected a mapping of resource name to quantity, got list": ["scorer"],
        "expected resource names as strings, got 1": {1: 1.0},
        r"'scorer': expected a quantity >= 0, got True": {"scorer": True},
        r"'scorer': expected a quantity >= 0, got inf": {"scorer": float("inf")},
        # Ray's own rules, read from Ray.
        "Use the 'num_cpus'": {"CPU": 1},
        "cannot be negative": {"scorer": -1},
    }
    for message, resources in bad.items():
        with pytest.raises(InputError, match=f"resources: .*{message}"):
            scr.safety_consistency(ds, sut=sut, judge=sut, resources=resources, validate=False)
    # A resource no node has is not an error here: a node with it may join the cluster later.
    scr.safety_consistency(ds, sut=sut, judge=sut, resources={"scorer": 0.5}, validate=False)


def test_a_batched_client_is_refused_by_the_ray_path_by_name():
    ds = dataset(rows(4), 1)
    batched = sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key="", batch=True)
    live = sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key="")
    with pytest.raises(InputError, match=r"^sut: a client made with batch=True"):
        scr.safety_consistency(ds, sut=batched, judge=live, validate=False)
    with pytest.raises(InputError, match=r"^judge: a client made with batch=True"):
        scr.safety_consistency(ds, sut=live, judge=batched, validate=False)


def test_arguments_the_ray_path_cannot_take_are_refused_by_name():
    ds = dataset(rows(4), 1)
    sut = sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(InputError, match=r"expected a ray\.data\.Dataset, got DataFrame"):
        scr.safety_consistency(rows(4), sut=sut, judge=sut)
    with pytest.raises(InputError, match="max_calls: not an option of the Ray path"):
        scr.safety_consistency(ds, sut=sut, judge=sut, max_calls=10)
    with pytest.raises(InputError, match="actors: expected a whole number"):
        scr.safety_consistency(ds, sut=sut, judge=sut, actors=0)
    with pytest.raises(InputError, match="max_in_flight: expected a whole number"):
        scr.safety_consistency(ds, sut=sut, judge=sut, max_in_flight=True)
    lock = threading.Lock()
    with pytest.raises(InputError, match="judge: cannot be sent to Ray's actors"):
        scr.safety_consistency(
            ds, sut=sut, judge=lambda messages, temperature: str(lock), validate=False
        )

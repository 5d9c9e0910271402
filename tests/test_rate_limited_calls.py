"""A 429 is back-pressure, not a failure: it spends no retry of its call (within a bound)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

import safecons as sc
from safecons.clients import RetryableCallError
from safecons.run import RetryPolicy, Runner
from safecons.run._headers import HeaderPace
from safecons.run._runner import MAX_RATE_LIMITED_FREE, RATE_LIMIT_PATIENCE_SECONDS
from safecons.testing import FakeOpenAIServer, RateLimit, StandInJudge, route_by_model

FAST = RetryPolicy(base_delay=0.001, max_delay=0.01)


def scripted(*failures: str):
    """An attempt that fails as ``failures`` say ("429" or "503"), then answers."""
    state = {"n": 0}

    async def attempt(_attempt) -> str:
        n = state["n"]
        state["n"] += 1
        if n < len(failures):
            kind = failures[n]
            raise RetryableCallError(kind, rate_limited=kind == "429", retry_after=0.001)
        return "ok"

    return attempt, state


@pytest.mark.anyio
async def test_429s_do_not_spend_retries_but_count_as_attempts() -> None:
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST, max_calls=100)
    attempt, _ = scripted("429", "429", "429", "503", "429")
    outcome = await runner.call(attempt, retries=1, kind="sut")
    assert outcome.value == "ok"
    assert (outcome.attempts, outcome.rate_limited) == (6, 4)
    assert runner._spent == 6  # the max_calls budget saw every one


@pytest.mark.anyio
async def test_other_failures_still_spend_retries() -> None:
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST)
    attempt, _ = scripted("503", "429", "503", "503")
    outcome = await runner.call(attempt, retries=1, kind="sut")
    assert outcome.value is None
    assert outcome.error == "503 (3 attempts)"
    assert outcome.rate_limited == 1


@pytest.mark.anyio
async def test_the_max_calls_budget_bounds_free_429s() -> None:
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST, max_calls=5)
    attempt, _ = scripted(*["429"] * 50)
    outcome = await runner.call(attempt, retries=0, kind="sut")
    assert outcome.skipped and outcome.attempts == 5


@pytest.mark.anyio
async def test_past_the_cap_of_free_429s_they_spend_retries() -> None:
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST)
    attempt, state = scripted(*["429"] * (MAX_RATE_LIMITED_FREE + 10))
    outcome = await runner.call(attempt, retries=2, kind="sut")
    assert outcome.value is None
    assert outcome.attempts == MAX_RATE_LIMITED_FREE + 3
    assert state["n"] == MAX_RATE_LIMITED_FREE + 3


@pytest.mark.anyio
async def test_past_the_patience_429s_spend_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST)
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    # Each back-off "waits" a quarter of the patience, on a sleep that returns at once.
    monkeypatch.setattr(
        runner.policy.__class__,
        "delay",
        lambda self, attempt, retry_after, rng: RATE_LIMIT_PATIENCE_SECONDS / 4,
    )
    monkeypatch.setattr("safecons.run._runner.anyio.sleep", no_sleep)
    attempt, _ = scripted(*["429"] * 20)
    outcome = await runner.call(attempt, retries=1, kind="sut")
    # Four free ones use up the patience; then two that spend the retries.
    assert outcome.value is None
    assert outcome.attempts == 6


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


@pytest.mark.slow  # real-time pacing against a rate-limited server
@pytest.mark.network
@pytest.mark.timeout(60)
def test_every_row_scored_under_a_providers_rate_limit() -> None:
    # A run at 1,440 requests a minute in half-second windows of 12: 150 rows, 2
    # answers each, 64 in flight, the default retries. Before, most rows ended in 429s.
    limit = RateLimit(1440, window=0.5)
    with FakeOpenAIServer(rate_limit=limit, responder=lambda body: "I can't help.") as srv:
        out = rows(150).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url),
            judge=StandInJudge(),
            responses_per_query=2,
            concurrency_limit=64,
            progress=False,
        )
        stats = srv.stats
    assert out["sc_error"].null_count() == 150
    answered = stats.statuses.get(200, 0)
    assert answered == 150
    # The wall time against the limit-bound ideal is the harness's to measure ("provider
    # limits" in benchmarks/harness.py): a loaded machine may miss any bound set here.
    assert stats.rate_limited <= 0.05 * stats.requests


@pytest.mark.slow  # real-time pacing against a rate-limited server
@pytest.mark.network
@pytest.mark.timeout(120)
@pytest.mark.parametrize("reset", ["full", "next"])
def test_every_row_scored_under_a_token_bucket_with_hardly_a_429(reset) -> None:
    # A provider that refills continuously (20 a second), whose reset says when it is full
    # (OpenAI's word) or when the next request fits (a gateway's; its limit then a minute's).
    # Before the pace let a turned window out at the limit's rate, the "next" kind had 57%
    # of its requests answered 429.
    limit = RateLimit(1200, window=1.0, bucket=True, bucket_reset=reset)
    with FakeOpenAIServer(rate_limit=limit, responder=lambda body: "I can't help.") as srv:
        out = rows(60).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=""),
            judge=StandInJudge(),
            responses_per_query=2,
            concurrency_limit=64,
            progress=False,
        )
        stats = srv.stats
    assert out["sc_error"].null_count() == 60
    assert stats.statuses.get(200, 0) == 60
    # The goal (at most 1% answered 429) is held on the virtual clock (tests/test_policy.py),
    # where no load can move it. Here the server runs in the test's own process and stamps a
    # request when its thread gets to it, so a starved machine can bunch paced requests: with
    # five busy processes on two cores, 2 of 12 runs had 2-3 of 65 answered 429 (idle: none).
    # The bound still fails the pace this test was written against (57%).
    assert stats.rate_limited <= 0.1 * stats.requests


def tpm_limited_run() -> tuple[pl.DataFrame, Any]:
    """The metric, SUT and judge on one server whose limit is in tokens (10,000 a second a
    model, in half-second windows), each request counted as its prompt plus its max_tokens."""
    limit = RateLimit(tokens_per_minute=600_000, window=0.5)
    verdict = json.dumps({"label": "Consistent", "score": 0.9})
    responder = route_by_model({"sut": lambda body: "I can't help.", "judge": lambda body: verdict})
    bounded = {"max_tokens": 64}
    with FakeOpenAIServer(rate_limit=limit, responder=responder) as srv:
        out = rows(40).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(base_url=srv.base_url, model="sut", api_key="", params=bounded),
            judge=sc.OpenAICompatible(
                base_url=srv.base_url, model="judge", api_key="", params=bounded
            ),
            responses_per_query=2,
            concurrency_limit=64,
            progress=False,
        )
        return out, srv.stats


@pytest.mark.slow  # real-time pacing against a rate-limited server
@pytest.mark.network
@pytest.mark.timeout(60)
def test_every_row_scored_under_a_providers_tokens_per_minute_limit() -> None:
    # The run paces each endpoint by the tokens its answers say remain: almost nothing is 429.
    out, stats = tpm_limited_run()
    assert out["sc_error"].null_count() == 40
    assert out["safety_consistency"].null_count() == 0
    assert stats.statuses.get(200, 0) == 80  # a SUT sample and a judge call a row
    print(f"429s with the tokens pace: {stats.rate_limited} of {stats.requests} requests")
    assert stats.rate_limited <= 0.05 * stats.requests


@pytest.mark.slow  # real-time pacing against a rate-limited server
@pytest.mark.network
@pytest.mark.timeout(120)
def test_without_the_tokens_pace_the_same_run_meets_429s(monkeypatch) -> None:
    # The check above can fail: the same run with the pace reading requests only.
    monkeypatch.setattr(HeaderPace, "counts_tokens", property(lambda self: False))
    out, stats = tpm_limited_run()
    assert out["sc_error"].null_count() == 40  # 429s spend no retry: every row still scores
    print(f"429s without the tokens pace: {stats.rate_limited} of {stats.requests} requests")
    assert stats.rate_limited > 0.05 * stats.requests


@pytest.mark.anyio
async def test_a_429_that_says_no_wait_spends_a_retry() -> None:
    # A bare 429 (no Retry-After, no reset time) may be a quota waiting does not mend.
    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST)
    state = {"n": 0}

    async def attempt(_attempt) -> str:
        state["n"] += 1
        raise RetryableCallError("429 insufficient_quota", rate_limited=True)

    outcome = await runner.call(attempt, retries=2, kind="sut")
    assert outcome.error == "429 insufficient_quota (3 attempts)"
    assert outcome.rate_limited == 3


@pytest.mark.anyio
async def test_a_429_with_a_token_reset_says_when_and_spends_no_retry() -> None:
    from safecons.clients import RateLimits

    runner = Runner(concurrency_limit=4, timeout_seconds=5, policy=FAST)
    state = {"n": 0}
    word = RateLimits(limit_tokens=100, remaining_tokens=0, reset_tokens=0.001)

    async def attempt(_attempt) -> str:
        state["n"] += 1
        if state["n"] <= 3:
            raise RetryableCallError("429 tokens", rate_limited=True, rate_limits=word)
        return "ok"

    outcome = await runner.call(attempt, retries=0, kind="sut", tokens=10)
    assert outcome.value == "ok"
    assert (outcome.attempts, outcome.rate_limited) == (4, 3)


@pytest.mark.network
def test_a_request_too_large_for_the_limit_fails_at_once_and_says_why() -> None:
    # 200 tokens per one-second window; each SUT request asks max_tokens=500 on its own.
    limit = RateLimit(tokens_per_minute=12_000, window=1.0)
    with FakeOpenAIServer(responder=lambda body: "no", rate_limit=limit) as srv:
        sut = sc.OpenAICompatible(
            base_url=srv.base_url, model="sut", api_key="", params={"max_tokens": 500}
        )
        out = pl.DataFrame(
            {"input_id": [1], "prompt": ["hello"], "sut_response": ["I can't help."]}
        ).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            cache=False,
            progress=False,
            allow_unscored=True,
        )
        requests = srv.stats.requests
    error = out["sc_error"][0]
    assert "Request too large" in error and "lower max_tokens" in error
    # Not asked again: each sample's call failed on its first attempt.
    assert requests == out["sc_spend"][0]["sut_attempts"]
    assert out["sc_spend"][0]["sut_attempts"] == 2


@pytest.mark.slow  # real-time pacing against a rate-limited server
@pytest.mark.network
@pytest.mark.timeout(120)
def test_429s_slow_a_run_whose_provider_announces_more_than_it_admits() -> None:
    # A provider that announces a per-minute limit and enforces it in sub-minute slices: a
    # bucket of 20 refilled at 20 a second, whose remaining counts the request itself (one
    # too many each time it drains). Read alone, its headers had 8 of 308 requests answered
    # 429 (8 of 208 at 200 calls); the 429s now cut the endpoint's send rate to what the
    # provider admits (4 of 304; 2 and 3 of some 200). (Counts only: the pace is the benchmark's,
    # benchmarks/bench_pacing.py.)
    limit = RateLimit(1200, window=1.0, bucket=True, announced_requests=1200, remaining_before=True)
    with FakeOpenAIServer(rate_limit=limit, responder=lambda body: "I can't help.") as srv:
        out = rows(150).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=""),
            judge=StandInJudge(),
            responses_per_query=3,
            concurrency_limit=64,
            progress=False,
        )
        stats = srv.stats
    assert out["sc_error"].null_count() == 150
    assert stats.statuses.get(200, 0) == 300
    # A loaded machine may bunch a few paced requests (see the token-bucket test above).
    assert stats.rate_limited <= 6, stats.rate_limited

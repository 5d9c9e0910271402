"""Reading a provider's rate-limit headers: durations, names, and where the limits go."""

from __future__ import annotations

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from safecons.clients import (
    Completion,
    OpenAICompatible,
    RateLimits,
    RetryableCallError,
    parse_rate_limits,
)
from safecons.clients._internal import Attempt, parse_duration
from safecons.testing import FakeOpenAIServer, RateLimit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("0.35s", 0.35),
        ("1s", 1.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("7.66s", 7.66),
        ("2", 2.0),
        ("0.5", 0.5),
        (" 1s ", 1.0),
        ("0ms", 0.0),
        ("500us", 0.0005),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "-1s", "1x", "s", "1s2", "nan", "inf", "m1s"])
def test_not_durations(text: str) -> None:
    assert parse_duration(text) is None


@given(
    minutes=st.integers(0, 600),
    millis=st.integers(0, 59_999),
)
def test_go_durations_round_trip(minutes: int, millis: int) -> None:
    seconds = millis / 1000
    text = f"{minutes}m{seconds:g}s" if minutes else f"{seconds:g}s"
    assert parse_duration(text) == pytest.approx(minutes * 60 + seconds)
    assert parse_duration(f"{millis}ms") == pytest.approx(seconds)


OPENAI = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-limit-tokens": "2000000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-remaining-tokens": "1999985",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-reset-tokens": "0s",
}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            OPENAI,
            RateLimits(10000, 9999, 0.006, 2_000_000, 1_999_985, 0.0),
        ),
        (  # a 429 of OpenAI's: the same names, and the wait
            {**OPENAI, "x-ratelimit-remaining-requests": "0", "retry-after": "2"},
            RateLimits(10000, 0, 0.006, 2_000_000, 1_999_985, 0.0, retry_after=2.0),
        ),
        (  # a gateway that sends the remaining count alone
            {"x-ratelimit-remaining-requests": "3"},
            RateLimits(remaining_requests=3),
        ),
        (  # the IETF draft's names, seconds as plain numbers
            {"ratelimit-limit": "100", "ratelimit-remaining": "0", "ratelimit-reset": "7"},
            RateLimits(limit_requests=100, remaining_requests=0, reset_requests=7.0),
        ),
        (  # what cannot be read is missing, not an error
            {"x-ratelimit-remaining-requests": "lots", "x-ratelimit-reset-requests": "soon"},
            None,
        ),
        ({"retry-after-ms": "250"}, RateLimits(retry_after=0.25)),
        ({"content-type": "application/json"}, None),
    ],
)
def test_rate_limits_of_headers(headers: dict[str, str], expected: RateLimits | None) -> None:
    assert parse_rate_limits(httpx.Headers(headers)) == expected


def test_completion_equality_ignores_the_limits() -> None:
    assert Completion("a", rate_limits=RateLimits(remaining_requests=1)) == Completion("a")


@pytest.mark.network
@pytest.mark.timeout(30)
def test_limits_reach_the_completion_the_error_and_the_attempt() -> None:
    async def main(base_url: str) -> tuple[Completion, RetryableCallError, Attempt]:
        client = OpenAICompatible(base_url=base_url, model="m", api_key="k")
        async with client.session() as session:
            first = await session.complete([{"role": "user", "content": "hi"}], temperature=0)
            start = Attempt()
            with pytest.raises(RetryableCallError) as caught:
                await session.attempt(start, [{"role": "user", "content": "hi"}], temperature=0)
        return first, caught.value, start

    with FakeOpenAIServer(rate_limit=RateLimit(1)) as srv:
        first, error, start = anyio.run(main, srv.base_url)
    assert first.rate_limits is not None
    assert (first.rate_limits.limit_requests, first.rate_limits.remaining_requests) == (1, 0)
    assert 0 < (first.rate_limits.reset_requests or 0) <= 60
    assert error.rate_limited
    assert error.rate_limits is not None
    assert error.rate_limits.remaining_requests == 0
    assert error.rate_limits.retry_after == error.retry_after
    assert start.rate_limits == error.rate_limits

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
from safecons.clients._rate_limits import parse_retry_after
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


class _CountingHeaders(dict[str, str]):
    """Headers that count the names looked up one by one (``get`` and ``[]``)."""

    looked_up = 0

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
        self.looked_up += 1
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        self.looked_up += 1
        return super().__getitem__(name.lower())


def test_an_answer_without_limits_is_read_without_a_lookup_per_name() -> None:
    # Most answers carry no rate-limit header: one look at the names, not eleven lookups.
    plain = _CountingHeaders({"content-type": "application/json", "content-length": "2"})
    assert parse_rate_limits(plain) is None
    assert plain.looked_up == 0
    some = _CountingHeaders({"content-type": "application/json", "retry-after": "2"})
    assert parse_rate_limits(some) == RateLimits(retry_after=2.0)
    assert some.looked_up > 0


_NAMES = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "retry-after",
    "retry-after-ms",
)


@given(
    sent=st.dictionaries(
        st.sampled_from(_NAMES).flatmap(
            lambda name: st.sampled_from([name, name.upper(), name.title()])
        ),
        st.sampled_from(["0", "7", "10.0", "6m0s", "20ms", "soon", "-1", ""]),
        max_size=4,
    ),
    other=st.dictionaries(
        st.sampled_from(["content-type", "Server", "x-request-id", "X-RateLimit", "date"]),
        st.sampled_from(["application/json", "1", "x"]),
        max_size=3,
    ),
)
def test_the_quick_look_reads_what_the_lookups_read(
    sent: dict[str, str], other: dict[str, str]
) -> None:
    """Whatever names an answer carries, in whatever case, the limits read are those the
    lookup of each name finds."""
    headers = httpx.Headers({**other, **sent})
    expected = RateLimits(
        limit_requests=_whole(headers, "x-ratelimit-limit-requests", "ratelimit-limit"),
        remaining_requests=_whole(headers, "x-ratelimit-remaining-requests", "ratelimit-remaining"),
        reset_requests=_seconds(headers, "x-ratelimit-reset-requests", "ratelimit-reset"),
        limit_tokens=_whole(headers, "x-ratelimit-limit-tokens"),
        remaining_tokens=_whole(headers, "x-ratelimit-remaining-tokens"),
        reset_tokens=_seconds(headers, "x-ratelimit-reset-tokens"),
        retry_after=parse_retry_after(headers),
    )
    assert parse_rate_limits(headers) == (None if expected == RateLimits() else expected)


def _whole(headers: httpx.Headers, *names: str) -> int | None:
    for name in names:
        try:
            value = float(headers.get(name, "x"))
        except ValueError:
            continue
        if value >= 0 and value != float("inf"):
            return int(value)
    return None


def _seconds(headers: httpx.Headers, *names: str) -> float | None:
    for name in names:
        value = parse_duration(headers.get(name, "x"))
        if value is not None:
            return value
    return None

"""The fake server's requests-per-minute limit: fixed windows, OpenAI's headers, 429s."""

from __future__ import annotations

import time

import httpx
import pytest

from safecons._server import FakeOpenAIServer, RateLimit, openai_duration
from safecons.testing import RateLimit as PublicRateLimit

pytestmark = [pytest.mark.network, pytest.mark.timeout(30)]

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
)


def test_rate_limit_is_public_through_testing() -> None:
    assert PublicRateLimit is RateLimit


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0ms"),
        (0.02, "20ms"),
        (0.35, "350ms"),
        (1.0, "1s"),
        (2.5, "2.5s"),
        (360.0, "6m0s"),
        (61.5, "1m1.5s"),
    ],
)
def test_openai_duration_forms(seconds: float, text: str) -> None:
    assert openai_duration(seconds) == text


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10"])
def test_rate_limit_rejects_bad_values(bad: object) -> None:
    with pytest.raises(ValueError, match="RateLimit"):
        RateLimit(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="RateLimit"):
        RateLimit(60, window=bad)  # type: ignore[arg-type]


def test_per_window_scales_the_minute_rate() -> None:
    assert RateLimit(600).per_window == 600
    assert RateLimit(600, window=1.0).per_window == 10
    assert RateLimit(1, window=1.0).per_window == 1  # a window admits at least one


def test_window_admits_its_share_then_429_with_retry_after_and_headers() -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(300, window=2.0)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        answers = [http.post("/chat/completions", json=BODY) for _ in range(12)]
        stats = srv.stats
    assert [r.status_code for r in answers] == [200] * 10 + [429] * 2
    for r in answers:
        assert all(h in r.headers for h in HEADERS)
        assert r.headers["x-ratelimit-limit-requests"] == "10"
    remaining = [int(r.headers["x-ratelimit-remaining-requests"]) for r in answers]
    assert remaining == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0]
    limited = answers[-1]
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert 0 < float(limited.headers["retry-after"]) <= 2.0
    assert "retry-after" not in answers[0].headers
    assert stats.rate_limited == 2
    assert stats.statuses == {200: 10, 429: 2}
    assert stats.faults == {}  # the limit is not an injected fault


def test_next_window_admits_again() -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(240, window=0.5)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        first = [http.post("/chat/completions", json=BODY).status_code for _ in range(2)]
        wait = float(http.post("/chat/completions", json=BODY).headers["retry-after"])
        time.sleep(wait + 0.02)
        again = http.post("/chat/completions", json=BODY)
    assert first == [200, 200]
    assert again.status_code == 200
    assert again.headers["x-ratelimit-remaining-requests"] == "1"


def test_number_is_requests_per_minute_and_reset_stats_restarts_the_window() -> None:
    with FakeOpenAIServer(rate_limit=2) as srv, httpx.Client(base_url=srv.base_url) as http:
        codes = [http.post("/chat/completions", json=BODY).status_code for _ in range(3)]
        reset = http.post("/chat/completions", json=BODY).headers["x-ratelimit-reset-requests"]
        srv.reset_stats()
        after = http.post("/chat/completions", json=BODY).status_code
    assert codes == [200, 200, 429]
    assert reset.endswith("s")  # "59.9s" or so: OpenAI's form
    assert after == 200


def test_no_limit_no_headers() -> None:
    with FakeOpenAIServer() as srv, httpx.Client(base_url=srv.base_url) as http:
        r = http.post("/chat/completions", json=BODY)
    assert not any(h in r.headers for h in HEADERS)
    assert srv.stats.rate_limited == 0

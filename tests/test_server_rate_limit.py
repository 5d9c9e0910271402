"""The fake server's requests-per-minute limit: fixed windows, OpenAI's headers, 429s."""

from __future__ import annotations

import httpx
import pytest

from safecons.testing import RateLimit as PublicRateLimit
from safecons.testing._rate_limit import RateLimit, openai_duration
from safecons.testing._server import FakeOpenAIServer

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


class _Clock:
    """The server's clock, moved by the test alone: however long a loaded machine takes
    between two requests, no window ends and no bucket refills that the test does not move."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def server_clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from safecons.testing import _server

    clock = _Clock()
    monkeypatch.setattr(_server, "time", clock)
    return clock


def test_next_window_admits_again(server_clock: _Clock) -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(240, window=0.5)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        first = [http.post("/chat/completions", json=BODY).status_code for _ in range(2)]
        wait = float(http.post("/chat/completions", json=BODY).headers["retry-after"])
        server_clock.now += wait + 0.02
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


TOKEN_HEADERS = (
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
)


def test_a_limit_needs_requests_or_tokens() -> None:
    with pytest.raises(ValueError, match="RateLimit"):
        RateLimit()
    with pytest.raises(ValueError, match=r"RateLimit\.tokens_per_minute"):
        RateLimit(tokens_per_minute=0)
    with pytest.raises(ValueError, match="unbounded_completion_tokens"):
        RateLimit(tokens_per_minute=10, unbounded_completion_tokens=-1)
    assert RateLimit(tokens_per_minute=6000, window=1.0).tokens_per_window == 100
    assert RateLimit(tokens_per_minute=6000).per_window is None


def test_a_request_counts_its_prompt_and_its_completion_bound() -> None:
    from safecons._tokens import estimate_tokens

    prompt = estimate_tokens(BODY["messages"], model="m")
    limit = RateLimit(tokens_per_minute=1000, unbounded_completion_tokens=7)
    assert limit.request_tokens({**BODY, "max_tokens": 50}) == prompt + 50
    assert limit.request_tokens({**BODY, "max_completion_tokens": 40}) == prompt + 40
    assert limit.request_tokens(BODY) == prompt + 7


def test_tokens_per_minute_admit_what_fits_then_429_with_headers() -> None:
    from safecons._tokens import estimate_tokens

    cost = estimate_tokens(BODY["messages"], model="m") + 100
    body = {**BODY, "max_tokens": 100}
    # Three requests' worth a window (two-second windows), requests not limited.
    limit = RateLimit(tokens_per_minute=3 * cost * 30, window=2.0)
    with (
        FakeOpenAIServer(rate_limit=limit) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        answers = [http.post("/chat/completions", json=body) for _ in range(4)]
        stats = srv.stats
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    for r in answers:
        assert all(h in r.headers for h in TOKEN_HEADERS)
        assert not any(h in r.headers for h in HEADERS)
        assert r.headers["x-ratelimit-limit-tokens"] == str(3 * cost)
    remaining = [int(r.headers["x-ratelimit-remaining-tokens"]) for r in answers]
    assert remaining == [2 * cost, cost, 0, 0]
    limited = answers[-1]
    assert "tokens per min (TPM)" in limited.json()["error"]["message"]
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert 0 < float(limited.headers["retry-after"]) <= 2.0
    assert stats.rate_limited == 1


def test_a_smaller_request_still_fits_what_a_larger_one_did_not() -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(tokens_per_minute=300)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        big = http.post("/chat/completions", json={**BODY, "max_tokens": 200})
        bigger = http.post("/chat/completions", json={**BODY, "max_tokens": 200})
        small = http.post("/chat/completions", json={**BODY, "max_tokens": 10})
    assert [big.status_code, bigger.status_code, small.status_code] == [200, 429, 200]


def test_a_request_larger_than_a_window_is_too_large_not_asked_to_wait() -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(600, tokens_per_minute=600, window=1.0)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        r = http.post("/chat/completions", json={**BODY, "max_tokens": 50})
    assert r.status_code == 429
    assert r.json()["error"]["message"].startswith("Request too large")
    assert r.json()["error"]["type"] == "tokens"
    assert "retry-after" not in r.headers
    assert all(h in r.headers for h in HEADERS + TOKEN_HEADERS)


def test_each_model_has_windows_of_its_own() -> None:
    with (
        FakeOpenAIServer(rate_limit=RateLimit(1)) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        codes = [
            http.post("/chat/completions", json={**BODY, "model": model}).status_code
            for model in ("a", "b", "a")
        ]
    assert codes == [200, 200, 429]  # one a window per model


# ------------------------------------------------------------------------ token buckets


def test_a_bucket_admits_what_it_holds_then_refills_continuously(server_clock: _Clock) -> None:
    limit = RateLimit(600, window=1.0, bucket=True)  # holds 10, refills 10 a second
    with (
        FakeOpenAIServer(rate_limit=limit) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        first = [http.post("/chat/completions", json=BODY) for _ in range(11)]
        server_clock.now += 0.25  # 2.5 requests' worth refilled
        later = [http.post("/chat/completions", json=BODY) for _ in range(4)]
    assert [r.status_code for r in first[:10]] == [200] * 10
    assert first[10].status_code == 429
    assert first[0].headers["x-ratelimit-limit-requests"] == "10"  # what the bucket holds
    assert [int(r.headers["x-ratelimit-remaining-requests"]) for r in first[:3]] == [9, 8, 7]
    # The time until the bucket is full again, OpenAI's word.
    # Ten taken at one instant of the server's clock: 10 a second refill them in one.
    assert first[9].headers["x-ratelimit-reset-requests"] == openai_duration(1.0)
    wait = float(first[10].headers["retry-after"])
    assert wait == pytest.approx(0.1)  # until one request fits
    assert [r.status_code for r in later][:2] == [200, 200] and later[-1].status_code == 429


def test_a_bucket_whose_reset_says_when_the_next_request_fits() -> None:
    limit = RateLimit(600, window=1.0, bucket=True, bucket_reset="next")
    with (
        FakeOpenAIServer(rate_limit=limit) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        answers = [http.post("/chat/completions", json=BODY) for _ in range(10)]
    last = answers[-1]
    assert last.headers["x-ratelimit-limit-requests"] == "600"  # a minute's, as RPM reads
    assert last.headers["x-ratelimit-remaining-requests"] == "0"
    reset = last.headers["x-ratelimit-reset-requests"]
    assert reset.endswith("ms") and float(reset.removesuffix("ms")) <= 100  # the next one


def test_a_provider_announcing_a_minute_s_limit_it_enforces_in_slices() -> None:
    # 600 a minute announced, a bucket of 10 refilled at 10 a second enforced; remaining and
    # reset honest about that bucket (or, with remaining_before, counting the request itself).
    for before, first in ((False, "9"), (True, "10")):
        limit = RateLimit(
            600, window=1.0, bucket=True, announced_requests=600, remaining_before=before
        )
        with (
            FakeOpenAIServer(rate_limit=limit) as srv,
            httpx.Client(base_url=srv.base_url) as http,
        ):
            answers = [http.post("/chat/completions", json=BODY) for _ in range(11)]
        assert [a.status_code for a in answers].count(429) >= 1
        assert {a.headers["x-ratelimit-limit-requests"] for a in answers} == {"600"}
        assert answers[0].headers["x-ratelimit-remaining-requests"] == first
        assert float(answers[0].headers["x-ratelimit-reset-requests"].removesuffix("ms")) <= 101


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_an_announced_limit_is_a_whole_number(bad: object) -> None:
    with pytest.raises(ValueError, match="announced_requests"):
        RateLimit(600, announced_requests=bad)  # type: ignore[arg-type]

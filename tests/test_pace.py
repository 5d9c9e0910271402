"""Pacing an endpoint by what its provider said (run/_headers.py: HeaderPace; run/_permits.py:
LocalPermits)."""

from __future__ import annotations

import anyio
import pytest

from safecons.clients import RateLimits
from safecons.run._headers import MAX_PACED_WAIT_SECONDS, HeaderPace
from safecons.run._permits import LocalPermits
from virtual_time import VirtualTimeLoop


class FakeClock:
    """A clock that moves only when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def said(remaining: int, reset: float, limit: int | None = 10) -> RateLimits:
    return RateLimits(limit_requests=limit, remaining_requests=remaining, reset_requests=reset)


async def new_pace() -> HeaderPace:
    return HeaderPace()  # its event is made on a running loop


def test_no_word_no_wait() -> None:
    pace = anyio.run(new_pace)
    assert pace.wait(0.0) == 0.0
    pace.answered(pace.start(), None, 0.0)
    assert pace.wait(0.0) == 0.0
    assert pace.first_answer.is_set()


def test_remaining_lets_that_many_start_then_holds_until_reset() -> None:
    pace = anyio.run(new_pace)
    first = pace.start()
    pace.answered(first, said(remaining=2, reset=0.5), now=0.1)
    pace.start()
    assert pace.wait(0.1) == 0.0
    pace.start()
    assert pace.wait(0.2) == pytest.approx(0.4)  # two started since: none left until 0.6
    # The window turned with no newer word: the limit again, until one window later.
    assert pace.wait(0.6) == 0.0
    for _ in range(10):
        pace.start()
    assert pace.wait(0.7) == pytest.approx(0.4)


def test_attempts_in_flight_before_the_word_do_not_count_against_it() -> None:
    pace = anyio.run(new_pace)
    a, b = pace.start(), pace.start()
    pace.answered(a, said(remaining=1, reset=1.0), now=0.0)
    # b started after a: it is one of the "remaining" a's answer counted.
    assert pace.wait(0.0) == pytest.approx(1.0)
    # b's own answer is newer word; an older one (a again) would not replace it.
    pace.answered(b, said(remaining=3, reset=1.0), now=0.1)
    pace.answered(a, said(remaining=0, reset=5.0), now=0.2)
    assert pace.wait(0.2) == 0.0


def test_after_a_long_quiet_the_assumed_window_starts_now() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), said(remaining=0, reset=0.5, limit=2), now=0.0)
    assert pace.wait(10.0) == 0.0
    pace.start()
    pace.start()
    assert pace.wait(10.0) == pytest.approx(0.5)  # one window from now, not from long ago


def test_without_a_limit_the_hold_ends_at_the_reset() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), said(remaining=0, reset=0.3, limit=None), now=0.0)
    assert pace.wait(0.1) == pytest.approx(0.2)
    assert pace.wait(0.3) == 0.0
    for _ in range(100):
        pace.start()
    assert pace.wait(0.4) == 0.0


def test_remaining_without_reset_is_believed_a_second() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), RateLimits(remaining_requests=0), now=0.0)
    assert pace.wait(0.0) == pytest.approx(1.0)


def test_a_429_holds_the_endpoint_capped() -> None:
    pace = anyio.run(new_pace)
    pace.hold(2.0, now=1.0)
    assert pace.wait(1.5) == pytest.approx(1.5)
    pace.hold(1e9, now=0.0)
    assert pace.wait(0.0) == pytest.approx(MAX_PACED_WAIT_SECONDS)
    # A reset of hours (a daily limit spent) is believed, each wait capped; one past a day
    # is nonsense, read as nothing said (test_a_nonsense_word_holds_nothing).
    reset = anyio.run(new_pace)
    reset.answered(reset.start(), said(remaining=0, reset=5 * 3600.0), now=0.0)
    assert reset.wait(0.0) == pytest.approx(MAX_PACED_WAIT_SECONDS)


def test_local_permits_pace_each_endpoint_on_its_own_clock() -> None:
    clock = FakeClock()
    starts: dict[str, list[float]] = {"a": [], "b": []}

    async def attempt(permits: LocalPermits, endpoint: str) -> None:
        async with permits.slot(endpoint) as slot:
            starts[endpoint].append(clock())
            if endpoint == "a":
                # The provider of "a" admits 2 per second, in windows from 0.
                used = len(starts["a"])
                window_end = float(int(clock()) + 1)
                slot.rate_limits = said(
                    remaining=max(0, 2 - used % 2 - 1) if used % 2 else 1,
                    reset=window_end - clock(),
                    limit=2,
                )
            slot.succeeded()

    async def main() -> None:
        permits = LocalPermits(8, clock=clock, sleep=clock.sleep)
        async with anyio.create_task_group() as tg:
            for _ in range(3):  # first, as the fake clock moves when anyone waits on it
                tg.start_soon(attempt, permits, "b")
            for _ in range(6):
                tg.start_soon(attempt, permits, "a")

    anyio.run(main)
    # "a": two a window (the first alone, before any word), never more.
    per_second = [sum(int(t) == s for t in starts["a"]) for s in range(4)]
    assert max(per_second) <= 2
    assert len(starts["a"]) == 6
    # "b" said nothing: it was never held by "a"'s pace.
    assert starts["b"] == [0.0, 0.0, 0.0]


def test_a_429_holds_every_attempt_of_the_endpoint() -> None:
    clock = FakeClock()
    starts: list[float] = []

    async def attempt(permits: LocalPermits, limited: bool) -> None:
        async with permits.slot("e") as slot:
            starts.append(clock())
            if limited:
                slot.rate_limited(3.0)
            else:
                slot.succeeded()

    async def main() -> None:
        permits = LocalPermits(4, clock=clock, sleep=clock.sleep)
        await attempt(permits, limited=True)
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(attempt, permits, False)
        assert permits.lowest_target == 2

    anyio.run(main)
    assert starts == [0.0, 3.0, 3.0, 3.0]


def test_only_one_attempt_before_the_endpoints_first_answer() -> None:
    in_flight = {"now": 0, "max": 0, "first": 0}

    async def attempt(permits: LocalPermits, index: int) -> None:
        async with permits.slot("e") as slot:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            if index == 0:
                in_flight["first"] = in_flight["max"]
            await anyio.sleep(0.01)
            in_flight["now"] -= 1
            slot.succeeded()

    async def main() -> None:
        permits = LocalPermits(8)
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(attempt, permits, i)

    anyio.run(main)
    assert in_flight["first"] == 1  # the first went alone
    assert in_flight["max"] == 7


def tokens_said(remaining: int, reset: float, limit: int | None = 1000) -> RateLimits:
    return RateLimits(limit_tokens=limit, remaining_tokens=remaining, reset_tokens=reset)


def test_remaining_tokens_let_estimates_start_until_they_no_longer_fit() -> None:
    pace = anyio.run(new_pace)
    assert not pace.counts_tokens
    first = pace.start(100)
    pace.answered(first, tokens_said(remaining=250, reset=0.5), now=0.0)
    assert pace.counts_tokens
    assert pace.wait(0.0, 200) == 0.0
    second = pace.start(200)
    assert pace.wait(0.1, 50) == 0.0  # 200 + 50 of 250
    assert pace.wait(0.1, 51) == pytest.approx(0.4)  # does not fit: until the reset
    pace.answered(second, None, now=0.2)  # answered, and it said nothing
    # The window turned with no newer word: the whole limit again.
    assert pace.wait(0.5, 1000) == 0.0
    pace.start(1000)
    assert pace.wait(0.6, 1) == pytest.approx(0.4)


def test_estimates_of_attempts_started_after_the_answered_one_count() -> None:
    pace = anyio.run(new_pace)
    a = pace.start(10)
    pace.start(300)  # in flight when a's answer comes: the server counted it after a
    pace.answered(a, tokens_said(remaining=400, reset=1.0), now=0.1)
    assert pace.wait(0.1, 100) == 0.0
    assert pace.wait(0.1, 101) == pytest.approx(1.0)


def test_newer_token_word_replaces_older_and_older_does_not() -> None:
    pace = anyio.run(new_pace)
    a, b = pace.start(10), pace.start(10)
    pace.answered(b, tokens_said(remaining=500, reset=1.0), now=0.0)
    # a, started before b and still in flight, may reach the server after it: it counts.
    assert pace.wait(0.0, 490) == 0.0
    assert pace.wait(0.0, 491) == pytest.approx(1.0)
    pace.answered(a, tokens_said(remaining=0, reset=5.0), now=0.1)  # older: ignored
    assert pace.wait(0.1, 490) == 0.0
    c = pace.start(490)
    pace.answered(c, tokens_said(remaining=20, reset=2.0), now=0.2)  # newer: it says 20 left
    assert pace.wait(0.2, 20) == 0.0
    assert pace.wait(0.2, 21) == pytest.approx(2.0)


def test_an_attempt_larger_than_the_limit_starts_in_a_fresh_window() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(10), tokens_said(remaining=900, reset=1.0), now=0.0)
    assert pace.wait(0.0, 5000) == pytest.approx(1.0)  # not while part of a window is used
    assert pace.wait(1.0, 5000) == 0.0  # a whole window, nothing in it yet: it goes
    pace.start(5000)
    assert pace.wait(1.0, 1) == pytest.approx(1.0)  # and the window is spent


def test_token_resets_are_capped_and_default_when_unsaid() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), tokens_said(remaining=0, reset=5 * 3600.0), now=0.0)
    assert pace.wait(0.0, 1) == pytest.approx(MAX_PACED_WAIT_SECONDS)
    unsaid = anyio.run(new_pace)
    unsaid.answered(unsaid.start(), RateLimits(remaining_tokens=0), now=0.0)
    assert unsaid.wait(0.0, 1) == pytest.approx(1.0)
    assert unsaid.wait(1.0, 1) == 0.0  # no limit said: the hold just ends
    assert not unsaid.counts_tokens


def test_requests_and_tokens_both_hold() -> None:
    pace = anyio.run(new_pace)
    both = RateLimits(
        limit_requests=10,
        remaining_requests=0,
        reset_requests=0.2,
        limit_tokens=1000,
        remaining_tokens=50,
        reset_tokens=0.6,
    )
    pace.answered(pace.start(), both, now=0.0)
    assert pace.wait(0.0, 10) == pytest.approx(0.2)  # requests first
    assert pace.wait(0.2, 10) == 0.0
    assert pace.wait(0.2, 60) == pytest.approx(0.4)  # then tokens


def test_local_permits_work_an_estimate_out_only_once_tokens_are_said() -> None:
    clock = FakeClock()
    asked: list[int] = []
    starts: list[float] = []

    def estimate() -> int:
        asked.append(1)
        return 400

    async def attempt(permits: LocalPermits, word: RateLimits | None) -> None:
        async with permits.slot("e", tokens=estimate) as slot:
            starts.append(clock())
            slot.rate_limits = word
            slot.succeeded()

    async def main() -> None:
        permits = LocalPermits(4, clock=clock, sleep=clock.sleep)
        await attempt(permits, None)
        assert asked == []  # nothing said of tokens: nothing worked out
        await attempt(permits, tokens_said(remaining=500, reset=1.0))
        assert asked == []
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(attempt, permits, None)

    anyio.run(main)
    assert len(asked) == 3  # once per attempt, once tokens were said
    # 500 left of 1,000: one of 400 now; then, no answer saying more, each window that turns
    # lets one out at once and the rest at the limit's rate over a minute (test_spread_...).
    assert starts == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_attempts_in_flight_when_the_window_turns_count_in_the_new_one() -> None:
    pace = anyio.run(new_pace)
    pace.answered(pace.start(10), tokens_said(remaining=100, reset=0.5), now=0.0)
    late = pace.start(90)  # sent before the turn; the server may count it after
    assert pace.wait(0.5, 910) == 0.0
    assert pace.wait(0.5, 911) == pytest.approx(0.5)
    pace.answered(late, None, now=0.6)  # its answer said nothing: the window keeps its count
    assert pace.wait(0.6, 911) == pytest.approx(0.4)


async def new_unordered_pace() -> HeaderPace:
    return HeaderPace(ordered=False)


def test_unordered_answers_count_every_attempt_in_flight_and_the_strictest_word_stands() -> None:
    # Many processes share the pace: their attempts reach the server in no known order.
    pace = anyio.run(new_unordered_pace)
    pace.answered(pace.start(), said(remaining=5, reset=1.0), now=0.0)
    flying = [pace.start() for _ in range(5)]
    assert pace.wait(0.0) == pytest.approx(1.0)  # the five may all count against the five
    # Answers come back out of order: the last started arrived first at the server (4 left)
    # and an earlier one second (3 left); neither loosens what is counted.
    pace.answered(flying[4], said(remaining=4, reset=0.9), now=0.1)
    assert pace.wait(0.1) == pytest.approx(0.9)
    pace.answered(flying[0], said(remaining=3, reset=0.9), now=0.1)
    assert pace.wait(0.1) == pytest.approx(0.9)
    for n in flying[1:4]:
        pace.answered(n, said(remaining=0, reset=0.9), now=0.1)
    # A word of the window already past changes nothing; the next window's replaces it.
    pace.answered(pace.start(), said(remaining=9, reset=0.95), now=1.05)
    assert pace.wait(1.05) == 0.0
    stale = said(remaining=9, reset=0.01)
    pace.answered(pace.start(), stale, now=1.06)  # reset at 1.07: before the window counted
    assert pace.wait(1.06) == 0.0


def test_an_ordered_pace_would_have_been_loosened_by_the_same_answers() -> None:
    # The check can fail: once the earlier attempts are answered (none left in flight), one
    # connection pool's pace takes the newest word at face value, looser or not; a shared
    # pace keeps the strictest word of the window.
    for make, expected in ((new_pace, 0.0), (new_unordered_pace, 0.9)):
        pace = anyio.run(make)
        pace.answered(pace.start(), said(remaining=5, reset=1.0), now=0.0)
        flying = [pace.start() for _ in range(5)]
        for n in flying[:4]:
            pace.answered(n, None, now=0.1)
        pace.answered(flying[4], said(remaining=4, reset=0.9), now=0.1)
        assert pace.wait(0.1) == pytest.approx(expected), make


def test_an_ordered_pace_counts_earlier_attempts_in_flight_as_not_yet_counted() -> None:
    # 64 connections do not keep their order: an attempt started before the one answered,
    # still in flight, may reach the server after it. (Without this, a burst met 429s.)
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), said(remaining=5, reset=1.0), now=0.0)
    flying = [pace.start() for _ in range(5)]
    pace.answered(flying[4], said(remaining=4, reset=0.9), now=0.1)
    assert pace.wait(0.1) == pytest.approx(0.9)  # 4 left, less the 4 still on their way


# ------------------------------------------------ nonsense words read as "no limit known"


@pytest.mark.parametrize("kind", ["requests", "tokens"])
@pytest.mark.parametrize(
    ("limit", "remaining", "reset"),
    [
        (0, 0, 1.0),  # some gateways send 0 for "no limit set"
        (0, 0, 1e-9),
        (-5, 0, 1.0),
        (60, -1, 1.0),
        (10**15, 0, 1.0),
        (60, 61, 1.0),  # more left than the limit
        (60, 0, 99999 * 3600.0),  # a reset past a day
        (60, 0, float("inf")),
        (60, 0, -1.0),
    ],
)
def test_a_nonsense_word_holds_nothing(kind, limit, remaining, reset) -> None:
    word = (
        RateLimits(limit_requests=limit, remaining_requests=remaining, reset_requests=reset)
        if kind == "requests"
        else RateLimits(limit_tokens=limit, remaining_tokens=remaining, reset_tokens=reset)
    )
    pace = anyio.run(new_pace)
    pace.answered(pace.start(100), word, now=0.0)
    for t in (0.0, 0.5, 2.0, 61.0, 3600.0):
        pace.start(100)
        assert pace.wait(t, 100) == 0.0, t
    assert pace.last_headers is None  # a word read as nothing said is named by no wait


def test_a_limit_of_zero_never_stops_the_permits_nor_spins() -> None:
    clock = FakeClock()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await clock.sleep(seconds)

    async def main() -> int:
        permits = LocalPermits(4, clock=clock, sleep=sleep)
        done = 0
        with anyio.fail_after(5):  # real seconds: a stuck or spinning pace never gets there
            for _ in range(50):
                async with permits.slot("e") as slot:
                    slot.rate_limits = said(remaining=0, reset=1e-9, limit=0)
                    slot.succeeded()
                done += 1
        return done

    assert anyio.run(main) == 50
    assert sleeps == []


def test_a_nanosecond_reset_sleeps_at_least_a_millisecond() -> None:
    from safecons.run._headers import MIN_PACED_WAIT_SECONDS

    clock = FakeClock()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await clock.sleep(seconds)

    async def main() -> None:
        permits = LocalPermits(1, clock=clock, sleep=sleep)
        for _ in range(20):
            async with permits.slot("e") as slot:
                slot.rate_limits = said(remaining=0, reset=1e-9, limit=None)
                slot.succeeded()

    anyio.run(main)
    assert sleeps and min(sleeps) >= MIN_PACED_WAIT_SECONDS


def test_a_long_wait_is_shown_on_the_bar_and_warned_once_naming_the_endpoint() -> None:
    import warnings

    import safecons as sc

    clock = FakeClock()

    class Bar:
        def __init__(self) -> None:
            self.postfixes: list[str] = []

        def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
            self.postfixes.append(s)

    bar = Bar()

    async def main() -> None:
        permits = LocalPermits(2, clock=clock, sleep=clock.sleep)
        permits.notices.bar = bar
        for _ in range(3):
            async with permits.slot("https://api.example/v1 gpt-x") as slot:
                slot.rate_limits = said(remaining=0, reset=30.0, limit=60)
                slot.succeeded()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        anyio.run(main)
    pacing = [w for w in caught if issubclass(w.category, sc.errors.PacingWarning)]
    assert len(pacing) == 1
    text = str(pacing[0].message)
    assert "https://api.example/v1 gpt-x" in text and "0 of 60 requests left" in text
    assert "reset in 30 s" in text
    shown = [p for p in bar.postfixes if p]
    assert shown and all("waiting 30 s for https://api.example/v1 gpt-x" in p for p in shown)
    assert bar.postfixes[-1] == ""  # cleared once the wait is over


def test_a_short_wait_is_not_shown() -> None:
    import warnings

    clock = FakeClock()

    async def main() -> None:
        permits = LocalPermits(2, clock=clock, sleep=clock.sleep)
        for _ in range(3):
            async with permits.slot("e") as slot:
                slot.rate_limits = said(remaining=0, reset=2.0, limit=60)
                slot.succeeded()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anyio.run(main)
    assert clock.now == pytest.approx(4.0)


def test_a_window_turned_with_no_newer_word_lets_one_out_then_the_limit_at_its_rate() -> None:
    # Whether the reset meant "whole again" or "the next one fits" cannot be told from one
    # answer: the turn does not burst the whole limit.
    pace = anyio.run(new_pace)
    pace.answered(pace.start(), said(remaining=0, reset=0.1, limit=600), now=0.0)
    assert pace.wait(0.05) == pytest.approx(0.05)  # held until the reset
    assert pace.wait(0.1) == 0.0  # the turn: one at once
    pace.start()
    # then 600 a minute: 10 a second, the next in a tenth of a second (capped at the window)
    assert pace.wait(0.1) == pytest.approx(0.1)
    assert pace.wait(0.2) == 0.0
    # A newer word replaces the guess: all it says remains may go at once.
    pace.answered(1, None, now=0.21)  # the one started at the turn is answered
    pace.answered(pace.start(), said(remaining=5, reset=0.5, limit=600), now=0.21)
    for _ in range(5):
        assert pace.wait(0.21) == 0.0
        pace.start()
    assert pace.wait(0.21) > 0


def test_a_waiter_looks_again_when_a_newer_word_is_heard() -> None:
    woke: list[float] = []

    async def main() -> None:
        # The loop's own clock, virtual: the waiter's 30 s sleep takes no real time, and the
        # word comes at an exact moment of it.
        permits = LocalPermits(4)
        pace = permits.policy("e").pace
        pace.answered(pace.start(), said(remaining=0, reset=30.0, limit=10), now=0.0)

        async def waiter() -> None:
            async with permits.slot("e") as slot:
                woke.append(anyio.current_time())
                slot.succeeded()

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(1.0)  # the waiter is asleep on its 30 s
            # A later attempt's answer says the provider's count is whole again.
            pace.answered(pace.start(), said(remaining=9, reset=30.0, limit=10), now=1.0)

    from safecons.errors import PacingWarning

    with pytest.warns(PacingWarning, match="reset in 30 s"):  # a long wait is shown
        anyio.run(main, backend_options={"loop_factory": VirtualTimeLoop})
    assert woke == [1.0]  # woken by the word, not by the end of its sleep


def test_the_bar_notice_stays_while_any_attempt_still_waits() -> None:
    from safecons.run._permits import PaceNotices

    notices = PaceNotices()
    shown: list[str] = []

    class Bar:
        def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
            shown.append(s)

    notices.bar = Bar()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        notices.waiting("e", 20.0, "0 of 10 requests left")
        notices.waiting("e", 20.0, "0 of 10 requests left")
    notices.waited("e")
    assert shown[-1].startswith("waiting 20 s for e")  # one still waits
    notices.waited("e")
    assert shown[-1] == ""


@pytest.mark.parametrize("make", [new_pace, new_unordered_pace])
def test_a_reset_of_now_lets_the_remaining_out_then_the_limit_at_its_rate(make) -> None:
    # A gateway's token bucket says how long until the next request fits: 0 while any do,
    # with a minute's limit. Read as a window already over, it let every attempt out at once
    # (39 of 99 requests answered 429 in the fake server's "next" bucket).
    pace = anyio.run(make)
    pace.answered(pace.start(), said(remaining=3, reset=0.0, limit=600), now=0.0)
    for _ in range(3):
        assert pace.wait(0.0) == 0.0
        pace.start()
    assert pace.wait(0.0) == pytest.approx(0.1)  # then 600 a minute: one a tenth of a second
    assert pace.wait(0.1) == 0.0
    pace.start()
    assert pace.wait(0.1) == pytest.approx(0.1)
    # A newer word replaces it, in either order of answers.
    pace.answered(pace.start(), said(remaining=0, reset=0.25, limit=600), now=0.15)
    assert pace.wait(0.15) == pytest.approx(0.25)

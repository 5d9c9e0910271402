"""Pacing one endpoint by its provider's rate-limit headers, read as hints (:class:`HeaderPace`).

Each count the headers report (requests, tokens) says how many more fit until its reset.
When the reset passes with no newer word, one attempt goes alone, and its answer tells a
window from a token bucket. Nothing here reads a clock: every time is the caller's.
"""

from __future__ import annotations

import math
from typing import Final

import anyio

from ..clients import RateLimits
from ..clients._internal import sensible

__all__ = ("MAX_PACED_WAIT_SECONDS", "MIN_PACED_WAIT_SECONDS", "HeaderPace")

#: The longest one answer holds an endpoint (seconds), whatever its headers say.
MAX_PACED_WAIT_SECONDS: Final = 60.0
#: The shortest paced wait (seconds): a reset of a nanosecond must not make the pace spin.
MIN_PACED_WAIT_SECONDS: Final = 0.001
#: How long a remaining count sent without its reset is believed (seconds).
UNKNOWN_RESET_SECONDS: Final = 1.0
#: The shortest time over which a reset of nothing lets the limit out (seconds): such a
#: reset says when one more request fits, of a limit that may be a minute's.
SPREAD_SECONDS: Final = 60.0


def _clip(wait: float) -> float:
    return min(max(wait, MIN_PACED_WAIT_SECONDS), MAX_PACED_WAIT_SECONDS)


class _Count:
    """One count (requests, or tokens) on a running total the caller keeps (attempts started,
    or their estimates summed): ``remaining`` more than ``_base`` until ``_reset_at``.

    A window's reset after the first attempt of a turn is the rest of the window; a bucket's
    is that attempt over its refill rate. When the turn's first answer reads so, the count is
    a bucket's (:attr:`rate`): the newest word refilled at that rate, at most the most any
    answer said remains plus one, until a 429 refutes it for good.
    """

    def __init__(self) -> None:
        self.remaining: int | None = None  # None: nothing said, nothing paced
        self._limit: int | None = None
        self._base = self._most = 0  # _most: the most any answer said remains
        self._newest = -1  # the attempt whose answer is the word in force
        self._reset_at, self._said_at, self._window = -math.inf, 0.0, 0.0  # longest reset
        self._spread: tuple[float, int] | None = None  # a reset of nothing: since, allowance
        self.scout: int | None = None  # the attempt that goes alone after a turn
        self.rate: float | None = None  # a bucket's refill a second
        self._refuted = False

    @property
    def _cap(self) -> int:  # a bucket's size: a minute's limit may be said over a slice
        return min(self._limit or self._most + 1, self._most + 1)

    def wait(self, now: float, total: int, cost: int, started: int) -> float:
        """Seconds before ``cost`` more fit at ``now`` (``started``: attempts so far)."""
        if self.remaining is None:
            return 0.0
        used, cap = total - self._base, self._cap
        if self.rate is not None:
            level = min(cap, self.remaining + (now - self._said_at) * self.rate) - used
            if level >= cost or (cost > cap and level >= cap):
                return 0.0
            return _clip((min(cost, cap) - level) / self.rate)
        if now >= self._reset_at:
            if self._limit is None or self._window <= 0:
                self.remaining = None
                return 0.0
            self.remaining, self._base, self.scout = self._most, total, started
            self._reset_at, self._spread = now + self._window, None
        if self.scout == started:
            return 0.0  # a turn's first attempt goes whatever it costs, and alone
        if self._spread is not None:  # a bucket's "the next fits now": the limit at its rate
            since, allowance = self._spread
            rate = (self._limit or 1) / max(self._window, SPREAD_SECONDS)
            ahead = used + cost - max(cost, allowance) - (now - since) * rate
            return 0.0 if ahead <= 0 else _clip(ahead / rate)
        if used + cost <= self.remaining:
            return 0.0
        return max(MIN_PACED_WAIT_SECONDS, self._reset_at - now)

    def answered(
        self, number: int, said: tuple[int | None, int | None, float | None], now: float,
        base: int,
    ) -> None:  # fmt: skip
        """Attempt ``number``'s answer said ``remaining`` of ``limit`` until ``reset``, ``base``
        being the running total the provider had counted then."""
        remaining, limit, reset = said
        scout, self.scout = number == self.scout, None if number == self.scout else self.scout
        cap, window = self._cap, self._window  # (as it was before this answer)
        self._most = max(self._most, remaining or 0)
        if remaining is None or number < self._newest:
            return
        read = UNKNOWN_RESET_SECONDS if reset is None else min(reset, MAX_PACED_WAIT_SECONDS)
        gap = cap - remaining  # (found empty after its reset: not a bucket full by then)
        # A bucket's: within one request and the header's millisecond of ``gap`` over its rate.
        fits = abs((reset or 0) - gap * window / cap) <= window / cap + 0.001
        if scout and fits and window > MIN_PACED_WAIT_SECONDS and 0 < gap < cap - 1 and reset:
            self.rate = None if self._refuted else (cap - 1) / window
        self.remaining, self._limit, self._base = remaining, limit, base
        self._newest, self._said_at, self._spread = number, now, None
        self._reset_at, self._window = now + read, max(self._window, read)
        if read < MIN_PACED_WAIT_SECONDS and limit is not None:
            self._spread = (now, max(remaining, 1))
            self._reset_at = now + max(self._window, SPREAD_SECONDS)

    def refute(self) -> bool:
        """A 429: never read as a bucket again. Whether it was read as one."""
        was, self.rate = self.rate is not None, None
        self._refuted = self._refuted or was
        return was


class HeaderPace:
    """When the next attempt to one endpoint may start, by its provider's headers.

    - **Remaining requests**: an answer that said ``remaining`` lets that many attempts start
      after its own until its reset; when the reset passes with no newer word, one attempt
      goes alone, then at most the most any answer said remains. A turn's first answer that
      reads as a bucket's paces the count at its refill rate, until a 429 refutes it.
    - **Remaining tokens**: the same in tokens, each attempt counted at its estimate (the
      prompt's plus ``max_tokens``); one larger than any count said goes first after a turn.
    - **Retry-After**: a 429's wait holds every attempt, not only the one that got it.

    Before the first answer one attempt goes alone (:attr:`first_answer`). Attempts started
    before the answered one and still in flight count as used after it. Every wait is capped
    at :data:`MAX_PACED_WAIT_SECONDS`.
    """

    def __init__(self) -> None:
        self.started = 0
        #: The newest headers heard, as the provider sent them.
        self.last_headers: RateLimits | None = None
        self.first_answer = anyio.Event()
        #: Set, then made anew, when headers or a turn's first answer are heard.
        self.headers_heard = anyio.Event()
        self._requests, self._tokens = _Count(), _Count()
        self._hold_until = -math.inf
        self._spent = 0  # token estimates of every attempt started, summed
        self._in_flight: dict[int, tuple[int, int]] = {}  # number: (_spent then, estimate)

    @property
    def counts_tokens(self) -> bool:
        """Whether an answer said how many tokens remain (then estimates are read)."""
        return self._tokens.remaining is not None

    @property
    def held_until(self) -> float:
        """When the latest :meth:`hold` ends (-inf: none was made)."""
        return self._hold_until

    def wait(self, now: float, tokens: int = 0) -> float:
        """Seconds before an attempt of an estimated ``tokens`` may start at ``now`` (``inf``
        while a turn's first attempt is unanswered)."""
        if now < self._hold_until:
            return self._hold_until - now
        counts = ((self._requests, self.started, 1), (self._tokens, self._spent, tokens))
        waits = [c.wait(now, total, n, self.started) for c, total, n in counts]
        if any(c.scout is not None and c.scout < self.started for c, *_ in counts):
            return math.inf
        return max(waits)

    def start(self, tokens: int = 0) -> int:
        """Count an attempt of an estimated ``tokens`` as started; its number."""
        number = self.started
        self.started += 1
        self._spent += tokens
        self._in_flight[number] = (self._spent, tokens)
        return number

    def answered(self, number: int, limits: RateLimits | None, now: float) -> None:
        """Attempt ``number``'s answer said ``limits`` (None: nothing, or no answer)."""
        self.first_answer.set()
        through, _ = self._in_flight.pop(number, (self._spent, 0))
        c = sensible(limits)
        scout = number in (self._requests.scout, self._tokens.scout)
        if c is not None:
            self.last_headers = limits
        # Started before this one and still in flight: it may reach the server after.
        earlier = [t for n, (_, t) in self._in_flight.items() if n < number]
        said = (c.remaining_requests, c.limit_requests, c.reset_requests) if c else (None,) * 3
        self._requests.answered(number, said, now, number + 1 - len(earlier))
        said = (c.remaining_tokens, c.limit_tokens, c.reset_tokens) if c else (None,) * 3
        self._tokens.answered(number, said, now, through - sum(earlier))
        if c is not None or scout:
            heard, self.headers_heard = self.headers_heard, anyio.Event()
            heard.set()

    def rate_limited(self) -> bool:
        """A 429: whether it refuted a bucket's reading (then it is answered here)."""
        requests = self._requests.refute()
        return self._tokens.refute() or requests

    def hold(self, seconds: float, now: float) -> None:
        """Hold the endpoint ``seconds`` from ``now`` (a 429's ``Retry-After``)."""
        until = now + min(max(seconds, 0.0), MAX_PACED_WAIT_SECONDS)
        self._hold_until = max(self._hold_until, until)

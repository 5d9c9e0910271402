"""Pacing one endpoint by its provider's rate-limit headers, read as hints (:class:`HeaderPace`).

The headers (what :func:`~safecons.clients._rate_limits.sensible` keeps of them) say how
many requests and tokens remain until a reset. Each count is read as a fixed window's
(:class:`_Count`) or, once its answers read so, a token bucket's level (:class:`_BucketLevel`).
Nothing here reads a clock: every time is the caller's.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

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
#: The shortest time over which a window that turned unannounced lets its limit out (seconds):
#: a reset may be the time until one more request fits, of a per-minute limit.
SPREAD_SECONDS: Final = 60.0
#: Answers that must fit one refill rate before a count is read as a bucket's.
BUCKET_EVIDENCE: Final = 3
#: A limit this many times what any answer said remains is a minute's announced over a slice.
SLICE_EVIDENCE: Final = 4
#: The smallest ``limit - remaining`` that counts as evidence: gaps of 1 to 3 fit any rate.
BUCKET_SMALLEST_GAP: Final = 4


class _Tally(NamedTuple):
    """Where an answer stands in a running total (attempts, or their token estimates)."""

    base: int  # the total as the provider counted it when it answered
    total: int  # the total now
    started: int  # the attempts the answer knows of: one numbered from it on is newer


def _reset_of(reset: float | None) -> float:
    return UNKNOWN_RESET_SECONDS if reset is None else min(reset, MAX_PACED_WAIT_SECONDS)


def _one_rate(small: int, short: float, big: int, long: float) -> bool:
    """Whether one refill rate fits two gaps (each within one of the truth) at two resets
    (each within a millisecond and a percent: the header's rounding)."""
    slack_short, slack_long = 0.001 + 0.01 * short, 0.001 + 0.01 * long
    lowest = max((small - 1) / (short + slack_short), (big - 1) / (long + slack_long))
    highest = math.inf
    for gap, reset, slack in ((small, short, slack_short), (big, long, slack_long)):
        if reset > slack:  # a reset within its rounding of nothing bounds no rate
            highest = min(highest, (gap + 1) / (reset - slack))
    return lowest <= highest


class _BucketLevel:
    """Whether a count is a token bucket's, and if so its level, refilled at its rate.

    A bucket's answer is a snapshot (``limit - remaining`` is ``reset`` times the refill
    rate, in any order); a window's is not (the count used grows as its reset shrinks).
    :data:`BUCKET_EVIDENCE` answers spread in time that fit one rate (:func:`_one_rate`)
    against the widest gap heard say "bucket"; one that fits none says "window". Once a
    bucket, the newest (or a stricter) answer sets the level, less every attempt in flight.
    A 429 while the level paces refutes it for the rest of the run (:meth:`refute`): another
    client draws on the bucket too, so it refills slower than its answers say.
    """

    __slots__ = ("_agreed", "_cap", "_counted", "_level", "_level_at", "_reference",
                 "_refuted", "_through", "rate")  # fmt: skip

    def __init__(self) -> None:
        self.rate: float | None = None  # refilled a second (None: not read as a bucket)
        self._reference: tuple[int, int, float] | None = None  # limit, widest gap, its reset
        self._agreed: tuple[float, ...] = ()  # the resets of the answers that fit
        self._cap, self._level = 0, 0.0
        self._level_at: float | None = None
        self._counted = 0  # the running total the level has drawn
        self._through = 0  # attempts started when the level was set
        self._refuted = False

    @property
    def paced(self) -> bool:
        """Whether the level paces the count (a bucket, and an answer heard since)."""
        return self.rate is not None and self._level_at is not None

    def refute(self) -> bool:
        """A 429 came: never read as a bucket again. Whether it was read as one."""
        was = self.rate is not None
        self._refuted = self._refuted or was
        self.rate, self._level_at = None, None
        return was

    def learn(self, remaining: int, limit: int, reset: float) -> None:
        """One more answer: does the count read as a bucket's (or no longer)?"""
        gap = limit - remaining
        if self._refuted or gap <= 0 or reset < MIN_PACED_WAIT_SECONDS:
            return
        if self._reference is None or self._reference[0] != limit:
            self._reference, self._agreed = (limit, gap, reset), ()
            self.rate = self._level_at = None
            return
        _, big, long = self._reference
        small, short = gap, reset
        if small > big:
            self._reference = (limit, gap, reset)
            (small, short), big, long = (big, long), gap, reset
        if not _one_rate(small, short, big, long):
            self._agreed, self.rate, self._level_at = (), None, None
        elif self.rate is not None:
            self.rate = self._rate_of(big, long)  # read closer on a wider gap
        elif (
            short <= 0.75 * long
            and small >= BUCKET_SMALLEST_GAP
            and all(abs(short - other) > 0.1 * other for other in self._agreed)
        ):
            # Answers alike in reset fit many rates (a burst answered at once): spread only.
            self._agreed += (short,)
            if len(self._agreed) >= BUCKET_EVIDENCE:
                self.rate = self._rate_of(big, long)

    @staticmethod
    def _rate_of(gap: int, reset: float) -> float:
        # The lowest rate the whole-number gap allows: the level never runs ahead.
        return max(gap - 1, 0.5) / reset

    def available(self, now: float, total: int) -> float:
        """The level at ``now``, ``total`` being the running total (refilled, then drawn)."""
        assert self.rate is not None and self._level_at is not None
        level = min(float(self._cap), self._level + (now - self._level_at) * self.rate)
        self._level, self._level_at = level - (total - self._counted), now
        self._counted = total
        return self._level

    def wait(self, now: float, total: int, cost: int) -> float:
        """Seconds before ``cost`` more may be drawn (more than the bucket: once it is full)."""
        assert self.rate is not None
        level = self.available(now, total)
        if level >= cost or (cost > self._cap and level >= self._cap):
            return 0.0
        wait = (min(cost, self._cap) - level) / self.rate
        return min(max(wait, MIN_PACED_WAIT_SECONDS), MAX_PACED_WAIT_SECONDS)

    def set_level(self, number: int, remaining: int, limit: int, now: float, at: _Tally) -> None:
        """Attempt ``number``'s answer: ``remaining``, less what started since; an older
        answer (its attempt started before the level's) is kept only if stricter."""
        level = float(remaining - (at.total - at.base))
        older = self._level_at is not None and number < self._through
        if older and level >= self.available(now, at.total):
            return
        self._cap, self._level, self._level_at = limit, level, now
        self._counted, self._through = at.total, max(self._through, at.started)


class _Count:
    """One count the headers report (requests, or tokens) and how much was used since.

    Use is read on a running total the caller keeps (attempts started, or their token
    estimates summed), less ``_base``: the total once the newest answer's attempt started.
    ``remaining`` lets that many more go until the reset; when the reset passes with no newer
    answer, a window of ``limit`` is guessed, let out at its rate (:meth:`_spread_wait`).
    """

    __slots__ = ("_allowance", "_base", "_bucket", "_carried", "_limit", "_most", "_newest",
                 "_newest_said", "_reset_at", "_turned", "_window", "remaining")  # fmt: skip

    def __init__(self) -> None:
        self.remaining: int | None = None
        self._newest = -1  # the attempt whose answer is the newest heard
        self._base = 0
        self._carried = 0  # what the window took over, in flight when it turned
        self._limit: int | None = None
        self._most = 0  # the most any answer said remains
        self._reset_at = -math.inf
        self._window = 0.0  # the longest reset heard
        self._turned: float | None = None  # when the window turned unannounced
        self._allowance = 0  # what a turned window lets out at once (0: one attempt)
        self._bucket = _BucketLevel()
        # The newest answer the bucket heard, read again as a window's if a 429 refutes it.
        self._newest_said: tuple[int, int, int, int | None, float, float] | None = None

    def wait(self, now: float, total: int, cost: int, started: int, *, carried: int = 0) -> float:
        """Seconds before ``cost`` more may be used at ``now`` (``carried``: in flight, which
        the server may count in a window that turns unannounced)."""
        if self.remaining is None:
            return 0.0
        if self._bucket.paced:
            return self._bucket.wait(now, total, cost)
        if now >= self._reset_at:
            if self._limit is None or self._window <= 0:
                self.remaining = None
                return 0.0
            self.remaining, self._newest = self._limit, started - 1
            self._base, self._carried = total - carried, carried
            self._turned, self._allowance = now, 0
            turned = self._reset_at + self._window
            self._reset_at = turned if turned > now else now + self._window
        used = total - self._base
        if used + cost <= self.remaining:
            spread = self._spread_wait(now, used, cost)
            return 0.0 if spread <= 0 else min(spread, max(0.0, self._reset_at - now))
        limit = self._limit
        if limit and cost > limit and used == self._carried and self.remaining >= limit:
            return 0.0  # larger than a whole window: it goes first in a fresh one
        return max(0.0, self._reset_at - now)

    def _spread_wait(self, now: float, used: int, cost: int) -> float:
        # One answer cannot tell a reset "until whole" from "until one more fits": let the
        # guessed window out at the limit's rate, and the next answer corrects the guess.
        if self._turned is None or self._limit is None:
            return 0.0
        rate = self._limit / max(self._window, SPREAD_SECONDS)
        allowed = self._carried + max(cost, self._allowance) + (now - self._turned) * rate
        return 0.0 if used + cost <= allowed else (used + cost - allowed) / rate

    def rate_limited(self) -> bool:
        """A 429: a bucket's level that paced ran ahead; the newest answer is read again as a
        window's. Whether a bucket's reading was taken back."""
        if not self._bucket.refute():
            return False
        if self._newest_said is not None:
            number, base, remaining, limit, reset, now = self._newest_said
            self._newest, self._base, self._carried = number, base, 0
            self._reset_at, self._window = -math.inf, 0.0
            self._take(remaining, limit, reset, now)
        return True

    def answered(
        self, number: int, said: tuple[int | None, int | None, float | None], now: float,
        at: _Tally, *, ordered: bool,
    ) -> None:  # fmt: skip
        """Attempt ``number``'s answer ``said`` ``remaining`` of ``limit`` until ``reset``.
        ``ordered``: attempts reach the server in the order they start (one process); else
        (many processes) within one window the strictest answer stands."""
        remaining, limit, reset = said
        if remaining is None or self._as_bucket(number, said, now, at):
            return
        base, total = at.base, at.total
        read = _reset_of(reset)
        if ordered:
            if number < self._newest:
                return
            self._newest = number
        elif self._turned is not None and self._allowance == 0 and number > self._newest:
            self._newest = number  # started after an unannounced turn: replaces the guess
        elif (
            self.remaining is not None
            and math.isfinite(self._reset_at)
            # A bucket's "the next fits now" belongs to no window: newer replaces older.
            and (limit is None or not (read < MIN_PACED_WAIT_SECONDS or self._allowance > 0))
        ):
            half, reset_at = self._window / 2, now + read
            if reset_at < self._reset_at - half:
                return  # a window already past
            ours = self.remaining - (total - self._base)
            if reset_at <= self._reset_at + half and remaining - (total - base) >= ours:
                self._turned = None  # the provider said this window: no longer a guess
                return
        self._base, self._carried = base, 0
        self._take(remaining, limit, read, now)

    def _as_bucket(
        self, number: int, said: tuple[int | None, int | None, float | None], now: float,
        at: _Tally,
    ) -> bool:  # fmt: skip
        """Hear an answer as a bucket's, if the answers read as one: whether it was."""
        remaining, limit, reset = said
        assert remaining is not None
        self._most = max(self._most, remaining)
        held = limit
        if limit is not None and limit > SLICE_EVIDENCE * (self._most + 1):
            # A minute's limit announced over the slice the provider enforces: the bucket is
            # the slice, as full as any answer said.
            held = self._most + 1
        if held is not None and reset is not None:
            self._bucket.learn(remaining, held, reset)
        if self._bucket.rate is None or limit is None or held is None:
            return False
        self.remaining, self._limit = remaining, limit
        self._newest_said = (number, at.base, remaining, limit, _reset_of(reset), now)
        self._bucket.set_level(number, remaining, held, now, at)
        return True

    def _take(self, remaining: int, limit: int | None, reset: float, now: float) -> None:
        # A reset of nothing is a bucket's "the next fits now": ``remaining`` at once, the
        # rest at the limit's rate (read as a window past, all would go and meet 429s).
        self._turned, self._allowance = None, 0
        self.remaining, self._limit = remaining, limit
        self._reset_at = now + reset
        self._window = max(self._window, reset)
        if reset < MIN_PACED_WAIT_SECONDS and limit is not None:
            self.remaining = max(limit, remaining)
            self._turned, self._allowance = now, max(remaining, 1)
            self._reset_at = now + max(self._window, SPREAD_SECONDS)


class HeaderPace:
    """When the next attempt to one endpoint may start, by its provider's headers.

    - **Remaining requests**: an answer that said ``remaining`` lets that many attempts start
      after its own, then holds the endpoint until its reset.
    - **Remaining tokens**: the same in tokens, each attempt counted at its estimate (the
      prompt's plus ``max_tokens``); one larger than the whole limit goes in a fresh window.
    - **Retry-After**: a 429's wait holds every attempt, not only the one that got it.

    Before the first answer one attempt goes alone (:attr:`first_answer`). Answers to attempts
    still in flight that started earlier may reach the server later: they count as not yet
    counted. Every wait is capped at :data:`MAX_PACED_WAIT_SECONDS`.
    """

    def __init__(self, *, ordered: bool = True) -> None:
        self.started = 0
        self.ordered = ordered
        #: The newest headers heard, as the provider sent them.
        self.last_headers: RateLimits | None = None
        self.first_answer = anyio.Event()
        #: Set, then made anew, when headers are heard: waiters look again.
        self.headers_heard = anyio.Event()
        self._requests, self._tokens = _Count(), _Count()
        self._hold_until = -math.inf
        self._spent = 0  # token estimates of every attempt started, summed
        self._in_flight: dict[int, tuple[int, int]] = {}  # number: (_spent then, estimate)
        self._in_flight_tokens = 0

    @property
    def counts_tokens(self) -> bool:
        """Whether an answer said how many tokens remain (then estimates are read)."""
        return self._tokens.remaining is not None

    @property
    def held_until(self) -> float:
        """When the latest :meth:`hold` ends (-inf: none was made)."""
        return self._hold_until

    def wait(self, now: float, tokens: int = 0) -> float:
        """Seconds before an attempt of an estimated ``tokens`` may start at ``now``."""
        if now < self._hold_until:
            return self._hold_until - now
        # Many processes: in flight when a window turns may be counted in the new one.
        carried = 0 if self.ordered else len(self._in_flight)
        requests = self._requests.wait(now, self.started, 1, self.started, carried=carried)
        if requests > 0 or self._tokens.remaining is None:
            return requests
        return self._tokens.wait(
            now, self._spent, tokens, self.started, carried=self._in_flight_tokens
        )

    def start(self, tokens: int = 0) -> int:
        """Count an attempt of an estimated ``tokens`` as started; its number."""
        number = self.started
        self.started += 1
        self._spent += tokens
        self._in_flight[number] = (self._spent, tokens)
        self._in_flight_tokens += tokens
        return number

    def answered(self, number: int, limits: RateLimits | None, now: float) -> None:
        """Attempt ``number``'s answer said ``limits`` (None: nothing, or no answer)."""
        self.first_answer.set()
        through, tokens = self._in_flight.pop(number, (self._spent, 0))
        self._in_flight_tokens -= tokens
        checked = sensible(limits)
        if checked is None:
            return
        self.last_headers = limits
        heard, self.headers_heard = self.headers_heard, anyio.Event()
        heard.set()
        if self.ordered:
            earlier = [t for n, (_, t) in self._in_flight.items() if n < number]
            requests = _Tally(number + 1 - len(earlier), self.started, number + 1)
            spent = _Tally(through - sum(earlier), self._spent, number + 1)
        else:  # every attempt in flight counted as used after this one: the worst case
            requests = _Tally(self.started - len(self._in_flight), self.started, self.started)
            spent = _Tally(self._spent - self._in_flight_tokens, self._spent, self.started)
        c, ordered = checked, self.ordered
        said = (c.remaining_requests, c.limit_requests, c.reset_requests)
        self._requests.answered(number, said, now, requests, ordered=ordered)
        said = (c.remaining_tokens, c.limit_tokens, c.reset_tokens)
        self._tokens.answered(number, said, now, spent, ordered=ordered)

    def rate_limited(self) -> bool:
        """A 429: whether it took back a bucket's reading (then it is answered here)."""
        requests = self._requests.rate_limited()
        return self._tokens.rate_limited() or requests

    def hold(self, seconds: float, now: float) -> None:
        """Hold the endpoint ``seconds`` from ``now`` (a 429's ``Retry-After``)."""
        until = now + min(max(seconds, 0.0), MAX_PACED_WAIT_SECONDS)
        self._hold_until = max(self._hold_until, until)

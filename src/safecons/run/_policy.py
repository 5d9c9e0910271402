"""One endpoint's pacing: the :class:`PacingPolicy` its permit holders ask, and the default,
:class:`EndpointPolicy`, which reads a provider's rate-limit headers as hints
(:class:`~safecons.run._headers.HeaderPace`) and its 429s as the truth (:class:`SendRate`,
an in-flight target). One policy per endpoint is kept by the holder of a run's permits: in
one process :class:`~safecons.run._permits.LocalPermits`, across the workers of a Ray job
:class:`safecons.ray._leases.LeaseTable`. No policy reads a clock: times are the holder's.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final, Protocol

import anyio

from ..clients import RateLimits
from ._headers import MAX_PACED_WAIT_SECONDS, HeaderPace

__all__ = ("MAX_PACED_WAIT_SECONDS", "EndpointPolicy", "PacingPolicy", "SendRate")

#: A cut keeps this share of the rate the provider admitted before its 429.
RATE_CUT: Final = 0.95
#: The span over which the admitted rate is measured (seconds), and the least of it.
ADMITTED_SPAN_SECONDS: Final = 5.0
MIN_MEASURED_SECONDS: Final = 1.0
#: The fewest successes in the span that measure a rate.
MIN_ADMITTED: Final = 4
#: After a cut the rate grows by this share of the admitted rate per second of successes.
RATE_STEP: Final = 1 / 256
#: The lowest send rate a cut leaves (attempts a second): one a minute.
MIN_SEND_RATE: Final = 1 / 60
#: Attempts started since a cut before a 429 may cut again.
CUT_EVIDENCE: Final = 20
#: A share of 429s since a cut (and at least this many) that reads the cut as futile.
FUTILE_SHARE: Final = 0.05
FUTILE_COUNT: Final = 2


class PacingPolicy(Protocol):
    """What the holder of a run's permits asks of one endpoint's pacing.

    The holder (:class:`~safecons.run._permits.LocalPermits` in one process,
    :class:`safecons.ray._leases.LeaseTable` for a Ray job) keeps one policy per endpoint
    and passes every time on its own clock. An attempt meets it three times:

    - **May it start?** :meth:`wait` says how long until the provider's word and its 429s
      let it (``inf`` until the endpoint's first answer); :meth:`news` wakes a waiter when
      an answer may shorten that. :attr:`room` says whether it stays within the endpoint's
      in-flight target, else :meth:`place_freed` wakes it.
    - **It starts**: :meth:`take_place` (a place under the target) and :meth:`start`
      (counted by the pace; its number is the attempt's).
    - **It ends**: :meth:`answered` (the reply's rate-limit headers, and whether it
      succeeded), :meth:`rate_limited` for a 429 (with its ``Retry-After``) or
      :meth:`succeeded`, then :meth:`give_place`.

    The rest says what the policy did, for stats and notices.
    """

    def wait(self, now: float, tokens: int = 0) -> float:
        """Seconds before an attempt of an estimated ``tokens`` may start (0: now)."""

    def news(self) -> anyio.Event:
        """Set when an answer is heard that may change :meth:`wait`."""

    @property
    def room(self) -> bool:
        """Whether one more attempt stays within the in-flight target."""

    def place_freed(self) -> anyio.Event:
        """Set when an attempt gives its place back."""

    def take_place(self) -> None: ...
    def give_place(self) -> None: ...

    def start(self, tokens: int = 0, *, now: float) -> int:
        """Count an attempt started at ``now``; its number, for :meth:`answered`."""

    def answered(
        self, number: int, limits: RateLimits | None, now: float, *, ok: bool = False
    ) -> None:
        """Attempt ``number`` was answered at ``now`` with these headers (None: none, or no
        answer); ``ok``: the provider admitted it."""

    def rate_limited(self, started: float, now: float, retry_after: float | None) -> None:
        """An attempt started at ``started`` was answered 429 at ``now``."""

    def succeeded(self, count: int = 1) -> None: ...

    @property
    def target(self) -> int:
        """The most attempts in flight at once, now."""

    @property
    def lowest(self) -> int:
        """The lowest :attr:`target` reached."""

    @property
    def last_cut(self) -> float:
        """When a 429 last cut the target (-inf: never)."""

    @property
    def held_until(self) -> float:
        """When the latest ``Retry-After`` stops holding the endpoint (-inf: none did)."""

    @property
    def counts_tokens(self) -> bool:
        """Whether the provider said how many tokens remain (then estimates are read)."""

    @property
    def last_headers(self) -> RateLimits | None:
        """The newest rate-limit headers heard, as sent (what a long wait names)."""


class SendRate:
    """How fast attempts to one endpoint may start, by its 429s alone.

    No bound until a 429. A 429 from an attempt started after the last cut (one burst is one
    signal) sets the rate at :data:`RATE_CUT` of what the provider admitted since its first
    429 (over :data:`ADMITTED_SPAN_SECONDS` at most, :data:`MIN_MEASURED_SECONDS` and
    :data:`MIN_ADMITTED` successes at least, else it halves a rate already set); successes
    then grow it by :data:`RATE_STEP` of that rate per second's worth. Once set, a 429 cuts
    again only after :data:`CUT_EVIDENCE` attempts; if by then at least :data:`FUTILE_COUNT`
    and :data:`FUTILE_SHARE` of them met 429s (a provider refusing at random, whatever the
    pace), the rate is dropped (:attr:`dropped`) and that share is the provider's own: a 429
    sets a rate again only when the span's share of 429s is twice it.
    """

    __slots__ = ("_admitted", "_attempts", "_baseline", "_cut_share", "_due", "_first_limited",
                 "_last_cut", "_limited", "_since_attempts", "_since_limited", "_step", "cuts",
                 "dropped", "rate")  # fmt: skip

    def __init__(self) -> None:
        self.rate: float | None = None  # attempts a second (None: not bound)
        self.cuts = 0
        self.dropped = 0
        self._last_cut = -math.inf
        self._step = 0.0
        self._due = -math.inf  # when the next attempt may start
        # When each recent success was heard, each attempt started, each 429 was heard.
        self._admitted: deque[float] = deque()
        self._attempts: deque[float] = deque()
        self._limited: deque[float] = deque()
        self._since_attempts = self._since_limited = 0  # since the last cut
        self._cut_share = 0.0  # the span's share of 429s at the last cut
        self._baseline = 0.0  # the share of 429s the provider gives whatever the pace
        self._first_limited = math.inf

    def wait(self, now: float) -> float:
        """Seconds before an attempt may start at ``now``."""
        return 0.0 if self.rate is None else max(0.0, self._due - now)

    def started(self, now: float) -> None:
        self._attempts.append(now)
        self._since_attempts += 1
        if self.rate is not None:
            self._due = max(self._due, now - 1 / self.rate) + 1 / self.rate

    def succeeded(self, now: float, count: int = 1) -> None:
        self._admitted.extend([now] * count)
        self._trim(now)
        if self.rate is not None:
            self.rate += self._step * count / self.rate

    def rate_limited(self, attempt_started: float, now: float, *, cut: bool = True) -> None:
        """A 429 heard at ``now`` (``cut=False``: counted, but another rule answered it)."""
        self._limited.append(now)
        self._first_limited = min(self._first_limited, now)
        self._trim(now)
        if not cut or attempt_started <= self._last_cut:
            return
        self._since_limited += 1
        share = len(self._limited) / max(1, len(self._attempts))
        if self.rate is None:
            if share < 2 * self._baseline:
                return  # the provider's own refusals, not a limit on top of them
        elif self._since_attempts < CUT_EVIDENCE:
            return
        elif self._since_limited >= FUTILE_COUNT and (
            since := self._since_limited / self._since_attempts
        ) >= max(FUTILE_SHARE, self._cut_share / 2):
            self.rate, self._baseline = None, max(since, share)
            self.dropped += 1
            self._mark_cut(now, share)
            return
        admitted = self._admitted_rate(now)
        if admitted is not None:
            self._step = RATE_STEP * admitted
            lowered = RATE_CUT * (admitted if self.rate is None else min(admitted, self.rate))
        elif self.rate is not None:
            lowered = self.rate / 2
        else:
            return
        self.rate = max(MIN_SEND_RATE, lowered)
        self.cuts += 1
        self._mark_cut(now, share)

    def _admitted_rate(self, now: float) -> float | None:
        # From the first 429 on: before it a bucket's stored burst was admitted, no rate.
        since = max(now - ADMITTED_SPAN_SECONDS, self._first_limited)
        if now - since < MIN_MEASURED_SECONDS:
            return None
        heard = sum(1 for t in self._admitted if t > since)
        return None if heard < MIN_ADMITTED else heard / (now - since)

    def _mark_cut(self, now: float, share: float) -> None:
        self._last_cut, self._cut_share = now, share
        self._since_attempts = self._since_limited = 0

    def _trim(self, now: float) -> None:
        edge = now - ADMITTED_SPAN_SECONDS
        for times in (self._admitted, self._attempts, self._limited):
            while times and times[0] <= edge:
                times.popleft()


class EndpointPolicy:
    """The default :class:`PacingPolicy`: the provider's headers as hints, its 429s as truth.

    - **Headers** (:attr:`pace`): one attempt alone until the first answer, then the
      remaining requests and tokens they said, until their resets; a 429's ``Retry-After``
      holds the endpoint, at most ``max_hold`` seconds.
    - **429s** (``adaptive``): the in-flight :attr:`target`, halved by a 429 from an attempt
      started after the last cut and grown back by one per clean window, up to ``ceiling``;
      and a :class:`SendRate` cut to just under what the provider admitted. Each endpoint
      has its own: a judge's 429s do not slow the SUT's calls.

    The run's bound over every endpoint (a capacity limiter, or a lease table's cap) is the
    holder's, asked after the policy, so a held endpoint leaves its places to the others.
    ``ordered=False``: attempts reach the provider in no order the holder knows (many
    processes).

    Examples
    --------
    >>> policy = EndpointPolicy(8)
    >>> policy.rate_limited(started=0.0, now=1.0, retry_after=2.0)
    >>> policy.wait(1.5), policy.target
    (1.5, 4)
    """

    def __init__(
        self,
        ceiling: int,
        *,
        adaptive: bool = True,
        ordered: bool = True,
        max_hold: float = MAX_PACED_WAIT_SECONDS,
    ) -> None:
        self.ceiling = self.target = self.lowest = ceiling
        self.adaptive = adaptive
        self.pace = HeaderPace(ordered=ordered)
        self.send_rate = SendRate() if adaptive else None
        self.max_hold = max_hold
        self.last_cut = -math.inf  # when the target was last cut
        self.in_flight = 0  # places held now (attempts in flight, or a table's leases)
        self._clean = 0  # successes since the target last moved
        self._freed: anyio.Event | None = None  # made only while an attempt waits for a place

    @property
    def room(self) -> bool:
        return self.in_flight < self.target

    @property
    def held_until(self) -> float:
        return self.pace.held_until

    @property
    def counts_tokens(self) -> bool:
        return self.pace.counts_tokens

    @property
    def last_headers(self) -> RateLimits | None:
        return self.pace.last_headers

    @property
    def _awaiting_first_answer(self) -> bool:
        return bool(self.pace.started) and not self.pace.first_answer.is_set()

    def wait(self, now: float, tokens: int = 0) -> float:
        if self._awaiting_first_answer:
            return math.inf
        paced = self.pace.wait(now, tokens)
        return paced if self.send_rate is None else max(paced, self.send_rate.wait(now))

    def news(self) -> anyio.Event:
        pace = self.pace
        return pace.first_answer if self._awaiting_first_answer else pace.headers_heard

    def may_start(self, now: float, tokens: int = 0) -> bool:
        """Whether every rule lets an attempt of an estimated ``tokens`` start at ``now``."""
        return self.room and self.wait(now, tokens) <= 0

    def place_freed(self) -> anyio.Event:
        if self._freed is None:
            self._freed = anyio.Event()
        return self._freed

    def take_place(self) -> None:
        self.in_flight += 1

    def give_place(self) -> None:
        self.in_flight -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def start(self, tokens: int = 0, *, now: float) -> int:
        if self.send_rate is not None:
            self.send_rate.started(now)
        return self.pace.start(tokens)

    def answered(
        self, number: int, limits: RateLimits | None, now: float, *, ok: bool = False
    ) -> None:
        self.pace.answered(number, limits, now)
        if ok and self.send_rate is not None:
            self.send_rate.succeeded(now)  # measured as the answer comes, not when told

    def rate_limited(self, started: float, now: float, retry_after: float | None) -> None:
        if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
            self.pace.hold(min(retry_after, self.max_hold), now)
        # A 429 that takes back a bucket's reading of the headers is answered by it.
        corrected = self.pace.rate_limited()
        if self.adaptive:
            self._clean = 0
            if started > self.last_cut:  # one burst of 429s is one signal, as in TCP
                self.last_cut = now
                self.target = max(1, self.target // 2)
                self.lowest = min(self.lowest, self.target)
        if self.send_rate is not None:
            self.send_rate.rate_limited(started, now, cut=not corrected)

    def succeeded(self, count: int = 1) -> None:
        """``count`` attempts succeeded: the target grows by one per clean window."""
        for _ in range(count if self.adaptive else 0):
            if self.target >= self.ceiling:
                return
            self._clean += 1
            if self._clean >= self.target:
                self._clean, self.target = 0, self.target + 1

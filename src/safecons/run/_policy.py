"""One endpoint's pacing: the :class:`PacingPolicy` a permit holder asks, and the default,
:class:`EndpointPolicy`: a provider's headers as hints (:class:`~._headers.HeaderPace`), its
429s as the truth (:class:`SendRate`, an in-flight target). The holder keeps one policy per
endpoint (:class:`~._permits.LocalPermits`, or a Ray job's
:class:`safecons.ray._leases.LeaseTable`) and passes every time on its own clock.
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

    An attempt may start once :meth:`wait` is 0 (``inf`` until an answer: :meth:`news` is
    set then) and :attr:`room` holds (else :meth:`place_freed`); it then :meth:`take_place`
    and :meth:`start`; when it ends, :meth:`answered`, then :meth:`rate_limited` (a 429) or
    :meth:`succeeded`, then :meth:`give_place`. The rest is read for stats and notices. The
    rules of the default are set out in docs/reliability.md ("One pacing
    policy per endpoint", "Adaptive pressure").
    """

    def wait(self, now: float, tokens: int = 0) -> float: ...
    def news(self) -> anyio.Event: ...
    @property
    def room(self) -> bool: ...
    def place_freed(self) -> anyio.Event: ...
    def take_place(self) -> None: ...
    def give_place(self) -> None: ...
    def start(self, tokens: int = 0, *, now: float) -> int: ...
    def answered(
        self, number: int, limits: RateLimits | None, now: float, *, ok: bool = False
    ) -> None: ...
    def rate_limited(self, started: float, now: float, retry_after: float | None) -> None: ...
    def succeeded(self, count: int = 1) -> None: ...
    @property
    def target(self) -> int: ...
    @property
    def lowest(self) -> int: ...
    @property
    def last_cut(self) -> float: ...
    @property
    def held_until(self) -> float: ...
    @property
    def counts_tokens(self) -> bool: ...
    @property
    def last_headers(self) -> RateLimits | None: ...


class SendRate:
    """How fast attempts to one endpoint may start, by its 429s alone.

    No bound until a 429. A 429 from an attempt started after the last cut sets the rate at
    :data:`RATE_CUT` of what was admitted since the first 429 (else halves a rate set);
    successes grow it by :data:`RATE_STEP` of that a second's worth. A 429 cuts again only
    after :data:`CUT_EVIDENCE` attempts; if :data:`FUTILE_SHARE` of them met 429s, the cut
    was futile: the rate is dropped and that share read as the provider's own.
    """

    def __init__(self) -> None:
        self.rate: float | None = None  # attempts a second (None: not bound)
        self.cuts = self.dropped = 0
        self._last_cut = self._due = -math.inf
        self._step = self._cut_share = self._baseline = 0.0
        # When each recent success was heard, each attempt started, each 429 was heard.
        self._admitted: deque[float] = deque()
        self._attempts: deque[float] = deque()
        self._limited: deque[float] = deque()
        self._since_attempts = self._since_limited = 0  # since the last cut
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
        since = self._since_limited / max(1, self._since_attempts)
        if self.rate is None and share < 2 * self._baseline:
            return  # the provider's own refusals, not a limit on top of them
        if self.rate is not None and self._since_attempts < CUT_EVIDENCE:
            return
        futile = since >= max(FUTILE_SHARE, self._cut_share / 2)
        if self.rate is not None and self._since_limited >= FUTILE_COUNT and futile:
            self.rate, self._baseline = None, max(since, share)
            self.dropped += 1
        else:
            admitted = self._admitted_rate(now)
            if admitted is not None:
                self._step = RATE_STEP * admitted
                lowered = RATE_CUT * min(admitted, self.rate or math.inf)
            elif self.rate is not None:
                lowered = self.rate / 2
            else:
                return
            self.rate = max(MIN_SEND_RATE, lowered)
            self.cuts += 1
        self._last_cut, self._cut_share = now, share
        self._since_attempts = self._since_limited = 0

    def _admitted_rate(self, now: float) -> float | None:
        # From the first 429 on: before it a bucket's stored burst was admitted, no rate.
        since = max(now - ADMITTED_SPAN_SECONDS, self._first_limited)
        heard = sum(1 for t in self._admitted if t > since)
        if now - since < MIN_MEASURED_SECONDS or heard < MIN_ADMITTED:
            return None
        return heard / (now - since)

    def _trim(self, now: float) -> None:
        for times in (self._admitted, self._attempts, self._limited):
            while times and times[0] <= now - ADMITTED_SPAN_SECONDS:
                times.popleft()


class EndpointPolicy:
    """The default :class:`PacingPolicy`: the provider's headers as hints, its 429s as truth.

    - **Headers** (:attr:`pace`, a :class:`~._headers.HeaderPace`); a 429's ``Retry-After``
      holds the endpoint, at most ``max_hold`` seconds.
    - **429s** (``adaptive``): the in-flight :attr:`target`, halved by a 429 from an attempt
      started after the last cut and grown back by one per clean window, up to ``ceiling``;
      and a :class:`SendRate`. Each endpoint has its own.

    The run's bound over every endpoint is the holder's, asked after the policy, so a held
    endpoint leaves its places to the others. ``ordered=False`` (many processes) reads the
    headers as ``True`` does: every attempt in flight counts as used after the newest word.

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
        self.adaptive, self.max_hold = adaptive, max_hold
        self.pace = HeaderPace()
        self.ordered = ordered  # (read alike: earlier attempts in flight count after a word)
        self.send_rate = SendRate() if adaptive else None
        self.last_cut = -math.inf  # when the target was last cut
        self.in_flight = 0  # places held now (attempts in flight, or a table's leases)
        self._clean = 0  # successes since the target last moved
        self._freed: anyio.Event | None = None  # made only while an attempt waits for a place

    room = property(lambda self: self.in_flight < self.target)
    held_until = property(lambda self: self.pace.held_until)
    counts_tokens = property(lambda self: self.pace.counts_tokens)
    last_headers = property(lambda self: self.pace.last_headers)

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
        self._freed = self._freed or anyio.Event()
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
        # A 429 that refutes a bucket's reading of the headers is answered by it.
        corrected = self.pace.rate_limited()
        if self.adaptive:
            self._clean = 0
            if started > self.last_cut:  # one burst of 429s is one signal, as in TCP
                self.last_cut, self.target = now, max(1, self.target // 2)
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

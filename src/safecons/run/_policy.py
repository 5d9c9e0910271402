"""One endpoint's pacing policy: when its next attempt may start, and what each attempt's end
says of the endpoint (:class:`EndpointPolicy`).

The policy is made of the provider's word (:class:`Pace`: its rate-limit headers, a 429's
``Retry-After``, one attempt alone before the first answer: hints) and adaptive pressure
(:class:`Pressure`: an in-flight target, halved on a 429; :class:`SendRate`: a send rate that
429s alone bound, since a provider's headers may not tell the whole truth). Where attempts
run, one policy per
endpoint is kept and asked: in one process by :class:`~safecons.run._permits.LocalPermits`,
across the workers of a Ray job by :class:`safecons.ray._leases.LeaseTable`. Neither reads a
clock: times are the holder's.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final

import anyio

from ..clients import RateLimits

__all__ = (
    "MAX_PACED_WAIT_SECONDS",
    "MIN_PACED_WAIT_SECONDS",
    "EndpointPolicy",
    "Pace",
    "Pressure",
    "SendRate",
    "describe",
    "sensible",
)

#: The longest one answer's word holds an endpoint (seconds): a ``Retry-After`` or a reset
#: time past it is read as this long, whatever a misconfigured or hostile server says.
MAX_PACED_WAIT_SECONDS: Final = 60.0
#: How long a remaining count sent without its reset time is believed (seconds).
UNKNOWN_RESET_SECONDS: Final = 1.0
#: A count above this (requests or tokens in one window) is no limit anyone sets: read as
#: nothing said (:func:`sensible`).
MAX_SENSIBLE_COUNT: Final = 10**12
#: A reset further off than this is no per-minute or per-day window: read as nothing said.
MAX_SENSIBLE_RESET_SECONDS: Final = 86_400.0
#: The shortest time over which a window that turned with no newer word lets its limit out
#: (seconds): OpenAI's limits are per minute (:meth:`_Budget._spread_wait`).
SPREAD_SECONDS: Final = 60.0
#: The shortest paced wait (seconds): a reset of a nanosecond must not make the pace spin.
MIN_PACED_WAIT_SECONDS: Final = 0.001


def sensible(limits: RateLimits | None) -> RateLimits | None:
    """``limits`` with each count (requests, tokens) that no provider could mean read as not
    said: a limit of 0 (some gateways send it for "no limit set"), a count below 0 or above
    :data:`MAX_SENSIBLE_COUNT`, a remaining count above its limit, or a reset that is negative,
    not finite or past :data:`MAX_SENSIBLE_RESET_SECONDS`. A count's limit, remaining and reset
    go together: one nonsense figure drops the three. ``Retry-After`` is kept (a hold is
    capped at :data:`MAX_PACED_WAIT_SECONDS` where it is read).

    Examples
    --------
    >>> from safecons.clients import RateLimits
    >>> sensible(RateLimits(limit_requests=0, remaining_requests=0, reset_requests=1.0))
    >>> sensible(RateLimits(limit_requests=60, remaining_requests=0, reset_requests=360e3))
    >>> sensible(RateLimits(limit_requests=60, remaining_requests=3, reset_requests=2.0))
    RateLimits(limit_requests=60, remaining_requests=3, reset_requests=2.0, limit_tokens=None, remaining_tokens=None, reset_tokens=None, retry_after=None)
    """  # noqa: E501
    if limits is None:
        return None
    requests = _sensible_count(
        limits.limit_requests, limits.remaining_requests, limits.reset_requests
    )
    tokens = _sensible_count(limits.limit_tokens, limits.remaining_tokens, limits.reset_tokens)
    if requests is None and tokens is None and limits.retry_after is None:
        return None
    no = (None, None, None)
    (lr, rr, sr), (lt, rt, st) = requests or no, tokens or no
    return RateLimits(
        limit_requests=lr,
        remaining_requests=rr,
        reset_requests=sr,
        limit_tokens=lt,
        remaining_tokens=rt,
        reset_tokens=st,
        retry_after=limits.retry_after,
    )


def _sensible_count(
    limit: int | None, remaining: int | None, reset: float | None
) -> tuple[int | None, int | None, float | None] | None:
    if limit is None and remaining is None and reset is None:
        return None
    if limit is not None and not 0 < limit <= MAX_SENSIBLE_COUNT:
        return None
    if remaining is not None and not 0 <= remaining <= MAX_SENSIBLE_COUNT:
        return None
    if limit is not None and remaining is not None and remaining > limit:
        return None
    if reset is not None and not (
        math.isfinite(reset) and 0 <= reset <= MAX_SENSIBLE_RESET_SECONDS
    ):
        return None
    return limit, remaining, reset


def describe(limits: RateLimits | None) -> str:
    """What a provider's word said, in a few words (for a warning or a progress bar).

    Examples
    --------
    >>> from safecons.clients import RateLimits
    >>> describe(RateLimits(limit_requests=60, remaining_requests=0, reset_requests=42.0))
    '0 of 60 requests left, reset in 42 s'
    >>> describe(None)
    'nothing of its limits'
    """
    if limits is None:
        return "nothing of its limits"
    parts = []
    for name, limit, remaining, reset in (
        ("requests", limits.limit_requests, limits.remaining_requests, limits.reset_requests),
        ("tokens", limits.limit_tokens, limits.remaining_tokens, limits.reset_tokens),
    ):
        if remaining is None and limit is None:
            continue
        left = "?" if remaining is None else f"{remaining:,}"
        of = "" if limit is None else f" of {limit:,}"
        when = "" if reset is None else f", reset in {_seconds(reset)} s"
        parts.append(f"{left}{of} {name} left{when}")
    if limits.retry_after is not None:
        parts.append(f"Retry-After {_seconds(limits.retry_after)} s")
    return "; ".join(parts) or "nothing of its limits"


def _seconds(value: float) -> str:
    """``42``, ``0.35``, ``3,600``: seconds as a person reads them."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"  # noqa: PLR2004


class Pressure:
    """Adaptive in-flight target: halve it on a 429, grow it back by one per clean window.

    Only a 429 from an attempt that started after the last cut cuts again, so one burst of
    rate-limit answers to requests sent together counts as one signal (as TCP treats one
    window's losses). The target never exceeds ``ceiling`` nor drops below 1. Times are the
    caller's clock (one monotonic clock: the permits' ``clock``); it reads none itself.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.target = ceiling
        self.lowest = ceiling
        self._last_cut = -math.inf
        self._clean = 0

    @property
    def last_cut(self) -> float:
        """When the target was last cut (the caller's clock; -inf before any cut)."""
        return self._last_cut

    def rate_limited(self, attempt_started: float, now: float) -> None:
        self._clean = 0
        if attempt_started <= self._last_cut:
            return
        self._last_cut = now
        self.target = max(1, self.target // 2)
        self.lowest = min(self.lowest, self.target)

    def succeeded(self) -> None:
        if self.target >= self.ceiling:
            return
        self._clean += 1
        if self._clean >= self.target:
            self._clean = 0
            self.target += 1


#: What a cut keeps of the rate the provider admitted just before its 429 (:class:`SendRate`).
RATE_CUT: Final = 0.95
#: Over how long the admitted rate is measured when a 429 comes (seconds).
ADMITTED_SPAN_SECONDS: Final = 5.0
#: After a cut, the send rate grows by this share of the rate the provider admitted before it,
#: per second's worth of successes (:class:`SendRate`).
RATE_STEP: Final = 1 / 256
#: The fewest successes in the span that measure a rate: fewer say too little of one (then
#: the in-flight target's cut, :class:`Pressure`, is the 429's only effect).
MIN_ADMITTED: Final = 4
#: The shortest time over which the admitted rate is measured (seconds).
MIN_MEASURED_SECONDS: Final = 1.0
#: The lowest send rate a cut leaves (attempts a second): one a minute.
MIN_SEND_RATE: Final = 1 / 60
#: How many attempts must start after a cut before a 429 may cut again (:class:`SendRate`):
#: fewer say nothing of whether the cut helped.
CUT_EVIDENCE: Final = 20
#: The share of 429s since a cut at or above which the cut is read as futile (with at least
#: two of them, and at least half the share before the cut): the provider refuses whatever
#: the pace, so a send rate only slows the run (:class:`SendRate`).
FUTILE_SHARE: Final = 0.05
#: The fewest 429s since a cut that read it as futile (one alone is the limit met again).
FUTILE_COUNT: Final = 2


class SendRate:
    """How fast attempts to one endpoint may start, by its 429s alone: a provider's headers
    are hints, its 429s the truth.

    No bound until a 429 comes (the headers' pace, :class:`Pace`, is all). A 429 from an
    attempt that started after the last cut (one burst of 429s is one signal, as in
    :class:`Pressure`) sets the rate at :data:`RATE_CUT` of what the provider admitted since
    its first 429, over the last :data:`ADMITTED_SPAN_SECONDS` at most (its successes,
    counted when they are heard), or at most that of the rate already set: the limit the
    provider really enforces, whatever its headers announce (a per-minute limit enforced in
    sub-minute slices). Each success then grows the rate back by :data:`RATE_STEP` of the
    admitted rate per second's worth of successes (additive increase), until the next 429
    cuts it again (multiplicative decrease): the run converges on the enforced limit, probing
    above it slowly. Attempts are spaced ``1 / rate`` apart (after a pause, two may go at
    once). Times are the caller's clock; it reads none itself.

    What is measured and when a 429 cuts are chosen so that a 429 no pace avoids does not
    slow the run for nothing:

    - **From the first 429, over a second at least.** Before its first 429 a provider
      admitted what a bucket had stored, or what the in-flight target let through: no rate
      (read over a short start, either misleads by several times). A 429 with less than
      :data:`MIN_MEASURED_SECONDS` since the first, or fewer than :data:`MIN_ADMITTED`
      successes since, sets no rate (the in-flight target's cut is all) and halves one set.
    - **Evidence.** Once a rate is set, a 429 cuts again only after :data:`CUT_EVIDENCE`
      attempts started since the last cut.
    - **A futile cut is undone.** If, by then, at least :data:`FUTILE_COUNT` of those
      attempts were answered 429 and their share is at least :data:`FUTILE_SHARE` and half
      the span's share at the cut, the cut did not help (a provider refusing some requests
      at random, whatever the pace): the rate is dropped (:attr:`dropped` counts it) and
      that share is remembered as the provider's own; with no rate set, a 429 sets one again
      only when the span's share of 429s is at least twice it (a limit on top of the random
      refusals).
    """

    __slots__ = (
        "_admitted",
        "_attempts",
        "_baseline",
        "_cut_share",
        "_due",
        "_first_limited",
        "_last_cut",
        "_limited",
        "_since_attempts",
        "_since_limited",
        "_step",
        "cuts",
        "dropped",
        "rate",
    )

    def __init__(self) -> None:
        #: Attempts a second (None: not bound by 429s yet).
        self.rate: float | None = None
        #: How many times a 429 cut the rate.
        self.cuts = 0
        #: How many times a cut was read as futile and the rate dropped.
        self.dropped = 0
        self._last_cut = -math.inf
        self._step = 0.0
        self._due = -math.inf  # when the next attempt may start
        self._admitted: deque[float] = deque()  # when each recent success was heard
        self._attempts: deque[float] = deque()  # when each recent attempt started
        self._limited: deque[float] = deque()  # when each recent 429 was heard
        self._since_attempts = 0  # attempts started since the last cut
        self._since_limited = 0  # of them, answered 429
        self._cut_share = 0.0  # the span's share of 429s at the last cut
        self._baseline = 0.0  # the share of 429s the provider gives whatever the pace
        self._first_limited = math.inf  # when the first 429 was heard

    def wait(self, now: float) -> float:
        """Seconds before an attempt may start at ``now`` (0: it may)."""
        return 0.0 if self.rate is None else max(0.0, self._due - now)

    def started(self, now: float) -> None:
        """An attempt started at ``now``."""
        self._attempts.append(now)
        self._since_attempts += 1
        if self.rate is not None:
            self._due = max(self._due, now - 1 / self.rate) + 1 / self.rate

    def succeeded(self, now: float, count: int = 1) -> None:
        """``count`` attempts succeeded, heard at ``now``."""
        self._admitted.extend([now] * count)
        self._trim(now)
        if self.rate is None:
            return
        self.rate += self._step * count / self.rate

    def rate_limited(self, attempt_started: float, now: float, *, cut: bool = True) -> None:
        """An attempt started at ``attempt_started`` was answered 429 at ``now`` (``cut``:
        False for a 429 another rule has answered, counted but cutting nothing)."""
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
        else:
            since = self._since_limited / self._since_attempts
            futile = max(FUTILE_SHARE, self._cut_share / 2)
            if self._since_limited >= FUTILE_COUNT and since >= futile:
                self.rate = None
                self.dropped += 1
                self._baseline = max(since, share)
                self._mark_cut(now, share)
                return
        admitted = self._admitted_rate(now)
        if admitted is not None:
            self._step = RATE_STEP * admitted
            if self.rate is not None:
                admitted = min(admitted, self.rate)
            lowered = RATE_CUT * admitted
        elif self.rate is not None:
            lowered = self.rate / 2
        else:
            return
        self.rate = max(MIN_SEND_RATE, lowered)
        self.cuts += 1
        self._mark_cut(now, share)

    def _admitted_rate(self, now: float) -> float | None:
        """What the provider admitted a second over the span before ``now`` (None: too little
        heard to say)."""
        # Measured from the first 429 on: before it, a bucket's stored burst (or nothing at
        # all) was admitted, which is no rate; and over a second at least.
        since = max(now - ADMITTED_SPAN_SECONDS, self._first_limited)
        if now - since < MIN_MEASURED_SECONDS:
            return None
        heard = sum(1 for t in self._admitted if t > since)
        return None if heard < MIN_ADMITTED else heard / (now - since)

    def _mark_cut(self, now: float, share: float) -> None:
        self._last_cut = now
        self._cut_share = share
        self._since_attempts = 0
        self._since_limited = 0

    def _trim(self, now: float) -> None:
        edge = now - ADMITTED_SPAN_SECONDS
        for times in (self._admitted, self._attempts, self._limited):
            while times and times[0] <= edge:
                times.popleft()


class Pace:
    """When the next attempt to one endpoint may start, by what its provider said.

    Three holds, all on the caller's clock (it reads none itself):

    - the **remaining count**: an answer that said ``remaining`` requests are left until its
      reset lets that many attempts start after the one it answered (in the order attempts
      started, which on one connection pool is the order the server counts them), then holds
      the endpoint until the reset. When the reset passes with no newer word, a new window is
      taken to allow ``limit`` attempts (when the provider said its limit) until one window
      later, its length being the longest reset heard; with no limit said, the hold just ends.
      A reset of nothing (a token bucket's "the next fits now") lets ``remaining`` out at
      once and the rest at the limit's rate (:meth:`_Budget._take`).
    - the **remaining tokens**: the same, counted in tokens (``x-ratelimit-remaining-tokens``
      and ``-reset-tokens``): an attempt starts only if its estimate (``tokens`` of
      :meth:`wait` and :meth:`start`: the prompt's estimate plus the request's ``max_tokens``,
      :func:`safecons._tokens.request_tokens`) fits in what the answer said remains, less the
      estimates of the attempts started after the one it answered and of those started
      before it still in flight (they may reach the server after it); else it waits for the
      token reset, when a new window of the token limit is taken as for requests, less what
      is still in flight (sent before the turn, the server may count it after). An attempt
      larger than the whole limit starts when a window is whole and nothing has started in it
      yet, so that it never waits for ever (the provider then answers it as it sees fit).
      What an answer really used is not known here: only the next answer's headers say it.
    - **Retry-After**: a 429's wait holds every attempt to the endpoint, not only the one that
      got it.

    Before the endpoint's first answer, only one attempt is in flight: a run does not send a
    burst of requests to a provider whose limits it has not heard (:attr:`first_word` is set
    when the first attempt ends, however it ends). Newer word replaces older; the word of an
    attempt that started before the one last heard is older, and only its ``Retry-After``
    counts. Every wait is capped at :data:`MAX_PACED_WAIT_SECONDS`.
    """

    def __init__(self, *, ordered: bool = True) -> None:
        self.started = 0  # attempts started to the endpoint
        self.ordered = ordered
        #: The newest word heard, as the provider said it (before :func:`sensible`).
        self.said: RateLimits | None = None
        self.first_word = anyio.Event()
        #: Set when an answer's word is heard (then made anew): an attempt waiting on the pace
        #: looks again, since a newer word may let it start sooner.
        self.word = anyio.Event()
        self._requests = _Budget()
        self._tokens = _Budget()
        self._hold_until = -math.inf
        self._spent = 0  # the token estimates of every attempt started, summed
        # Each attempt in flight: _spent once it had started, and its own estimate.
        self._in_flight: dict[int, tuple[int, int]] = {}
        self._in_flight_tokens = 0

    @property
    def counts_tokens(self) -> bool:
        """Whether an answer said how many tokens remain (then :meth:`wait` reads estimates)."""
        return self._tokens.remaining is not None

    def wait(self, now: float, tokens: int = 0) -> float:
        """Seconds before an attempt of an estimated ``tokens`` may start at ``now`` (0: it may
        start)."""
        if now < self._hold_until:
            return self._hold_until - now
        # Unordered (many processes), attempts in flight when a window turns may be counted
        # in the new one: they are carried into it, as tokens always are.
        carried = 0 if self.ordered else len(self._in_flight)
        requests = self._requests.wait(now, self.started, 1, self.started, carried=carried)
        if requests > 0 or self._tokens.remaining is None:
            return requests
        return self._tokens.wait(
            now, self._spent, tokens, self.started, carried=self._in_flight_tokens
        )

    def start(self, tokens: int = 0) -> int:
        """Count an attempt of an estimated ``tokens`` as started; its number, for
        :meth:`heard`."""
        number = self.started
        self.started += 1
        self._spent += tokens
        self._in_flight[number] = (self._spent, tokens)
        self._in_flight_tokens += tokens
        return number

    def heard(self, number: int, limits: RateLimits | None, now: float) -> None:
        """What attempt ``number``'s answer said (None: nothing, or no answer), at ``now``.

        Its ``Retry-After`` is not read here: only a 429's holds the endpoint (:meth:`hold`);
        a 503's is that one call's back-off.
        """
        self.first_word.set()
        through, tokens = self._in_flight.pop(number, (self._spent, 0))
        self._in_flight_tokens -= tokens
        checked = sensible(limits)
        if checked is None:
            return
        self.said = limits  # as the provider said it: what a long wait names
        limits = checked
        word, self.word = self.word, anyio.Event()
        word.set()
        if not self.ordered:
            self._heard_unordered(number, limits, now)
            return
        # Attempts started before this one and still in flight may reach the server after
        # it (64 connections do not keep their order): counted as not yet counted, for
        # requests as for tokens.
        earlier = sum(1 for n in self._in_flight if n < number)
        self._requests.heard(
            number,
            remaining=limits.remaining_requests,
            limit=limits.limit_requests,
            reset=limits.reset_requests,
            now=now,
            base=number + 1 - earlier,
            total=self.started,
        )
        if limits.remaining_tokens is not None:
            # Attempts started before this one and still in flight may reach the server after
            # it (64 connections do not keep their order): count them as not yet counted.
            through -= sum(t for n, (_, t) in self._in_flight.items() if n < number)
        self._tokens.heard(
            number,
            remaining=limits.remaining_tokens,
            limit=limits.limit_tokens,
            reset=limits.reset_tokens,
            now=now,
            base=through,
            total=self._spent,
        )

    def _heard_unordered(self, number: int, limits: RateLimits, now: float) -> None:
        """An answer's word when attempts reach the server in no known order (many processes
        share the pace): every attempt still in flight is counted as used after it, the worst
        case, and within one window the strictest word stands; a token bucket's words, once
        they read as one, pace as its level instead (:class:`_Refill`)."""
        self._requests.heard_unordered(
            number,
            remaining=limits.remaining_requests,
            limit=limits.limit_requests,
            reset=limits.reset_requests,
            now=now,
            base=self.started - len(self._in_flight),
            total=self.started,
            started=self.started,
        )
        self._tokens.heard_unordered(
            number,
            remaining=limits.remaining_tokens,
            limit=limits.limit_tokens,
            reset=limits.reset_tokens,
            now=now,
            base=self._spent - self._in_flight_tokens,
            total=self._spent,
            started=self.started,
        )

    def rate_limited(self) -> bool:
        """An attempt was answered 429: a token bucket read from the answers overran the
        provider (:meth:`_Refill.refute`), and is read so no longer. Whether a reading was
        taken back."""
        requests = self._requests.rate_limited()
        return self._tokens.rate_limited() or requests

    @property
    def held_until(self) -> float:
        """When the latest :meth:`hold` ends (-inf: none was made)."""
        return self._hold_until

    def hold(self, seconds: float, now: float) -> None:
        """Hold the endpoint ``seconds`` from ``now`` (a 429's ``Retry-After``)."""
        self._hold_until = max(
            self._hold_until, now + min(max(seconds, 0.0), MAX_PACED_WAIT_SECONDS)
        )


#: How many words of a provider's count must read as one token bucket's (:class:`_Refill`)
#: before the pace reads them so.
BUCKET_EVIDENCE: Final = 3


#: A limit said more than this many times the most any word said remains is read as a
#: minute's limit announced over a sub-minute slice, the slice being the bucket
#: (:meth:`_Budget._as_bucket`).
SLICE_EVIDENCE: Final = 4


#: The smallest gap (``limit - remaining``) a word's agreement with a bucket counts at: the
#: count is a whole number, so a gap of 1 to 3 fits almost any rate.
BUCKET_SMALLEST_GAP: Final = 4


def _one_rate(small: int, short: float, big: int, long: float) -> bool:
    """Whether one refill rate fits two words of a bucket: gaps ``small`` and ``big`` (whole
    numbers, each within one of the true gap, however the provider rounds) at resets
    ``short`` and ``long`` (each within a millisecond and a percent: the header's rounding)."""
    slack_short, slack_long = 0.001 + 0.01 * short, 0.001 + 0.01 * long
    lowest = max((small - 1) / (short + slack_short), (big - 1) / (long + slack_long))
    highest = math.inf
    for gap, reset, slack in ((small, short, slack_short), (big, long, slack_long)):
        if reset > slack:  # a reset within its own rounding of nothing sets no highest rate
            highest = min(highest, (gap + 1) / (reset - slack))
    return lowest <= highest


class _Refill:
    """Whether a provider's count is a token bucket, and if so, how much of it the workers
    sharing it may use now: one estimated level, refilled at the bucket's rate.

    **Telling a bucket from a window.** A bucket's word is a snapshot: ``remaining`` of
    ``limit`` held, ``reset`` the time until it is full again, so ``limit - remaining`` is
    ``reset`` times its refill rate, in every word, in whatever order the words are heard. A
    fixed window's words are not: within a window the count used grows while the time to its
    reset shrinks, so of two words the one that used less never has the shorter reset. Words
    are compared with the most precise one heard (the most used: ``remaining`` is a whole
    number, so a larger gap reads the rate closer): one rate fits both (:func:`_one_rate`:
    each gap within one, each reset within a millisecond and a percent) or not. Words that
    no rate fits are a window's: what was counted is dropped, and a bucket read before is
    read so no longer. :data:`BUCKET_EVIDENCE` words that fit, with no misfit between them,
    say "bucket", each with a gap of at least :data:`BUCKET_SMALLEST_GAP` and a reset at
    most three quarters of the reference's and a tenth apart from the others' (gaps of 1 to
    3, or alike resets, fit almost any rate). A window's words never say it (a property
    test: bursts at any moment of any window, heard in disorder). A reset said in whole
    seconds, for a bucket of a second's worth, never fits: such a bucket stays paced as a
    window (:class:`_Budget`'s reading, which is never too fast for either).

    **The level.** Once a bucket, each word is a level (``remaining`` less every attempt still
    in flight, counted as used after it: the worst case for many workers), which refills at
    the rate up to ``limit`` and is drawn down by each attempt started. A word replaces the
    level when it is lower (stricter), or when its attempt started after the level was taken
    (it reached the provider after every attempt the level knew of: newer knowledge, lower or
    higher). A drained bucket is then used at its refill rate, as it refills, where a window's
    reading waited for it to be whole and sent a burst (the run's last requests waited up to
    a whole reset).

    **A 429 takes it back** (:meth:`refute`), for the rest of the run: a bucket that another
    client draws on too (a key shared with other jobs) refills for this run slower than its
    answers say (its reset is the time until it is full if nobody draws), and every answer
    still fits the one rate, so nothing else would show it; its level ran ahead of it (a red
    team: 10% to 36% of requests answered 429 where the window's reading met none).
    """

    __slots__ = (
        "_agreed",
        "_cap",
        "_counted",
        "_level",
        "_level_at",
        "_reference",
        "_refuted",
        "_through",
        "rate",
    )

    def __init__(self) -> None:
        #: The bucket's refill rate (a count a second; None until the words say "bucket").
        self.rate: float | None = None
        self._reference: tuple[int, int, float] | None = None  # limit, gap, reset
        self._agreed: tuple[float, ...] = ()  # the resets of the words that agreed
        self._cap = 0
        self._level = 0.0
        self._level_at: float | None = None
        self._counted = 0  # the running total the level has drawn
        self._through = 0  # attempts started when the level was taken
        self._refuted = False  # a 429 came while the level paced: never a bucket again

    def refute(self) -> bool:
        """A 429 while the level paced: the bucket does not refill for this run at the rate its
        answers say (another client draws on it: a key shared with other jobs; its reset is
        the time until it is full if nobody draws). Read as a window for the rest of the run,
        which waits for each reset and is never too fast. Whether it was read as a bucket."""
        if self.rate is None:
            return False
        self.rate, self._level_at, self._refuted = None, None, True
        return True

    def learn(self, remaining: int, limit: int, reset: float) -> None:
        """One more word: does the provider's count read as a bucket's (or, read so, no
        longer)?"""
        gap = limit - remaining
        if self._refuted or gap <= 0 or reset < MIN_PACED_WAIT_SECONDS:
            return
        reference = self._reference
        if reference is None or reference[0] != limit:
            self._reference, self._agreed = (limit, gap, reset), ()
            self.rate = self._level_at = None
            return
        _, big, long = reference
        small, short = gap, reset
        if small > big:
            self._reference = (limit, gap, reset)
            (small, short), big, long = (big, long), gap, reset
        if not _one_rate(small, short, big, long):
            # A window's words, not a bucket's (or no longer): its level is forgotten too.
            self._agreed, self.rate, self._level_at = (), None, None
            return
        if self.rate is not None:
            self.rate = self._rate_of(big, long)  # read closer on a larger gap
        elif (
            short <= 0.75 * long
            and small >= BUCKET_SMALLEST_GAP
            and all(abs(short - other) > 0.1 * other for other in self._agreed)
        ):
            # Agreeing words must be spread in time: two alike resets fit many rates, and a
            # burst answered at once gives many gaps at one reset, which some window's word
            # may happen to fall beside.
            self._agreed += (short,)
            if len(self._agreed) >= BUCKET_EVIDENCE:
                self.rate = self._rate_of(big, long)

    @staticmethod
    def _rate_of(gap: int, reset: float) -> float:
        # remaining is a whole number, the true gap within one of the gap said: the lowest
        # rate it allows, so the level never runs ahead of the bucket between two words.
        return max(gap - 1, 0.5) / reset

    def available(self, now: float, total: int) -> float:
        """The level at ``now``, ``total`` being the running total (refilled, then drawn)."""
        assert self.rate is not None and self._level_at is not None
        level = min(float(self._cap), self._level + (now - self._level_at) * self.rate)
        self._level, self._level_at = level - (total - self._counted), now
        self._counted = total
        return self._level

    def wait(self, now: float, total: int, cost: int) -> float:
        """Seconds before ``cost`` more may be drawn at ``now``."""
        assert self.rate is not None
        level = self.available(now, total)
        if level >= cost or (cost > self._cap and level >= self._cap):
            return 0.0  # (larger than the whole bucket: it goes when the bucket is full)
        wait = (min(cost, self._cap) - level) / self.rate
        return min(max(wait, MIN_PACED_WAIT_SECONDS), MAX_PACED_WAIT_SECONDS)

    def heard(
        self,
        number: int,
        *,
        remaining: int,
        limit: int,
        now: float,
        base: int,
        total: int,
        started: int,
    ) -> None:
        """Attempt ``number``'s word: ``remaining`` held; ``base`` the running total as the
        provider counted it (many workers: every attempt in flight counted as used after it),
        ``total`` the running total now, ``started`` the attempts the word knows of (many
        workers: every attempt started; one process: up to ``number``): the word of an
        attempt numbered from it on is newer."""  # fmt: skip
        level = float(remaining - (total - base))
        older = self._level_at is not None and number < self._through
        if older and level >= self.available(now, total):
            return  # older than the level, and no stricter
        self._cap, self._level, self._level_at = limit, level, now
        # An older word that is stricter lowers the level but knows no more attempts.
        self._counted, self._through = total, max(self._through, started)

    @property
    def paced(self) -> bool:
        """Whether the bucket's level paces the count (a bucket, and a word of it heard)."""
        return self.rate is not None and self._level_at is not None


def _reset_of(reset: float | None) -> float:
    """A word's reset as the pace reads it: unknown is :data:`UNKNOWN_RESET_SECONDS`, and none
    is read past :data:`MAX_PACED_WAIT_SECONDS`."""
    return UNKNOWN_RESET_SECONDS if reset is None else min(reset, MAX_PACED_WAIT_SECONDS)


class _Budget:
    """One count a provider reports (requests, or tokens) and how much of it was used since.

    ``used`` is read on a running total the caller keeps (attempts started, or their token
    estimates summed): what was used since the newest word is that total less ``_base``, the
    total as it stood once the attempt that word answered had started.
    """

    __slots__ = (
        "_allowance",
        "_base",
        "_carried",
        "_heard",
        "_limit",
        "_most",
        "_refill",
        "_reset_at",
        "_said",
        "_turned",
        "_window",
        "remaining",
    )

    def __init__(self) -> None:
        self.remaining: int | None = None
        self._heard = -1  # the attempt whose answer is the newest word
        self._base = 0
        self._carried = 0  # what the window took over, in flight when it turned
        self._limit: int | None = None
        self._most = 0  # the most any word said remains
        self._reset_at = -math.inf
        self._window = 0.0
        # When the window turned with no newer word (None: the window is a word's own).
        self._turned: float | None = None
        # What a turned window lets out at once (0: one attempt): a word whose reset is now.
        self._allowance = 0
        #: The reading of a token bucket (:class:`_Refill`), and the newest word it heard
        #: (number, base, remaining, limit, reset, when), read again if a 429 refutes it.
        self._refill = _Refill()
        self._said: tuple[int, int, int, int | None, float, float] | None = None

    def wait(self, now: float, total: int, cost: int, started: int, *, carried: int = 0) -> float:
        """Seconds before ``cost`` more may be used at ``now``, ``total`` being the running
        total and ``started`` the attempts started so far.

        ``carried`` is what attempts in flight use: when the window turns with no newer
        word, it counts against the new window, since the server may count those attempts
        in it (the reset was heard an answer's latency late, so attempts sent just before
        it may reach the server after its turn).
        """
        if self.remaining is None:
            return 0.0
        if self._refill.paced:
            return self._refill.wait(now, total, cost)
        if now >= self._reset_at:
            if self._limit is None or self._window <= 0:
                self.remaining = None
                return 0.0
            # The window turned with no newer word: a new one, as large as the limit said,
            # let out at the limit's rate (below), not all at once.
            self.remaining, self._heard = self._limit, started - 1
            self._base, self._carried = total - carried, carried
            self._turned, self._allowance = now, 0
            turned = self._reset_at + self._window
            self._reset_at = turned if turned > now else now + self._window
        used = total - self._base
        if used + cost <= self.remaining:
            spread = self._spread_wait(now, used, cost)
            if spread <= 0:
                return 0.0
            return min(spread, max(0.0, self._reset_at - now))
        limit = self._limit
        if limit and cost > limit and used == self._carried and self.remaining >= limit:
            return 0.0  # larger than a whole window: it may go first in a fresh one
        return max(0.0, self._reset_at - now)

    def _spread_wait(self, now: float, used: int, cost: int) -> float:
        """Seconds before ``cost`` more may be used in a window that turned with no newer
        word: one attempt at once, then the limit at its rate over at least
        :data:`SPREAD_SECONDS`.

        Whether a provider's reset is the time until its count is whole again (OpenAI's
        word: then the whole limit is there at once) or until the next request fits (some
        gateways' token buckets: then the limit is a minute's, refilled continuously) cannot
        be told from one answer. Let out at the rate, a window is never a burst of 429s on
        the second kind; on the first, the next answer's word (which replaces the turn's
        guess) comes one round trip later.
        """
        if self._turned is None or self._limit is None:
            return 0.0
        rate = self._limit / max(self._window, SPREAD_SECONDS)
        allowed = self._carried + max(cost, self._allowance) + (now - self._turned) * rate
        return 0.0 if used + cost <= allowed else (used + cost - allowed) / rate

    def rate_limited(self) -> bool:
        """A 429 came: if a bucket's level paced this count, it ran ahead of the provider
        (:meth:`_Refill.refute`); the newest word (the 429's own, which said what is left and
        when the bucket is full) is read again as a window's, and every word after it.
        Whether a bucket's reading was taken back."""
        if not self._refill.refute():
            return False
        if self._said is not None:
            number, base, remaining, limit, reset, now = self._said
            self._heard, self._base, self._carried = number, base, 0
            self._reset_at, self._window = -math.inf, 0.0
            self._take(remaining, limit, reset, now)
        return True

    def _as_bucket(
        self,
        number: int,
        *,
        remaining: int,
        limit: int | None,
        reset: float | None,
        now: float,
        base: int,
        total: int,
        started: int,
    ) -> bool:
        """Hear a word as a token bucket's (:class:`_Refill`), if the words read as one:
        whether it was (``started``: the attempts the word knows of)."""
        self._most = max(self._most, remaining)
        held = limit
        if limit is not None and limit > SLICE_EVIDENCE * (self._most + 1):
            # A limit many times more than any word said remains is a minute's, announced
            # over the slice the provider enforces (OpenAI: a per-minute limit may be
            # enforced in sub-minute slices): the bucket is the slice, as full as said yet.
            held = self._most + 1
        if held is not None and reset is not None:
            self._refill.learn(remaining, held, reset)  # in any order: each word is a snapshot
        if self._refill.rate is None or limit is None or held is None:
            return False
        self.remaining, self._limit = remaining, limit
        self._said = (number, base, remaining, limit, _reset_of(reset), now)
        self._refill.heard(
            number, remaining=remaining, limit=held, now=now, base=base, total=total,
            started=started,
        )  # fmt: skip
        return True

    def heard(
        self,
        number: int,
        *,
        remaining: int | None,
        limit: int | None,
        reset: float | None,
        now: float,
        base: int,
        total: int,
    ) -> None:
        """Attempt ``number``'s answer said ``remaining`` of ``limit`` are left until ``reset``
        seconds from ``now``; ``base`` is the running total once that attempt had started,
        ``total`` the running total now. Once the words read as a token bucket's, the newest
        is its level (:class:`_Refill`)."""
        if remaining is None:
            return
        if self._as_bucket(
            number, remaining=remaining, limit=limit, reset=reset, now=now, base=base,
            total=total, started=number + 1,
        ):  # fmt: skip
            return
        if number < self._heard:
            return
        reset = _reset_of(reset)
        self._heard, self._base, self._carried = number, base, 0
        self._take(remaining, limit, reset, now)

    def _take(self, remaining: int, limit: int | None, reset: float, now: float) -> None:
        """The newest word: ``remaining`` of ``limit`` left until ``reset`` seconds from ``now``.

        A reset of (next to) nothing is a token bucket's "the next request fits now" (some
        gateways send the time until one more fits, 0 while any do, with a minute's limit):
        ``remaining`` may start at once and the rest at the limit's rate, as in a window that
        turned (:meth:`_spread_wait`). Read as a window that is already over, it would let
        every attempt out at once, and most would be answered 429.
        """
        self._turned, self._allowance = None, 0
        self.remaining, self._limit = remaining, limit
        self._reset_at = now + reset
        self._window = max(self._window, reset)
        if reset < MIN_PACED_WAIT_SECONDS and limit is not None:
            self.remaining = max(limit, remaining)
            self._turned, self._allowance = now, max(remaining, 1)
            self._reset_at = now + max(self._window, SPREAD_SECONDS)

    def heard_unordered(
        self,
        number: int,
        *,
        remaining: int | None,
        limit: int | None,
        reset: float | None,
        now: float,
        base: int,
        total: int,
        started: int,
    ) -> None:
        """As :meth:`heard`, for answers in no known order: ``base`` counts every attempt in
        flight as used after this one (``total`` is the running total now, ``started`` the
        attempts started).

        When the window turned with no newer word (a guess, let out at the limit's rate), the
        word of an attempt ``number`` started after the turn replaces the guess. Otherwise a
        word of an earlier window than the one counted is stale; of a later one, it replaces
        it; of the same one, it replaces it only if it leaves less. (The turned window's own
        end is no provider's: a token bucket's reset, the time until it is full again, fell
        before it, so each fresh word read as a window already past, and many workers were
        held to the guess's rate, an eighth of the limit.) Once the words read as a token
        bucket's, its level paces the count instead (:class:`_Refill`)."""
        if remaining is None:
            return
        if self._as_bucket(
            number, remaining=remaining, limit=limit, reset=reset, now=now, base=base,
            total=total, started=started,
        ):  # fmt: skip
            return
        if self._turned is not None and self._allowance == 0 and number > self._heard:
            # The window turned with no word, and this attempt started after the turn: its
            # word is the provider's own count of the window that the turn only guessed.
            self._heard, self._base, self._carried = number, base, 0
            reset = _reset_of(reset)
            self._take(remaining, limit, reset, now)
            return
        reset = _reset_of(reset)
        reset_at = now + reset
        half = self._window / 2
        # A bucket's "the next fits now" belongs to no window: newer replaces older.
        bucket = limit is not None and (reset < MIN_PACED_WAIT_SECONDS or self._allowance > 0)
        if self.remaining is not None and math.isfinite(self._reset_at) and not bucket:
            if reset_at < self._reset_at - half:
                return  # the word of a window already past
            same = reset_at <= self._reset_at + half
            if same and remaining - (total - base) >= self.remaining - (total - self._base):
                # No stricter than what is counted; but the provider has now said this
                # window's count itself: no longer a guess let out at the limit's rate.
                self._turned = None
                return
        self._base, self._carried = base, 0
        self._take(remaining, limit, reset, now)


class EndpointPolicy:
    """The pacing policy of one endpoint: the one place that answers "may an attempt to it
    start now, or how long until it may?" and hears "what happened" to each attempt.

    Its rules, in the order an attempt meets them (every time is the holder's clock):

    1. **The provider's word** (:attr:`pace`, a :class:`Pace`). Before the endpoint's first
       answer one attempt goes alone (:attr:`awaiting_first_word`); then the remaining
       requests and tokens its headers said, until their resets; a 429's ``Retry-After``
       holds every attempt to the endpoint, not only the call that got it, for at most
       ``max_hold`` seconds (:meth:`rate_limited`). :meth:`wait` says how long.
    2. **Adaptive pressure** (:attr:`pressure`, a :class:`Pressure`, or None when the run is
       not adaptive): at most :attr:`target` attempts to this endpoint in flight; a 429 from
       an attempt started after the last cut halves the target, a clean window grows it back
       by one, up to ``ceiling`` (the run's concurrency). The target is the endpoint's own: a
       judge's 429s do not slow the SUT's calls, nor the SUT's the judge's (one target for the
       whole run, as before, made a 429 on one endpoint cut the concurrency of all).
       :attr:`room` says whether there is a place, :meth:`place_freed` when one frees. And a
       send rate (:attr:`send_rate`, a :class:`SendRate`): a 429 the headers' pace did not
       foresee cuts it to just under what the provider admitted, successes grow it back;
       :meth:`wait` says the longer of its wait and the pace's.
    3. **The run's bound** is not the policy's: one :class:`anyio.CapacityLimiter` per run
       (or a lease table's cap across processes) bounds the attempts to every endpoint
       together, and the holder asks it after the policy, so an endpoint the policy holds
       leaves its places to the others.

    What an attempt's end says (:meth:`ended`, or its parts :meth:`heard`,
    :meth:`rate_limited`, :meth:`succeeded`, :meth:`give_place` for a holder that learns them
    apart): the provider's word replaces older word; a 429 holds the endpoint for its
    ``Retry-After`` and cuts the target; a success counts toward growing it back.

    What is not the policy's: one call's own back-off after a failed attempt and how many 429s
    it may meet without spending a retry (:class:`~safecons.run._runner.RetryPolicy` and
    ``Runner.call``). They are the call's, not the endpoint's: a 429's ``Retry-After`` is both
    the hold of the endpoint here and the wait of the call that got it there, the same length,
    so the call's next attempt meets no further hold.
    """

    def __init__(
        self,
        ceiling: int,
        *,
        adaptive: bool = True,
        ordered: bool = True,
        max_hold: float = MAX_PACED_WAIT_SECONDS,
    ) -> None:
        self.ceiling = ceiling
        self.pace = Pace(ordered=ordered)
        self.pressure = Pressure(ceiling) if adaptive else None
        self.send_rate = SendRate() if adaptive else None
        self.max_hold = max_hold
        #: Places this endpoint holds now (attempts in flight, or a table's leases).
        self.in_flight = 0
        self._freed: anyio.Event | None = None  # made only while an attempt waits for a place

    @property
    def target(self) -> int:
        """The most attempts to this endpoint in flight at once, now."""
        return self.ceiling if self.pressure is None else self.pressure.target

    @property
    def lowest(self) -> int:
        """The lowest :attr:`target` reached."""
        return self.ceiling if self.pressure is None else self.pressure.lowest

    @property
    def last_cut(self) -> float:
        """When the target was last cut (-inf before any cut, or when not adaptive)."""
        return -math.inf if self.pressure is None else self.pressure.last_cut

    @property
    def room(self) -> bool:
        """Whether one more attempt to this endpoint stays within its target."""
        return self.in_flight < self.target

    @property
    def awaiting_first_word(self) -> bool:
        """Whether an attempt is in flight and no answer has been heard yet: the next waits
        for it (:attr:`Pace.first_word`)."""
        return bool(self.pace.started) and not self.pace.first_word.is_set()

    @property
    def counts_tokens(self) -> bool:
        """Whether the provider said how many tokens remain (then :meth:`wait` reads an
        attempt's estimate)."""
        return self.pace.counts_tokens

    def wait(self, now: float, tokens: int = 0) -> float:
        """Seconds before the provider's word lets an attempt of an estimated ``tokens`` start
        at ``now``, and the send rate its 429s allow (0: it may; pressure is :attr:`room`'s)."""
        paced = self.pace.wait(now, tokens)
        if self.send_rate is None:
            return paced
        return max(paced, self.send_rate.wait(now))

    def may_start(self, now: float, tokens: int = 0) -> bool:
        """Whether an attempt of an estimated ``tokens`` may start at ``now``: every rule of
        the policy lets it."""
        return not self.awaiting_first_word and self.room and self.wait(now, tokens) <= 0

    def place_freed(self) -> anyio.Event:
        """An event set when an attempt to this endpoint gives its place back (for an attempt
        waiting for :attr:`room`)."""
        if self._freed is None:
            self._freed = anyio.Event()
        return self._freed

    def take_place(self) -> None:
        """One more place held (an attempt starts, or a table grants a lease)."""
        self.in_flight += 1

    def give_place(self) -> None:
        """A place given back: an attempt waiting for one looks again."""
        self.in_flight -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def start(self, tokens: int = 0, *, now: float) -> int:
        """Count an attempt of an estimated ``tokens`` started with the provider at ``now``;
        its number, for :meth:`heard`."""
        if self.send_rate is not None:
            self.send_rate.started(now)
        return self.pace.start(tokens)

    def heard(
        self, number: int, limits: RateLimits | None, now: float, *, ok: bool = False
    ) -> None:
        """What attempt ``number``'s answer said of the provider's limits (None: nothing, or
        no answer), at ``now``, and whether the provider admitted it (``ok``: the send rate
        measures what it admits when each answer comes, not when a holder says so later)."""
        self.pace.heard(number, limits, now)
        if ok and self.send_rate is not None:
            self.send_rate.succeeded(now)

    def rate_limited(self, started: float, now: float, retry_after: float | None) -> None:
        """An attempt started at ``started`` was answered 429 at ``now``: its ``Retry-After``
        (if any) holds the endpoint, at most ``max_hold`` seconds, and the target is cut."""
        if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
            self.pace.hold(min(retry_after, self.max_hold), now)
        # A 429 that takes back a token bucket's reading of the headers has been answered
        # by it (the pace reads them as a window's, which is never too fast): the send rate
        # is cut by a 429 that the corrected reading meets.
        corrected = self.pace.rate_limited()
        if self.pressure is not None:
            self.pressure.rate_limited(started, now)
        if self.send_rate is not None:
            self.send_rate.rate_limited(started, now, cut=not corrected)

    def succeeded(self, count: int = 1) -> None:
        """``count`` attempts succeeded: the target grows back by one per clean window."""
        if self.pressure is not None:
            for _ in range(count):
                self.pressure.succeeded()

    def held_until(self) -> float:
        """When the latest ``Retry-After`` stops holding the endpoint (-inf: none did)."""
        return self.pace.held_until

    def ended(
        self,
        number: int,
        *,
        started: float,
        now: float,
        limits: RateLimits | None,
        limited: bool = False,
        retry_after: float | None = None,
        ok: bool = False,
    ) -> None:
        """Attempt ``number`` (from :meth:`start`, its place from :meth:`take_place`), started
        at ``started``, ended at ``now``: what its answer said (``limits``), whether it was
        rate limited (with ``retry_after``) or succeeded. Its place is given back."""
        self.heard(number, limits, now, ok=ok)
        if limited:
            self.rate_limited(started, now, retry_after)
        elif ok:
            self.succeeded()
        self.give_place()

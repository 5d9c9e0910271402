"""Leases from one table that many processes share: the Ray job's one cap, without Ray.

- :class:`LeaseTable`: one cap for many processes (the actors of a Ray job). Each permit is a
  *lease* with a deadline, so a holder that dies without giving its permits back only keeps
  them until they expire; a 429 with ``Retry-After`` on one endpoint starts a *cool-down* in
  which no holder is granted a permit for that endpoint.
- :class:`RemotePermits`: a worker's side of a table in another process, the
  :class:`~safecons.run.Permits` its runner takes each attempt's permit from.

:mod:`._limiter` serves a table from one named Ray actor. This module is plain anyio and never
imports Ray (a test checks it), so the table and the worker's side are tested without Ray.
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._tasks import background_tasks
from ..clients import RateLimits
from ..run import (
    MAX_PACED_WAIT_SECONDS,
    MAX_RETRY_AFTER_SECONDS,
    EndpointPolicy,
    PacingPolicy,
    Slot,
    Tokens,
)

__all__ = ("LeaseTable", "RemotePermits", "check_cap")

#: How far past a deadline a wait for it sleeps (seconds).
_PAST = 1e-9
#: How long a paced attempt counts as in flight without its answer being told (seconds):
#: longer than any attempt's timeout, so that only a holder that is gone is let go of.
_PACE_TTL = 600.0


@dataclass(slots=True, eq=False)
class _Waiter:
    request: str
    holder: str
    endpoint: str
    ttl: float
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: float | None = None
    abandoned: bool = False


@dataclass(slots=True)
class _Lease:
    holder: str
    endpoint: str
    granted: float
    expires: float


#: How many abandoned requests a table remembers, in case the abandonment arrives before the
#: request it abandons (two calls from one holder are not always handled in order).
_ABANDONED_KEPT = 10_000


def check_cap(cap: object) -> int:
    """``cap`` if it is a whole number of permits >= 1 (a table's, checked before one is made)."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap: expected a whole number >= 1, got {cap!r}")
    return cap


#: How many of the latest cool-downs :meth:`LeaseTable.stats` lists.
_COOL_DOWNS_KEPT = 100


class LeaseTable:
    """One concurrency cap and one pacing policy per endpoint for many holders.

    A holder (one process, e.g. one Ray actor) asks for a permit with :meth:`acquire`, naming
    the request (an id of its own, unique to it), the endpoint and the lease's length; it gives
    the permit back with :meth:`release`, saying how the attempt went. Waiters are served first
    come, first served, skipping those whose endpoint is cooling down.

    - **Leases.** A lease not released within its ``ttl`` expires and its permit is free again:
      a holder that died cannot keep permits. A holder that starts again calls :meth:`forget`
      with its old name to free at once what its previous life held. A late release of an
      expired lease is ignored.
    Each endpoint's rules are its :class:`~safecons.run.EndpointPolicy`, the one a
    process keeps for itself, here on the table's clock so that the attempts of all holders
    count together:

    - **Pressure.** A 429 halves the endpoint's in-flight target and clean releases grow it
      back; the leases granted for an endpoint stay within its target (and all of them within
      ``cap``), so one endpoint's 429s do not cut another's. The endpoint's send rate
      (:class:`~safecons.run._policy.SendRate`) is the table's too: any holder's 429
      cuts it, and the successes it measures are the holders' answers as :meth:`answered`
      hears them, so every holder's attempts to a paced endpoint are spaced by one rate.
    - **Cool-down.** A 429 with ``Retry-After: s`` holds every new grant for its endpoint for
      ``s`` seconds (capped at ``max_retry_after``), whichever holder got the 429.
    - **Pace.** What the provider says of its limits (the rate-limit headers' remaining
      requests and tokens, and their reset times) paces the attempts of every holder to its
      endpoint, as one process's are paced: a holder asks :meth:`pace` before each attempt
      and tells :meth:`answered` what its answer said. An endpoint whose first answer says
      nothing of limits is not paced: :meth:`pace` says so, and holders stop asking until an
      answer of theirs carries limits.

    ``clock`` is the table's monotonic clock (injectable for tests); ``pace=False`` makes a
    table that paces nothing (:meth:`pace` answers -1).

    Examples
    --------
    >>> import anyio
    >>> async def main():
    ...     table = LeaseTable(2, adaptive=False)
    ...     await table.acquire("a", "a-1", "http://x", ttl=30)
    ...     await table.acquire("b", "b-1", "http://x", ttl=30)
    ...     table.release("a-1", limited=True, retry_after=0.2)
    ...     began = anyio.current_time()
    ...     await table.acquire("b", "b-2", "http://x", ttl=30)  # waits out the cool-down
    ...     return anyio.current_time() - began >= 0.2, table.stats()["in_flight"]
    >>> anyio.run(main)
    (True, 2)
    """

    def __init__(
        self,
        cap: int,
        *,
        adaptive: bool = True,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        pace: bool = True,
    ) -> None:
        self.cap = check_cap(cap)
        self._pacing = pace
        self._adaptive = adaptive
        self._max_retry_after = max_retry_after
        self._clock = clock
        self._leases: dict[str, _Lease] = {}
        self._waiting: deque[_Waiter] = deque()
        self._cooling: dict[str, float] = {}  # endpoints held now: when their hold ends
        self._abandoned: dict[str, None] = {}
        self._counts = {
            "granted": 0,
            "released": 0,
            "expired": 0,
            "reclaimed": 0,
            "rate_limited": 0,
        }
        self._holders: set[str] = set()
        self._due = math.inf  # the deadline the time keeper sleeps until
        self._keeper: _Waiter | None = None
        self._max_in_flight = 0
        self._cooled_seconds = 0.0
        self._cool_downs: deque[tuple[str, float, float]] = deque(maxlen=_COOL_DOWNS_KEPT)
        self._cool_version = 0
        self._cool_changed: anyio.Event | None = None  # made on the loop, by the first poll
        self._policies: dict[str, PacingPolicy] = {}
        self._unpaced: set[str] = set()  # endpoints whose answers say nothing of limits
        self._spoke: set[str] = set()  # endpoints an answer said its limits of
        self._pace_due: dict[str, dict[int, float]] = {}  # attempts in flight: their deadline

    # ------------------------------------------------------------------ the holders' calls

    async def acquire(self, holder: str, request: str, endpoint: str, *, ttl: float) -> float:
        """Wait for a permit and return when it was granted (the table's clock).

        Returns ``nan`` when the request was abandoned while it waited (:meth:`abandon`,
        :meth:`forget`): it holds nothing then.
        """
        if request in self._abandoned:
            del self._abandoned[request]
            return math.nan
        waiter = _Waiter(request, holder, endpoint, float(ttl))
        self._holders.add(holder)
        self._waiting.append(waiter)
        self._pump()
        try:
            while waiter.granted is None and not waiter.abandoned:
                # One waiter keeps time: it sleeps until the earliest deadline (an expiry, a
                # cool-down's end) and its pump serves everyone, so no timer task is needed and
                # the others sleep until they are served.
                if self._keeper is None:
                    self._keeper = waiter
                waiter.event = anyio.Event()
                keeping = self._keeper is waiter
                with anyio.move_on_after(self._wake_in() if keeping else math.inf):
                    await waiter.event.wait()
                self._pump()
        finally:
            if waiter.granted is None and waiter in self._waiting:
                self._waiting.remove(waiter)  # cancelled while it waited
            if self._keeper is waiter:
                self._keeper = None
            # Whoever leaves, the queue must not be left without a time keeper: the one woken
            # to take the role may itself have been served (or dropped) before it ran.
            if self._keeper is None and self._waiting:
                self._waiting[0].event.set()
        if waiter.granted is None:
            return math.nan
        return waiter.granted

    def release(
        self,
        request: str,
        *,
        limited: bool = False,
        retry_after: float | None = None,
        ok: int = 0,
        endpoint: str | None = None,
        started_ago: float | None = None,
    ) -> None:
        """Give the permit of ``request`` back, saying how its attempts went.

        ``ok`` counts the attempts that succeeded on it (a holder may reuse a permit for
        several attempts before it gives it back); ``limited`` says the last one was rate
        limited, by ``endpoint`` (default: the one the lease was asked for), ``started_ago``
        seconds ago (default: when the lease was granted), with ``Retry-After: retry_after``.
        """
        lease = self._leases.pop(request, None)
        if lease is None:
            return  # expired already, or never granted: nothing is held
        self._counts["released"] += 1
        now = self._clock()
        mine = self._policy(lease.endpoint)
        mine.give_place()
        if lease.granted > mine.last_cut:
            # Successes on a permit granted before the last cut were sent before it too: they
            # say nothing of the lower target (and would undo the cut at once).
            mine.succeeded(int(ok))
        if limited:
            self._counts["rate_limited"] += 1
            started = lease.granted if started_ago is None else now - max(0.0, started_ago)
            hit = endpoint or lease.endpoint
            policy = self._policy(hit)
            policy.rate_limited(started, now, retry_after)
            self._cool(hit, now, policy.held_until)
        self._pump()

    def _cool(self, endpoint: str, now: float, until: float) -> None:
        """The endpoint's policy holds it until ``until``: count it, and tell the holders."""
        if until <= max(now, self._cooling.get(endpoint, -math.inf)):
            return
        self._cooled_seconds += until - max(now, self._cooling.get(endpoint, now))
        self._cooling[endpoint] = until
        self._cool_downs.append((endpoint, now, until))
        self._deadline(until)
        # Holders that wait for news of cool-downs (cooling_changes) hear of it now.
        self._cool_version += 1
        if self._cool_changed is not None:
            self._cool_changed.set()
            self._cool_changed = None

    def cooling(self) -> dict[str, float]:
        """The endpoints cooling down now, and the seconds left of each."""
        now = self._clock()
        return {e: until - now for e, until in self._cooling.items() if until > now}

    async def cooling_changes(
        self, seen: int, *, wait: float = 30.0
    ) -> tuple[int, dict[str, float]]:
        """Wait (at most ``wait`` seconds) until a cool-down starts that a holder which has seen
        version ``seen`` has not, and return the version and :meth:`cooling`: a long poll, so
        holders hear of a 429 at once without asking again and again."""
        if seen == self._cool_version:
            if self._cool_changed is None:
                self._cool_changed = anyio.Event()
            with anyio.move_on_after(wait):
                await self._cool_changed.wait()
        return self._cool_version, self.cooling()

    async def pace(self, endpoint: str, tokens: int = 0, ttl: float = _PACE_TTL) -> int:
        """Wait until ``endpoint``'s pace lets an attempt of an estimated ``tokens`` start, and
        count it started: its number, for :meth:`answered`. -1: the endpoint is not paced (its
        provider said nothing of its limits), and the holder need not ask again.

        Until the endpoint's first answer is heard, one attempt goes at a time (the others
        wait for that answer, at most :data:`~safecons.run.MAX_PACED_WAIT_SECONDS`;
        then that attempt counts as answered with nothing, so a holder that died before
        telling it does not hold the endpoint for ever).
        """
        if not self._pacing:
            return -1  # a table made with pace=False shares only the cap and cool-downs
        policy = self._policy(endpoint)
        due = self._pace_due.setdefault(endpoint, {})
        while True:
            self._expire_paced(policy, due)
            if endpoint in self._unpaced:
                return -1
            now = self._clock()
            wait = policy.wait(now, tokens)
            if wait <= 0:
                number = policy.start(tokens, now=now)
                due[number] = self._clock() + ttl
                return number
            # Until the wait is over, or the provider's newer headers are heard; the first
            # answer at most MAX_PACED_WAIT_SECONDS, then its attempt is given up on.
            first = math.isinf(wait)
            with anyio.move_on_after(MAX_PACED_WAIT_SECONDS if first else wait + _PAST) as scope:
                await policy.news().wait()
            if first and scope.cancelled_caught:
                self._expire_paced(policy, due, everything=True)

    def _expire_paced(
        self, policy: PacingPolicy, due: dict[int, float], *, everything: bool = False
    ) -> None:
        """Attempts whose holder never told their answer within their ``ttl`` (it died, or
        was cancelled while the table counted its attempt) stop counting as in flight."""
        now = self._clock()
        for number in [n for n, when in due.items() if everything or when <= now]:
            del due[number]
            policy.answered(number, None, now)

    def answered(
        self, endpoint: str, number: int, limits: RateLimits | None, ok: bool = False
    ) -> None:
        """What the answer of attempt ``number`` (from :meth:`pace`; -1 for an attempt not
        paced) to ``endpoint`` said of the provider's limits (None: nothing), and whether it
        succeeded (``ok``: the send rate its 429s allow measures what the provider admits)."""
        policy = self._policy(endpoint)
        if number >= 0 and self._pace_due.get(endpoint, {}).pop(number, None) is not None:
            policy.answered(number, limits, self._clock(), ok=ok)
        if limits is not None:
            self._spoke.add(endpoint)
            self._unpaced.discard(endpoint)
        elif number >= 0 and endpoint not in self._spoke:
            self._unpaced.add(endpoint)

    def _policy(self, endpoint: str) -> PacingPolicy:
        """The pacing policy of ``endpoint`` (made on first use)."""
        policy = self._policies.get(endpoint)
        if policy is None:
            # Many holders' attempts reach the provider in no order the table knows.
            policy = self._policies[endpoint] = EndpointPolicy(
                self.cap,
                adaptive=self._adaptive,
                ordered=False,
                max_hold=self._max_retry_after,
            )
        return policy

    def abandon(self, request: str) -> None:
        """The holder stopped waiting for ``request`` (it was cancelled): drop the wait, or
        give back the permit if it was granted meanwhile."""
        if request in self._leases:
            self.release(request)
            return
        for waiter in self._waiting:
            if waiter.request == request:
                self._drop(waiter)
                self._pump()
                return
        self._abandoned[request] = None
        while len(self._abandoned) > _ABANDONED_KEPT:
            del self._abandoned[next(iter(self._abandoned))]

    def forget(self, holder: str) -> int:
        """Free every permit ``holder`` holds and drop its waits (it is starting anew); returns
        how many permits were freed."""
        freed = [r for r, lease in self._leases.items() if lease.holder == holder]
        for request in freed:
            self._policy(self._leases.pop(request).endpoint).give_place()
        for waiter in [w for w in self._waiting if w.holder == holder]:
            self._drop(waiter)
        self._counts["reclaimed"] += len(freed)
        self._pump()
        return len(freed)

    def stats(self) -> dict[str, Any]:
        """What the table has done: permits in flight now and at most, grants, releases,
        ``expired`` leases (their ttl ran out) and ``reclaimed`` ones (:meth:`forget`), 429s,
        the target and its lowest value, endpoints cooling down (seconds left), the total
        seconds of cool-down, the latest ``cool_downs`` as ``(endpoint, start, end)`` on the
        table's clock, and how many distinct ``holders`` asked. ``target`` and
        ``lowest_target`` are the lowest over the endpoints (``cap`` before any 429),
        ``targets`` each endpoint's now."""
        self._pump()  # expired leases are not counted as in flight
        policies = self._policies.values()
        return {
            "cap": self.cap,
            "target": min((p.target for p in policies), default=self.cap),
            "lowest_target": min((p.lowest for p in policies), default=self.cap),
            "targets": {e: p.target for e, p in self._policies.items()},
            "in_flight": len(self._leases),
            "max_in_flight": self._max_in_flight,
            "waiting": len(self._waiting),
            **self._counts,
            "cooling": self.cooling(),
            "cooled_seconds": self._cooled_seconds,
            "cool_downs": list(self._cool_downs),
            "holders": len(self._holders),
        }

    # ------------------------------------------------------------------ inside

    def _drop(self, waiter: _Waiter) -> None:
        waiter.abandoned = True
        self._waiting.remove(waiter)
        waiter.event.set()

    def _pump(self) -> None:
        """Expire overdue leases and grant permits to the waiters that may have one."""
        now = self._clock()
        for request in [r for r, lease in self._leases.items() if lease.expires <= now]:
            self._policy(self._leases.pop(request).endpoint).give_place()
            self._counts["expired"] += 1
        for endpoint in [e for e, until in self._cooling.items() if until <= now]:
            del self._cooling[endpoint]
        if not self._waiting:
            return
        skipped: list[_Waiter] = []
        while self._waiting and len(self._leases) < self.cap:
            waiter = self._waiting.popleft()
            policy = self._policy(waiter.endpoint)
            if waiter.endpoint in self._cooling or not policy.room:
                skipped.append(waiter)
                continue
            policy.take_place()
            waiter.granted = now
            self._deadline(now + waiter.ttl)
            self._leases[waiter.request] = _Lease(
                waiter.holder, waiter.endpoint, now, now + waiter.ttl
            )
            self._counts["granted"] += 1
            waiter.event.set()
        self._waiting.extendleft(reversed(skipped))
        self._max_in_flight = max(self._max_in_flight, len(self._leases))

    def _wake_in(self) -> float:
        """Seconds until the next moment a permit may free itself: an expiry or the end of a
        cool-down (inf when nothing is due)."""
        due = [lease.expires for lease in self._leases.values()]
        due.extend(self._cooling.values())
        self._due = min(due, default=math.inf)
        if not due:
            return math.inf
        return max(0.0, self._due - self._clock()) + 1e-3

    def _deadline(self, when: float) -> None:
        """A new deadline: the time keeper, asleep until a later one, wakes to count again."""
        if when < self._due and self._keeper is not None:
            self._due = when
            self._keeper.event.set()


@dataclass(slots=True, eq=False)
class _Held:
    """A permit this worker holds: its lease, the endpoint it was granted for, when it came,
    how many attempts succeeded on it."""

    request: str
    endpoint: str
    granted: float  # this worker's clock
    ok: int = 0


class RemotePermits:
    """A worker's permits, leased from a :class:`LeaseTable` in another process (the Ray
    limiter actor: ``limiter`` is a handle whose methods are called with ``.remote(...)``,
    returning awaitables) and reused for a moment.

    Asking the actor for every attempt costs two Ray calls an attempt, and one actor answers
    only so many (``benchmarks/bench_ray.py`` measures it), so a permit is kept for ``hold``
    seconds and serves this worker's next attempts to the endpoint it was granted for (the
    table counts it against that endpoint's target), one at a time; then, or as soon as no
    attempt of this worker wants it (``idle`` seconds), it goes back, to be granted again
    first come, first served. The cap holds exactly: a permit serves one attempt at a
    time. A 429 gives its permit back at once with its ``Retry-After``; every worker hears of
    the cool-down by a long poll on the actor and starts no attempt to that endpoint until it
    ends, permit held or not.

    ``local_limit`` bounds this worker's attempts in flight. A lease lasts ``ttl`` seconds at
    most (longer than ``hold`` plus the per-attempt timeout), so a live worker always gives its
    permits back first and a dead one's free themselves when their leases expire.

    The permits are used inside :meth:`open`, whose block hosts the two loops that serve them
    (hearing of cool-downs, giving back the permits no attempt wants). ``clock`` is this
    worker's monotonic clock; the permits wait on it with anyio, so a clock given instead (in
    tests) must be the event loop's own (:func:`anyio.current_time`). ``lost`` is what a call
    to the actor raises when it is gone or busy (Ray's ``RayError``; this module never
    imports Ray): hearing of cool-downs then tries again a second later.
    """

    def __init__(
        self,
        limiter: Any,
        holder: str,
        *,
        ttl: float,
        local_limit: int,
        hold: float = 1.0,
        idle: float = 0.05,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        lost: tuple[type[Exception], ...] = (OSError,),
    ) -> None:
        self._limiter = limiter
        self._holder = holder
        self._lost = lost
        # Request ids are unique to this life of the holder: a message of a previous life
        # still on its way (the holder's name survives a restart) cannot touch a new lease.
        self._life = uuid.uuid4().hex[:12]
        self._max_retry_after = max_retry_after
        self._ttl = float(ttl)
        self._local_limit = local_limit
        self._hold = hold
        self._idle = idle
        self._clock = clock
        self._requests = itertools.count()
        self._free: list[tuple[_Held, float]] = []  # (permit, when it was last given back)
        self._cooling: dict[str, float] = {}  # endpoint -> end, on this worker's clock
        self._unpaced: set[str] = set()  # endpoints the table said it does not pace
        # Made by open, on the worker's own event loop; None while the permits are closed.
        self._local: anyio.CapacityLimiter | None = None
        # Wakes the loop that gives permits back when one is kept that is due before the
        # moment it sleeps until (_next_return), so the loop never polls. Made by that loop.
        self._kept: anyio.Event | None = None
        self._next_return = math.inf

    @property
    def lowest_target(self) -> int:
        # Adaptive pressure is the limiter's, over every worker: see limiter_stats.
        return self._local_limit

    @asynccontextmanager
    async def open(self) -> AsyncIterator[RemotePermits]:
        """Use the permits for as long as the block runs.

        Meanwhile this worker hears of every cool-down and gives back each permit it keeps as
        soon as no attempt wants it; when the block ends, it stops listening and gives back
        every permit it kept. The permits open once at a time, on the event loop that uses
        them.
        """
        if self._local is not None:
            raise RuntimeError("RemotePermits.open: the permits are open already")
        self._local = anyio.CapacityLimiter(self._local_limit)
        try:
            async with background_tasks() as tg:
                tg.start_soon(self._hear_cool_downs)
                tg.start_soon(self._give_back_idle)
                yield self
        finally:
            self._local = None  # from now on, a permit an attempt leaves goes straight back
            for held, _ in self._free:
                self._return(held)
            self._free = []
            self._kept = None
            self._next_return = math.inf

    async def _hear_cool_downs(self) -> None:
        seen = -1
        while True:
            try:
                seen, cooling = await self._limiter.cooling_changes.remote(seen)
            except self._lost:  # the actor is gone or busy: try again, never end the worker
                await anyio.sleep(1.0)
                continue
            now = self._clock()
            for endpoint, left in cooling.items():
                self._cooling[endpoint] = max(self._cooling.get(endpoint, -math.inf), now + left)

    async def _give_back_idle(self) -> None:
        # Sleeps until the next kept permit is due to go back, or until one is kept that is
        # due sooner (_keep wakes it); with none kept, until one is.
        while True:
            now = self._clock()
            keep = []
            for held, since in self._free:
                if now - since >= self._idle or now - held.granted >= self._hold:
                    self._return(held)
                else:
                    keep.append((held, since))
            self._free = keep
            self._next_return = min((self._due(h, since) for h, since in keep), default=math.inf)
            self._kept = kept = anyio.Event()
            with anyio.move_on_after(self._next_return - now + _PAST):
                await kept.wait()

    def _due(self, held: _Held, since: float) -> float:
        """When a kept permit goes back: once idle, or once its time to be reused is up."""
        return min(since + self._idle, held.granted + self._hold)

    def _keep(self, held: _Held) -> None:
        """Keep a permit an attempt left, for the next attempt, or give it back if its time
        to be reused is up (or the permits are closed)."""
        now = self._clock()
        if self._local is None or now - held.granted >= self._hold:
            self._return(held)
            return
        self._free.append((held, now))
        due = self._due(held, now)
        if due < self._next_return and self._kept is not None:
            self._next_return = due
            self._kept.set()

    def _return(self, held: _Held, **outcome: Any) -> None:
        # Not awaited: the permit's return needs no answer, and a return lost with a dying
        # worker is what lease expiry is for.
        self._limiter.release.remote(held.request, ok=held.ok, **outcome)

    async def _wait_cool(self, endpoint: str) -> None:
        while (left := self._cooling.get(endpoint, -math.inf) - self._clock()) > 0:
            # A hair past the end: a float that rounds the wake-up just short of it would
            # otherwise be slept again and again for nothing.
            await anyio.sleep(left + _PAST)

    async def _lease(self, endpoint: str) -> _Held:
        while True:
            request = f"{self._holder}:{self._life}:{next(self._requests)}"
            granted: float | None = None
            try:
                granted = await self._limiter.acquire.remote(
                    self._holder, request, endpoint, self._ttl
                )
            finally:
                if granted is None:
                    # Cancelled while waiting: the actor may grant the lease anyway, so say
                    # that nobody will use it (it is freed, or never granted).
                    self._limiter.abandon.remote(request)
            if not math.isnan(granted):
                return _Held(request, endpoint, self._clock())

    def _take(self, endpoint: str) -> _Held | None:
        """A kept permit granted for ``endpoint`` whose time to be reused is not up, if any
        (the newest first). A permit serves only the endpoint it was granted for: the table
        counts it against that endpoint's in-flight target."""
        now = self._clock()
        for k in range(len(self._free) - 1, -1, -1):
            held, _ = self._free[k]
            if held.endpoint != endpoint:
                continue
            del self._free[k]
            if now - held.granted < self._hold:
                return held
            self._return(held)
        return None

    async def _paced(self, endpoint: str, tokens: Tokens) -> int:
        """Wait for the table's pace of ``endpoint`` (unless it said it does not pace it);
        the attempt's number there, -1 when not paced."""
        if endpoint in self._unpaced:
            return -1
        estimate = tokens() if callable(tokens) else tokens or 0
        number = int(await self._limiter.pace.remote(endpoint, estimate, self._ttl))
        if number < 0:
            self._unpaced.add(endpoint)
        return number

    def _answered(
        self, endpoint: str, number: int, limits: RateLimits | None, ok: bool = False
    ) -> None:
        if number < 0 and limits is None:
            return
        if limits is not None:
            self._unpaced.discard(endpoint)  # it says its limits now: pace by them
        # Not awaited, as a return: the table's pace needs no answer.
        self._limiter.answered.remote(endpoint, number, limits, ok)

    @asynccontextmanager
    async def slot(self, endpoint: str, *, tokens: Tokens = None) -> AsyncIterator[Slot]:
        local = self._local
        if local is None:
            raise RuntimeError("RemotePermits.slot: open the permits first (RemotePermits.open)")
        await self._wait_cool(endpoint)
        async with local:
            await self._wait_cool(endpoint)
            number = await self._paced(endpoint, tokens)
            held: _Held | None = None
            try:
                held = self._take(endpoint) or await self._lease(endpoint)
            finally:
                if held is None:  # cancelled: the table's pace counts the attempt no more
                    self._answered(endpoint, number, None)
            slot = Slot(self._clock())
            try:
                yield slot
            finally:
                self._answered(endpoint, number, slot.rate_limits, slot.ok)
                if slot.limited:
                    wait = slot.retry_after
                    if wait is not None and math.isfinite(wait) and wait > 0:
                        # This worker waits at once; the others when the actor tells them.
                        until = self._clock() + min(wait, self._max_retry_after)
                        self._cooling[endpoint] = max(self._cooling.get(endpoint, -math.inf), until)
                    self._return(
                        held,
                        limited=True,
                        retry_after=slot.retry_after,
                        endpoint=endpoint,
                        started_ago=self._clock() - slot.started,
                    )
                else:
                    held.ok += slot.ok
                    self._keep(held)

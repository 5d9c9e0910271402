"""One concurrency cap for a whole Ray job: a :class:`~safecons.run._permits.LeaseTable` served
by one named async actor, and the permits a worker leases from it."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import ray

from ..run._permits import LeaseTable, Slot

__all__ = ("LimiterActor", "RemotePermits", "global_limiter", "limiter_stats")

#: Every safecons limiter actor lives in this Ray namespace, so a name finds the same actor from
#: any driver of the cluster.
NAMESPACE = "safecons"


class LimiterActor:
    """The Ray actor around one :class:`~safecons.run._permits.LeaseTable` (async: every
    method runs on the actor's one event loop, so the table needs no lock)."""

    def __init__(self, cap: int, adaptive: bool = True, max_retry_after: float = 60.0) -> None:
        self._table = LeaseTable(cap, adaptive=adaptive, max_retry_after=max_retry_after)

    async def acquire(self, holder: str, request: str, endpoint: str, ttl: float) -> float:
        return await self._table.acquire(holder, request, endpoint, ttl=ttl)

    async def release(
        self,
        request: str,
        *,
        limited: bool = False,
        retry_after: float | None = None,
        ok: int = 0,
        endpoint: str | None = None,
        started_ago: float | None = None,
    ) -> None:
        self._table.release(
            request,
            limited=limited,
            retry_after=retry_after,
            ok=ok,
            endpoint=endpoint,
            started_ago=started_ago,
        )

    async def cooling_changes(self, seen: int) -> tuple[int, dict[str, float]]:
        return await self._table.cooling_changes(seen)

    async def abandon(self, request: str) -> None:
        self._table.abandon(request)

    async def forget(self, holder: str) -> int:
        return self._table.forget(holder)

    async def stats(self) -> dict[str, Any]:
        return self._table.stats()


def global_limiter(
    cap: int,
    *,
    name: str | None = None,
    adaptive: bool = True,
    max_retry_after: float = 60.0,
) -> Any:
    """The limiter actor that caps every attempt of a job at ``cap`` in flight.

    With a ``name`` the actor is found (or made) under that name in the ``safecons``
    namespace, so several runs, or several drivers on one cluster, that give the same name
    share one cap and one cool-down per endpoint; a found actor keeps the cap it was made
    with. Without a name the actor is the job's own. The actor takes no CPU.

    Examples
    --------
    >>> import ray                                                  # doctest: +SKIP
    >>> limiter = global_limiter(32, name="openai-gpt-4o-mini")     # doctest: +SKIP
    >>> limiter_stats(limiter)["cap"]                               # doctest: +SKIP
    32
    """
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap: expected a whole number >= 1, got {cap!r}")
    options: dict[str, Any] = {
        "num_cpus": 0,
        # Every attempt in the job waits in here at once: far more than Ray's default of 1,000
        # concurrent calls to an async actor.
        "max_concurrency": 100_000,
        "namespace": NAMESPACE,
    }
    if name is not None:
        options |= {"name": name, "get_if_exists": True}
    actor = ray.remote(LimiterActor).options(**options)
    return actor.remote(cap, adaptive, max_retry_after)


def limiter_stats(limiter: Any) -> dict[str, Any]:
    """What the limiter has done: ``cap``, ``target`` and ``lowest_target`` (adaptive
    pressure), ``in_flight`` and ``max_in_flight``, ``granted``, ``released``, ``expired``
    (leases of holders that died), ``rate_limited``, the endpoints ``cooling`` down (seconds
    left) and the total ``cooled_seconds``."""
    stats: dict[str, Any] = ray.get(limiter.stats.remote())
    return stats


@dataclass(slots=True, eq=False)
class _Held:
    """A permit this worker holds: its lease, when it came, how many attempts succeeded on it."""

    request: str
    granted: float  # this worker's clock
    ok: int = 0


class RemotePermits:
    """A worker's permits, leased from the job's limiter actor and reused for a moment.

    Asking the actor for every attempt costs two Ray calls an attempt, and one actor answers
    only so many (``benchmarks/bench_ray.py`` measures it), so a permit is kept for ``hold``
    seconds and serves this worker's next attempts, to any endpoint, one at a time; then, or as
    soon as no attempt of this worker wants it (``idle`` seconds), it goes back, to be granted
    again first come, first served. The cap holds exactly: a permit serves one attempt at a
    time. A 429 gives its permit back at once with its ``Retry-After``; every worker hears of
    the cool-down by a long poll on the actor and starts no attempt to that endpoint until it
    ends, permit held or not.

    ``local_limit`` bounds this worker's attempts in flight. A lease lasts ``ttl`` seconds at
    most (longer than ``hold`` plus the per-attempt timeout), so a live worker always gives its
    permits back first and a dead one's free themselves when their leases expire.
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
    ) -> None:
        self._limiter = limiter
        self._holder = holder
        self._ttl = float(ttl)
        self._local_limit = local_limit
        self._hold = hold
        self._idle = idle
        self._requests = itertools.count()
        self._free: list[tuple[_Held, float]] = []  # (permit, when it was last given back)
        self._cooling: dict[str, float] = {}  # endpoint -> end, on this worker's clock
        self._local: anyio.CapacityLimiter | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def lowest_target(self) -> int:
        # Adaptive pressure is the limiter's, over every worker: see limiter_stats.
        return self._local_limit

    def _start(self) -> None:
        # On the worker's own event loop, at its first attempt.
        self._local = anyio.CapacityLimiter(self._local_limit)
        self._tasks = [
            asyncio.ensure_future(self._hear_cool_downs()),
            asyncio.ensure_future(self._give_back_idle()),
        ]

    async def _hear_cool_downs(self) -> None:
        seen = -1
        while True:
            try:
                seen, cooling = await self._limiter.cooling_changes.remote(seen)
            except Exception:  # the actor is gone or busy: try again, never end the worker
                await asyncio.sleep(1.0)
                continue
            now = time.monotonic()
            for endpoint, left in cooling.items():
                self._cooling[endpoint] = max(self._cooling.get(endpoint, 0.0), now + left)

    async def _give_back_idle(self) -> None:
        while True:
            await asyncio.sleep(self._idle)
            now = time.monotonic()
            keep = []
            for held, since in self._free:
                if now - since >= self._idle or now - held.granted >= self._hold:
                    self._return(held)
                else:
                    keep.append((held, since))
            self._free = keep

    def _return(self, held: _Held, **outcome: Any) -> None:
        # Not awaited: the permit's return needs no answer, and a return lost with a dying
        # worker is what lease expiry is for.
        self._limiter.release.remote(held.request, ok=held.ok, **outcome)

    async def _wait_cool(self, endpoint: str) -> None:
        while (left := self._cooling.get(endpoint, 0.0) - time.monotonic()) > 0:
            await anyio.sleep(left)

    async def _lease(self, endpoint: str) -> _Held:
        while True:
            request = f"{self._holder}:{next(self._requests)}"
            try:
                granted = await self._limiter.acquire.remote(
                    self._holder, request, endpoint, self._ttl
                )
            except BaseException:
                # Cancelled while waiting: the actor may grant the lease anyway, so say that
                # nobody will use it (it is freed, or never granted).
                self._limiter.abandon.remote(request)
                raise
            if not math.isnan(granted):
                return _Held(request, time.monotonic())

    def _take(self) -> _Held | None:
        now = time.monotonic()
        while self._free:
            held, _ = self._free.pop()
            if now - held.granted < self._hold:
                return held
            self._return(held)
        return None

    @asynccontextmanager
    async def slot(self, endpoint: str) -> AsyncIterator[Slot]:
        if self._local is None:
            self._start()
        assert self._local is not None
        await self._wait_cool(endpoint)
        async with self._local:
            await self._wait_cool(endpoint)
            held = self._take() or await self._lease(endpoint)
            slot = Slot(time.monotonic())
            try:
                yield slot
            finally:
                if slot.limited:
                    if slot.retry_after is not None and slot.retry_after > 0:
                        # This worker waits at once; the others when the actor tells them.
                        until = time.monotonic() + slot.retry_after
                        self._cooling[endpoint] = max(self._cooling.get(endpoint, 0.0), until)
                    self._return(
                        held,
                        limited=True,
                        retry_after=slot.retry_after,
                        endpoint=endpoint,
                        started_ago=time.monotonic() - slot.started,
                    )
                else:
                    held.ok += slot.ok
                    if time.monotonic() - held.granted < self._hold:
                        self._free.append((held, time.monotonic()))
                    else:
                        self._return(held)

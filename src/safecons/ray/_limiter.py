"""One concurrency cap for a whole Ray job: a :class:`~safecons.ray._leases.LeaseTable` served
by one named async actor; the workers lease from it through
:class:`~safecons.ray._leases.RemotePermits`."""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..run import MAX_RETRY_AFTER_SECONDS
from ._leases import LeaseTable, check_cap

__all__ = ("LimiterActor", "global_limiter", "limiter_stats")

#: Every safecons limiter actor lives in this Ray namespace, so a name finds the same actor from
#: any driver of the cluster.
NAMESPACE = "safecons"


class LimiterActor:
    """The Ray actor around one :class:`~safecons.ray._leases.LeaseTable` (async: every
    method runs on the actor's one event loop, so the table needs no lock)."""

    def __init__(
        self,
        cap: int,
        adaptive: bool = True,
        max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
        pace: bool = True,
    ) -> None:
        self._table = LeaseTable(cap, adaptive=adaptive, max_retry_after=max_retry_after, pace=pace)

    async def acquire(self, holder: str, request: str, endpoint: str, ttl: float) -> float:
        return await self._table.acquire(holder, request, endpoint, ttl=ttl)

    async def release(self, request: str, **outcome: Any) -> None:
        self._table.release(request, **outcome)

    async def cooling_changes(self, seen: int) -> tuple[int, dict[str, float]]:
        return await self._table.cooling_changes(seen)

    async def pace(self, endpoint: str, tokens: int, ttl: float) -> int:
        return await self._table.pace(endpoint, tokens, ttl)

    async def answered(self, endpoint: str, number: int, limits: Any, ok: bool = False) -> None:
        self._table.answered(endpoint, number, limits, ok)

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
    max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
    pace: bool = True,
) -> Any:
    """The limiter actor that caps every attempt of a job at ``cap`` in flight.

    With ``pace`` (the default) it also paces every actor's attempts to an endpoint by what
    its provider's rate-limit headers say (:class:`~safecons.ray._leases.LeaseTable`);
    ``pace=False`` shares only the cap and the 429 cool-downs (each actor then paces by the
    answers it gets itself, which is how a job ran before the shared pace).

    With a ``name`` the actor is found (or made) under that name in the ``safecons``
    namespace, so several runs, or several drivers on one cluster, that give the same name
    share one cap and one cool-down per endpoint; a found actor keeps the cap it was made
    with. A named limiter is detached: it outlives the driver that made it, until
    ``ray.kill(limiter)`` or the cluster stops. Without a name the actor is the job's own and
    ends with it. The actor takes no CPU, and runs on the node of the driver that makes it:
    every actor of the job depends on it and Ray does not restart it, but a job ends with its
    driver's node anyway, so no other node's loss takes the limiter with it. (A named
    limiter stays on the node of the driver that made it, and outlives that driver but not
    that node.)

    Examples
    --------
    >>> import ray                                                  # doctest: +SKIP
    >>> limiter = global_limiter(32, name="openai-gpt-4o-mini")     # doctest: +SKIP
    >>> limiter_stats(limiter)["cap"]                               # doctest: +SKIP
    32
    """
    check_cap(cap)  # here, not in the actor, where the error would surface late
    options: dict[str, Any] = {
        "num_cpus": 0,
        # Every attempt in the job waits in here at once: far more than Ray's default of 1,000
        # concurrent calls to an async actor.
        "max_concurrency": 100_000,
        "namespace": NAMESPACE,
    }
    if not ray.is_initialized():
        ray.init()  # as ``.remote()`` would: the driver's node is needed below
    # Hard: with Ray's default placement, or a soft affinity, it landed on another node of a
    # two-node cluster in 3 of 10 and 2 of 5 tries. Any node can hold an actor that reserves
    # nothing.
    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
        ray.get_runtime_context().get_node_id(), soft=False
    )
    if name is not None:
        # Detached: a limiter other drivers found by name must outlive the one that made it.
        options |= {"name": name, "get_if_exists": True, "lifetime": "detached"}
    actor = ray.remote(LimiterActor).options(**options)
    return actor.remote(cap, adaptive, max_retry_after, pace)


def limiter_stats(limiter: Any) -> dict[str, Any]:
    """What the limiter has done: ``cap``, ``target`` and ``lowest_target`` (adaptive
    pressure), ``in_flight`` and ``max_in_flight``, ``granted``, ``released``, ``expired``
    (leases of holders that died), ``rate_limited``, the endpoints ``cooling`` down (seconds
    left) and the total ``cooled_seconds``."""
    stats: dict[str, Any] = ray.get(limiter.stats.remote())
    return stats

"""Permits to send one attempt: what the runner holds while an attempt is in flight.

The runner holds a permit for exactly one attempt (see :mod:`._runner`) and tells it how the
attempt went; what a permit is depends on where the run runs:

- :class:`LocalPermits`: one process. An :class:`anyio.CapacityLimiter` with adaptive pressure
  (:class:`Pressure`): the behaviour of every Polars entry point.
- leases from one table that many processes share (the actors of a Ray job):
  :mod:`safecons.ray._leases` (``LeaseTable``, ``RemotePermits``), which implement the same
  :class:`Permits` protocol with the :class:`Slot` and :class:`Pressure` defined here.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import anyio

__all__ = ("LocalPermits", "Permits", "Pressure", "Slot")


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


@dataclass(slots=True)
class Slot:
    """One attempt's permit, and what the runner says of the attempt before it gives it back."""

    started: float
    limited: bool = False
    retry_after: float | None = None
    ok: bool = False

    def rate_limited(self, retry_after: float | None) -> None:
        self.limited = True
        self.retry_after = retry_after

    def succeeded(self) -> None:
        self.ok = True


class Permits(Protocol):
    """Where a runner gets the permit for one attempt to ``endpoint``."""

    def slot(self, endpoint: str) -> AbstractAsyncContextManager[Slot]: ...

    @property
    def lowest_target(self) -> int: ...


class LocalPermits:
    """One process's permits: a capacity limiter whose size adaptive pressure moves.

    ``clock`` dates each attempt's start and each 429 for :class:`Pressure` (injectable for
    tests: any monotonic clock; nothing here waits on it).
    """

    def __init__(
        self,
        concurrency_limit: int,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limiter = anyio.CapacityLimiter(concurrency_limit)
        self._pressure = Pressure(concurrency_limit) if adaptive else None
        self._clock = clock

    @property
    def lowest_target(self) -> int:
        return (
            self._pressure.lowest if self._pressure is not None else int(self.limiter.total_tokens)
        )

    @asynccontextmanager
    async def slot(self, endpoint: str) -> AsyncIterator[Slot]:
        async with self.limiter:
            slot = Slot(self._clock())
            try:
                yield slot
            finally:
                pressure = self._pressure
                if pressure is not None and (slot.limited or slot.ok):
                    if slot.limited:
                        pressure.rate_limited(slot.started, self._clock())
                    else:
                        pressure.succeeded()
                    if pressure.target != self.limiter.total_tokens:
                        self.limiter.total_tokens = pressure.target

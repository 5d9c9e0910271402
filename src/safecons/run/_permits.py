"""Permits to send one attempt: what the runner holds while an attempt is in flight.

The runner takes each attempt's permit from a :class:`Permits` and says on its :class:`Slot`
how the attempt went. In one process that is :class:`LocalPermits` (one capacity limiter for
the run, one :class:`~safecons.run._policy.PacingPolicy` per endpoint); across the workers of
a Ray job, ``RemotePermits`` of :mod:`safecons.ray._leases`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

import anyio

from ..clients import RateLimits
from ..clients._internal import describe_limits
from ..errors import PacingWarning
from ._headers import MAX_PACED_WAIT_SECONDS, MIN_PACED_WAIT_SECONDS
from ._policy import EndpointPolicy, PacingPolicy

__all__ = ("LocalPermits", "PaceNotices", "Permits", "Slot", "Tokens")

#: A paced wait longer than this (seconds) is shown: a warning once per endpoint, and the
#: progress bar's postfix while it lasts.
VISIBLE_WAIT_SECONDS: Final = 5.0


class PostfixBar(Protocol):
    """A progress bar with a postfix (tqdm's)."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...


class PaceNotices:
    """Where a run shows that a provider's headers hold an endpoint longer than
    :data:`VISIBLE_WAIT_SECONDS`: a :class:`~safecons.errors.PacingWarning` once per endpoint, and
    the postfix of the progress bar in use (``bar``, set by the engine while it shows one)."""

    def __init__(self) -> None:
        self.bar: PostfixBar | None = None
        self._warned: set[str] = set()
        self._waiting: dict[str, str] = {}  # endpoint: what the bar shows
        self._waiters: dict[str, int] = {}

    def waiting(self, endpoint: str, seconds: float, said: str) -> None:
        """An attempt to ``endpoint`` waits ``seconds`` because its provider said ``said``
        (each call is matched by one :meth:`waited`)."""
        self._waiters[endpoint] = self._waiters.get(endpoint, 0) + 1
        if endpoint not in self._warned:
            self._warned.add(endpoint)
            warnings.warn(
                f"{endpoint}: the provider's rate-limit headers hold its calls ({said}); the "
                f"run waits {seconds:,.0f} s, at most {MAX_PACED_WAIT_SECONDS:.0f} s at a time "
                "for each word it hears",
                PacingWarning,
                stacklevel=2,
            )
        self._waiting[endpoint] = f"waiting {seconds:,.0f} s for {endpoint} ({said})"
        self._show()

    def waited(self, endpoint: str) -> None:
        """One attempt's wait is over: the notice goes with the endpoint's last."""
        left = self._waiters.pop(endpoint, 0) - 1
        if left > 0:
            self._waiters[endpoint] = left
        elif self._waiting.pop(endpoint, None) is not None:
            self._show()

    def _show(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str("; ".join(self._waiting.values()), refresh=True)


@dataclass(slots=True)
class Slot:
    """One attempt's permit, and what the runner says of the attempt before it gives it back:
    whether it succeeded or was rate limited, and its answer's headers (``rate_limits``)."""

    started: float
    limited: bool = False
    retry_after: float | None = None
    ok: bool = False
    rate_limits: RateLimits | None = None

    def rate_limited(self, retry_after: float | None) -> None:
        self.limited = True
        self.retry_after = retry_after

    def succeeded(self) -> None:
        self.ok = True


#: An attempt's estimated tokens: a number, a function that works it out (called only once
#: the provider has said how many tokens remain), or None.
Tokens: TypeAlias = int | Callable[[], int] | None


class Permits(Protocol):
    """Where a runner gets the permit for one attempt to ``endpoint``, of an estimated
    ``tokens`` (the pace of a tokens-per-minute limit reads it)."""

    def slot(
        self, endpoint: str, *, tokens: Tokens = None
    ) -> AbstractAsyncContextManager[Slot]: ...

    @property
    def lowest_target(self) -> int: ...


class LocalPermits:
    """One process's permits: one capacity limiter of ``concurrency_limit`` for the run, and
    a :class:`~safecons.run._policy.PacingPolicy` per endpoint (``policy`` makes one from the
    concurrency; default :class:`~safecons.run._policy.EndpointPolicy`).

    An attempt waits until its endpoint's policy lets it start before it takes a place in the
    limiter, so a held endpoint leaves the places to the others. ``clock`` dates each
    attempt's start and end; ``sleep`` waits on it (default: the event loop's clock and
    timeouts, which the runner's deadlines use too).
    """

    def __init__(
        self,
        concurrency_limit: int,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] = anyio.current_time,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        notices: PaceNotices | None = None,
        policy: Callable[[int], PacingPolicy] | None = None,
    ) -> None:
        self.limiter = anyio.CapacityLimiter(concurrency_limit)
        self.notices = PaceNotices() if notices is None else notices
        self._concurrency = concurrency_limit
        self._new_policy = policy or (lambda ceiling: EndpointPolicy(ceiling, adaptive=adaptive))
        self._clock = clock
        self._sleep = sleep
        self._policies: dict[str, PacingPolicy] = {}

    def policy(self, endpoint: str) -> PacingPolicy:
        """The pacing policy of ``endpoint`` (made on first use)."""
        policy = self._policies.get(endpoint)
        if policy is None:
            policy = self._policies[endpoint] = self._new_policy(self._concurrency)
        return policy

    @property
    def lowest_target(self) -> int:
        """The lowest in-flight target any endpoint reached (the concurrency when none was cut)."""
        return min((p.lowest for p in self._policies.values()), default=self._concurrency)

    async def _paced(self, endpoint: str, policy: PacingPolicy, tokens: Tokens) -> int:
        """Take a place in the limiter once ``policy`` lets an attempt of ``tokens`` start;
        the attempt's estimate (0 while its provider has said nothing of tokens)."""
        n = tokens if isinstance(tokens, int) else 0
        shown = False
        try:
            while True:
                if callable(tokens) and policy.counts_tokens:
                    n, tokens = tokens(), None  # worked out once, when first needed
                wait = policy.wait(self._clock(), n)
                if wait == math.inf:
                    await policy.news().wait()
                elif wait > 0:
                    if wait > VISIBLE_WAIT_SECONDS and not shown:
                        shown = True
                        self.notices.waiting(endpoint, wait, describe_limits(policy.last_headers))
                    await self._sleep_or_news(max(wait, MIN_PACED_WAIT_SECONDS), policy.news())
                elif not policy.room:
                    await policy.place_freed().wait()
                else:
                    await self.limiter.acquire()
                    # Others may have started while this one queued for its place: look again.
                    fresh = not (callable(tokens) and policy.counts_tokens)
                    if fresh and policy.room and policy.wait(self._clock(), n) <= 0:
                        return n
                    self.limiter.release()
        finally:
            if shown:
                self.notices.waited(endpoint)

    async def _sleep_or_news(self, seconds: float, news: anyio.Event) -> None:
        """Sleep ``seconds``, or less if the provider's newer headers are heard meanwhile."""
        if self._sleep is None:
            # One timed wait, no task: every answer wakes every waiter on the endpoint.
            with anyio.move_on_after(seconds):
                await news.wait()
            return
        sleep = self._sleep
        async with anyio.create_task_group() as tg:

            async def heard() -> None:
                await news.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(heard)
            await sleep(seconds)  # in this task: it starts at once, as a plain sleep would
            tg.cancel_scope.cancel()

    @asynccontextmanager
    async def slot(self, endpoint: str, *, tokens: Tokens = None) -> AsyncIterator[Slot]:
        policy = self.policy(endpoint)
        estimate = await self._paced(endpoint, policy, tokens)
        slot = Slot(self._clock())
        policy.take_place()
        number = policy.start(estimate, now=slot.started)
        try:
            yield slot
        finally:
            self.limiter.release()
            now = self._clock()
            policy.answered(number, slot.rate_limits, now, ok=slot.ok)
            if slot.limited:
                policy.rate_limited(slot.started, now, slot.retry_after)
            elif slot.ok:
                policy.succeeded()
            policy.give_place()

"""Permits to send one attempt: what the runner holds while an attempt is in flight.

The runner holds a permit for exactly one attempt (see :mod:`._runner`) and tells it how the
attempt went; what a permit is depends on where the run runs:

- :class:`LocalPermits`: one process. An :class:`anyio.CapacityLimiter` bounds the run's
  attempts, and each endpoint's :class:`~safecons.run._policy.EndpointPolicy` (what its
  provider said, its own adaptive pressure) says when an attempt to it may start: the
  behaviour of every Polars entry point.
- leases from one table that many processes share (the actors of a Ray job):
  :mod:`safecons.ray._leases` (``LeaseTable``, ``RemotePermits``), which implement the same
  :class:`Permits` protocol with the :class:`Slot` defined here and the same policy.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Final, Protocol, TypeAlias

import anyio

from ..clients import RateLimits
from ..errors import PacingWarning
from ._policy import MAX_PACED_WAIT_SECONDS, MIN_PACED_WAIT_SECONDS, EndpointPolicy, describe

__all__ = (
    "LocalPermits",
    "PaceNotices",
    "Permits",
    "Slot",
    "Tokens",
)

#: A paced wait longer than this is shown: a :class:`~safecons.PacingWarning` (once per
#: endpoint) and the progress bar's postfix (:class:`PaceNotices`).
VISIBLE_WAIT_SECONDS: Final = 5.0


class PostfixBar(Protocol):
    """A progress bar with a postfix (tqdm's)."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...


class PaceNotices:
    """Where a run shows that a provider's word holds an endpoint for longer than
    :data:`VISIBLE_WAIT_SECONDS`: a :class:`~safecons.PacingWarning` once per endpoint, and
    the postfix of the progress bar in use (``bar``, set by the engine while it shows one)."""

    def __init__(self) -> None:
        self.bar: PostfixBar | None = None
        self._warned: set[str] = set()
        self._waiting: dict[str, str] = {}
        self._waiters: dict[str, int] = {}

    def waiting(self, endpoint: str, seconds: float, said: str) -> None:
        """An attempt to ``endpoint`` waits ``seconds`` because its provider said ``said``
        (each call is matched by one :meth:`waited`)."""
        self._waiters[endpoint] = self._waiters.get(endpoint, 0) + 1
        text = f"waiting {seconds:,.0f} s for {endpoint} ({said})"
        if endpoint not in self._warned:
            self._warned.add(endpoint)
            warnings.warn(
                f"{endpoint}: the provider's rate-limit headers hold its calls "
                f"({said}); the run waits {seconds:,.0f} s, at most "
                f"{MAX_PACED_WAIT_SECONDS:.0f} s at a time for each word it hears",
                PacingWarning,
                stacklevel=2,
            )
        self._waiting[endpoint] = text
        self._show()

    def waited(self, endpoint: str) -> None:
        """One attempt's wait for ``endpoint`` is over: the notice goes with the last one."""
        left = self._waiters.get(endpoint, 0) - 1
        if left > 0:
            self._waiters[endpoint] = left
            return
        self._waiters.pop(endpoint, None)
        if self._waiting.pop(endpoint, None) is not None:
            self._show()

    def _show(self) -> None:
        bar = self.bar
        if bar is None:
            return
        text = "; ".join(self._waiting.values())
        bar.set_postfix_str(text, refresh=True)


@dataclass(slots=True)
class Slot:
    """One attempt's permit, and what the runner says of the attempt before it gives it back:
    whether it succeeded or was rate limited, and what its answer said of the provider's
    limits (``rate_limits``)."""

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


#: An attempt's estimated tokens (:func:`safecons._tokens.request_tokens`): a number, a
#: function that works it out (called only once the endpoint's provider has said how many
#: tokens remain, so that a run no provider limits by tokens never counts them), or None.
Tokens: TypeAlias = int | Callable[[], int] | None


class Permits(Protocol):
    """Where a runner gets the permit for one attempt to ``endpoint``, of an estimated
    ``tokens`` (:data:`Tokens`; the pace of a tokens-per-minute limit reads it)."""

    def slot(
        self, endpoint: str, *, tokens: Tokens = None
    ) -> AbstractAsyncContextManager[Slot]: ...

    @property
    def lowest_target(self) -> int: ...


class LocalPermits:
    """One process's permits: one capacity limiter for the run, and an
    :class:`~safecons.run._policy.EndpointPolicy` per endpoint, shared by every session of the
    run that calls it.

    An attempt waits until its endpoint's policy lets it start (the provider's word, the
    endpoint's in-flight target) before it takes a place in the limiter, so an endpoint that
    is held leaves the places to the run's other endpoints; the limiter's size is the run's
    ``concurrency_limit`` and never changes (adaptive pressure is each endpoint's target).
    ``clock`` dates each attempt's start, each 429 and each answer's word; ``sleep`` waits on
    the same clock. By default (``sleep=None``) both are the event loop's
    (``anyio.current_time``, and a wait timed by the loop), the clock the runner's deadlines
    and backoffs run on too: on a loop whose clock is virtual (the tests'), every wait of a
    run is on it.
    """

    def __init__(
        self,
        concurrency_limit: int,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] = anyio.current_time,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        notices: PaceNotices | None = None,
    ) -> None:
        self.limiter = anyio.CapacityLimiter(concurrency_limit)
        self.notices = PaceNotices() if notices is None else notices
        self._concurrency = concurrency_limit
        self._adaptive = adaptive
        self._clock = clock
        self._sleep = sleep
        self._policies: dict[str, EndpointPolicy] = {}

    def policy(self, endpoint: str) -> EndpointPolicy:
        """The pacing policy of ``endpoint`` (made on first use)."""
        policy = self._policies.get(endpoint)
        if policy is None:
            policy = self._policies[endpoint] = EndpointPolicy(
                self._concurrency, adaptive=self._adaptive
            )
        return policy

    async def _paced(self, endpoint: str, policy: EndpointPolicy, tokens: Tokens) -> int:
        """Take a place in the limiter once ``policy`` lets an attempt of ``tokens`` start; the
        attempt's estimate (0 while its provider has said nothing of tokens)."""
        n = tokens if isinstance(tokens, int) else 0
        while True:
            if policy.awaiting_first_word:
                await policy.pace.first_word.wait()
            if callable(tokens) and policy.counts_tokens:
                n, tokens = tokens(), None  # worked out once, when first needed
            await self._wait_for(endpoint, policy, n)
            await self.limiter.acquire()
            # Others may have started while this one queued for its place: look again.
            estimated = not (callable(tokens) and policy.counts_tokens)
            if estimated and policy.may_start(self._clock(), n):
                return n
            self.limiter.release()

    async def _wait_for(self, endpoint: str, policy: EndpointPolicy, tokens: int) -> None:
        """Sleep until ``policy`` lets an attempt of ``tokens`` start (the provider's word, then
        a place under the endpoint's target), showing a long wait."""
        shown = False
        try:
            while True:
                wait = policy.wait(self._clock(), tokens)
                if wait <= 0 and policy.room:
                    return
                if wait <= 0:
                    await policy.place_freed().wait()
                    continue
                if wait > VISIBLE_WAIT_SECONDS and not shown:
                    shown = True
                    self.notices.waiting(endpoint, wait, describe(policy.pace.said))
                await self._sleep_or_word(max(wait, MIN_PACED_WAIT_SECONDS), policy.pace.word)
        finally:
            if shown:
                self.notices.waited(endpoint)

    async def _sleep_or_word(self, seconds: float, word: anyio.Event) -> None:
        """Sleep ``seconds``, or less if a newer word of the provider is heard meanwhile."""
        if self._sleep is None:
            # Every word wakes every attempt waiting on the endpoint (at 6,000 RPM, a hundred
            # words a second to as many waiters): one timed wait, no task started for it,
            # costs a third of the CPU of a task group of two.
            with anyio.move_on_after(seconds):
                await word.wait()
            return
        sleep = self._sleep
        async with anyio.create_task_group() as tg:

            async def heard() -> None:
                await word.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(heard)
            # The sleep in this task, not in another: it starts at once, as a plain sleep
            # would (a test clock that moves on each sleep sees the same order).
            await sleep(seconds)
            tg.cancel_scope.cancel()

    @property
    def lowest_target(self) -> int:
        """The lowest in-flight target any endpoint's pressure reached (the run's
        concurrency when none was cut)."""
        return min((p.lowest for p in self._policies.values()), default=self._concurrency)

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
            policy.ended(
                number,
                started=slot.started,
                now=self._clock(),
                limits=slot.rate_limits,
                limited=slot.limited,
                retry_after=slot.retry_after,
                ok=slot.ok,
            )

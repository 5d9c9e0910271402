"""The async core: one capacity limiter per run, retries with backoff, per-call timeouts.

Only this module and :mod:`safecons.clients` are async. A *call* is one logical request (one
SUT sample, one judge comparison); it is made of up to ``retries + 1`` *attempts*. A slot of the
run's :class:`anyio.CapacityLimiter` is held for exactly one attempt, so a call that is backing
off leaves its slot to others.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import anyio.from_thread

from .clients._base import CallFailed, NonRetryableCallError, RetryableCallError
from .errors import AuthenticationError

__all__ = ("CallOutcome", "RetryPolicy", "RunStats", "Runner", "run_sync")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff between attempts: full-jitter exponential, or the server's ``Retry-After``.

    The wait before retry ``n`` (counting from 0) is uniform in
    ``[0, min(max_delay, base_delay * 2**n)]``; when the server sent ``Retry-After`` the wait is
    that value (capped at ``max_retry_after``) plus up to 10% jitter, so that many callers told
    to come back at the same moment do not all return at once.
    """

    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None and math.isfinite(retry_after):
            wait = min(max(retry_after, 0.0), self.max_retry_after)
            return wait + rng.uniform(0.0, 0.1 * wait)
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


@dataclass(slots=True)
class RunStats:
    """Counters of one run, kept for its summary."""

    calls: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    failed_calls: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    started: float = field(default_factory=time.perf_counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "attempts": dict(self.attempts),
            "failed_calls": dict(self.failed_calls),
            "max_in_flight": self.max_in_flight,
            "elapsed_seconds": time.perf_counter() - self.started,
        }


@dataclass(frozen=True, slots=True)
class CallOutcome(Generic[T]):
    """The result of a call: a value, or the last attempt's error, and the attempts made."""

    value: T | None
    error: str | None
    attempts: int


class Runner:
    """Runs model calls for one run under one limiter, with retries and per-call timeouts.

    Parameters
    ----------
    concurrency_limit
        Attempts in flight at once, over every kind of call of the run.
    timeout_seconds
        Deadline of each single attempt.
    policy
        Backoff policy between attempts.
    seed
        Seeds the jitter (timing only: no result depends on it).
    """

    def __init__(
        self,
        *,
        concurrency_limit: int,
        timeout_seconds: float,
        policy: RetryPolicy | None = None,
        seed: int = 0,
    ) -> None:
        self.limiter = anyio.CapacityLimiter(concurrency_limit)
        self.timeout_seconds = timeout_seconds
        self.policy = policy or RetryPolicy()
        self.stats = RunStats()
        self._rng = random.Random(seed)

    async def call(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        retries: int,
        kind: str,
    ) -> CallOutcome[T]:
        """Make up to ``retries + 1`` attempts of ``attempt`` and return the outcome.

        ``attempt`` raises :class:`~safecons.clients._base.CallFailed` for a failed attempt
        (retryable or not). :class:`~safecons.AuthenticationError` is never retried: it
        propagates and ends the run. A timeout is a retryable failure.
        """
        stats = self.stats
        stats.calls[kind] = stats.calls.get(kind, 0) + 1
        error = "no attempt made"
        for n in range(retries + 1):
            retry_after: float | None = None
            async with self.limiter:
                stats.attempts[kind] = stats.attempts.get(kind, 0) + 1
                stats.in_flight += 1
                stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
                try:
                    with anyio.fail_after(self.timeout_seconds):
                        value = await attempt()
                    return CallOutcome(value=value, error=None, attempts=n + 1)
                except TimeoutError:
                    error = f"timed out after {self.timeout_seconds:g} s"
                except AuthenticationError:
                    raise
                except NonRetryableCallError as exc:
                    stats.failed_calls[kind] = stats.failed_calls.get(kind, 0) + 1
                    return CallOutcome(value=None, error=str(exc), attempts=n + 1)
                except RetryableCallError as exc:
                    error = str(exc)
                    retry_after = exc.retry_after
                except CallFailed as exc:
                    error = str(exc)
                finally:
                    stats.in_flight -= 1
            if n < retries:
                await anyio.sleep(self.policy.delay(n, retry_after, self._rng))
        stats.failed_calls[kind] = stats.failed_calls.get(kind, 0) + 1
        attempts = retries + 1
        plural = "s" if attempts > 1 else ""
        return CallOutcome(
            value=None, error=f"{error} ({attempts} attempt{plural})", attempts=attempts
        )


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """Run the coroutine function ``fn`` to completion from synchronous code.

    Works in a plain script and inside a running event loop (a Jupyter cell): there the work
    runs on a fresh loop in a worker thread through an anyio blocking portal, because the
    notebook's own loop cannot be re-entered.
    """
    call = functools.partial(fn, *args, **kwargs)
    if not _in_running_loop():
        return anyio.run(call)
    with anyio.from_thread.start_blocking_portal() as portal:
        return portal.call(call)

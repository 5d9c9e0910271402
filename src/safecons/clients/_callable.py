"""Plain Python callables, sync or async, used as chat clients."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from ..errors import AuthenticationError
from ._base import CallFailed, ChatSession, Completion, Messages, RetryableCallError, describe

__all__ = ("CallableClient",)


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - instances with an async __call__
    )


def _accepts_seed(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == "seed" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        or p.kind == p.VAR_KEYWORD
        for p in params
    )


def _to_completion(value: object, who: str) -> Completion:
    if isinstance(value, Completion):
        return value
    if isinstance(value, str):
        return Completion(text=value)
    raise RetryableCallError(
        f"{who} returned {type(value).__name__}; a chat callable must return str"
    )


class _CallableSession:
    def __init__(self, fn: Callable[..., Any], who: str, threads: anyio.CapacityLimiter) -> None:
        self._fn = fn
        self._who = who
        self._async = _is_async_callable(fn)
        self._threads = threads
        self._seeded = _accepts_seed(fn)

    async def complete(
        self, messages: Messages, *, temperature: float, seed: int | None = None
    ) -> Completion:
        msgs = [dict(m) for m in messages]
        kwargs: dict[str, Any] = {"temperature": temperature}
        if self._seeded:
            kwargs["seed"] = seed
        try:
            if self._async:
                value = await self._fn(msgs, **kwargs)
            else:
                # A sync callable cannot be interrupted; abandoning it on cancellation lets the
                # per-call timeout and Ctrl-C take effect while the thread finishes on its own.
                value = await anyio.to_thread.run_sync(
                    lambda: self._fn(msgs, **kwargs),
                    abandon_on_cancel=True,
                    limiter=self._threads,
                )
        except (CallFailed, AuthenticationError):
            raise
        except Exception as exc:  # a user's callable may fail in any way: one failed attempt
            raise RetryableCallError(f"{self._who} raised {type(exc).__name__}: {exc}") from exc
        return _to_completion(value, self._who)


class CallableClient:
    """Adapt a callable ``fn(messages, *, temperature) -> str`` into a chat client.

    ``fn`` may be sync (run in a worker thread) or async. An exception it raises counts as one
    failed attempt and is retried within the call's budget. If ``fn`` also takes a ``seed``
    keyword it receives the sample's seed (derived from the run's seed, the row's ``input_id``
    and the sample index), so a callable can make its sampling reproducible.

    Examples
    --------
    >>> from safecons.clients import CallableClient
    >>> client = CallableClient(lambda messages, temperature: "I can't help with that.")
    >>> client.identity
    'callable:<lambda>'
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}")
        self._fn = fn
        self._name = name or describe(fn)

    @property
    def identity(self) -> str:
        return f"callable:{self._name}"

    def __repr__(self) -> str:
        return f"CallableClient({self._name})"

    @asynccontextmanager
    async def session(self) -> AsyncIterator[ChatSession]:
        yield _CallableSession(self._fn, self.identity, anyio.CapacityLimiter(64))

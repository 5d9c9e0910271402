"""Plain Python callables, sync or async, used as chat clients."""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from ..errors import AuthenticationError, InputError
from ._base import CallFailed, ChatSession, Completion, Messages, RetryableCallError, describe

__all__ = ("CallableClient", "check_chat_signature", "status_of")

#: Threads a sync callable may occupy at once when the run does not say (the config's maximum).
DEFAULT_MAX_THREADS = 64


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


def check_chat_signature(fn: Callable[..., Any], parameter: str) -> None:
    """Raise :class:`InputError` unless ``fn(messages, temperature=...)`` can be called.

    Checked before any call, so a callable of the wrong shape fails once, not on every row.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and some C callables have no signature to check
    extra = {"seed": 0} if _accepts_seed(fn) else {}
    try:
        signature.bind([], temperature=0.0, **extra)
    except TypeError as exc:
        raise InputError(
            f"{parameter}: a chat callable must accept (messages, *, temperature) and return "
            f"str; {describe(fn)}{signature} does not ({exc})"
        ) from None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``, or ``response.status_code``)."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def _to_completion(value: object, who: str) -> Completion:
    if isinstance(value, Completion):
        return value
    if isinstance(value, str):
        return Completion(text=value)
    raise RetryableCallError(
        f"{who} returned {type(value).__name__}; a chat callable must return str"
    )


class _CallableSession:
    def __init__(self, fn: Callable[..., Any], who: str, max_threads: int) -> None:
        self._fn = fn
        self._who = who
        self._async = _is_async_callable(fn)
        self._seeded = _accepts_seed(fn)
        self._max_threads = max_threads
        self._threads = anyio.CapacityLimiter(max_threads)
        self._live = 0
        self._lock = threading.Lock()

    async def _start_thread(self) -> None:
        # A sync call that overran its timeout is abandoned but its thread runs on; count it
        # until it really returns, so hung calls slow the run down instead of piling up threads
        # (and requests to the backend) beyond the run's concurrency.
        while True:
            with self._lock:
                if self._live < self._max_threads:
                    self._live += 1
                    return
            await anyio.sleep(0.01)

    def _run_in_thread(self, msgs: list[dict[str, str]], kwargs: dict[str, Any]) -> Any:
        try:
            return self._fn(msgs, **kwargs)
        finally:
            with self._lock:
                self._live -= 1

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
                await self._start_thread()
                # A sync callable cannot be interrupted; abandoning it on cancellation lets the
                # per-call timeout and Ctrl-C take effect while the thread finishes on its own.
                value = await anyio.to_thread.run_sync(
                    self._run_in_thread,
                    msgs,
                    kwargs,
                    abandon_on_cancel=True,
                    limiter=self._threads,
                )
        except (CallFailed, AuthenticationError):
            raise
        except Exception as exc:  # a user's callable may fail in any way: one failed attempt
            status = status_of(exc)
            if status in (401, 403):
                # An SDK's authentication error (openai.AuthenticationError, ...) inside the
                # callable stops the run like a 401 from our own client would.
                raise AuthenticationError(
                    f"{self._who}: the endpoint rejected the credentials (HTTP {status}, "
                    f"{type(exc).__name__})"
                ) from None
            raise RetryableCallError(f"{self._who} raised {type(exc).__name__}: {exc}") from exc
        return _to_completion(value, self._who)


class CallableClient:
    """Adapt a callable ``fn(messages, *, temperature) -> str`` into a chat client.

    ``fn`` may be sync (run in a worker thread) or async. An exception it raises counts as one
    failed attempt and is retried within the call's budget, except one carrying HTTP status 401
    or 403 (``status_code``, as SDK errors do), which stops the run. If ``fn`` also takes a
    ``seed`` keyword it receives the sample's seed (derived from the run's seed, the row's
    ``input_id`` and the sample index), so a callable can make its sampling reproducible.

    A sync callable cannot be interrupted: past ``timeout_seconds`` its attempt is abandoned
    but its thread runs on, and counts against the run's concurrency until it returns. Give
    such callables their own timeout.

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
    async def session(self, *, concurrency: int | None = None) -> AsyncIterator[ChatSession]:
        """Open a session; ``concurrency`` caps the threads a sync callable occupies."""
        yield _CallableSession(self._fn, self.identity, concurrency or DEFAULT_MAX_THREADS)

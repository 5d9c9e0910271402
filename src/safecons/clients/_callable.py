"""Plain Python callables, sync or async, used as chat clients."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import threading
import types
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from ..errors import AuthenticationError, InputError
from ._base import (
    CURRENT_ATTEMPT,
    CallFailed,
    ChatSession,
    Completion,
    Messages,
    RetryableCallError,
    describe,
)

__all__ = (
    "DEFAULT_MAX_THREADS",
    "CallableClient",
    "UserCode",
    "callable_fingerprint",
    "check_chat_signature",
    "check_signature",
    "status_of",
)

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


def check_signature(
    fn: Callable[..., Any], *args: Any, parameter: str, expected: str, **kwargs: Any
) -> None:
    """Raise :class:`InputError` unless ``fn(*args, **kwargs)`` would bind.

    Checked before any call, so a callable of the wrong shape fails once, not on every row.
    ``expected`` says in the error what shape was expected.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and some C callables have no signature to check
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InputError(
            f"{parameter}: {expected}; {describe(fn)}{signature} does not ({exc})"
        ) from None


def check_chat_signature(fn: Callable[..., Any], parameter: str) -> None:
    """Raise :class:`InputError` unless ``fn(messages, temperature=...)`` can be called."""
    extra = {"seed": 0} if _accepts_seed(fn) else {}
    check_signature(
        fn,
        [],
        parameter=parameter,
        expected="a chat callable must accept (messages, *, temperature) and return str",
        temperature=0.0,
        **extra,
    )


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``status_code``, or ``response.status_code``)."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


_SCALARS = (str, int, float, bool, type(None))


def _stable(value: object, depth: int = 0) -> object:
    """A process-independent description of ``value`` for a fingerprint.

    Scalars and containers by content, functions by code, objects by class and state; nothing
    that prints a memory address is included. State that changes as a run goes on changes the
    fingerprint too, which costs cache misses, never a wrong replay.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if depth > 4:
        return f"<{type(value).__qualname__}>"
    if isinstance(value, list | tuple):
        return [_stable(v, depth + 1) for v in value[:1000]]
    if isinstance(value, set | frozenset):
        return sorted(repr(_stable(v, depth + 1)) for v in value)
    if isinstance(value, dict):
        return {str(k): _stable(v, depth + 1) for k, v in sorted(value.items(), key=repr)}
    if isinstance(value, types.CodeType):
        return {
            "code": value.co_code.hex(),
            "consts": [_stable(c, depth + 1) for c in value.co_consts],
            "names": list(value.co_names),
        }
    if isinstance(value, functools.partial) or inspect.isfunction(value) or inspect.ismethod(value):
        return _callable_parts(value, depth + 1)
    return _object_parts(value, depth + 1)


def _callable_parts(fn: Any, depth: int = 0) -> object:
    if isinstance(fn, functools.partial):
        return {
            "partial": _callable_parts(fn.func, depth + 1),
            "args": _stable(fn.args, depth + 1),
            "keywords": _stable(fn.keywords, depth + 1),
        }
    if inspect.ismethod(fn):
        return {
            "method": _callable_parts(fn.__func__, depth + 1),
            "self": _object_parts(fn.__self__, depth + 1),
        }
    if inspect.isfunction(fn):
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(_stable(cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                cells.append(None)
        return {
            "function": f"{fn.__module__}.{fn.__qualname__}",
            "code": _stable(fn.__code__, depth + 1),
            "defaults": _stable(fn.__defaults__, depth + 1),
            "kwdefaults": _stable(fn.__kwdefaults__, depth + 1),
            "closure": cells,
        }
    return _object_parts(fn, depth)


def _object_parts(obj: object, depth: int = 0) -> object:
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    # An object may say what identifies it (safecons' stand-ins do, to leave out bookkeeping
    # such as a log of calls).
    identity = getattr(obj, "cache_identity", None)
    if isinstance(identity, str):
        return {"class": kind, "identity": identity}
    if depth > 3:
        return {"class": kind}
    try:
        state = vars(obj)
    except TypeError:
        state = {}
    return {"class": kind, "state": {k: _stable(v, depth + 1) for k, v in sorted(state.items())}}


def callable_fingerprint(fn: Callable[..., Any]) -> str:
    """A short hash of what defines a callable: code, defaults, closure and bound values.

    Two lambdas, two ``functools.partial`` of one function with other arguments, or two
    instances of a class with other settings get different fingerprints, so a response cache
    never mixes their answers. An object with a ``cache_identity`` string is known by it.

    Examples
    --------
    >>> callable_fingerprint(lambda m, temperature: "a") == callable_fingerprint(
    ...     lambda m, temperature: "b")
    False
    """
    blob = json.dumps(_callable_parts(fn), sort_keys=True, default=str)
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _to_completion(value: object, who: str) -> Completion:
    if isinstance(value, Completion):
        return value
    if isinstance(value, str):
        return Completion(text=value)
    raise RetryableCallError(
        f"{who} returned {type(value).__name__}; a chat callable must return str"
    )


class UserCode:
    """Calls a user's function (sync or async) as one attempt of a run.

    One place for what every user-supplied function needs (a chat callable, a judge object's
    ``compare``): a sync function runs in a worker thread, at most ``max_threads`` at once,
    counting threads that overran their timeout until they really return; an attempt starts
    when a thread calls the function (see :class:`~safecons.clients._base.AttemptStart`);
    whatever the function raises is one failed attempt, except an error carrying HTTP status
    401/403 (as SDK errors do), which stops the run like a 401 from our own client.
    """

    def __init__(self, fn: Callable[..., Any], who: str, max_threads: int) -> None:
        self._fn = fn
        self._who = who
        self._async = _is_async_callable(fn)
        self._max_threads = max_threads
        self._threads = anyio.CapacityLimiter(max_threads)
        self._live = 0
        self._lock = threading.Lock()

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._async:
                return await self._fn(*args, **kwargs)
            return await self._in_thread(args, kwargs)
        except (CallFailed, AuthenticationError):
            raise
        except Exception as exc:  # a user's function may fail in any way: one failed attempt
            status = status_of(exc)
            if status in (401, 403):
                # An SDK's authentication error (openai.AuthenticationError, ...) inside the
                # function stops the run like a 401 from our own client would.
                raise AuthenticationError(
                    f"{self._who}: the endpoint rejected the credentials (HTTP {status}, "
                    f"{type(exc).__name__})"
                ) from None
            raise RetryableCallError(f"{self._who} raised {type(exc).__name__}: {exc}") from exc

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

    def _run_in_thread(self, ticket: _Ticket, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with ticket.lock:
            ticket.entered = True
            if ticket.abandoned:
                # The attempt's deadline passed before this thread got to it: it was never
                # made, so the function is not called (and its thread slot is already freed).
                return None
            ticket.started = True
        try:
            return self._fn(*args, **kwargs)
        finally:
            with self._lock:
                self._live -= 1

    async def _in_thread(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        attempt = CURRENT_ATTEMPT.get()
        if attempt is not None:
            attempt.started = False  # until a thread really calls the function
        await self._start_thread()
        ticket = _Ticket()
        try:
            # A sync function cannot be interrupted; abandoning it on cancellation lets the
            # per-call timeout and Ctrl-C take effect while the thread finishes on its own.
            return await anyio.to_thread.run_sync(
                self._run_in_thread,
                ticket,
                args,
                kwargs,
                abandon_on_cancel=True,
                limiter=self._threads,
            )
        finally:
            with ticket.lock:
                ticket.abandoned = True
                if not ticket.entered:
                    with self._lock:
                        self._live -= 1  # the thread will never run: free its slot here
            if attempt is not None:
                attempt.started = ticket.started


class _Ticket:
    """One attempt's hand-over to a worker thread: whether it started or was abandoned first."""

    __slots__ = ("abandoned", "entered", "lock", "started")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entered = False
        self.started = False
        self.abandoned = False


class _CallableSession:
    def __init__(self, fn: Callable[..., Any], who: str, max_threads: int) -> None:
        self._call = UserCode(fn, who, max_threads)
        self._who = who
        self._seeded = _accepts_seed(fn)

    async def complete(
        self, messages: Messages, *, temperature: float, seed: int | None = None
    ) -> Completion:
        kwargs: dict[str, Any] = {"temperature": temperature}
        if self._seeded:
            kwargs["seed"] = seed
        value = await self._call([dict(m) for m in messages], **kwargs)
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
    >>> client = CallableClient(lambda messages, temperature: "I can't help with that.",
    ...                         name="refuser-v1")
    >>> client.identity
    'callable:refuser-v1'
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}")
        self._fn = fn
        # An explicit name is the callable's whole identity (and cache identity); without one,
        # a fingerprint of its code and settings keeps different callables apart.
        self._name = name or f"{describe(fn)}#{callable_fingerprint(fn)}"

    @property
    def identity(self) -> str:
        """``callable:`` and the name given, or the callable's name and fingerprint."""
        return f"callable:{self._name}"

    def __repr__(self) -> str:
        return f"CallableClient({self._name})"

    @asynccontextmanager
    async def session(self, *, concurrency: int | None = None) -> AsyncIterator[ChatSession]:
        """Open a session; ``concurrency`` caps the threads a sync callable occupies."""
        yield _CallableSession(self._fn, self.identity, concurrency or DEFAULT_MAX_THREADS)

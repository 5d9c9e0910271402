"""Plain Python callables, sync or async, used as chat clients."""

from __future__ import annotations

import copy
import inspect
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from .._foreign import Raised, describe_exception, guarded, guarded_await, type_name
from .._tasks import background_tasks, user_stacklevel
from ..errors import AuthenticationError, IdentityWarning, InputError
from ._base import (
    Attempt,
    CallFailed,
    Completion,
    Messages,
    RetryableCallError,
    describe,
)
from ._facts import ClientFacts
from ._identity import Identity, identify

__all__ = (
    "DEFAULT_MAX_THREADS",
    "CallableClient",
    "UserCode",
    "check_attribute_lookup",
    "check_chat_signature",
    "check_signature",
    "status_of",
    "warn_if_partial",
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


def check_attribute_lookup(obj: object, parameter: str) -> None:
    """Raise :class:`~safecons.InputError` naming ``parameter`` when looking up a name ``obj``
    lacks raises something other than ``AttributeError``.

    Python's own tools (``inspect.signature``, ``hasattr``, ``getattr`` with a default) rely
    on that rule; an object that breaks it (a ``__getattr__`` reading a dict: ``KeyError``)
    would fail deep inside them, on its first use, with a message naming no argument.

    Examples
    --------
    >>> class Settings:
    ...     def __call__(self, messages, *, temperature):
    ...         return "no"
    ...     def __getattr__(self, key):
    ...         return {}[key]
    >>> check_attribute_lookup(Settings(), "sut")
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: sut: Settings raises KeyError for a name it does not have ('__safecons_absent__'); Python's tools (inspect, hasattr) need AttributeError there: make its __getattr__ raise AttributeError, or pass a function that calls it
    """  # noqa: E501
    absent = "__safecons_absent__"
    found = guarded(getattr, obj, absent)
    if isinstance(found, Raised) and not isinstance(found.error, AttributeError):
        raise InputError(
            f"{parameter}: {type(obj).__qualname__} raises {type_name(found.error)} for a name it "
            f"does not have ({absent!r}); Python's tools (inspect, hasattr) need "
            "AttributeError there: make its __getattr__ raise AttributeError, or pass a "
            "function that calls it"
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
    """The HTTP status an exception carries (``status_code``, or ``response.status_code``);
    None when it carries none, or reading it raises (the exception is the user's code)."""
    status = guarded(_carried_status, exc)
    return status if type(status) is int else None


def _carried_status(exc: BaseException) -> object:
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if type(status) is int:
            return status
    return None


def _to_completion(value: object, who: str) -> Completion:
    if isinstance(value, Completion):
        return value
    if isinstance(value, str):
        return Completion(text=value)
    raise RetryableCallError(f"{who} returned {type_name(value)}; a chat callable must return str")


class UserCode:
    """Calls a user's function (sync or async) as one attempt of a run.

    One place for what every user-supplied function needs (a chat callable, a judge object's
    ``compare``): a sync function runs in a worker thread, at most ``max_threads`` at once,
    counting threads that overran their timeout until they really return; an attempt starts
    when a thread calls the function (see :class:`~safecons.clients._base.Attempt`);
    whatever the function raises is one failed attempt, except an error carrying HTTP status
    401/403 (as SDK errors do), which stops the run like a 401 from our own client.

    A sync function is called only while the object is open (:meth:`open`, for a session's
    length): each call's thread is watched by a task of the open block, which holds the
    call's thread slot until the thread returns, whether the attempt still waits for it or
    was abandoned at its timeout. The watcher frees the slot on the event loop, where it wakes
    the next call waiting for one at once (:class:`anyio.CapacityLimiter`), so nothing polls,
    and threads never call into the event loop: one that returns after the loop is gone has
    nothing to tell it, and neither blocks nor fails.
    """

    def __init__(self, fn: Callable[..., Any], who: str, max_threads: int) -> None:
        self._fn = fn
        self._who = who
        self._async = _is_async_callable(fn)
        self._max_threads = max_threads
        # Made by open, on the event loop that calls; None while the object is closed.
        self._slots: anyio.CapacityLimiter | None = None
        self._threads: anyio.CapacityLimiter | None = None
        self._watchers: TaskGroup | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[UserCode]:
        """Call the function for as long as the block runs.

        When the block ends, the threads of sync calls that have not returned (calls
        abandoned at their timeout, hung) are left to finish on their own: the block does not
        wait for them.
        """
        if self._watchers is not None:
            raise RuntimeError(f"{self._who}: open already")
        self._slots = anyio.CapacityLimiter(self._max_threads)
        # The threads' own limiter for anyio (its process-wide default holds 40): never
        # waited on, since a thread starts only once its call holds a slot.
        self._threads = anyio.CapacityLimiter(self._max_threads)
        try:
            async with background_tasks() as watchers:
                self._watchers = watchers
                yield self
        finally:
            self._watchers = None

    async def __call__(self, attempt: Attempt | None, *args: Any, **kwargs: Any) -> Any:
        """Call the function with ``args`` and ``kwargs`` as ``attempt`` (None: an attempt no
        runner counts), which starts when a thread calls it."""
        if not self._async and self._watchers is None:
            # Safecons' own mistake, not a failed attempt: raised as it is, never retried.
            raise RuntimeError(f"{self._who}: a sync function is called inside UserCode.open()")
        if self._async:
            outcome = await guarded_await(self._fn, *args, **kwargs)
        else:
            outcome = await self._in_thread(attempt, args, kwargs)
        if isinstance(outcome, Raised):
            self._failed(outcome.error)
        return outcome

    def _failed(self, exc: Exception) -> NoReturn:
        """Raise what the function raised as the attempt's failure: a user's function may
        fail in any way, and each is one failed attempt."""
        if isinstance(exc, CallFailed | AuthenticationError):
            raise exc
        status = status_of(exc)
        if status in (401, 403):
            # An SDK's authentication error (openai.AuthenticationError, ...) inside the
            # function stops the run like a 401 from our own client would.
            raise AuthenticationError(
                f"{self._who}: the endpoint rejected the credentials (HTTP {status}, "
                f"{type_name(exc)})"
            ) from None
        # Its text is read once, here, where whatever reading it raises is still this
        # attempt's failure.
        raise RetryableCallError(f"{self._who} raised {describe_exception(exc)}") from exc

    def _run_in_thread(self, ticket: _Ticket, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with ticket.lock:
            if ticket.abandoned:
                # The attempt's deadline passed before this thread got to it: it was never
                # made, so the function is not called.
                return None
            ticket.started = True
        return guarded(self._fn, *args, **kwargs)

    async def _watch(
        self,
        slots: anyio.CapacityLimiter,
        threads: anyio.CapacityLimiter,
        ticket: _Ticket,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        # A task of the open block, not of the attempt: the attempt may stop waiting at its
        # timeout, while this waits until the thread really returns and only then frees its
        # slot, so hung calls slow the run down instead of piling up threads (and requests to
        # the backend) beyond the run's concurrency.
        # What the attempt reads if the thread gives nothing back: what the function returned
        # or raised (guarded in the thread) takes its place.
        ticket.value = Raised(RuntimeError(f"{self._who}: its thread ended without an answer"))
        try:
            # A sync function cannot be interrupted: the thread is abandoned only when the
            # open block ends (this task is cancelled then) and finishes on its own.
            ticket.value = await anyio.to_thread.run_sync(
                self._run_in_thread, ticket, args, kwargs, abandon_on_cancel=True, limiter=threads
            )
        except anyio.get_cancelled_exc_class():
            ticket.value = Raised(RuntimeError(f"{self._who}: closed while the call ran"))
            raise
        finally:
            slots.release_on_behalf_of(ticket)
            ticket.done.set()

    async def _in_thread(
        self, attempt: Attempt | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        slots, threads, watchers = self._slots, self._threads, self._watchers
        assert slots is not None and threads is not None and watchers is not None  # open
        if attempt is not None:
            attempt.started = False  # until a thread really calls the function
        ticket = _Ticket()
        # Waiting for a slot is part of the attempt (its timeout counts it); once it has one,
        # the watcher holds it.
        await slots.acquire_on_behalf_of(ticket)
        watching = False
        try:
            watchers.start_soon(self._watch, slots, threads, ticket, args, kwargs)
            watching = True
        finally:
            if not watching:  # the slot is the watcher's to free once it runs, else ours
                slots.release_on_behalf_of(ticket)
        try:
            await ticket.done.wait()
        finally:
            with ticket.lock:
                ticket.abandoned = True  # a thread that has not called the function will not
            if attempt is not None:
                attempt.started = ticket.started
        return ticket.value


class _Ticket:
    """One call's hand-over to a worker thread: whether it started or was abandoned first,
    and what it returned or raised (set on the event loop by the call's watcher)."""

    __slots__ = ("abandoned", "done", "lock", "started", "value")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.abandoned = False
        self.done = anyio.Event()
        #: What the function returned, or :class:`Raised` with what it raised.
        self.value: Any = None


class _CallableSession:
    #: A callable is called with messages and a temperature (and a seed, if it takes one).
    structured_output = False
    #: Every call is a request of its own: none waits without a permit.
    holds = 0

    def __init__(self, call: UserCode, who: str, seeded: bool) -> None:
        self._call = call
        self._who = who
        self._seeded = seeded

    async def complete(
        self, messages: Messages, *, temperature: float, seed: int | None = None
    ) -> Completion:
        """Answer ``messages`` once (the :class:`~safecons.clients.ChatSession` protocol)."""
        return await self.attempt(Attempt(), messages, temperature=temperature, seed=seed)

    async def attempt(
        self,
        attempt: Attempt,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One attempt of a run: it starts when a thread calls the function (a sync one)."""
        kwargs: dict[str, Any] = {"temperature": temperature}
        if self._seeded:
            kwargs["seed"] = seed
        value = await self._call(attempt, [dict(m) for m in messages], **kwargs)
        answer = _to_completion(value, self._who)
        # A callable that wraps a client returns its Completion: what the provider said of
        # its limits paces the endpoint, as for our own client.
        attempt.rate_limits = answer.rate_limits
        return answer


class NotCallableError(InputError, TypeError):
    """What was given as a client's function cannot be called (also a ``TypeError``)."""


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

    Parameters
    ----------
    fn
        The callable.
    name
        The callable's whole identity for a response cache (``callable:name``): answers
        cached under a name are replayed for any callable of that name, whatever its code.
        Change the name (or the ``version``) whenever the model or its settings change.
    version
        Part of the identity too, with or without a ``name`` (``"2024-06"``, ``"prompt-v3"``).

    Notes
    -----
    Without a ``name``, the identity is ``callable:<qualified name>#<hash>`` (then
    ``@version``), the hash, 16 hex digits, read again each time a run starts, of:

    * the function's module and qualified name, and its code object: bytecode, constants
      (its docstring, and the code of the lambdas, comprehensions and inner functions it
      makes), the names it reads, its parameters. Editing the code changes the hash; moving
      it in its file does not; another Python version (another bytecode) does.
    * its defaults, keyword defaults and closure cells, by value when they are plain data
      (None, bool, int, float, str, bytes, and tuples, lists, dicts, sets and frozensets of
      them, at most 10,000 values and 8 levels deep); a function among them (a decorator's
      wrapped function) by this same rule; a module, a class or a builtin by its name;
      anything else (an SDK's client, a model object) by its type's qualified name only; a
      str or bytes over 4,096 long by a hash of it; a URL's user and password left out.
      Any value held under a credential's name (``api_key``, ``OPENAI_API_KEY``,
      ``HF_TOKEN``, ``password``, ``auth=("alice", pw)``, ...; not ``EOS_TOKEN``,
      ``eot_token`` or ``MODEL_KEY``, which are settings) counts by its name only: no key
      reaches the cache, not even hashed, and rotating one keeps it. A positional argument
      has no name, and is not recognised as a secret.
    * the module-level values its code reads by name, by value when they are plain data
      that cannot change in place, scalars and tuples of them (``MODEL = "gpt-4o"`` set
      again in a notebook changes the hash); a module-level list, dict or set (a log, a
      memo) is named in the warning instead.
    * a bound method: its function, its class's name, its class's own attributes and the
      instance's attributes (by the same rule as a closure); a callable object: its class's
      name, its ``__call__``, its class's own attributes and its attributes; a
      :func:`functools.partial`: its function and arguments; a builtin: its name alone. A
      class's own attributes: those of each class of its MRO outside installed code, values
      as a closure's, methods by their code. An object with a ``cache_identity`` string is
      known by that string. An object met again while it is read (``self.handler =
      self.respond``) counts as a reference to it.

    Not part of it: the module-level objects its code reads (``CONFIG = Settings(...)``, an
    SDK's client), what it reads from a module of the user's own (``config.MODEL``), the
    code of the functions and modules it calls, settings inside installed packages,
    environment variables, files. :attr:`unseen` names what of that can be named, and a run
    (or dry run) that uses a cache warns once per identity when it is not empty, since a
    change there would replay the answers given before it. A callable whose code reads no such value
    (``lambda messages, temperature: "no"``, or one that reads only its closure's plain
    values and calls functions) does not warn. Naming it makes the identity exact.

    This rule replaced a walk of everything the callable reached: answers cached
    by an unnamed callable before it are not replayed (each is asked again once); a named
    callable's identity and keys are what they were, and its answers replay.

    Examples
    --------
    >>> from safecons.clients import CallableClient
    >>> client = CallableClient(lambda messages, temperature: "I can't help with that.",
    ...                         name="refuser", version="v1")
    >>> client.identity
    'callable:refuser@v1'
    >>> unnamed = CallableClient(lambda messages, temperature: "no")
    >>> unnamed.identity.startswith("callable:<lambda>#"), unnamed.unseen
    (True, ())
    """

    def __init__(
        self, fn: Callable[..., Any], *, name: str | None = None, version: str | None = None
    ) -> None:
        if not callable(fn):
            raise NotCallableError(f"fn: expected a callable, got {type(fn).__name__}")
        for parameter, value in (("name", name), ("version", version)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"{parameter}: expected a non-empty string, got {value!r}")
        self._fn = fn
        self._name = name
        self._version = version
        self._pinned: Identity | None = None

    def pinned(self) -> CallableClient:
        """This client with its identity read once, now, for one run: every look at it
        during the run (its cache keys, its warning, its name in messages) is the same and
        costs nothing more (each read hashes the closure: 0.1 s per 100 MB of it). A run
        makes its own; a named client is its own pinned self.

        Examples
        --------
        >>> from safecons.clients import CallableClient
        >>> def answering(said):
        ...     return lambda messages, temperature: said[0]
        >>> said = ["no"]
        >>> client = CallableClient(answering(said))
        >>> pinned = client.pinned()
        >>> said[0] = "yes"  # the closure's value changes after the pin
        >>> pinned.identity == client.identity, pinned.identity == pinned.identity
        (False, True)
        """
        if self._name is not None or self._pinned is not None:
            return self
        pinned = copy.copy(self)  # a subclass of the user's stays one
        pinned._pinned = identify(self._fn)
        return pinned

    def _read(self) -> Identity | None:
        # Read each time it is asked for, unless pinned for a run: a closure's value changed
        # since the client was made is then part of the next run's identity.
        if self._name is not None:
            return None
        return self._pinned if self._pinned is not None else identify(self._fn)

    def _label(self, read: Identity | None) -> str:
        name = f"{describe(self._fn)}#{read.digest}" if read is not None else self._name
        assert name is not None  # nothing read only with a name
        return name if self._version is None else f"{name}@{self._version}"

    @property
    def identity(self) -> str:
        """``callable:`` and the name given (or the callable's qualified name and hash), then
        ``@version`` when one was given."""
        return f"callable:{self._label(self._read())}"

    @property
    def unseen(self) -> tuple[str, ...]:
        """What an unnamed callable reads that is not part of its identity, as far as it can
        be named: the module-level values its code reads, and what of its defaults, closure
        or attributes counts by type or name only (always empty with a ``name``)."""
        read = self._read()
        return () if read is None else read.unseen

    @property
    def facts(self) -> ClientFacts:
        """What the run knows of this client beyond its identity: its version, for cache
        keys."""
        return ClientFacts(request=self.request_fingerprint)

    @property
    def request_fingerprint(self) -> dict[str, Any]:
        """The version apart from the identity, for cache keys: ``name="a@b"`` is not
        ``name="a", version="b"``. Empty without a version, so the keys of a callable named
        before versions existed stay what they were."""
        return {} if self._version is None else {"version": self._version}

    def __repr__(self) -> str:
        return f"CallableClient({self._label(self._read())})"

    @asynccontextmanager
    async def session(self, *, concurrency: int | None = None) -> AsyncIterator[_CallableSession]:
        """Open a session; ``concurrency`` caps the threads a sync callable occupies."""
        who = self.identity
        call = UserCode(self._fn, who, concurrency or DEFAULT_MAX_THREADS)
        async with call.open():
            yield _CallableSession(call, who, _accepts_seed(self._fn))


def warn_if_partial(client: object, warned: set[str]) -> None:
    """Warn once (per identity in ``warned``) when ``client`` is an unnamed callable that
    reads something its identity does not hold: a cache may then replay answers given before
    a change there."""
    if not isinstance(client, CallableClient):
        return
    read = client._read()
    if read is None or not read.unseen:
        return
    identity = f"callable:{client._label(read)}"
    if identity in warned:
        return
    warned.add(identity)
    warnings.warn(
        f"{identity}: this callable has no name, so its cache identity is its qualified name "
        "and a hash of its code, defaults, closure and the globals it reads (plain values by "
        f"value, others by type). Not part of it: {_listed(read.unseen)}; nor the code of the "
        "functions it calls. A change there is not seen, and the answers cached before it would be "
        "replayed. To make the identity exact, name it: CallableClient(fn, name=..., "
        "version=...), and change the version whenever the model or its settings change",
        IdentityWarning,
        stacklevel=user_stacklevel(),
    )


def _listed(notes: Collection[str], shown: int = 6) -> str:
    items = list(notes)
    more = len(items) - shown
    return "; ".join(items[:shown]) + (f"; and {more} more" if more > 0 else "")

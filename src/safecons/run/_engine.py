"""The engine: the one place that runs the model calls of a plan.

Every front that makes model calls (the metric, ``swap_test``, ``audit_judge``, a Ray actor)
hands the engine its *units*, the pieces of work of its plan, each a coroutine function that
makes its calls through :meth:`Engine.call`; the engine does the rest, once for all of them:
the response cache, the runner (one limiter, retries with backoff honouring ``Retry-After``,
per-call timeouts, the ``max_calls`` budget), the sessions of the clients (whose secrets are
scrubbed from every error of the run), the gate that starts units in order, the progress bar.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TypeVar

import anyio
import anyio.abc

from .._tokens import request_tokens
from ..clients import MAX_BATCH_LINES, ChatClient
from ..clients._house import Attempt, BatchedSession, RunSession, batch_api, open_session
from ._batches import Batcher
from ._cache import opened_cache
from ._calls import CallKind, ModelCall
from ._options import RunOptions
from ._runner import CallOutcome, Runner, UnitGate, first_exception, progress_bar, run_in_order

__all__ = ("Engine", "call_tokens", "engine")

T = TypeVar("T")

#: Units in progress per permit of the limiter: with twice as many units as permits, the
#: limiter stays busy while some units wait to make their next attempt.
UNITS_PER_PERMIT = 2


def call_tokens(call: ModelCall) -> int:
    """What ``call`` costs against a tokens-per-minute limit, by its provider's count at
    admission: its prompt's estimate plus the ``max_tokens`` (or ``max_completion_tokens``)
    its client's ``params`` set (:func:`safecons._tokens.request_tokens`); the model, for the
    tokenizer, is the one its endpoint's identity (``url#model``) names.

    Examples
    --------
    >>> from safecons.run._calls import Endpoint, ModelCall
    >>> from safecons._tokens import estimate_tokens
    >>> msgs = [{"role": "user", "content": "hi"}]
    >>> call = ModelCall("sut", Endpoint("u#m", {"params": {"max_tokens": 50}}), msgs, 0.0, "0")
    >>> call_tokens(call) == estimate_tokens(msgs, model="m") + 50
    True
    """
    params = call.endpoint.request.get("params")
    return request_tokens(
        call.messages,
        model=call.endpoint.identity.rpartition("#")[2] or None,
        params=params if isinstance(params, Mapping) else None,
    )


class Engine:
    """One run of model calls, open for as long as its :func:`engine` block runs.

    Parameters
    ----------
    options
        The run's options (concurrency, retries per kind of call, timeout, budget, progress).
    runner
        Makes each call (shared with other engines when a caller scores in batches).
    stack
        Where the sessions the engine opens are closed when the block ends.
    """

    def __init__(
        self,
        options: RunOptions,
        runner: Runner,
        stack: AsyncExitStack,
        tasks: anyio.abc.TaskGroup | None = None,
    ) -> None:
        self.options = options
        self.runner = runner
        self._stack = stack
        self._tasks = tasks
        self._gate = UnitGate(UNITS_PER_PERMIT * options.concurrency_limit)
        self._batcher: Batcher | None = None

    def protect(self, client: object) -> None:
        """Scrub ``client``'s secrets from every error of the run (and, with a cache, warn
        once when its identity is a guess)."""
        self.runner.protect(client)

    async def session(self, client: ChatClient) -> RunSession:
        """A session of ``client`` for as long as the engine is open."""
        self.protect(client)
        session = await self._stack.enter_async_context(
            open_session(client, concurrency=self.options.concurrency_limit)
        )
        return await self.adapt(client, session)

    async def adapt(self, client: ChatClient, session: RunSession) -> RunSession:
        """``session``, or, for a client made with ``batch=True``, a session whose calls are
        lines of the provider's batches (:mod:`safecons.run._batches`)."""
        api = batch_api(client)
        if api is None:
            return session
        if self._tasks is None:
            raise RuntimeError("an engine made without a task group cannot batch")
        batcher = self._batcher
        if batcher is None:
            batcher = self._batcher = Batcher(
                self.runner.cache, progress=self.options.progress, gate_waiting=self._gate.full
            )
            # Units park until their batch ends: let as many start as one batch can hold.
            self._gate.widen(MAX_BATCH_LINES)
            self._tasks.start_soon(batcher.serve)
        return BatchedSession(session, api, batcher.add(api))  # type: ignore[arg-type]

    async def enter(self, context: AbstractAsyncContextManager[T]) -> T:
        """Enter ``context`` (a judge's session, say) until the engine closes."""
        return await self._stack.enter_async_context(context)

    async def call(
        self,
        kind: CallKind,
        attempt: Callable[[Attempt], Awaitable[T]],
        *,
        call: ModelCall | None,
        endpoint: str,
        encode: Callable[[T], str] | None = None,
        decode: Callable[[str], T] | None = None,
        budgeted: bool = True,
    ) -> CallOutcome[T]:
        """Make one call of the plan: replayed where the cache holds ``call``'s key, else up to
        ``retries[kind] + 1`` attempts of ``attempt``, its unit lending its place in the gate
        while it backs off. ``call=None`` (a local judge) is never cached, nor paced by
        tokens (:func:`call_tokens`)."""
        runner = self.runner
        batcher = self._batcher
        if batcher is not None and call is not None and endpoint in batcher.endpoints:
            return await self._batched(
                kind, attempt=attempt, call=call, endpoint=endpoint, encode=encode, decode=decode
            )
        return await runner.call(
            attempt,
            retries=self.options.retries[kind],
            kind=kind,
            # No cache, no key: hashing every request would be work for nothing.
            cache_key=None if call is None or runner.cache is None else call.key,
            endpoint=endpoint,
            encode=encode,
            decode=decode,
            # A batched run does not lend a backing-off unit's place: the batcher counts a
            # unit waiting for its place again as neither parked nor done, so lending it could
            # leave the run waiting for a unit that waits for the run.
            while_backing_off=self._gate.lend if batcher is None else None,
            budgeted=budgeted,
            # A function, not a number: the permits work it out only for an endpoint whose
            # provider has said how many tokens remain, so other runs never count tokens.
            tokens=None if call is None else functools.partial(call_tokens, call),
        )

    async def _batched(
        self,
        kind: CallKind,
        *,
        attempt: Callable[[Attempt], Awaitable[T]],
        call: ModelCall,
        endpoint: str,
        encode: Callable[[T], str] | None,
        decode: Callable[[str], T] | None,
    ) -> CallOutcome[T]:
        """A call whose attempts are lines of a provider batch, each keyed by the call's key
        (its ``custom_id``): no permit, no per-attempt timeout (a batch has 24 hours)."""
        key = call.key
        got = await self.runner.call(
            attempt,
            retries=self.options.retries[kind],
            kind=kind,
            cache_key=key,
            endpoint=endpoint,
            encode=encode,
            decode=decode,
            line=key,
        )
        return got if got.cached or not got.attempts else dataclasses.replace(got, batched=True)

    async def each(
        self, units: Iterable[Callable[[], Awaitable[None]]], *, total: int, desc: str, unit: str
    ) -> None:
        """Run ``units`` (``total`` of them), started in order through the gate, with a
        progress bar named ``desc`` counting ``unit``\\ s; the first error a unit raises ends
        the others and is raised."""
        bar = progress_bar(total, self.options.progress, desc=desc, unit=unit)
        if self._batcher is not None:
            units = self._batcher.tracked(units)
        notices = self.runner.notices
        notices.bar = bar  # a long wait for a provider's word shows on it
        try:
            await run_in_order(units, gate=self._gate, bar=bar)
        finally:
            notices.bar = None


@asynccontextmanager
async def engine(options: RunOptions, *, runner: Runner | None = None) -> AsyncIterator[Engine]:
    """An :class:`Engine` for ``options``; the cache it opens and the sessions it opens on
    the way are closed when the block ends.

    ``runner`` shares one limiter, budget and cache across several engines (the batches of a
    LazyFrame, an actor's batches); without one, a runner is made from ``options``.

    Examples
    --------
    >>> import anyio
    >>> from safecons.run._house import RunOptions, engine
    >>> async def main():
    ...     async with engine(RunOptions(progress=False, cache=False)) as run:
    ...         async def answer(_attempt):
    ...             return "ok"
    ...         got = await run.call("sut", answer, call=None, endpoint="example")
    ...         return got.value, got.attempts
    >>> anyio.run(main)
    ('ok', 1)
    """
    try:
        async with AsyncExitStack() as stack:
            if runner is None:
                runner = options.runner(stack.enter_context(opened_cache(options.cache)))
            # Where a batched run's sender works, stopped once the sessions are closed. Not
            # on the exit stack: a task group that re-raises the cancellation it was exited
            # with makes that exception its own context there, and asyncio's task-group
            # bookkeeping then walks the chain for ever.
            async with anyio.create_task_group() as tasks:
                try:
                    async with AsyncExitStack() as sessions:
                        yield Engine(options, runner, sessions, tasks)
                finally:
                    tasks.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        first = first_exception(group)
        if isinstance(first, anyio.get_cancelled_exc_class()):
            raise
        raise first from None

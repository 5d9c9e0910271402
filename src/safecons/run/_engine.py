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

from .._progress import progress_bar
from .._tokens import request_tokens
from ..clients import ChatClient
from ..clients._internal import Attempt, RunSession, open_session
from ._cache import opened_cache
from ._calls import CallKind, ModelCall
from ._options import RunOptions
from ._runner import CallOutcome, Runner, UnitGate, first_exception, run_in_order

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
        Makes each call (shared with other engines when a caller scores in parts).
    stack
        Where the sessions the engine opens are closed when the block ends.
    """

    def __init__(
        self,
        options: RunOptions,
        runner: Runner,
        stack: AsyncExitStack,
    ) -> None:
        self.options = options
        self.runner = runner
        self._stack = stack
        self._gate = UnitGate(UNITS_PER_PERMIT * options.concurrency_limit)
        self._held = 0  # the most calls an open session lets wait at once

    def protect(self, client: object) -> None:
        """Scrub ``client``'s secrets from every error of the run (and, with a cache, warn
        once when it is an unnamed callable that reads what its identity does not hold)."""
        self.runner.protect(client)

    async def session(self, client: ChatClient) -> RunSession:
        """A session of ``client`` for as long as the engine is open.

        A session whose calls wait for answers that come later (:attr:`RunSession.holds`)
        lets as many more units start as it may hold calls: they wait on their calls, and
        the session sends them together.
        """
        self.protect(client)
        options = self.options
        session = await self._stack.enter_async_context(
            open_session(
                client,
                concurrency=options.concurrency_limit,
                ledger=None if self.runner.cache is None else self.runner.cache.ledger,
                progress=options.progress,
            )
        )
        if session.holds > self._held:
            self._gate.widen(session.holds - self._held)
            self._held = session.holds
        return session

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
        deferred: bool = False,
    ) -> CallOutcome[T]:
        """Make one call of the plan: replayed where the cache holds ``call``'s key, else up to
        ``retries[kind] + 1`` attempts of ``attempt``, its unit lending its place in the gate
        while it backs off. ``call=None`` (a local judge) is never cached, nor paced by
        tokens (:func:`call_tokens`). ``deferred``: the call's session holds its calls
        (:attr:`RunSession.holds`): each attempt is handed the call's key, takes no permit
        and has no per-attempt timeout."""
        runner = self.runner
        if deferred and call is None:
            raise RuntimeError("a deferred call was made without its ModelCall (a safecons bug)")
        got = await runner.call(
            attempt,
            retries=self.options.retries[kind],
            kind=kind,
            # No cache, no key: hashing every request would be work for nothing.
            cache_key=None if call is None or runner.cache is None else call.key,
            endpoint=endpoint,
            encode=encode,
            decode=decode,
            while_backing_off=self._gate.lend,
            budgeted=budgeted,
            deferred=deferred,
            key=call.key if deferred and call is not None else None,
            # A function, not a number: the permits work it out only for an endpoint whose
            # provider has said how many tokens remain, so other runs never count tokens.
            tokens=None if call is None else functools.partial(call_tokens, call),
        )
        if deferred and not got.cached and got.attempts:
            return dataclasses.replace(got, deferred=True)
        return got

    async def each(
        self, units: Iterable[Callable[[], Awaitable[None]]], *, total: int, desc: str, unit: str
    ) -> None:
        """Run ``units`` (``total`` of them), started in order through the gate, with a
        progress bar named ``desc`` counting ``unit``\\ s; the first error a unit raises ends
        the others and is raised."""
        bar = progress_bar(total, self.options.progress, desc=desc, unit=unit)
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

    ``runner`` shares one limiter, budget and cache across several engines (the parts of a
    LazyFrame, an actor's frames); without one, a runner is made from ``options``.

    Examples
    --------
    >>> import anyio
    >>> from safecons.run import RunOptions, engine
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
            yield Engine(options, runner, stack)
    except BaseExceptionGroup as group:  # only a group, and nothing swallowed: its first error
        first = first_exception(group)
        if isinstance(first, anyio.get_cancelled_exc_class()):
            raise
        raise first from None

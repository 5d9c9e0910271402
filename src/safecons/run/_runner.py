"""The async core: one capacity limiter per run, retries with backoff, per-call timeouts.

Only this module and :mod:`safecons.clients` are async. A *call* is one logical request (one
SUT sample, one judge comparison); it is made of up to ``retries + 1`` failed *attempts* (a 429
spends no retry, within a bound: :meth:`Runner.call`). A slot of the
run's :class:`anyio.CapacityLimiter` is held for exactly one attempt, so a call that is backing
off leaves its slot to others.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import itertools
import math
import random
import sqlite3
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._foreign import describe_exception, safe_text
from .._tasks import in_asyncio_loop
from .._text import valid_unicode
from ..clients import CallFailed, NonRetryableCallError, RateLimits, RetryableCallError
from ..clients._internal import AnsweredElsewhere, Attempt, Secrets, secrets_of, warn_if_partial
from ..errors import CacheError, CacheWarning
from ._cache import ResponseCache
from ._permits import LocalPermits, PaceNotices, Permits, Slot, Tokens

__all__ = (
    "MAX_RATE_LIMITED_FREE",
    "MAX_RETRY_AFTER_SECONDS",
    "RATE_LIMIT_PATIENCE_SECONDS",
    "CallOutcome",
    "RetryPolicy",
    "RunStats",
    "Runner",
    "UnitGate",
    "first_exception",
    "portal_call",
    "replay",
    "run_in_order",
    "run_sync",
)

T = TypeVar("T")

#: The longest a server's ``Retry-After`` is honoured (seconds): a run never sleeps longer on
#: one answer, whatever a misconfigured or hostile server asks.
MAX_RETRY_AFTER_SECONDS = 60.0
#: How long one call may back off on 429s (seconds, summed) before they spend its retries:
#: a 429 that says when to come back is the provider asking to wait, not a failure of the
#: call, up to this bound. (A bare 429, which says nothing of when, spends a retry: it may be
#: a quota that waiting does not mend.)
RATE_LIMIT_PATIENCE_SECONDS = 600.0
#: The most 429s of one call that do not spend its retries (whatever their waits add up to):
#: a server answering 429 with no wait at all cannot keep a call asking for ever.
MAX_RATE_LIMITED_FREE = 100


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
    max_retry_after: float = MAX_RETRY_AFTER_SECONDS

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None and math.isfinite(retry_after):
            wait = min(max(retry_after, 0.0), self.max_retry_after)
            return wait + rng.uniform(0.0, 0.1 * wait)
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


@dataclass(slots=True)
class RunStats:
    """What only the run itself can know (its frame records every call's spend): the calls in
    flight now, the most in flight at once, and the lowest in-flight target adaptive pressure
    reached."""

    in_flight: int = 0
    max_in_flight: int = 0
    min_target: int = 0
    #: Usage figures answers reported that were impossible, read as not reported.
    dropped_usage: int = 0


@dataclass(slots=True)
class _Tally:
    """One call's attempts so far: how many started, how many were 429s, and what the last
    failed one left (its error, the server's ``Retry-After``, an unusable output)."""

    made: int = 0
    limited: int = 0
    asked_to_wait: bool = False  # the last attempt was a 429 that said when to come back
    free: int = 0  # 429s that did not spend a retry
    waited: float = 0.0  # seconds backed off after those
    error: str = "no attempt made"
    retry_after: float | None = None
    output: str | None = None


@dataclass(frozen=True, slots=True)
class _Ended(Generic[T]):
    """An attempt that ends its call: a value, or a failure another attempt cannot mend."""

    value: T | None
    error: str | None
    #: Another run sharing the cache answered the call meanwhile: replay its answer.
    elsewhere: bool = False


@dataclass(frozen=True, slots=True)
class CallOutcome(Generic[T]):
    """The result of a call: a value, or the last attempt's error, and the attempts made.

    ``cached`` marks a value replayed from the response cache (no attempt made); ``skipped``
    a call not made because the run's ``max_calls`` budget was spent; ``rate_limited`` counts
    the 429 answers among the attempts; ``output`` is the last unusable output a failed call
    got (a judge reply that did not parse), for the user to see what the model said;
    ``deferred`` marks a call that a session holding its calls answered (or failed), such
    as a client that sends its calls later together (:attr:`RunSession.holds`).
    """

    value: T | None
    error: str | None
    attempts: int
    cached: bool = False
    skipped: bool = False
    rate_limited: int = 0
    output: str | None = None
    deferred: bool = False


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
    cache
        Response cache: a call with a ``cache_key`` is replayed from it when present and
        stored in it (one write) as soon as it succeeds.
    max_calls
        Budget of network attempts for the run; once spent, calls are skipped (not made) and
        say so. None: no cap.
    adaptive
        Lower the in-flight target when the server answers 429, then recover (see
        :class:`~safecons.run._policy.EndpointPolicy`, each endpoint's own).
    permits
        Where each attempt gets its permit; default: :class:`~safecons.run._permits.LocalPermits`
        of ``concurrency_limit`` (and ``adaptive``), this process's own. A Ray job passes
        permits leased from one table for all of its actors.
    """

    def __init__(
        self,
        *,
        concurrency_limit: int,
        timeout_seconds: float,
        policy: RetryPolicy | None = None,
        seed: int = 0,
        cache: ResponseCache | None = None,
        max_calls: int | None = None,
        adaptive: bool = True,
        permits: Permits | None = None,
    ) -> None:
        #: Where a long paced wait is shown (the engine hands it its progress bar).
        self.notices = PaceNotices()
        self.permits: Permits = (
            LocalPermits(concurrency_limit, adaptive=adaptive, notices=self.notices)
            if permits is None
            else permits
        )
        self.timeout_seconds = timeout_seconds
        self.policy = policy or RetryPolicy()
        self.stats = RunStats(min_target=concurrency_limit)
        self.cache = cache
        self.max_calls = max_calls
        self._spent = 0
        self._cache_warned = False
        self._partial: set[str] = set()  # callables already warned about
        self._rng = random.Random(seed)
        self.secrets = Secrets()

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The capacity limiter of a runner with its own permits."""
        if not isinstance(self.permits, LocalPermits):
            raise AttributeError("this runner's permits are leased, it has no limiter of its own")
        return self.permits.limiter

    def _store(
        self, cache: ResponseCache, key: str, kind: str, endpoint: str, value: str
    ) -> str | None:
        """Store ``value``; return the value the cache holds (another run's may have won)."""
        # The answer is in hand: a cache that cannot take it (disk full, file removed) costs
        # the resume, not the run. Warn once and carry on.
        try:
            return cache.put(key, kind=kind, endpoint=endpoint, value=value)
        # ValueError: sqlite3 refuses text it cannot encode (UnicodeEncodeError) or a number
        # too large for it (OverflowError is an ArithmeticError, named apart).
        except (sqlite3.Error, OSError, CacheError, ValueError, OverflowError) as exc:
            self._warn_once(cache, f"could not store a {kind} answer ({type(exc).__name__}: {exc})")
            return None

    def _lookup(self, cache: ResponseCache, key: str) -> str | None:
        """The stored value for ``key``; a cache that cannot be read costs a miss, not the run."""
        try:
            return cache.get(key)
        except (sqlite3.Error, OSError, CacheError) as exc:
            self._warn_once(cache, f"could not read a stored answer ({type(exc).__name__}: {exc})")
            return None

    def _warn_once(self, cache: ResponseCache, problem: str) -> None:
        if not self._cache_warned:
            self._cache_warned = True
            warnings.warn(
                f"response cache {cache}: {problem}; the run goes on, but calls that are not "
                "stored will be requested again by a rerun",
                CacheWarning,
                stacklevel=3,
            )

    def protect(self, client: object) -> None:
        """Take in a client the run uses: scrub its secrets (its key, auth headers) from every
        error of the run, and, with a cache, warn once when the client is an unnamed callable
        that reads what its identity does not hold (a replay could then be of answers from
        before a change there)."""
        self.secrets = self.secrets | secrets_of(client)
        if self.cache is not None:
            warn_if_partial(client, self._partial)

    @property
    def budget_spent(self) -> bool:
        """Whether ``max_calls`` attempts have been made."""
        return self.max_calls is not None and self._spent >= self.max_calls

    async def call(
        self,
        attempt: Callable[[Attempt], Awaitable[T]],
        *,
        retries: int,
        kind: str,
        cache_key: str | None = None,
        endpoint: str = "",
        encode: Callable[[T], str] | None = None,
        decode: Callable[[str], T] | None = None,
        while_backing_off: Callable[[], AbstractAsyncContextManager[None]] | None = None,
        budgeted: bool = True,
        deferred: bool = False,
        key: str | None = None,
        tokens: Tokens = None,
    ) -> CallOutcome[T]:
        """Make up to ``retries + 1`` failed attempts of ``attempt`` and return the outcome.

        A 429 (a :class:`~safecons.clients.RetryableCallError` with ``rate_limited``) that says
        when to come back (``Retry-After``, or a reset time in its rate-limit headers) is the
        provider asking to wait, not a failure: it does not spend one of the ``retries`` until
        the call has backed off :data:`RATE_LIMIT_PATIENCE_SECONDS` on 429s or had
        :data:`MAX_RATE_LIMITED_FREE` of them. It is still an attempt made: it counts in the
        outcome's ``attempts`` and ``rate_limited`` and in the ``max_calls`` budget.

        The steps: replay the value stored under ``cache_key`` (with ``encode``/``decode``) if there
        is one; else, while the ``max_calls`` budget allows, make an attempt (call ``attempt`` with
        its :class:`~safecons.clients._base.Attempt`, which the session reports on) under a permit
        and within the timeout, back off before the next; store a value as soon as one comes.
        ``while_backing_off`` wraps each backoff sleep (the caller can lend out its own resources
        while the call waits). ``budgeted=False`` keeps a local call (a judge object, no network)
        out of ``max_calls``. ``deferred`` says the session holds its calls and
        waits for their answers with nothing in flight (:attr:`RunSession.holds`): such an
        attempt takes no permit and has no timeout (the provider's window is its deadline).
        ``key`` (the call's cache key) is handed to each attempt (:attr:`Attempt.key`: the id
        the session gives the call). ``tokens`` is each attempt's estimated tokens, for the
        permits to pace the endpoint under a tokens-per-minute limit
        (:data:`~safecons.run._permits.Tokens`).

        Only a failed attempt is a row's error: a :class:`~safecons.clients.CallFailed` that
        a client or the user's code raised (transport, server, unusable output, a user's
        function failing), or the timeout. :class:`~safecons.AuthenticationError` ends the
        run, and so does any other exception: that is a bug, and it must not pass as data.
        """
        caching = (
            self.cache is not None
            and cache_key is not None
            and encode is not None
            and decode is not None
        )
        if caching:
            assert self.cache is not None and cache_key is not None and decode is not None
            replayed = replay(self._lookup(self.cache, cache_key), decode, self.secrets)
            if replayed is not None:
                return CallOutcome(value=replayed, error=None, attempts=0, cached=True)
        tally = _Tally()
        failed = 0  # attempts that spent a retry
        for n in itertools.count():
            if budgeted and self.budget_spent:
                return self._skipped(tally)
            ended = await self._attempt(
                attempt,
                tally,
                endpoint=endpoint,
                budgeted=budgeted,
                deferred=deferred,
                key=key,
                tokens=tokens,
            )
            if ended is not None and ended.elsewhere:
                # Stored by another run after this one missed the cache (a session that holds
                # its calls found the answer there): replayed, not bought again. One that
                # does not replay is asked for with the next attempt.
                if caching:
                    assert self.cache is not None and cache_key is not None and decode is not None
                    replayed = replay(self._lookup(self.cache, cache_key), decode, self.secrets)
                    if replayed is not None:
                        return CallOutcome(value=replayed, error=None, attempts=0, cached=True)
                continue
            if ended is None:
                free = tally.asked_to_wait and self._patient(tally)
                failed += not free
                if failed > retries:
                    break
                waited = await self._back_off(n, tally.retry_after, while_backing_off)
                tally.waited += waited if free else 0.0
                continue
            value = ended.value
            if value is not None and caching:
                assert encode is not None and decode is not None and cache_key is not None
                value = self._keep(
                    cache_key,
                    kind=kind,
                    endpoint=endpoint,
                    value=value,
                    encode=encode,
                    decode=decode,
                )
            return self._outcome(value, ended.error, tally)
        plural = "s" if tally.made != 1 else ""
        return self._outcome(None, f"{tally.error} ({tally.made} attempt{plural})", tally)

    async def _attempt(
        self,
        attempt: Callable[[Attempt], Awaitable[T]],
        tally: _Tally,
        *,
        endpoint: str,
        budgeted: bool,
        deferred: bool = False,
        key: str | None = None,
        tokens: Tokens = None,
    ) -> _Ended[T] | None:
        """One attempt under a permit and the timeout: how it ended the call, or None when
        another attempt may mend it (what it left is in ``tally``)."""
        stats = self.stats
        if budgeted:
            self._spent += 1
        tally.retry_after, tally.asked_to_wait = None, False
        start = Attempt(key=key)
        succeeded = False
        permits = _no_permit() if deferred else self.permits.slot(endpoint, tokens=tokens)
        async with permits as permit:
            # A deferred call has no timeout: the provider's window is its deadline.
            deadline = math.inf if deferred else anyio.current_time() + self.timeout_seconds
            # A deferred call waiting for its answer is not in flight: it holds no connection.
            stats.in_flight += not deferred
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            try:
                # anyio.fail_after's cancel scope, without its generator, on every attempt's path.
                with anyio.CancelScope(deadline=deadline) as scope:
                    value = await attempt(start)
                if scope.cancelled_caught:
                    raise TimeoutError
            except TimeoutError:
                tally.error = self._timed_out(start)
            except AnsweredElsewhere:
                return _Ended(None, None, elsewhere=True)
            except NonRetryableCallError as exc:
                tally.output = _kept_output(exc) or tally.output
                return _Ended(None, _failure_text(exc))
            except RetryableCallError as exc:
                tally.error, tally.retry_after = _failure_text(exc), _given_wait(exc)
                tally.output = _kept_output(exc) or tally.output
                # A client of the user's own may say what the provider said only here.
                given = exc.rate_limits if isinstance(exc.rate_limits, RateLimits) else None
                start.rate_limits = start.rate_limits or given
                if exc.rate_limited:
                    tally.limited += 1
                    limits = start.rate_limits
                    tally.asked_to_wait = tally.retry_after is not None or (
                        limits is not None
                        and (limits.reset_requests is not None or limits.reset_tokens is not None)
                    )
                    permit.rate_limited(tally.retry_after)
            except CallFailed as exc:
                tally.error = _failure_text(exc)
            else:
                succeeded = True
                permit.succeeded()
                return _Ended(value, None)
            finally:
                permit.rate_limits = start.rate_limits  # the endpoint is paced by it
                stats.in_flight -= not deferred
                stats.min_target = min(stats.min_target, self.permits.lowest_target)
                tally.made += start.started or succeeded
                if budgeted and not start.started:
                    self._spent -= 1  # nothing was sent: the budget is not spent
        return None

    @staticmethod
    def _patient(tally: _Tally) -> bool:
        """Whether the 429 just counted in ``tally`` leaves the call's retries whole: until
        the call has backed off :data:`RATE_LIMIT_PATIENCE_SECONDS` on 429s, or had
        :data:`MAX_RATE_LIMITED_FREE` of them; past either, a 429 spends a retry as any
        failure does."""
        if tally.free >= MAX_RATE_LIMITED_FREE or tally.waited >= RATE_LIMIT_PATIENCE_SECONDS:
            return False
        tally.free += 1
        return True

    def _timed_out(self, start: Attempt) -> str:
        if start.started:
            return f"timed out after {self.timeout_seconds:g} s"
        return (
            f"not started within {self.timeout_seconds:g} s: the client had no free capacity "
            "(a sync callable's threads are all still running calls that overran their timeout)"
        )

    async def _back_off(
        self,
        n: int,
        retry_after: float | None,
        while_backing_off: Callable[[], AbstractAsyncContextManager[None]] | None,
    ) -> float:
        """Sleep before the next attempt; the seconds slept."""
        delay = self.policy.delay(n, retry_after, self._rng)
        if while_backing_off is None:
            await anyio.sleep(delay)
            return delay
        async with while_backing_off():
            await anyio.sleep(delay)
        return delay

    def _keep(
        self,
        key: str,
        *,
        kind: str,
        endpoint: str,
        value: T,
        encode: Callable[[T], str],
        decode: Callable[[str], T],
    ) -> T:
        """Store ``value``; the value to use is the one the cache holds after."""
        assert self.cache is not None
        mine = encode(value)
        kept = self._store(self.cache, key, kind, endpoint, mine)
        if kept is not None and kept != mine:
            # Another run sharing the file answered this call first: use its answer, which
            # is what every rerun will replay (unless it no longer decodes).
            theirs = replay(kept, decode, self.secrets)
            if theirs is not None:
                return theirs
        return value

    def _skipped(self, tally: _Tally) -> CallOutcome[T]:
        spent = f"the run's max_calls budget ({self.max_calls}) was spent"
        made = tally.made
        message = (
            f"not run: {spent}"
            if made == 0
            else f"{tally.error} ({made} attempt{'s' if made > 1 else ''}; then {spent})"
        )
        return self._outcome(None, message, tally, skipped=True)

    def _outcome(
        self, value: T | None, error: str | None, tally: _Tally, *, skipped: bool = False
    ) -> CallOutcome[T]:
        # Defence in depth: every client scrubs what its server sends, and the run scrubs
        # every error and output it keeps once more with the secrets of all of its clients.
        # Both become valid Unicode here, the one place every kept error passes: an exception
        # text with a lone surrogate (from a server's JSON or a user's function) cannot be
        # stored in a frame or a cache, and found out only when the frame is built, it would
        # lose a run whose every call was paid for.
        scrub = self.secrets.scrub
        output = None if value is not None else tally.output
        return CallOutcome(
            value=value,
            error=None if error is None else valid_unicode(scrub(error)),
            attempts=tally.made,
            skipped=skipped,
            rate_limited=tally.limited,
            output=None if output is None else valid_unicode(scrub(output)),
        )


@asynccontextmanager
async def _no_permit() -> AsyncIterator[Slot]:
    """What a deferred call holds in place of a permit: nothing that others wait for."""
    yield Slot(0.0)


def replay(stored: str | None, decode: Callable[[str], T], secrets: Secrets) -> T | None:
    """What a stored value replays as, or None for a miss; the run and the dry run share it.

    A file written before a secret was known to the scrubber must not replay it, so the stored
    text is scrubbed first; an entry that does not decode (a judge output that no longer
    parses under the judge's limits, a file another program wrote into) is a miss, not a
    failure.
    """
    if stored is None:
        return None
    try:
        return decode(secrets.scrub(stored))
    except (ValueError, TypeError, LookupError, RecursionError):
        return None


class UnitGate:
    """Bounds how many units of work are in progress, so work starts in order.

    A unit is one logical piece of work made of calls (a SUT sample and its judge call). With
    the gate, a row's judge call queues right behind its SUT answer instead of behind every
    SUT call of the frame. A unit that backs off lends its place (:meth:`lend`) and queues for
    it again before its next attempt, so waiting retries never hold the run up.
    """

    def __init__(self, size: int) -> None:
        self._semaphore = anyio.Semaphore(size)
        self._waiting = 0  # units blocked waiting for a place

    def full(self) -> bool:
        """Whether a unit waits for a place (no more start until one ends)."""
        return self._waiting > 0

    def widen(self, places: int) -> None:
        """Let ``places`` more units be in progress at once."""
        for _ in range(places):
            self._semaphore.release()

    async def acquire(self) -> None:
        try:
            self._semaphore.acquire_nowait()
        except anyio.WouldBlock:
            pass
        else:
            await anyio.lowlevel.checkpoint()
            return
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1

    def release(self) -> None:
        self._semaphore.release()

    @asynccontextmanager
    async def lend(self) -> AsyncIterator[None]:
        self._semaphore.release()
        try:
            yield
        finally:
            await self._semaphore.acquire()


async def run_in_order(
    jobs: Iterable[Callable[[], Awaitable[None]]], *, gate: UnitGate, bar: Any = None
) -> None:
    """Start ``jobs`` in order, as many at once as ``gate`` allows, and wait for all.

    ``bar`` (a progress bar) advances as each job ends and is closed at the end. If a job raises (an
    :class:`~safecons.AuthenticationError` ending the run), the others are cancelled and that
    one error is raised, not a group of them.
    """

    async def guarded(job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        finally:
            gate.release()
        # Only work that ended counts as done: a cancelled run's bar stops where it stopped.
        if bar is not None:
            bar.update(1)

    try:
        async with anyio.create_task_group() as tg:
            # A place first, then the next job: a job is taken only to start at once.
            pending = iter(jobs)
            while True:
                await gate.acquire()
                job = next(pending, None)
                if job is None:
                    gate.release()
                    break
                # Named: anyio would otherwise work a name out of each job's callable.
                tg.start_soon(guarded, job, name="safecons unit")
    except BaseExceptionGroup as group:  # only a group, and nothing swallowed: its first error
        raise first_exception(group) from None
    finally:
        if bar is not None:
            bar.close()


def first_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of an exception group: one clear error instead of a group of them."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def run_sync(
    fn: Callable[..., Awaitable[T]], /, *args: Any, keep: object = None, **kwargs: Any
) -> T:
    """Run the coroutine function ``fn`` to completion from synchronous code.

    Works in a plain script and inside a running event loop (a Jupyter cell): there the work
    runs on a fresh loop in a worker thread through an anyio blocking portal, because the
    notebook's own loop cannot be re-entered. ``keep`` (the run's ``cache=`` argument) is
    named in the message of a Ctrl-C or kernel interrupt, which says what was kept and how to
    continue.
    """
    call = functools.partial(fn, *args, **kwargs)
    try:
        with heap_frozen():
            if not in_asyncio_loop():
                return anyio.run(call)
            with anyio.from_thread.start_blocking_portal() as portal:
                return portal_call(portal, call)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_interrupted(keep)) from None


#: Allocations between two passes of the cyclic collector's youngest generation during a
#: sync run (Python's default is 700).
YOUNG_THRESHOLD: Final = 10_000


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Leave the objects that exist now out of the cyclic collector's passes until the block
    ends (:func:`gc.freeze`, then :func:`gc.unfreeze`), and pass over the youngest
    generation every :data:`YOUNG_THRESHOLD` allocations instead of every 700.

    A run allocates some thousands of objects a second; each pass of the collector's older
    generations walked the whole heap besides (every module, Polars, the caller's own
    objects), about a tenth of a sync run's CPU at 600 rows. What existed before the run is
    not collected during it (it is still freed when no longer referenced; only cyclic
    garbage among it waits for the block's end). A heap already frozen by its owner, or a
    collector switched off, is left as it is.

    The youngest generation's passes then still took about a tenth of the run's CPU: with
    64 calls in flight, each pass walked the same live tasks, coroutines and answers again
    (``docs/performance.md``). At most :data:`YOUNG_THRESHOLD` container objects wait for a
    pass (cyclic garbage among them is freed a little later; what no cycle holds is freed
    when no longer referenced, as always). The thresholds in force before are put back when
    the block ends; one its owner set higher is left as it is.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    try:
        if thresholds[0] < YOUNG_THRESHOLD:
            gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


#: How long the main thread waits on a portal between two looks at pending signals (seconds).
PORTAL_POLL_SECONDS = 0.05


def portal_call(
    portal: anyio.from_thread.BlockingPortal, fn: Callable[..., Awaitable[T]], *args: Any
) -> T:
    """``portal.call(fn, *args)``, waiting in slices so that an interrupt stops it at once.

    Importing polars installs a native SIGINT handler with ``SA_RESTART``
    (pola-rs/polars#21739). While it is in force (in a Jupyter cell that imported polars
    first: the kernel puts Python's handler back only after the cell), Ctrl-C or a kernel
    interrupt no longer wakes a thread blocked on a lock: an untimed wait, as
    ``portal.call``'s, would hear of it only when the whole run had ended, and then throw the
    finished frame away. A timed wait returns to the interpreter every
    :data:`PORTAL_POLL_SECONDS`, which runs the pending handler. On an interrupt the task is
    cancelled (the run keeps what it finished) and the interrupt propagates. The cancelled
    run's clean-up (closing connections and sessions, which may cancel work a provider
    still runs, at most 15 s) is waited for untimed as the portal closes: a
    second interrupt meanwhile is heard once it ends.
    """
    future = portal.start_task_soon(fn, *args)
    try:
        while not future.done():
            concurrent.futures.wait((future,), timeout=PORTAL_POLL_SECONDS)
    finally:
        # Reached undone only by an interrupt (or any error) in the wait: the task stops.
        if not future.done():
            future.cancel()
    return future.result()


def _interrupted(cache: object) -> str:
    from ._cache import get_default_cache

    where = cache if cache not in (None, True) else get_default_cache()
    if cache is False or where is None:
        return (
            "interrupted: the run was stopped and no cache was given, so its finished calls "
            "were not kept; pass cache='calls.sqlite' to keep them across interruptions"
        )
    return (
        f"interrupted: every call that finished before the interrupt is stored in the cache "
        f"{str(where)!r}; run the same call again with the same cache to continue (finished "
        "calls replay at no cost)"
    )


# A CallFailed may be raised by the user's own code (a client's session, a callable): what it
# carries is read here as a failed attempt's, whatever it holds.


def _failure_text(exc: CallFailed) -> str:
    """A failed attempt's error: its message, or its type when the message cannot be read."""
    text = safe_text(exc)
    return describe_exception(exc) if text is None else text


def _kept_output(exc: CallFailed) -> str | None:
    """What the model said, when the failure kept it as text."""
    output = exc.output
    return output if type(output) is str else None


def _given_wait(exc: RetryableCallError) -> float | None:
    """The wait a failure asked for, when it is a number of seconds from 0 up."""
    wait = exc.retry_after
    if isinstance(wait, bool) or not isinstance(wait, int | float):
        return None
    return float(wait) if math.isfinite(wait) and wait >= 0 else None

"""Batching a run's calls: the lines a ``batch=True`` client's calls park, the provider
batches they go out in, on the session's own schedule, and how a rerun picks a batch up.

A call of a batched session (:mod:`safecons.clients._batch_session`) parks its request as a
line (:meth:`Batcher.park`) instead of sending it. The batcher's sender (:meth:`Batcher.serve`)
sends the pending lines once none has come for the client's ``batch_wait_seconds``, once the
oldest has waited :data:`MAX_WAIT_SECONDS`, or at once when they fill a file
(:data:`~safecons.clients.MAX_BATCH_LINES` lines, :data:`~safecons.clients.MAX_BATCH_BYTES`
bytes): as few files as the API's limits allow, one batch each. It polls them and wakes each
call with its line's output record. A stage's calls start together and park within moments
of each other, so they go out together: the SUT's samples in one round, the judge's verdicts
(which need the SUT's answers) in the next. Nothing here knows the run's scheduler, and the
run knows nothing of batches: the session says that its calls wait, and the run lets that
many wait without a permit or a per-attempt timeout.

Resuming: every batch is recorded in the run's ledger (a
:class:`~safecons.clients._batch_claims.BatchLedger`, kept in the cache's file), with the keys
of the calls it answers, as soon as the provider has created it; its calls are claimed there
before its file is uploaded. A rerun with the same cache asks the provider for the recorded
batch of each of its calls before it makes a new one, so an interrupted notebook or CLI run
picks up the batch it paid for, and a second process waits for the first's batch. A recorded
batch that has ended without some of its lines (expired, cancelled, failed) is not waited on
again: those lines go in a new batch. A line that failed is forgotten, so the next run sends it
anew; answers are cached by the runner under the calls' own keys, which live calls share.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final

import anyio
import anyio.lowlevel

from .._progress import progress_bar
from .._tasks import user_stacklevel
from ..errors import AuthenticationError, BatchPickedUpWarning, BatchWarning, CacheWarning
from ._batch_api import (
    POLL_GRACE_SECONDS,
    UNREAD,
    UNSTATED_EXPIRY_SECONDS,
    BatchAPI,
    BatchError,
    BatchGone,
    BatchState,
)
from ._batch_claims import (
    LEDGER_ERRORS,
    BatchClaims,
    BatchLedger,
    ClaimLease,
    claim_tag,
    new_claim,
)

__all__ = ("MAX_WAIT_SECONDS", "STORED", "Batcher")

#: The longest the oldest pending line waits for more before the lines are sent (seconds):
#: a stage whose calls trickle in (a live SUT feeding a batched judge) still sends its lines.
MAX_WAIT_SECONDS: Final = 60.0

#: The first wait before looking at a batch again (seconds; doubling up to the client's
#: ``batch_poll_seconds``).
FIRST_POLL_SECONDS: Final = 1.0
#: Looks at a batch in a row that may fail (each after its own tries) before the run gives up
#: on it: its lines fail, and its record stays so that a rerun picks it up.
POLL_FAILURES: Final = 10
#: The longest a run waits for the provider to take a cancel, when interrupted (seconds).
CANCEL_SECONDS: Final = 15.0


@dataclass(slots=True)
class _Line:
    """One parked call: its line of JSONL, and, once its batch has ended, its output."""

    data: bytes
    done: anyio.Event = field(default_factory=anyio.Event)
    record: Mapping[str, Any] | None = None
    batch: str = ""

    def answer(self, record: Mapping[str, Any], batch: str) -> None:
        self.record, self.batch = record, batch
        self.done.set()


def _failure(code: str, message: str) -> dict[str, Any]:
    """An output record for a line that got no answer."""
    return {"response": None, "error": {"code": code, "message": message}}


#: The error code of a line whose call another run answered (and stored) meanwhile.
STORED: Final = "answered_meanwhile"
#: The error codes of a line the batch never ran (it ended first).
NOT_RUN: Final = frozenset({"batch_expired", "batch_cancelled"})


def _ran(record: Mapping[str, Any] | None) -> bool:
    """Whether ``record`` is what the provider made of running the line (an answer or the
    line's own error), not of the batch ending before it."""
    if record is None:
        return False
    error = record.get("error")
    return not (isinstance(error, Mapping) and error.get("code") in NOT_RUN)


def _answered(record: Mapping[str, Any]) -> bool:
    response = record.get("response")
    return isinstance(response, Mapping) and response.get("status_code") == HTTPStatus.OK


class Batcher:
    """The lines of one batched session, and the task that sends them (:meth:`serve`).

    ``api`` is the client's Batch API; ``ledger`` (the run's cache) records every batch, so
    that a rerun, a second process or a retry picks it up instead of making another; without
    one, a batch cannot be picked up again. ``wait`` is how long the pending lines wait for
    another after the last came (the client's ``batch_wait_seconds``).
    """

    def __init__(
        self,
        api: BatchAPI,
        ledger: BatchLedger | None,
        *,
        progress: bool,
        wait: float,
    ) -> None:
        self.api = api
        self._ledger = ledger
        self._progress = progress
        self._wait = wait
        self.lines: dict[str, _Line] = {}  # parked and in a batch, by custom_id
        self.pending: dict[str, _Line] = {}  # parked, not yet in a batch
        self._pending_bytes = 0
        self._first = self._last = 0.0  # when the oldest and the newest pending line came
        self._added = anyio.Event()
        self._warned: set[str] = set()
        self._delivered: set[str] = set()  # calls whose line was answered in this run
        # Recorded batches this run gave up on for a call: never picked up again for it, even
        # where the cache could not be told (read-only, a failed write).
        self._given_up: set[tuple[str, str]] = set()
        self._pruned = False

    async def park(self, custom_id: str, data: bytes) -> tuple[Mapping[str, Any], str]:
        """Park the line ``data`` of the call ``custom_id`` until the batch that holds it has
        ended: its output record and the batch's id. Two calls with one key share a line."""
        line = self.lines.get(custom_id)
        if line is None:
            line = self.lines[custom_id] = _Line(data)
            self._pend({custom_id: line})
        try:
            await line.done.wait()
        finally:
            if line.done.is_set():
                self.lines.pop(custom_id, None)
        self._delivered.add(custom_id)
        assert line.record is not None
        return line.record, line.batch

    def _pend(self, lines: Mapping[str, _Line]) -> None:
        now = anyio.current_time()
        if not self.pending:
            self._first = now
        self._last = now
        for key, line in lines.items():
            if key not in self.pending:
                self.pending[key] = line
                self._pending_bytes += len(line.data)
        self._added.set()

    def _take(self) -> dict[str, _Line]:
        taken, self.pending, self._pending_bytes = self.pending, {}, 0
        return taken

    async def _due(self) -> None:
        """Return once the pending lines are to go: none has come for ``wait`` seconds, the
        oldest has waited :data:`MAX_WAIT_SECONDS`, or they fill a file."""
        while True:
            self._added = anyio.Event()
            if not self.pending:
                await self._added.wait()
                continue
            api = self.api
            if len(self.pending) >= api.max_lines or self._pending_bytes >= api.max_bytes:
                return
            due = min(self._last + self._wait, self._first + MAX_WAIT_SECONDS)
            left = due - anyio.current_time()
            if left <= 0:
                return
            with anyio.move_on_after(left):
                await self._added.wait()

    async def serve(self) -> None:
        """Send the pending lines each time they are due (until cancelled), each lot in
        batches of its own while earlier ones still run.

        The connection to the Batch API is this task's own, opened on first use and closed
        after every batch it sent has been seen to: when the run is interrupted it is still
        open for cancelling or naming them.
        """
        async with AsyncExitStack() as stack:
            opened = False
            async with anyio.create_task_group() as tg:
                while True:
                    await self._due()
                    if not opened:
                        await stack.enter_async_context(self.api.open())
                        opened = True
                    tg.start_soon(self._send, self._take())

    async def _send(self, lines: dict[str, _Line]) -> None:
        """Put ``lines`` in batches (recorded ones first), and answer each once they end.

        Interrupted (Ctrl-C), every batch not yet ended is cancelled or left running, as the
        client says, and named (:meth:`_interrupted`).
        """
        api = self.api
        # A call whose answer this run already had is asked again (a verdict that did not
        # parse): its recorded batch holds that same answer, so it goes in a new one.
        held = self._recorded(api.identity, [k for k in lines if k not in self._delivered])
        for batch, keys in held.items():
            warnings.warn(
                f"{api.identity}: picked up batch {batch} ({len(keys):,} call(s)), made by an "
                "earlier run and recorded in the cache: no new charge",
                BatchPickedUpWarning,
                stacklevel=user_stacklevel(),
            )
        resumed, ended = set(held), set[str]()
        finished = False
        try:
            await self._create(api, lines, held, resumed)
            await self._wait_all(lines, held, resumed=resumed, ended=ended)
            finished = True
        finally:
            if not finished:
                # Interrupted, or ended by an error (a key the Batch API no longer takes): name
                # every batch still running (or cancel it, as the client says) before going.
                await self._interrupted_all(api, [b for b in held if b not in ended])

    async def _interrupted_all(self, api: BatchAPI, batches: list[str]) -> None:
        """:meth:`_interrupted` for each of ``batches``, shielded from the interrupt itself."""
        with anyio.CancelScope(shield=True):
            # All at once: each waits at most CANCEL_SECONDS for its cancel, so the clean-up
            # of many batches takes that long at most, not that long for each.
            async with anyio.create_task_group() as tg:
                for batch in batches:
                    tg.start_soon(self._interrupted, api, batch)

    async def _create(
        self,
        api: BatchAPI,
        lines: dict[str, _Line],
        held: dict[str, list[str]],
        resumed: set[str],
    ) -> None:
        """A batch for each file of the ``lines`` no recorded batch holds, added to ``held``.

        Each file's calls are claimed in the cache before it is uploaded
        (:meth:`~safecons.clients._batch_claims.BatchLedger.claim_batch_lines`): another run on the
        same cache (a second process started meanwhile) waits for this one's batch and picks
        it up rather than making its own; this one does the same for calls another run has
        claimed. Batches picked up so go in ``resumed``.
        """
        taken = {key for keys in held.values() for key in keys}
        todo = [key for key in lines if key not in taken]
        waited = 0.0
        while todo:
            theirs: list[str] = []
            for chunk in self._chunks(api, todo, lines):
                theirs += await self._make(api, chunk, lines, held, resumed)
                # Unshielded: an interrupt that came meanwhile stops here, before the next file.
                await anyio.lowlevel.checkpoint()
            todo = [key for key in theirs if key in lines and not lines[key].done.is_set()]
            if todo:
                if waited == 0.0:
                    self._warn(
                        "claimed",
                        f"{len(todo):,} of this run's calls to {api.identity} are being put in "
                        "a batch by another run on the same cache: waiting to pick its batch up "
                        "rather than paying for them twice",
                    )
                lease = self._ledger.lease if self._ledger is not None else ClaimLease.default()
                poll = lease.poll_seconds
                await anyio.sleep(poll)
                waited += poll

    async def _make(
        self,
        api: BatchAPI,
        chunk: list[str],
        lines: dict[str, _Line],
        held: dict[str, list[str]],
        resumed: set[str],
    ) -> list[str]:
        """Claim ``chunk``'s calls and make a batch of those claimed; the calls another run
        has claimed (to wait for)."""
        claim = new_claim()
        claims = self._claim(api, claim, chunk)
        for key in claims.stored:
            # Another run answered it after this one missed the cache: the run replays it.
            lines[key].answer(_failure(STORED, "answered meanwhile by another run"), "(cache)")
        for batch, keys in claims.held.items():  # recorded by another run since
            held.setdefault(batch, []).extend(keys)
            resumed.add(batch)
        ours = claims.ours
        # Shielded: a batch the provider made must be recorded (an interrupt waits for the
        # answer), or it would run and be paid for with no one to pick it up. The claim's
        # heartbeat beats from its making to its record, so no other run takes it over while
        # this one looks for a dead run's batch, uploads, or creates.
        submitted = False
        with anyio.CancelScope(shield=True):
            try:
                async with self._beating(claim if ours else None):
                    for old, keys in claims.stale.items():
                        # Its maker died claiming them: it may have made the batch first.
                        found = await api.made_for(claim_tag(old), since=claims.made.get(old))
                        mine = [key for key in keys if key in set(ours)]
                        if found is not None and mine:
                            self._record(api, found, mine, claim=None)
                            held.setdefault(found, []).extend(mine)
                            resumed.add(found)
                            ours = [key for key in ours if key not in set(mine)]
                    if ours:
                        data = b"".join(lines[k].data for k in ours)
                        batch = await api.submit(data, name=_name(ours), tag=claim_tag(claim))
                submitted = True
            except BatchError as exc:
                for key in ours:
                    lines[key].answer(_failure("batch_not_created", str(exc)), "(none)")
                return [k for keys in claims.theirs.values() for k in keys]
            finally:
                if not submitted:
                    # No batch was made under the claim (an error, or an interrupt).
                    self._give_up(claim, claims)
            if ours:
                self._record(api, batch, ours, claim=claim)
                held[batch] = ours
            elif claims.stale:
                self._release(claim)
        return [k for keys in claims.theirs.values() for k in keys]

    @asynccontextmanager
    async def _beating(self, claim: str | None) -> AsyncIterator[None]:
        """Beat ``claim``'s heartbeat every ``refresh_seconds`` of the ledger's lease for the
        block."""
        if claim is None or self._ledger is None:
            yield
            return
        ledger = self._ledger
        every = ledger.lease.refresh_seconds
        async with anyio.create_task_group() as tg:

            async def beat() -> None:
                while True:
                    await anyio.sleep(every)
                    # A claim that cannot be refreshed goes stale, and is taken over.
                    with contextlib.suppress(*LEDGER_ERRORS):
                        ledger.refresh_batch_claim(claim)

            tg.start_soon(beat)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    def _claim(self, api: BatchAPI, claim: str, keys: list[str]) -> BatchClaims:
        """Claim ``keys`` in the cache; with no cache to claim in, they are all this run's."""
        if self._ledger is not None and not self._ledger.read_only:
            try:
                # A call answered in this run, or whose batch this run gave up on, is asked
                # again: its recorded batch would only say the same.
                given_up = {key for _, key in self._given_up}
                return self._ledger.claim_batch_lines(
                    claim,
                    endpoint=api.identity,
                    keys=keys,
                    stale_after=self._ledger.lease.stale_seconds,
                    anew={k for k in keys if k in self._delivered or k in given_up},
                )
            except LEDGER_ERRORS as exc:
                self._warn(
                    "write",
                    f"could not claim calls for a batch ({type(exc).__name__}: {exc}); another "
                    "run on this cache may make a batch of them too",
                )
        return BatchClaims(ours=list(keys))

    def _give_up(self, claim: str, claims: BatchClaims) -> None:
        """No batch was made under ``claim``: release it, unless it took over dead runs'
        claims, whose batches may exist still unfound (then it is left to go stale, and the
        run taking it over looks for theirs and its own)."""
        if not claims.stale:
            self._release(claim)

    def _release(self, claim: str) -> None:
        if self._ledger is not None:
            with contextlib.suppress(*LEDGER_ERRORS):  # a claim left behind goes stale
                self._ledger.release_batch_claim(claim)

    async def _wait_all(
        self,
        lines: dict[str, _Line],
        held: dict[str, list[str]],
        *,
        resumed: set[str],
        ended: set[str],
    ) -> None:
        """Wait for every batch of ``held`` at once, with one progress bar of their lines."""
        if not held:
            return
        bar = progress_bar(
            sum(map(len, held.values())),
            self._progress,
            desc=f"batch {self.api.identity.rsplit('#', 1)[-1]}",
            unit="line",
        )
        seen: dict[str, int] = {}
        statuses: dict[str, str] = {}

        def advanced(batch: str, done: int, status: str) -> None:
            if bar is not None:
                step = min(done, len(held[batch])) - seen.get(batch, 0)
                if step > 0:
                    seen[batch] = seen.get(batch, 0) + step
                    bar.update(step)
                if statuses.get(batch) != status:
                    statuses[batch] = status  # what the provider says, shown as it says it
                    bar.set_postfix_str(", ".join(sorted(set(statuses.values()))))

        try:
            async with anyio.create_task_group() as tg:
                for batch, keys in held.items():
                    tg.start_soon(
                        functools.partial(
                            self._finish,
                            batch=batch,
                            keys=keys,
                            lines=lines,
                            resumed=batch in resumed,
                            advanced=advanced,
                            ended=ended,
                        )
                    )
        finally:
            if bar is not None:
                bar.close()

    def _chunks(
        self, api: BatchAPI, keys: list[str], lines: dict[str, _Line]
    ) -> Iterator[list[str]]:
        """``keys`` in files within the API's limits; a line too large for any file fails."""
        chunk: list[str] = []
        size = 0
        for key in keys:
            n = len(lines[key].data)
            if n > api.max_bytes:
                lines[key].answer(
                    _failure(
                        "line_too_large",
                        f"the request is {n} bytes, more than one batch file may hold "
                        f"({api.max_bytes} bytes)",
                    ),
                    "(none)",
                )
                continue
            if chunk and (len(chunk) >= api.max_lines or size + n > api.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(key)
            size += n
        if chunk:
            yield chunk

    async def _finish(
        self,
        *,
        batch: str,
        keys: list[str],
        lines: dict[str, _Line],
        resumed: bool,
        advanced: Callable[[str, int, str], None],
        ended: set[str],
    ) -> None:
        """Wait for ``batch`` to end and answer its lines (or send them anew)."""
        api = self.api
        try:
            state = await self._poll(api, batch, advanced)
            ended.add(batch)
        except BatchGone as exc:
            # The provider says the batch does not exist (for this key).
            self._forget(batch, keys)
            if resumed:
                self._requeue(keys, lines)  # a recorded one: its calls go anew
                return
            for key in keys:
                lines[key].answer(
                    _failure("batch_gone", f"{exc}; running again sends it anew"), batch
                )
            return
        except BatchError as exc:
            # Not readable now (5xx, a cut connection, a status that never ends): the batch
            # may still run and be billed, so its record stays for a rerun; nothing is sent
            # anew.
            self._unread(batch, keys, lines, str(exc))
            return
        records, unread, garbled = await self._records(api, state, set(keys))
        if unread is None and state.status == "completed" and len(records) < len(keys):
            # The batch ran every line, yet its files lack some: what the provider sent was
            # not what it ran (junk, a line too large).
            unread = f"batch {batch} completed, but its files hold no readable line for this call"
            garbled = True
        if unread is not None:
            lost = [key for key in keys if key not in records]
            if garbled and resumed:
                # Read twice, garbled twice: no rerun will read it. Bought anew, once.
                self._forget(batch, lost)
                self._requeue(lost, lines)
            elif garbled:
                # Left recorded: a rerun reads the files once more, then sends them anew.
                self._unread(batch, lost, lines, unread, again=True)
            else:
                # A file could not be fetched now: what the other gave is kept, the rest
                # stays recorded for a rerun.
                self._unread(batch, lost, lines, unread)
            keys = [key for key in keys if key in records]
        missing = [key for key in keys if not _ran(records.get(key))]
        if resumed and missing:
            # It ended without them before this run: they go in a new batch, not in errors.
            self._forget(batch, missing)
            self._requeue(missing, lines)
            keys = [key for key in keys if _ran(records.get(key))]
        why = _why(state)
        failed = []
        for key in keys:
            record = records.get(key) or _failure(f"batch_{state.status}", why)
            if not _answered(record):
                failed.append(key)
            lines[key].answer(record, batch)
        self._forget(batch, failed)

    def _unread(
        self, batch: str, keys: list[str], lines: dict[str, _Line], why: str, *, again: bool = False
    ) -> None:
        """``keys`` of ``batch`` could not be read now: each fails, its record kept
        (``again``: what was read is garbled; a rerun reads it once more, then sends anew)."""
        writable = self._ledger is not None and not self._ledger.read_only
        if not writable:
            resume = "no writable cache records it: look for it in the provider's console"
        elif again:
            resume = (
                "a rerun with the same cache reads the batch's files once more (no new "
                "charge), then sends what it still cannot read anew"
            )
        else:
            resume = "run again with the same cache to pick the batch up (no new charge)"
        for key in keys:
            lines[key].answer(_failure(UNREAD, f"{why}; {resume}"), batch)

    async def _poll(
        self, api: BatchAPI, batch: str, advanced: Callable[[str, int, str], None]
    ) -> BatchState:
        """Look at ``batch`` until it has ended and its files are named.

        Bounded: a batch that still has not ended :data:`POLL_GRACE_SECONDS` past its
        ``expires_at`` (25 hours from the first look when it names none), or that ended with
        its files unnamed for :data:`POLL_FAILURES` looks, is a :class:`BatchError` (its
        lines fail, its record stays for a rerun); so are that many failed looks in a row.
        """
        failures, unnamed, n = 0, 0, 0
        first = time.time()
        while True:
            try:
                state = await api.state(batch)
            except BatchGone:
                raise
            except BatchError:
                failures += 1
                if failures >= POLL_FAILURES:
                    raise
            else:
                failures = 0
                advanced(batch, state.done, state.status)
                if state.terminal:
                    if state.readable:
                        return state
                    unnamed += 1
                    if unnamed >= POLL_FAILURES:
                        raise BatchError(
                            f"{api.identity}: batch {batch} says {state.status!r} but names no "
                            "file for its lines"
                        )
                expires = state.expires_at if state.expires_at is not None else None
                deadline = (
                    expires + POLL_GRACE_SECONDS
                    if expires is not None
                    else first + UNSTATED_EXPIRY_SECONDS
                )
                if not state.terminal and time.time() > deadline:
                    raise BatchError(
                        f"{api.identity}: batch {batch} still says {state.status!r} past its "
                        "expiry (and an hour's grace)"
                    )
            await anyio.sleep(min(api.poll_seconds, FIRST_POLL_SECONDS * 2**n))
            n = min(n + 1, 30)

    async def _records(
        self, api: BatchAPI, state: BatchState, wanted: set[str]
    ) -> tuple[dict[str, Mapping[str, Any]], str | None, bool]:
        """The ``wanted`` records of an ended batch's output and error files, by custom_id;
        why a file could not be read (None: both were); and whether that is the provider's
        answer itself (a file id safecons will not use), not a passing failure. Each file is
        read on its own: an unreadable error file costs the lines it holds, not the answers
        of the output."""
        records: dict[str, Mapping[str, Any]] = {}
        unread: list[str] = []
        garbled = state.bad_file is not None
        if garbled:
            unread.append(f"the provider named a {state.bad_file} safecons will not use")
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id is None:
                continue
            try:
                got = await api.records(file_id, wanted - set(records))
            except BatchGone as exc:
                unread.append(str(exc))
            except BatchError as exc:
                unread.append(str(exc))
            else:
                for key, record in got.items():
                    records.setdefault(key, record)
        return records, "; ".join(unread) or None, garbled

    def _requeue(self, keys: Iterable[str], lines: dict[str, _Line]) -> None:
        self._pend({key: lines[key] for key in keys})

    def _recorded(self, endpoint: str, lines: Iterable[str]) -> dict[str, list[str]]:
        if self._ledger is None:
            return {}
        try:
            if not self._pruned:
                # The lines of calls whose answers are stored are never needed again.
                self._pruned = True
                self._ledger.prune_batch_lines(endpoint)
            held = self._ledger.batches_holding(endpoint, lines)
        except LEDGER_ERRORS as exc:
            self._warn("read", f"could not read its recorded batches ({type(exc).__name__}: {exc})")
            return {}
        kept = {
            batch: [k for k in keys if (batch, k) not in self._given_up]
            for batch, keys in held.items()
        }
        return {batch: keys for batch, keys in kept.items() if keys}

    def _record(
        self, api: BatchAPI, batch: str, keys: list[str], *, claim: str | None = None
    ) -> None:
        if self._ledger is None:
            self._warn(
                "none",
                f"batch {batch} was created with no cache to record it in: if this run is "
                "interrupted, a rerun cannot pick the batch up and pays for its calls again; "
                "pass cache='calls.sqlite'",
            )
            return
        try:
            self._ledger.record_batch(batch, endpoint=api.identity, keys=keys, claim=claim)
        except LEDGER_ERRORS as exc:
            self._warn(
                "write",
                f"could not record batch {batch} ({type(exc).__name__}: {exc}); a rerun cannot "
                "pick it up",
            )

    def _forget(self, batch: str, keys: list[str]) -> None:
        self._given_up.update((batch, key) for key in keys)
        if self._ledger is not None and keys:
            try:
                self._ledger.forget_batch_lines(batch, keys)
            except LEDGER_ERRORS as exc:
                self._warn("write", f"could not update batch {batch}'s record ({exc})")

    def _warn(self, what: str, problem: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            where = (
                f"response cache {str(self._ledger.path)!r}"
                if self._ledger is not None
                else "batch run"
            )
            warnings.warn(f"{where}: {problem}", CacheWarning, stacklevel=2)

    async def _interrupted(self, api: BatchAPI, batch: str) -> None:
        """The run was interrupted while ``batch`` ran: cancel it if the client says so, else
        leave it running and say how to pick it up."""
        if api.cancel_on_interrupt:
            with anyio.move_on_after(CANCEL_SECONDS) as scope:
                try:
                    await api.cancel(batch)
                except (BatchError, AuthenticationError) as exc:
                    warnings.warn(
                        f"batch {batch} of {api.identity}: could not cancel it ({exc}); "
                        "cancel it in the provider's console",
                        BatchWarning,
                        stacklevel=2,
                    )
                    return
            said = "cancelled" if not scope.cancelled_caught else "asked to cancel (no answer yet)"
            warnings.warn(
                f"batch {batch} of {api.identity} was {said}: the run was interrupted and the "
                "client was made with BatchOptions(cancel_on_interrupt=True); lines it answered "
                "before are picked up by a rerun with the same cache",
                BatchWarning,
                stacklevel=2,
            )
            return
        resume = (
            f"run the same call again with the same cache ({self._ledger.path}) to pick it up "
            "instead of paying twice"
            if self._ledger is not None and not self._ledger.read_only
            else "no writable cache records it, so a rerun cannot pick it up: cancel it in "
            "the provider's console if its answers are not wanted"
        )
        warnings.warn(
            f"batch {batch} of {api.identity} is still running at the provider: {resume}. "
            "To cancel a client's batches when a run is interrupted, make it with "
            "batch=BatchOptions(cancel_on_interrupt=True) (safecons run: --cancel-on-interrupt).",
            BatchWarning,
            stacklevel=2,
        )


def _why(state: BatchState) -> str:
    """Why an ended batch holds no line for a call."""
    if state.status == "expired":
        return (
            "the batch expired (its 24-hour window ended) before this request was run; "
            "running again sends it anew"
        )
    if state.status == "failed":
        return f"the batch failed: {state.problem or 'the provider said no more'}"
    if state.status == "cancelled":
        return "the batch was cancelled before this request was run"
    return f"the batch ended ({state.status}) with no line for this request"


def _name(keys: list[str]) -> str:
    digest = hashlib.blake2b("\n".join(keys).encode(), digest_size=6).hexdigest()
    return f"safecons-{digest}.jsonl"

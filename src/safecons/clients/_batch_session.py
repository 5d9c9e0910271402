"""A ``batch=True`` client's session: each of its calls is a line of a provider batch.

:func:`batched_session` opens it for a run: a :class:`BatchedSession` that builds the request
the client's own (live) session would send, parks it as a line with the run's
:class:`~safecons.clients._batch_run.Batcher`, and reads the line's output record as the
live session reads an answer. Which calls go in which batch, and when, is the batcher's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio

from .._text import valid_unicode
from ..errors import AuthenticationError
from ._base import (
    AnsweredElsewhere,
    Attempt,
    CallFailed,
    Completion,
    Messages,
    NonRetryableCallError,
)
from ._batch_api import MAX_BATCH_LINES, UNREAD, BatchAPI, short
from ._batch_claims import BatchLedger
from ._batch_run import STORED, Batcher
from ._openai import OpenAICompatible

__all__ = ("BatchedSession", "LiveSession", "batched_session")


class LiveSession(Protocol):
    """What a batched session needs of the client's own session: the body it would send,
    and how it reads an answer."""

    def request_body(
        self,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    def read_answer(self, status: int, data: bytes) -> Completion: ...


class BatchedSession:
    """A session whose every call is a line of a provider batch.

    :meth:`attempt` builds the request the live session would send, hands it as a line to
    the run (``lines``), and reads the line's output record as the live session reads an
    answer. A line that failed (its status was not 200, the error file holds it, the batch
    expired or was cancelled before it) is that call's error and is not tried again in this
    run: running again sends it anew. A judge's verdict that does not parse is tried again,
    as a live call is, in a later batch.
    """

    #: The judge may ask for structured output: the line's body is the live request's.
    structured_output = True

    #: How many of its calls may wait at once for their batch (a run lets that many units
    #: start, each call waiting with no permit and no per-attempt timeout).
    holds = MAX_BATCH_LINES

    def __init__(self, live: LiveSession, batcher: Batcher) -> None:
        self._live = live
        self._api = batcher.api
        self._batcher = batcher

    async def attempt(
        self,
        attempt: Attempt,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One attempt as the line ``attempt.key`` (its call's key) of a batch."""
        custom_id = attempt.key
        if custom_id is None:
            raise RuntimeError("a batched call was made without its key (a safecons bug)")
        body = self._live.request_body(
            messages, temperature=temperature, seed=seed, response_format=response_format
        )
        record, batch = await self._batcher.park(custom_id, self._api.line(custom_id, body))
        error = record.get("error")
        if isinstance(error, Mapping) and error.get("code") == STORED:
            attempt.started = False  # nothing was sent, nothing bought
            raise AnsweredElsewhere(f"{self._api.identity}: answered meanwhile by another run")
        return self._read(record, batch)

    def _read(self, record: Mapping[str, Any], batch: str) -> Completion:
        again = f"a line of batch {batch}; running again sends it anew"
        response, error = record.get("response"), record.get("error")
        if isinstance(response, Mapping) and isinstance(response.get("status_code"), int):
            body = response.get("body")
            try:
                # A string body may hold a lone surrogate; an object, any nesting.
                data = (
                    valid_unicode(body).encode()
                    if isinstance(body, str)
                    else json.dumps(body).encode("utf-8", "replace")
                )
            except (ValueError, RecursionError):
                data = b"not JSON safecons can read"
            try:
                return self._live.read_answer(response["status_code"], data)
            except (CallFailed, AuthenticationError) as exc:
                raise NonRetryableCallError(f"{exc} ({again})") from None
        scrub = self._api.client.secrets.scrub
        if isinstance(error, Mapping) and error.get("code") == UNREAD:
            # Not failed: not readable now. The message says how a rerun picks it up.
            said = scrub(short(error.get("message"), 600))
            raise NonRetryableCallError(f"{self._api.identity}: batch {batch}: {said}")
        if isinstance(error, Mapping):
            said = scrub(f"{short(error.get('code'))}: {short(error.get('message'))}")[:300]
            raise NonRetryableCallError(f"{self._api.identity}: the line failed: {said} ({again})")
        raise NonRetryableCallError(f"{self._api.identity}: {again} came back with no answer")


@asynccontextmanager
async def batched_session(
    client: OpenAICompatible, live: LiveSession, *, ledger: BatchLedger | None, progress: bool
) -> AsyncIterator[BatchedSession]:
    """A session of the ``batch=True`` ``client`` whose calls are lines of its provider's
    batches, sent by a task of its own for as long as the block runs; ``live`` is the client's
    own session (the bodies it would send, how it reads an answer). Interrupted, the sender
    cancels or names every batch still running before the block ends."""
    batcher = Batcher(BatchAPI(client), ledger, progress=progress, wait=client.batch_wait_seconds)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(batcher.serve)
        try:
            yield BatchedSession(live, batcher)
        finally:
            tasks.cancel_scope.cancel()

"""A provider's Batch API (OpenAI's, Azure OpenAI's global batch), for ``batch=True`` clients.

What a client's batches need from the provider, and nothing of the run: upload a JSONL file of
requests (``/files``, purpose ``batch``), create a batch over it (``/batches``, completion window
24 hours), look at its progress, read its output and error files, cancel it. The batcher
(:mod:`safecons.clients._batch_run`) decides which calls go in which file, when, and records
each batch in the run's ledger; each of its calls' answers comes from a batch's output
line instead of a request of its own.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

import anyio
import httpx

from .._text import valid_unicode
from ..errors import AuthenticationError, NoBatchAPIError, SafeconsError
from ._openai import OpenAICompatible
from ._rate_limits import parse_retry_after
from ._responses import error_text
from ._wire import Body, Upload, Wire, WireError, read_all, send

__all__ = (
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "POLL_GRACE_SECONDS",
    "UNREAD",
    "UNSTATED_EXPIRY_SECONDS",
    "BatchAPI",
    "BatchError",
    "BatchGone",
    "BatchState",
    "short",
)

#: The most requests one batch may hold (OpenAI's and Azure's limit).
MAX_BATCH_LINES: Final = 50_000
#: The largest input file one batch may read (OpenAI's limit: 200 MB).
MAX_BATCH_BYTES: Final = 200 * 2**20
#: The one completion window the APIs offer.
COMPLETION_WINDOW: Final = "24h"
#: A batch in one of these states changes no more.
TERMINAL: Final = frozenset({"completed", "failed", "expired", "cancelled"})
#: The newest batches searched for one whose creation's answer was lost.
LISTED: Final = 100
#: The most pages of the provider's listing read looking for a batch (100 batches a page).
LISTED_PAGES: Final = 1_000
#: How far back past a claim's making (by its maker's clock) the listing is read: room for
#: the maker's and the provider's clocks to disagree by up to a day.
LISTING_SLACK_SECONDS: Final = 86_400.0
#: The metadata key a batch's claim tag travels under (:meth:`BatchAPI.made_for`).
CLAIM_METADATA: Final = "safecons_claim"
#: Tries of one request to the Batch API (an upload, a look at progress) before it fails.
API_ATTEMPTS: Final = 6
#: The first wait before trying a Batch API request again (seconds; doubling, with jitter).
API_FIRST_DELAY: Final = 0.5
#: The longest wait between two tries of a Batch API request (seconds).
API_MAX_DELAY: Final = 30.0
#: What a provider's id (a batch's, a file's) must look like before it goes in a URL, the
#: cache or a message: OpenAI's are ``batch_...`` and ``file-...``; Azure's the same.
_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}")
#: Bytes one line of an output or error file may hold beyond the answer it carries (the
#: line's envelope: ids, status, request id).
LINE_ENVELOPE_BYTES: Final = 64 * 2**10
#: How long past a batch's ``expires_at`` (or, when it says none, past 25 hours from when
#: the run first saw it) the run keeps looking at a batch that still has not ended (seconds).
POLL_GRACE_SECONDS: Final = 3600.0
UNSTATED_EXPIRY_SECONDS: Final = 25 * 3600.0
#: An ``expires_at`` past this (the year 5138) is no time a provider means.
_LATEST_EPOCH: Final = 1e11
#: The error code of a line whose batch could not be read now (it stays recorded).
UNREAD: Final = "batch_unreadable"
#: Validation errors of a failed batch quoted in its lines' errors.
_SHOWN_ERRORS: Final = 3
#: The most of a failed download's error body read (its message is all that is wanted).
ERROR_BODY_BYTES: Final = 2**20
_RETRYABLE: Final = frozenset(
    {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.CONFLICT, HTTPStatus.TOO_MANY_REQUESTS}
)


class BatchError(SafeconsError):
    """The provider refused or failed a request of its Batch API (after every try)."""


class _Refused(BatchError):
    """The Batch API refused a request (a 4xx other than 408, 409, 429): another try cannot
    mend it."""


class BatchGone(_Refused):
    """The provider says the batch or file does not exist (404): not a passing failure."""


def parse_json(data: bytes, what: str) -> Any:
    """``data`` as JSON, or a :class:`BatchError` naming ``what``: malformed, nested too deep
    for the parser (a hostile answer nested 100,000 deep), or not UTF-8."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise BatchError(f"{what}: the answer is not JSON safecons can read") from None


def checked_id(value: object, what: str, scrub: Callable[[str], str]) -> str:
    """``value`` as a provider's id, fit to go in a URL, the cache and a message, or a
    :class:`BatchError`: a string of 1-255 letters, digits, ``_ . : -`` that holds no secret
    of the client (a server may echo the key it was sent)."""
    if isinstance(value, str) and _ID.fullmatch(value) and scrub(value) == value:
        return value
    shown = type(value).__name__ if not isinstance(value, str) else f"{len(value)} characters"
    raise BatchError(f"{what}: the provider answered an id safecons will not use ({shown})")


@dataclass(frozen=True, slots=True)
class BatchState:
    """What the provider says of one batch: its status, its line counts, its files."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    problem: str | None = None
    #: When the provider will end the batch if it has not (epoch seconds), when it said.
    expires_at: float | None = None
    #: A file id the provider named that safecons will not use (then its lines are unread).
    bad_file: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def done(self) -> int:
        """Lines that have an answer or an error."""
        return self.completed + self.failed

    @property
    def readable(self) -> bool:
        """Whether every file that should hold its lines is named (a batch may say
        ``completed`` a moment before its output file exists)."""
        if self.bad_file is not None:
            return True  # named, but not to be read: waiting would not mend it
        needs_output = self.completed > 0 and self.output_file_id is None
        needs_errors = self.failed > 0 and self.error_file_id is None
        return not (needs_output or needs_errors)

    @classmethod
    def of(cls, data: Any, scrub: Callable[[str], str]) -> BatchState:
        if not isinstance(data, Mapping):
            raise BatchError(f"not a batch object (a JSON {type(data).__name__})")
        ident = checked_id(data.get("id"), "a batch object", scrub)
        counts = data.get("request_counts")
        counts = counts if isinstance(counts, Mapping) else {}

        def count(name: str) -> int:
            value = counts.get(name)
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31
            return value if ok else 0  # type: ignore[return-value]

        bad: list[str] = []

        def file(name: str) -> str | None:
            value = data.get(name)
            if value is None or value == "":
                return None
            try:
                return checked_id(value, name, scrub)
            except BatchError:
                bad.append(name)
                return None

        status = data.get("status")
        expires = _epoch(data.get("expires_at"))
        return cls(
            id=ident,
            # "Completed", " completed ": a status is read without case or blanks; anything
            # that is no status word (megabytes, control characters) is "unknown".
            status=_status(status),
            total=count("total"),
            completed=count("completed"),
            failed=count("failed"),
            output_file_id=file("output_file_id"),
            error_file_id=file("error_file_id"),
            problem=_problem(data.get("errors"), scrub),
            expires_at=expires,
            bad_file=bad[0] if bad else None,
        )


def _problem(errors: Any, scrub: Callable[[str], str]) -> str | None:
    """A failed batch's validation errors, as one line."""
    items = errors.get("data") if isinstance(errors, Mapping) else None
    if not isinstance(items, list) or not items:
        return None
    said = []
    for item in items[:_SHOWN_ERRORS]:
        if isinstance(item, Mapping):
            line = item.get("line")
            at = f" (line {line})" if isinstance(line, int) else ""
            code, message = (short(item.get(k)) for k in ("code", "message"))
            said.append(f"{code}: {message}{at}")
    more = f"; and {len(items) - _SHOWN_ERRORS} more" if len(items) > _SHOWN_ERRORS else ""
    return valid_unicode(scrub("; ".join(said) + more))


_STATUS: Final = re.compile(r"[a-z_]{1,32}")


def _status(value: object) -> str:
    if isinstance(value, str) and len(value) <= 64:  # noqa: PLR2004
        word = value.strip().lower()
        if _STATUS.fullmatch(word):
            return word
    return "unknown"


def short(value: object, limit: int = 300) -> str:
    """A provider's text for a message: a string cut to ``limit``, anything else by type
    (a nested object's repr could recurse, or be huge)."""
    if isinstance(value, str):
        return valid_unicode(value[:limit])
    return "" if value is None else f"<{type(value).__name__}>"


class BatchAPI:
    """The Batch API of one :class:`~safecons.OpenAICompatible` client's provider.

    OpenAI's paths are ``{base_url}/files`` and ``{base_url}/batches``, each line posting to
    the path of the client's ``/chat/completions`` (``/v1/chat/completions``); Azure's are
    ``{endpoint}/openai/files`` and ``/openai/batches`` with the client's ``api-version``,
    each line posting to ``/chat/completions`` with the deployment as its ``model``.
    """

    def __init__(self, client: OpenAICompatible) -> None:
        self.client = client
        self.identity = client.identity
        self.cancel_on_interrupt = client.cancel_on_interrupt
        self.poll_seconds = client.batch_poll_seconds
        self.max_lines = MAX_BATCH_LINES
        self.max_bytes = MAX_BATCH_BYTES
        self._scrub = client.secrets.scrub
        self._query = dict(client._query)
        deployment = client._deployment
        self._model: str | None = client.model
        root = client.base_url
        self.line_url = httpx.URL(client._url).path
        if deployment is not None:
            root = f"{client.base_url}/openai"
            self.line_url = "/chat/completions"
            self._model = client.model or deployment
        self._files = f"{root}/files"
        self._batches = f"{root}/batches"
        self._wire: Wire | None = None
        headers = sorted(client._request_headers().items())
        #: Which of a run's batches this client's calls may share: the same endpoint *and*
        #: the same credentials and headers (a judge's lines never go out under the SUT's
        #: key or project). A digest: never the key itself.
        self.queue_key = (
            f"{self.identity}#"
            + hashlib.blake2b(json.dumps(headers).encode(), digest_size=8).hexdigest()
        )
        #: The most bytes one line of an output or error file may hold.
        self.max_line_bytes = client.max_response_bytes + LINE_ENVELOPE_BYTES
        #: The longest one file's download may take (seconds): a file trickled a byte at a
        #: time ends there, not never.
        self.file_seconds = float(client.http_timeout)

    def line(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        """One line of a batch's input file (with its newline)."""
        if self._model is not None and "model" not in body:
            body = {**body, "model": self._model}
        record = {"custom_id": custom_id, "method": "POST", "url": self.line_url, "body": body}
        return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"

    @asynccontextmanager
    async def open(self) -> AsyncIterator[BatchAPI]:
        """Ready to talk to the provider for the length of the block (over the client's own
        wire: its transport, proxies, headers and bounds)."""
        async with self.client.wire() as wire:
            self._wire = wire
            try:
                yield self
            finally:
                self._wire = None

    async def submit(self, data: bytes, *, name: str, tag: str | None = None) -> str:
        """Upload ``data`` (a JSONL file of lines) and create a batch over it; its id.

        ``tag`` goes in the batch's metadata (``safecons_claim``), for :meth:`made_for`."""
        uploaded = await self._json(
            "POST",
            self._files,
            what="upload the batch file",
            body=Upload({"purpose": "batch"}, "file", name, data, "application/jsonl"),
        )
        file_id = uploaded.get("id") if isinstance(uploaded, Mapping) else None
        if file_id is None:
            raise BatchError(f"{self.identity}: the upload answered no file id")
        file_id = checked_id(file_id, f"{self.identity}: the upload", self._scrub)
        return await self._create(file_id, tag)

    async def _create(self, file_id: str, tag: str | None = None) -> str:
        """Create the batch over ``file_id``, once: a creation whose answer was lost (a
        connection cut, a timeout, a 5xx) may have made the batch, so before asking again the
        provider's batches are searched for one over this file (each upload has its own id),
        and a retry never makes a second batch to pay for."""
        body = {
            "input_file_id": file_id,
            "endpoint": self.line_url,
            "completion_window": COMPLETION_WINDOW,
            "metadata": {"made_by": "safecons"} | ({} if tag is None else {CLAIM_METADATA: tag}),
        }
        delay, problem = API_FIRST_DELAY, "no try made"
        began = time.time()
        for attempt in range(API_ATTEMPTS):
            try:
                answer = await self._request(
                    "POST",
                    self._batches,
                    what="create the batch",
                    body=json.dumps(body).encode(),
                    tries=1,
                )
            except _Refused:
                raise  # refused (a 4xx): nothing was made, and asking again would not mend it
            except BatchError as exc:
                problem = str(exc)
            else:
                try:
                    what = f"{self.identity}: create the batch"
                    return BatchState.of(parse_json(answer, what), self._scrub).id
                except BatchError as exc:
                    # A 200 that is not a batch object may still have made one: look for it
                    # by its file before asking again, as for an answer that was lost.
                    problem = str(exc)
            made = await self._made_over(file_id, since=began)
            if made is not None:
                return made
            if attempt + 1 < API_ATTEMPTS:
                delay = await _pause(delay)
        raise BatchError(f"{self.identity}: could not create the batch: {problem}")

    async def _made_over(self, file_id: str, *, since: float) -> str | None:
        """The batch over ``file_id`` among the provider's batches made since ``since``
        (this process's clock, when its creation was first asked), if one was made."""
        return await self._listed(
            lambda item: item.get("input_file_id") == file_id,
            f"a batch over file {file_id}",
            since=since,
        )

    async def made_for(self, tag: str, *, since: float | None = None) -> str | None:
        """The batch created with ``tag`` (:meth:`submit`'s), if one was made: a run that died
        between creating a batch and recording it leaves it to be found so, not bought again.

        The provider's listing is read page by page, newest first, until the batch is found,
        the listing ends, or it reaches batches made before ``since`` (the claim's making, by
        its maker's clock) less :data:`LISTING_SLACK_SECONDS` for the clocks of the maker and
        the provider to disagree (with no ``since``, the listing is read to its end).
        """
        return await self._listed(
            lambda item: (
                isinstance(meta := item.get("metadata"), Mapping)
                and meta.get(CLAIM_METADATA) == tag
            ),
            f"a batch tagged {tag}",
            since=since,
        )

    async def _listed(
        self, match: Callable[[Mapping[str, Any]], bool], what: str, *, since: float | None
    ) -> str | None:
        """The first batch ``match`` takes in the provider's listing, paged through (``after``
        the last id of each page, while it says ``has_more``) back to ``since`` less
        :data:`LISTING_SLACK_SECONDS`; None when there is none. A listing that cannot be read
        to there (an error after retries, a page that does not go on, more than
        :data:`LISTED_PAGES` pages) is a :class:`BatchError`: not knowing whether the batch
        exists, making it again could pay for it twice."""
        oldest = None if since is None else since - LISTING_SLACK_SECONDS
        after: str | None = None
        seen: set[str] = set()
        for _ in range(LISTED_PAGES):
            params: dict[str, Any] = {"limit": LISTED} | ({} if after is None else {"after": after})
            try:
                listed = await self._json(
                    "GET", self._batches, what="list the batches", params=params
                )
            except BatchError as exc:
                raise BatchError(
                    f"{exc}; {what} may have been made: look for it in the provider's console "
                    "before running again"
                ) from None
            data = listed.get("data") if isinstance(listed, Mapping) else None
            items = (
                [item for item in data if isinstance(item, Mapping)]
                if isinstance(data, list)
                else []
            )
            for item in items:
                if match(item):
                    try:
                        return checked_id(
                            item.get("id"), f"{self.identity}: a listed batch", self._scrub
                        )
                    except BatchError as exc:
                        raise BatchError(
                            f"{exc}; {what} was made: look for it in the provider's console "
                            "before running again"
                        ) from None
            more = isinstance(listed, Mapping) and listed.get("has_more") is True
            if not more or not items:
                return None
            made = _epoch(items[-1].get("created_at"))
            if oldest is not None and made is not None and made < oldest:
                return None  # the listing, newest first, is now older than the claim
            last = listed.get("last_id") if isinstance(listed, Mapping) else None
            last = last if isinstance(last, str) else items[-1].get("id")
            if not isinstance(last, str) or not _ID.fullmatch(last) or last in seen:
                break  # a cursor that does not go on: the rest cannot be read
            seen.add(last)
            after = last
        raise BatchError(
            f"{self.identity}: the provider's listing of batches could not be read back to "
            f"when the claim was made; {what} may have been made: look for it in the "
            "provider's console before running again"
        )

    async def state(self, batch: str) -> BatchState:
        """What the provider says of ``batch`` now."""
        try:
            batch = checked_id(batch, f"{self.identity}: a recorded batch", self._scrub)
        except BatchError as exc:
            raise BatchGone(str(exc)) from None  # it can never be read: as good as gone
        data = await self._json("GET", f"{self._batches}/{batch}", what=f"read batch {batch}")
        return BatchState.of(data, self._scrub)

    async def records(self, file_id: str, wanted: set[str]) -> dict[str, Mapping[str, Any]]:
        """The records of ``wanted`` lines in the file ``file_id`` (a batch's output or error
        file), by ``custom_id``, read as the file streams in.

        Bounded whatever the provider sends: a line longer than :attr:`max_line_bytes` (after
        decompression), or one that is not a JSON object, is skipped, so the lines around it
        are still read; only the wanted records are kept; the download ends after
        :attr:`file_seconds` (:class:`BatchError`).
        """
        file_id = checked_id(file_id, f"{self.identity}: a batch's file", self._scrub)
        what = f"read file {file_id}"
        wire = self._wire
        assert wire is not None, "BatchAPI.open() first"
        url = f"{self._files}/{file_id}/content"
        found: dict[str, Mapping[str, Any]] = {}
        with anyio.move_on_after(self.file_seconds) as deadline:
            delay, problem = API_FIRST_DELAY, "no try made"
            for attempt in range(API_ATTEMPTS):
                wait: float | None = None
                try:
                    async with wire.stream("GET", url, params=self._query) as answer:
                        if answer.status == HTTPStatus.OK:
                            await self._read_lines(answer.chunks, wanted, found)
                            return found
                        body = await read_all(answer.chunks, ERROR_BODY_BYTES, _long_error)
                        problem = self._problem(answer.status, body, what)
                        wait = parse_retry_after(answer.headers)
                except WireError as exc:
                    problem = str(exc)
                if attempt + 1 < API_ATTEMPTS:
                    delay = await _pause(delay, wait)
        if deadline.cancelled_caught:
            problem = f"the download took more than {self.file_seconds:g} s (http_timeout)"
        raise BatchError(f"{self.identity}: could not {what}: {problem}")

    async def _read_lines(
        self,
        chunks: AsyncIterator[bytes],
        wanted: set[str],
        found: dict[str, Mapping[str, Any]],
    ) -> None:
        limit = self.max_line_bytes
        pending = bytearray()
        skipping = False
        async for chunk in chunks:
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if not skipping and len(pending) + end - start <= limit:
                    pending += chunk[start:end]
                    self._keep(bytes(pending), wanted, found)
                pending.clear()
                skipping = False
                start = end + 1
            if not skipping:
                pending += chunk[start:]
                if len(pending) > limit:
                    pending.clear()
                    skipping = True  # the rest of this line is dropped as it comes
        if pending and not skipping:
            self._keep(bytes(pending), wanted, found)

    @staticmethod
    def _keep(raw: bytes, wanted: set[str], found: dict[str, Mapping[str, Any]]) -> None:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            return  # an unreadable line costs that line, never the file
        if isinstance(record, dict):
            custom_id = record.get("custom_id")
            if isinstance(custom_id, str) and custom_id in wanted:
                found.setdefault(custom_id, record)

    async def cancel(self, batch: str) -> None:
        """Ask the provider to cancel ``batch`` (lines it answered stay in its output)."""
        await self._json("POST", f"{self._batches}/{batch}/cancel", what=f"cancel batch {batch}")

    async def _json(
        self,
        method: str,
        url: str,
        *,
        what: str,
        params: Mapping[str, Any] | None = None,
        body: Body = None,
    ) -> Any:
        data = await self._request(method, url, what=what, params=params, body=body)
        return parse_json(data, f"{self.identity}: {what}")

    async def _request(
        self,
        method: str,
        url: str,
        *,
        what: str,
        tries: int = API_ATTEMPTS,
        params: Mapping[str, Any] | None = None,
        body: Body = None,
    ) -> bytes:
        """The body of one request to the Batch API, tried again (up to ``tries`` in all) on a
        transient failure (connection, 429, 5xx) with backoff honouring ``Retry-After``. The
        body is read up to the client's ``max_response_bytes`` (a larger one is a failed try)."""
        wire = self._wire
        assert wire is not None, "BatchAPI.open() first"
        delay, problem = API_FIRST_DELAY, "no try made"
        query = {k: str(v) for k, v in {**self._query, **(params or {})}.items()}
        for attempt in range(tries):
            wait: float | None = None
            try:
                reply = await send(
                    wire,
                    method,
                    url,
                    limit=self.client.max_response_bytes,
                    params=query,
                    body=body,
                )
            except WireError as exc:
                problem = str(exc)
            else:
                if reply.status == HTTPStatus.OK:
                    return reply.body  # inflated already (gzip, deflate, as the answer said)
                problem = self._problem(reply.status, reply.body, what)
                wait = parse_retry_after(reply.headers)
            if attempt + 1 < tries:
                delay = await _pause(delay, wait)
        plural = "tries" if tries > 1 else "try"
        raise BatchError(f"{self.identity}: could not {what} ({tries} {plural}): {problem}")

    def _problem(self, status: int, body: bytes, what: str) -> str:
        """What a failed answer said; raises for one another try cannot mend."""
        message, _, _ = error_text(body, self._scrub)
        problem = f"HTTP {status}: {message}"
        self._refuse(status, what, problem)
        return problem

    def _refuse(self, status: int, what: str, problem: str) -> None:
        """Raise for an answer another try cannot mend."""
        if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
            raise AuthenticationError(
                f"{self.identity}: the Batch API rejected the credentials ({problem}). Check the "
                "API key and that it may use batches."
            )
        if status == HTTPStatus.NOT_FOUND and what in ("upload the batch file", "create the batch"):
            where = self._files if what.startswith("upload") else self._batches
            raise NoBatchAPIError(
                f"{self.identity}: the server has no Batch API at {where} ({problem}). "
                "OpenAI, Azure OpenAI and LiteLLM's proxy serve one; vLLM's, Ollama's and "
                "llama.cpp's servers do not"
            )
        if status in _RETRYABLE or status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            return
        if status == HTTPStatus.NOT_FOUND:
            raise BatchGone(f"{self.identity}: could not {what}: {problem}")
        raise _Refused(f"{self.identity}: could not {what}: {problem}")


def _long_error(limit: int) -> WireError:
    return WireError(
        f"the answer's error body is longer than the {limit:,} bytes read of one", "too large"
    )


def _epoch(value: object) -> float | None:
    """A provider's time (seconds since the epoch), or None when it is none."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < _LATEST_EPOCH:
        return float(value)
    return None


async def _pause(delay: float, wait: float | None = None) -> float:
    """Sleep before the next try of a Batch API request: the server's ``wait``
    (``Retry-After``) if it sent one, else ``delay`` with half of it jittered, at most
    :data:`API_MAX_DELAY`; the delay for the try after."""
    await anyio.sleep(
        min(delay * (1 + random.random()) / 2 if wait is None else wait, API_MAX_DELAY)
    )
    return min(delay * 2, API_MAX_DELAY)

"""A provider's Batch API (OpenAI's, Azure OpenAI's global batch), for ``batch=True`` clients.

What a client's batches need from the provider, and nothing of the run: upload a JSONL file of
requests (``/files``, purpose ``batch``), create a batch over it (``/batches``, completion window
24 hours), look at its progress, read its output and error files, cancel it. The run
(:mod:`safecons.run._batches`) decides which calls go in which file, when, and records each
batch in the cache; a :class:`BatchedSession` is the session a unit's call goes through, whose
answer comes from the batch's output line instead of a request of its own.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import httpx

from .._text import valid_unicode
from ..errors import AuthenticationError, ConfigError
from ._base import CallFailed, Completion, Messages, NonRetryableCallError

if TYPE_CHECKING:
    from ._openai import OpenAICompatible

__all__ = (
    "CURRENT_LINE",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "BatchAPI",
    "BatchError",
    "BatchState",
    "BatchedSession",
    "Lines",
    "batch_api",
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
#: Tries of one request to the Batch API (an upload, a look at progress) before it fails.
API_ATTEMPTS: Final = 6
#: The first wait before trying a Batch API request again (seconds; doubling, with jitter).
API_FIRST_DELAY: Final = 0.5
#: The longest wait between two tries of a Batch API request (seconds).
API_MAX_DELAY: Final = 30.0
#: Validation errors of a failed batch quoted in its lines' errors.
_SHOWN_ERRORS: Final = 3
_RETRYABLE: Final = frozenset(
    {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.CONFLICT, HTTPStatus.TOO_MANY_REQUESTS}
)

#: The key of the call the current task is making, which is its line's ``custom_id`` in a
#: batch file (set by the engine around a batched call).
CURRENT_LINE: ContextVar[str | None] = ContextVar("safecons_batch_line", default=None)

#: What a batched session hands its line to: ``(custom_id, line) -> (output record, batch
#: id)``, returning once the batch that holds the line has ended.
Lines = Callable[[str, bytes], Awaitable[tuple[Mapping[str, Any], str]]]


def batch_api(client: object) -> BatchAPI | None:
    """The Batch API of ``client`` when it was made with ``batch=True``, else None."""
    from ._openai import OpenAICompatible

    if isinstance(client, OpenAICompatible) and client.batch:
        return BatchAPI(client)
    return None


class BatchError(Exception):
    """The provider refused or failed a request of its Batch API (after every try)."""


class _Refused(BatchError):
    """The Batch API refused a request (a 4xx other than 408, 409, 429): another try cannot
    mend it."""


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

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def done(self) -> int:
        """Lines that have an answer or an error."""
        return self.completed + self.failed

    @classmethod
    def of(cls, data: Any, scrub: Callable[[str], str]) -> BatchState:
        if not isinstance(data, Mapping) or not isinstance(data.get("id"), str):
            raise BatchError(f"not a batch object: {scrub(repr(data))[:200]}")
        counts = data.get("request_counts")
        counts = counts if isinstance(counts, Mapping) else {}

        def count(name: str) -> int:
            value = counts.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def file(name: str) -> str | None:
            value = data.get(name)
            return value if isinstance(value, str) and value else None

        status = data.get("status")
        return cls(
            id=data["id"],
            status=status if isinstance(status, str) else "unknown",
            total=count("total"),
            completed=count("completed"),
            failed=count("failed"),
            output_file_id=file("output_file_id"),
            error_file_id=file("error_file_id"),
            problem=_problem(data.get("errors"), scrub),
        )


def _problem(errors: Any, scrub: Callable[[str], str]) -> str | None:
    """A failed batch's validation errors, as one line."""
    items = errors.get("data") if isinstance(errors, Mapping) else None
    if not isinstance(items, list) or not items:
        return None
    said = []
    for item in items[:_SHOWN_ERRORS]:
        if isinstance(item, Mapping):
            line = f" (line {item['line']})" if item.get("line") is not None else ""
            said.append(f"{item.get('code')}: {item.get('message')}{line}")
    more = f"; and {len(items) - _SHOWN_ERRORS} more" if len(items) > _SHOWN_ERRORS else ""
    return valid_unicode(scrub("; ".join(said) + more))


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
        self._http: httpx.AsyncClient | None = None

    def line(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        """One line of a batch's input file (with its newline)."""
        if self._model is not None and "model" not in body:
            body = {**body, "model": self._model}
        record = {"custom_id": custom_id, "method": "POST", "url": self.line_url, "body": body}
        return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"

    @asynccontextmanager
    async def open(self) -> AsyncIterator[BatchAPI]:
        """Ready to talk to the provider for the length of the block."""
        c = self.client
        headers = {k: v for k, v in c._request_headers().items() if k != "content-type"}
        transport = c.transport if isinstance(c.transport, httpx.AsyncBaseTransport) else None
        async with httpx.AsyncClient(
            transport=transport,
            headers=headers,
            timeout=httpx.Timeout(c.http_timeout),
            follow_redirects=False,
        ) as http:
            self._http = http
            try:
                yield self
            finally:
                self._http = None

    async def submit(self, data: bytes, *, name: str) -> str:
        """Upload ``data`` (a JSONL file of lines) and create a batch over it; its id."""
        uploaded = await self._json(
            "POST",
            self._files,
            what="upload the batch file",
            data={"purpose": "batch"},
            files={"file": (name, data, "application/jsonl")},
        )
        file_id = uploaded.get("id") if isinstance(uploaded, Mapping) else None
        if not isinstance(file_id, str):
            raise BatchError(f"{self.identity}: the upload answered no file id")
        return await self._create(file_id)

    async def _create(self, file_id: str) -> str:
        """Create the batch over ``file_id``, once: a creation whose answer was lost (a
        connection cut, a timeout, a 5xx) may have made the batch, so before asking again the
        provider's batches are searched for one over this file (each upload has its own id),
        and a retry never makes a second batch to pay for."""
        body = {
            "input_file_id": file_id,
            "endpoint": self.line_url,
            "completion_window": COMPLETION_WINDOW,
            "metadata": {"made_by": "safecons"},
        }
        delay, problem = API_FIRST_DELAY, "no try made"
        for attempt in range(API_ATTEMPTS):
            try:
                response = await self._request(
                    "POST", self._batches, what="create the batch", json=body, tries=1
                )
            except _Refused:
                raise  # refused (a 4xx): nothing was made, and asking again would not mend it
            except BatchError as exc:
                problem = str(exc)
            else:
                try:
                    return BatchState.of(response.json(), self._scrub).id
                except ValueError:
                    problem = "the answer is not JSON"
            made = await self._made_over(file_id)
            if made is not None:
                return made
            if attempt + 1 < API_ATTEMPTS:
                delay = await _pause(delay)
        raise BatchError(f"{self.identity}: could not create the batch: {problem}")

    async def _made_over(self, file_id: str) -> str | None:
        """The batch over ``file_id`` among the provider's newest, if one was made."""
        try:
            listed = await self._json(
                "GET", self._batches, what="list the batches", params={"limit": LISTED}
            )
        except BatchError as exc:
            # Not knowing whether the batch exists, asking again could pay for it twice.
            raise BatchError(
                f"{exc}; a batch over file {file_id} may have been made: look for it in the "
                "provider's console before running again"
            ) from None
        data = listed.get("data") if isinstance(listed, Mapping) else None
        for item in data if isinstance(data, list) else []:
            if isinstance(item, Mapping) and item.get("input_file_id") == file_id:
                ident = item.get("id")
                if isinstance(ident, str):
                    return ident
        return None

    async def state(self, batch: str) -> BatchState:
        """What the provider says of ``batch`` now."""
        data = await self._json("GET", f"{self._batches}/{batch}", what=f"read batch {batch}")
        return BatchState.of(data, self._scrub)

    async def content(self, file_id: str) -> bytes:
        """The bytes of the file ``file_id`` (a batch's output or error file)."""
        response = await self._request(
            "GET", f"{self._files}/{file_id}/content", what=f"read file {file_id}"
        )
        return response.content

    async def cancel(self, batch: str) -> None:
        """Ask the provider to cancel ``batch`` (lines it answered stay in its output)."""
        await self._json("POST", f"{self._batches}/{batch}/cancel", what=f"cancel batch {batch}")

    async def _json(self, method: str, url: str, *, what: str, **kwargs: Any) -> Any:
        response = await self._request(method, url, what=what, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise BatchError(f"{self.identity}: {what}: the answer is not JSON") from None

    async def _request(
        self, method: str, url: str, *, what: str, tries: int = API_ATTEMPTS, **kwargs: Any
    ) -> httpx.Response:
        """One request to the Batch API, tried again (up to ``tries`` in all) on a transient
        failure (connection, 429, 5xx) with backoff honouring ``Retry-After``."""
        from ._openai import error_text, parse_retry_after

        http = self._http
        assert http is not None, "BatchAPI.open() first"
        delay, problem = API_FIRST_DELAY, "no try made"
        params = {**self._query, **kwargs.pop("params", {})}
        for attempt in range(tries):
            wait: float | None = None
            try:
                response = await http.request(method, url, params=params, **kwargs)
            except httpx.HTTPError as exc:
                problem = f"connection error ({type(exc).__name__})"
            else:
                status = response.status_code
                if status == HTTPStatus.OK:
                    return response
                message, _, _ = error_text(response.content, self._scrub)
                problem = f"HTTP {status}: {message}"
                self._refuse(status, what, problem)
                wait = parse_retry_after(response.headers)
            if attempt + 1 < tries:
                delay = await _pause(delay, wait)
        plural = "tries" if tries > 1 else "try"
        raise BatchError(f"{self.identity}: could not {what} ({tries} {plural}): {problem}")

    def _refuse(self, status: int, what: str, problem: str) -> None:
        """Raise for an answer another try cannot mend."""
        if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
            raise AuthenticationError(
                f"{self.identity}: the Batch API rejected the credentials ({problem}). Check the "
                "API key and that it may use batches."
            )
        if status == HTTPStatus.NOT_FOUND and what in ("upload the batch file", "create the batch"):
            where = self._files if what.startswith("upload") else self._batches
            raise ConfigError(
                f"{self.identity}: the server has no Batch API at {where} ({problem}). "
                "OpenAI, Azure OpenAI and LiteLLM's proxy serve one; vLLM's, Ollama's and "
                "llama.cpp's servers do not: make the client with batch=False"
            )
        if status in _RETRYABLE or status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            return
        raise _Refused(f"{self.identity}: could not {what}: {problem}")


async def _pause(delay: float, wait: float | None = None) -> float:
    """Sleep before the next try of a Batch API request: the server's ``wait``
    (``Retry-After``) if it sent one, else ``delay`` with half of it jittered, at most
    :data:`API_MAX_DELAY`; the delay for the try after."""
    await anyio.sleep(
        min(delay * (1 + random.random()) / 2 if wait is None else wait, API_MAX_DELAY)
    )
    return min(delay * 2, API_MAX_DELAY)


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

    :meth:`complete` builds the request the live session would send, hands it as a line to
    the run (``lines``), and reads the line's output record as the live session reads an
    answer. A line that failed (its status was not 200, the error file holds it, the batch
    expired or was cancelled before it) is that call's error and is not tried again in this
    run: running again sends it anew. A judge's verdict that does not parse is tried again,
    as a live call is, in the run's next batch.
    """

    accepts_response_format = True

    def __init__(self, live: LiveSession, api: BatchAPI, lines: Lines) -> None:
        self._live = live
        self._api = api
        self._lines = lines

    async def complete(
        self,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        custom_id = CURRENT_LINE.get()
        if custom_id is None:
            raise RuntimeError("a batched call was made without its line id (a safecons bug)")
        body = self._live.request_body(
            messages, temperature=temperature, seed=seed, response_format=response_format
        )
        record, batch = await self._lines(custom_id, self._api.line(custom_id, body))
        return self._read(record, batch)

    def _read(self, record: Mapping[str, Any], batch: str) -> Completion:
        again = f"a line of batch {batch}; running again sends it anew"
        response, error = record.get("response"), record.get("error")
        if isinstance(response, Mapping) and isinstance(response.get("status_code"), int):
            body = response.get("body")
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                return self._live.read_answer(response["status_code"], data)
            except (CallFailed, AuthenticationError) as exc:
                raise NonRetryableCallError(f"{exc} ({again})") from None
        scrub = self._api.client.secrets.scrub
        if isinstance(error, Mapping):
            said = scrub(f"{error.get('code')}: {error.get('message')}")[:300]
            raise NonRetryableCallError(f"{self._api.identity}: the line failed: {said} ({again})")
        raise NonRetryableCallError(f"{self._api.identity}: {again} came back with no answer")

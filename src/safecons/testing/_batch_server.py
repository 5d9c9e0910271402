"""OpenAI's Batch API (files and batches) for :class:`~safecons.testing.FakeOpenAIServer`.

The server owns one :class:`Batches`, which serves ``/files`` and ``/batches`` under any prefix
(``/v1/files``, Azure's ``/openai/batches?api-version=...``) in OpenAI's wire format, and answers
each line of a batch through a callable the server hands it: the same machinery, responder and
faults as a live chat-completions request. This module knows nothing of the server itself (the
server imports it, never the reverse), so its replies are plain status, bytes and content type.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final

__all__ = (
    "BATCH_MAX_BYTES",
    "BATCH_MAX_LINES",
    "BatchReply",
    "BatchStats",
    "Batches",
    "LineAnswer",
)

#: OpenAI's limit on a file uploaded for a batch: 200 MB.
BATCH_MAX_BYTES: Final = 200 * 1024 * 1024
#: OpenAI's limit on the requests of one batch.
BATCH_MAX_LINES: Final = 50_000

#: ``(url, body) -> (status, response body, request id)``: answers one line of a batch.
LineAnswer = Callable[[str, dict[str, Any]], Awaitable[tuple[int, bytes, str | None]]]

_ROUTE = re.compile(
    r"^(?P<prefix>.*?)/(?P<kind>files|batches)(?:/(?P<id>[^/]+))?(?:/(?P<op>[^/]+))?$"
)
_OPENAI_ENDPOINTS: Final = frozenset({"/v1/chat/completions"})
_AZURE_ENDPOINTS: Final = frozenset({"/chat/completions", "/v1/chat/completions"})
_WINDOW: Final = "24h"
_WINDOW_SECONDS: Final = 24 * 60 * 60
_MAX_METADATA: Final = 16
_DEFAULT_LIST: Final = 20
_MAX_LIST: Final = 100
#: The statuses of a batch still running, which a cancel request can stop.
_ACTIVE: Final = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
_EXPIRED_ERROR: Final = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}
_CANCELLED_ERROR: Final = {
    "code": "batch_cancelled",
    "message": "This request could not be executed before the batch was cancelled.",
}


@dataclass(frozen=True, slots=True)
class BatchReply:
    """An HTTP answer of the Batch API: status, body and its content type."""

    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class BatchStats:
    """What the server's Batch API did (see :attr:`ServerStats.batch`).

    Attributes
    ----------
    files
        Files uploaded (``POST /files``); output and error files are not counted.
    batches
        Batches created (``POST /batches`` answered 200), including those that then failed
        validation.
    lines
        Batch lines answered by the responder machinery, whatever their status.
    line_statuses
        Those lines by the status of their answer.
    cancels
        Cancel requests that moved a batch to ``cancelling``.
    statuses
        Batches by their current status.
    """

    files: int = 0
    batches: int = 0
    lines: int = 0
    line_statuses: dict[int, int] = field(default_factory=dict)
    cancels: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class _Line:
    number: int  # 1-based, as OpenAI reports it
    custom_id: str
    url: str
    body: dict[str, Any]


@dataclass
class _Batch:
    obj: dict[str, Any]
    azure: bool
    cancel_requested: bool = False
    output: list[bytes] = field(default_factory=list)
    errors: list[bytes] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _reply(obj: Any, status: int = 200) -> BatchReply:
    return BatchReply(status, _json(obj))


def _error(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> BatchReply:
    # The shape of every OpenAI error, as the server's own ``_error`` builds it.
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return BatchReply(status, _json(body))


def _line_error(code: str, message: str, line: int | None, param: str | None = None) -> Any:
    return {"code": code, "message": message, "param": param, "line": line}


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]] | None:
    """The fields of a ``multipart/form-data`` body: name -> (filename, bytes); None if not."""
    kind, _, params = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        return None
    found = re.search(r'boundary="?([^";]+)"?', params)
    if found is None:
        return None
    delimiter = b"--" + found.group(1).encode()
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        head, sep, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            continue
        headers = head.decode("utf-8", "replace")
        name = re.search(r'(?i)content-disposition:[^\r\n]*?\bname="([^"]*)"', headers)
        if name is None:
            continue
        filename = re.search(r'(?i)content-disposition:[^\r\n]*?\bfilename="([^"]*)"', headers)
        fields[name.group(1)] = (
            filename.group(1) if filename else None,
            data.removesuffix(b"\r\n"),
        )
    return fields


class Batches:
    """The files and batches of one :class:`FakeOpenAIServer`, and the tasks that run them.

    Parameters
    ----------
    answer
        Answers one line: ``(url, body) -> (status, body bytes, request id)``.
    seconds
        How long a batch of ``n`` lines takes in all: it is cut into ``n + 2`` equal steps
        (validating, one per line, finalizing).
    max_lines, max_bytes
        The limits on a batch's lines and on an uploaded file's size.
    expire_after
        When set, a batch expires once it has answered that many lines.
    """

    def __init__(
        self,
        answer: LineAnswer,
        *,
        seconds: float = 0.2,
        max_lines: int = BATCH_MAX_LINES,
        max_bytes: int = BATCH_MAX_BYTES,
        expire_after: int | None = None,
    ) -> None:
        if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"batch_seconds: expected seconds >= 0, got {seconds!r}")
        for name, value in (("batch_max_lines", max_lines), ("batch_max_bytes", max_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if expire_after is not None and (
            not isinstance(expire_after, int) or isinstance(expire_after, bool) or expire_after < 0
        ):
            raise ValueError(f"batch_expire_after: expected an integer >= 0, got {expire_after!r}")
        self._answer = answer
        self._seconds = float(seconds)
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._expire_after = expire_after
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters; files and batches stay."""
        with self._lock:
            self._uploads = 0
            self._created = 0
            self._lines = 0
            self._line_statuses: dict[int, int] = {}
            self._cancels = 0

    def stats(self) -> BatchStats:
        """A snapshot of the counters."""
        with self._lock:
            statuses: dict[str, int] = {}
            for batch in self._batches.values():
                status = batch.obj["status"]
                statuses[status] = statuses.get(status, 0) + 1
            return BatchStats(
                files=self._uploads,
                batches=self._created,
                lines=self._lines,
                line_statuses=dict(self._line_statuses),
                cancels=self._cancels,
                statuses=statuses,
            )

    def snapshot(self) -> list[dict[str, Any]]:
        """Every batch object, oldest first, as ``GET /batches/{id}`` would show it."""
        with self._lock:
            return [json.loads(_json(b.obj)) for b in self._batches.values()]

    @staticmethod
    def serves(path: str) -> bool:
        """Whether ``path`` (without its query) is one of the Batch API's."""
        return _ROUTE.match(path) is not None

    # -- routing ---------------------------------------------------------------------------

    async def reply(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> BatchReply:
        """Answer a request on a path :meth:`serves` (``headers`` have lower-case names)."""
        route = _ROUTE.match(path)
        assert route is not None
        kind, ident, op = route["kind"], route["id"], route["op"]
        azure = route["prefix"].endswith("/openai")
        wanted: dict[tuple[str, str | None, str | None], Callable[[], Any]] = {
            ("POST", "files", None): lambda: self._upload(headers, body),
            ("GET", "files", None): self._list_files,
            ("GET", "files", "id"): lambda: self._file(ident),
            ("GET", "files", "content"): lambda: self._content(ident),
            ("POST", "batches", None): lambda: self._create(body, azure),
            ("GET", "batches", None): lambda: self._list_batches(query),
            ("GET", "batches", "id"): lambda: self._batch(ident),
            ("POST", "batches", "cancel"): lambda: self._cancel(ident),
        }
        key = (method, kind, op if op is not None else "id" if ident is not None else None)
        handler = wanted.get(key)
        if handler is None:
            return _error(404, f"Invalid URL ({method} {path})")
        result: BatchReply = handler()
        return result

    # -- files -----------------------------------------------------------------------------

    def _upload(self, headers: Mapping[str, str], body: bytes) -> BatchReply:
        fields = _multipart(headers.get("content-type", ""), body)
        if fields is None:
            return _error(
                400,
                "Invalid request: expected a multipart/form-data body with 'purpose' and 'file'.",
            )
        purpose = fields.get("purpose")
        if purpose is None:
            return _error(400, "Missing required parameter: 'purpose'.", param="purpose")
        purpose_name = purpose[1].decode("utf-8", "replace")
        if purpose_name != "batch":
            return _error(
                400,
                f"Invalid value for 'purpose': {purpose_name!r}. FakeOpenAIServer takes only "
                "'batch'.",
                param="purpose",
            )
        upload = fields.get("file")
        if upload is None:
            return _error(400, "Missing required parameter: 'file'.", param="file")
        filename, data = upload
        if len(data) > self.max_bytes:
            return _error(
                400,
                f"File is too large: {len(data)} bytes, more than the {self.max_bytes} bytes "
                "a batch input file may hold.",
                param="file",
                code="file_too_large",
            )
        new = self._store(filename or "upload.jsonl", "batch", data)
        with self._lock:
            self._uploads += 1
        return _reply(new.public())

    def _results(self, filename: str, lines: list[bytes]) -> _File | None:
        """A batch's output (or error) file of ``lines``; None when there are none, as
        OpenAI leaves the file id null."""
        if not lines:
            return None
        return self._store(filename, "batch_output", b"".join(line + b"\n" for line in lines))

    def _store(self, filename: str, purpose: str, data: bytes) -> _File:
        new = _File(f"file-{uuid.uuid4().hex}", filename, purpose, data, int(time.time()))
        with self._lock:
            self._files[new.id] = new
        return new

    def _no_file(self, ident: str | None) -> BatchReply:
        return _error(404, f"No such File object: {ident}", param="id")

    def _list_files(self) -> BatchReply:
        with self._lock:
            data = [f.public() for f in self._files.values()]
        return _reply({"object": "list", "data": data, "has_more": False})

    def _file(self, ident: str | None) -> BatchReply:
        found = self._files.get(ident or "")
        return self._no_file(ident) if found is None else _reply(found.public())

    def _content(self, ident: str | None) -> BatchReply:
        found = self._files.get(ident or "")
        if found is None:
            return self._no_file(ident)
        return BatchReply(200, found.data, "application/octet-stream")

    # -- batches ---------------------------------------------------------------------------

    def _create(self, body: bytes, azure: bool) -> BatchReply:
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            request = None
        if not isinstance(request, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(request.get(name), str):
                return _error(
                    400,
                    f"Missing required parameter: '{name}'.",
                    param=name,
                    code="missing_required_parameter",
                )
        endpoints = _AZURE_ENDPOINTS if azure else _OPENAI_ENDPOINTS
        if request["endpoint"] not in endpoints:
            return _error(
                400,
                f"Invalid value for 'endpoint': {request['endpoint']!r}. FakeOpenAIServer "
                f"batches only {sorted(endpoints)}.",
                param="endpoint",
            )
        if request["completion_window"] != _WINDOW:
            return _error(
                400,
                f"Invalid value for 'completion_window': {request['completion_window']!r}. "
                f"Supported values are: '{_WINDOW}'.",
                param="completion_window",
            )
        metadata = request.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and len(metadata) <= _MAX_METADATA
            and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        ):
            return _error(
                400,
                f"Invalid 'metadata': expected at most {_MAX_METADATA} string keys and values.",
                param="metadata",
            )
        source = self._files.get(request["input_file_id"])
        if source is None:
            return _error(
                404, f"No such File object: {request['input_file_id']}", param="input_file_id"
            )
        batch = self._new_batch(request, azure)
        batch.task = asyncio.get_running_loop().create_task(self._run(batch, source.data))
        batch.task.add_done_callback(functools.partial(self._crashed, batch))
        return _reply(batch.obj)

    def _crashed(self, batch: _Batch, task: asyncio.Task[None]) -> None:
        """A batch whose run raised fails, naming the error, as a provider's would, instead
        of staying in progress for ever. Its lines' answers never raise (the server turns a
        responder's error into a 500 line): this is a bug of the server's, made visible."""
        if task.cancelled() or (exc := task.exception()) is None:
            return
        error = _line_error("server_error", f"{type(exc).__name__}: {exc}", None)
        with self._lock:
            batch.obj["errors"] = {"object": "list", "data": [error]}
        self._set(batch, "failed", "failed_at")

    def _new_batch(self, request: dict[str, Any], azure: bool) -> _Batch:
        now = int(time.time())
        obj: dict[str, Any] = {
            "id": f"batch_{uuid.uuid4().hex}",
            "object": "batch",
            "endpoint": request["endpoint"],
            "errors": None,
            "input_file_id": request["input_file_id"],
            "completion_window": request["completion_window"],
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + _WINDOW_SECONDS,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": request.get("metadata"),
        }
        batch = _Batch(obj, azure)
        with self._lock:
            self._batches[obj["id"]] = batch
            self._created += 1
        return batch

    def _batch(self, ident: str | None) -> BatchReply:
        found = self._batches.get(ident or "")
        if found is None:
            return _error(404, f"No such Batch object: {ident}", param="batch_id")
        with self._lock:
            return _reply(found.obj)

    def _list_batches(self, query: str) -> BatchReply:
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        try:
            limit = int(params.get("limit", _DEFAULT_LIST))
        except ValueError:
            limit = 0
        if not 1 <= limit <= _MAX_LIST:
            return _error(400, f"Invalid 'limit': expected 1 to {_MAX_LIST}.", param="limit")
        with self._lock:
            newest = [b.obj for b in reversed(self._batches.values())]
            after = params.get("after")
            if after is not None:
                ids = [o["id"] for o in newest]
                newest = newest[ids.index(after) + 1 :] if after in ids else []
            page = [json.loads(_json(o)) for o in newest[:limit]]
        return _reply(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest) > limit,
            }
        )

    def _cancel(self, ident: str | None) -> BatchReply:
        found = self._batches.get(ident or "")
        if found is None:
            return _error(404, f"No such Batch object: {ident}", param="batch_id")
        with self._lock:
            status = found.obj["status"]
            if status == "cancelling":
                return _reply(found.obj)
            if status not in _ACTIVE:
                return _error(
                    int(HTTPStatus.CONFLICT), f"Cannot cancel a batch with status '{status}'."
                )
            found.cancel_requested = True
            found.obj["status"] = "cancelling"
            found.obj["cancelling_at"] = int(time.time())
            self._cancels += 1
            return _reply(found.obj)

    # -- running a batch -------------------------------------------------------------------

    def _validate(self, data: bytes, endpoint: str) -> tuple[list[_Line], list[Any]]:
        """The lines of an input file, or the errors that fail the batch."""
        raw = [r for r in data.splitlines() if r.strip()]
        if not raw:
            return [], [_line_error("empty_file", "The input file is empty.", None)]
        if len(raw) > self.max_lines:
            message = (
                f"The batch input file has {len(raw)} requests; a batch may hold at most "
                f"{self.max_lines}."
            )
            return [], [_line_error("too_many_tasks", message, None)]
        lines: list[_Line] = []
        errors: list[Any] = []
        seen: set[str] = set()
        models: set[Any] = set()
        for number, text in enumerate(raw, start=1):
            try:
                item = json.loads(text)
            except (ValueError, UnicodeDecodeError):
                item = None
            if not isinstance(item, dict):
                errors.append(
                    _line_error(
                        "invalid_json_line", "This line is not parseable as valid JSON.", number
                    )
                )
                continue
            problem = self._line_problem(item, number, endpoint, seen, models)
            if problem is not None:
                errors.append(problem)
                continue
            lines.append(_Line(number, item["custom_id"], item["url"], item["body"]))
        return lines, errors

    @staticmethod
    def _line_problem(
        item: dict[str, Any], number: int, endpoint: str, seen: set[str], models: set[Any]
    ) -> Any:
        for name, kind in (("custom_id", str), ("method", str), ("url", str), ("body", dict)):
            if not isinstance(item.get(name), kind):
                return _line_error(
                    "missing_required_parameter",
                    f"Missing required parameter: '{name}'.",
                    number,
                    name,
                )
        if item["method"] != "POST":
            return _line_error(
                "invalid_request", "The method of every request must be 'POST'.", number, "method"
            )
        if item["url"] != endpoint:
            return _line_error(
                "url_mismatch",
                "The URL provided for this request does not match the batch endpoint.",
                number,
                "url",
            )
        if item["custom_id"] in seen:
            return _line_error(
                "duplicate_custom_id",
                "The custom_id for this request is a duplicate of another request. The "
                "custom_id parameter must be unique for each request in a batch.",
                number,
                "custom_id",
            )
        seen.add(item["custom_id"])
        models.add(item["body"].get("model"))
        if len(models) > 1:
            return _line_error(
                "model_mismatch",
                "The model of every request in a batch must be the same.",
                number,
                "body.model",
            )
        return None

    def _set(self, batch: _Batch, status: str, stamp: str | None = None) -> None:
        with self._lock:
            batch.obj["status"] = status
            if stamp is not None:
                batch.obj[stamp] = int(time.time())

    async def _run(self, batch: _Batch, data: bytes) -> None:
        lines, errors = self._validate(data, batch.obj["endpoint"])
        step = self._seconds / (len(lines) + 2)
        await asyncio.sleep(step)
        if errors:
            with self._lock:
                batch.obj["errors"] = {"object": "list", "data": errors}
            self._set(batch, "failed", "failed_at")
            return
        with self._lock:
            batch.obj["request_counts"]["total"] = len(lines)
            if not batch.cancel_requested:
                batch.obj["status"] = "in_progress"
            batch.obj["in_progress_at"] = int(time.time())
        ended: str | None = None
        for done, line in enumerate(lines):
            if batch.cancel_requested:
                ended = "cancelled"
            elif self._expire_after is not None and done >= self._expire_after:
                ended = "expired"
            if ended is not None:
                self._abandon(batch, lines[done:], ended)
                break
            await asyncio.sleep(step)
            await self._run_line(batch, line)
        if ended is None and batch.cancel_requested:  # cancelled during the last line
            ended = "cancelled"
        if ended is None:
            self._set(batch, "finalizing", "finalizing_at")
        await asyncio.sleep(step)
        if ended is None and batch.cancel_requested:  # cancelled while finalizing
            ended = "cancelled"
        self._finish(batch, ended or "completed")

    async def _run_line(self, batch: _Batch, line: _Line) -> None:
        status, raw, request_id = await self._answer(line.url, dict(line.body))
        try:
            body: Any = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            body = raw.decode("utf-8", "replace")  # a malformed answer, kept as text
        out = {
            "id": f"batch_req_{uuid.uuid4().hex}",
            "custom_id": line.custom_id,
            "response": {
                "status_code": status,
                "request_id": request_id or f"req_{uuid.uuid4().hex}",
                "body": body,
            },
            "error": None,
        }
        ok = status == HTTPStatus.OK
        with self._lock:
            (batch.output if ok else batch.errors).append(_json(out))
            batch.obj["request_counts"]["completed" if ok else "failed"] += 1
            self._lines += 1
            self._line_statuses[status] = self._line_statuses.get(status, 0) + 1

    def _abandon(self, batch: _Batch, rest: list[_Line], why: str) -> None:
        error = _EXPIRED_ERROR if why == "expired" else _CANCELLED_ERROR
        with self._lock:
            for line in rest:
                batch.errors.append(
                    _json(
                        {
                            "id": f"batch_req_{uuid.uuid4().hex}",
                            "custom_id": line.custom_id,
                            "response": None,
                            "error": error,
                        }
                    )
                )

    def _finish(self, batch: _Batch, status: str) -> None:
        stem = batch.obj["id"]
        output = self._results(f"{stem}_output.jsonl", batch.output)
        errors = self._results(f"{stem}_error.jsonl", batch.errors)
        stamp = {"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}
        with self._lock:
            batch.obj["output_file_id"] = output.id if output else None
            batch.obj["error_file_id"] = errors.id if errors else None
            batch.obj["status"] = status
            batch.obj[stamp[status]] = int(time.time())

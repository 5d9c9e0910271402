"""The HTTP plumbing of :class:`~safecons.testing.FakeOpenAIServer`: requests and answers as
plain values, and OpenAI's error body.

aiohttp parses HTTP; the server turns its request into a :class:`Request` and builds a
:class:`Response`, so that its logic (faults, limits, answers) is plain code, the same for a
live request and for a line of a batch.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = (
    "BatchExchange",
    "BatchTamper",
    "Request",
    "Response",
    "error",
    "json_bytes",
    "seconds_header",
)


@dataclass(slots=True)
class Request:
    """A request as the server's logic reads it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass(slots=True)
class Response:
    """An answer as the server's logic writes it (the server hands it to aiohttp)."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "application/json"


@dataclass(frozen=True)
class BatchExchange:
    """One request to a :class:`~safecons.testing.FakeOpenAIServer`'s Batch API and its honest
    answer, as a ``batch_tamper`` sees it.

    :attr:`kind` says which request it was: ``"upload"``, ``"create"``, ``"list"``,
    ``"batch"`` (a look at one batch), ``"cancel"``, ``"content"`` (a file's bytes),
    ``"file"``, or ``"other"``.

    Examples
    --------
    >>> BatchExchange("POST", "/v1/batches", "", 200, b'{"id": "b"}', None).kind
    'create'
    """

    method: str
    path: str
    query: str
    status: int
    body: bytes
    request: web.BaseRequest

    @property
    def kind(self) -> str:
        parts = self.path.rstrip("/").split("/")
        if "files" in parts:
            if parts[-1] == "content":
                return "content"
            return "upload" if self.method == "POST" else "file"
        if "batches" in parts:
            if parts[-1] == "cancel":
                return "cancel"
            if parts[-1] == "batches":
                return "create" if self.method == "POST" else "list"
            return "batch"
        return "other"

    def json(self) -> Any:
        """The honest answer's JSON."""
        return json.loads(self.body)


#: A hostile Batch API: an exchange in, another answer (or None: the honest one) out.
BatchTamper = Callable[
    [BatchExchange], "web.StreamResponse | Awaitable[web.StreamResponse | None] | None"
]


def json_bytes(obj: Any) -> bytes:
    """``obj`` as compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()


def error(
    status: int,
    message: str,
    *,
    type_: str | None = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> Response:
    """An answer with OpenAI's error body."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return Response(status, json_bytes(body), headers or [])


def seconds_header(value: float) -> str:
    """A number of seconds as a header value."""
    # "2" rather than "2.0" for whole numbers, as real servers send; fractions are kept.
    return str(int(value)) if float(value).is_integer() else repr(float(value))

"""A loopback OpenAI-compatible chat-completions server with fault injection, for tests.

:class:`FakeOpenAIServer` serves HTTP on ``127.0.0.1`` through ``aiohttp.web`` (aiohttp is a core
dependency: the clients' wire, so it brings no new one) to stand in for OpenAI,
Azure OpenAI, vLLM, Ollama or a llama.cpp server, so that the whole client stack - sockets,
connection pools, timeouts, retries - is exercised for real, offline. This module holds what is
ours: faults, responders, statistics; aiohttp parses HTTP. The server runs its own event loop in
a daemon thread, so the same object works in synchronous tests and inside async ones.

Examples
--------
>>> import httpx
>>> with FakeOpenAIServer(responder=lambda body: "hello") as srv:
...     r = httpx.post(f"{srv.base_url}/chat/completions",
...                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
>>> r.status_code, r.json()["choices"][0]["message"]["content"]
(200, 'hello')
>>> srv.stats.requests_by_model
{'m': 1}
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import inspect
import itertools
import json
import logging
import math
import random
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final, Literal, get_args

from aiohttp import web

from .._tokens import completion_budget, estimate_tokens
from ._batch_server import BATCH_MAX_BYTES, BATCH_MAX_LINES, Batches, BatchStats

__all__ = (
    "DEFAULT_RECORDED_HEADERS",
    "FAULT_KINDS",
    "FakeOpenAIServer",
    "Fault",
    "FaultKind",
    "FaultScript",
    "FaultTable",
    "RateLimit",
    "RequestRecord",
    "Responder",
    "ServerStats",
    "echo_responder",
    "openai_duration",
    "route_by_model",
)

logger = logging.getLogger(__name__)

FaultKind = Literal[
    "rate_limit",
    "server_error",
    "slow",
    "content_filter_400",
    "content_filter_finish",
    "refusal",
    "malformed",
    "reset",
    "unauthorized",
    "forbidden",
    "bad_request",
    "model_not_found",
]
#: Every fault kind :class:`Fault` accepts.
FAULT_KINDS: Final[frozenset[str]] = frozenset(get_args(FaultKind))

#: Turns a parsed request body into the assistant's text (or an awaitable of it).
Responder = Callable[[dict[str, Any]], str | Awaitable[str]]

#: Request headers kept in :attr:`RequestRecord.headers` unless ``record_headers`` says otherwise.
DEFAULT_RECORDED_HEADERS: Final[tuple[str, ...]] = (
    "accept",
    "content-type",
    "openai-organization",
    "openai-project",
    "user-agent",
    "x-request-id",
)
# Credentials are never recorded, whatever the caller asks for.
_SECRET_HEADERS: Final[frozenset[str]] = frozenset(
    {"authorization", "api-key", "proxy-authorization", "cookie", "x-api-key"}
)

_DEFAULT_SLOW_DELAY: Final = 1.0
_DEFAULT_REFUSAL: Final = "I'm sorry, but I can't help with that request."
_DEFAULT_MALFORMED: Final = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": ['
_CONTENT_FILTER_MESSAGE: Final = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management "
    "policy. Please modify your prompt and retry. To learn more about our content filtering "
    "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)
_FILTER_RESULT: Final[dict[str, Any]] = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": True, "severity": "high"},
}
_MAX_BODY: Final = 32 * 1024 * 1024
#: Room for a multipart envelope around a batch input file of the largest size allowed.
_MULTIPART_SLACK: Final = 1024 * 1024
#: An HTTP status code is a three-digit integer (RFC 9110, section 15): at least 100...
_MIN_STATUS: Final = 100
#: ... and at most 599.
_MAX_STATUS: Final = 599
#: The highest TCP port: a port number is 16 bits (0 asks the system for a free one).
_MAX_PORT: Final = 65535
_DEPLOYMENT = re.compile(r"/deployments/([^/]+)/chat/completions/?$")
_WORD = re.compile(r"\S+")


# --------------------------------------------------------------------------------------------
# Faults


@dataclass(eq=True, unsafe_hash=True)
class Fault(Exception):
    """A fault to inject into one request; immutable, and raisable from a responder.

    Use the convenience constructors (``Fault.rate_limit(retry_after=0.05)``, ...) rather than
    the bare class. A ``Fault`` is returned by a ``faults=`` script, used as a key of a
    ``faults=`` mapping, or raised by a responder (``raise Fault.refusal()``). It is an
    exception so that it can be raised, which is why it is not a ``frozen`` dataclass (frozen
    exceptions break ``contextlib``); its fields still cannot be reassigned.

    Parameters
    ----------
    kind
        One of :data:`FAULT_KINDS`; the wire behaviour of each:

        ``rate_limit``
            429 with OpenAI's ``rate_limit_exceeded`` error body, and ``Retry-After`` (seconds,
            possibly fractional, e.g. ``"0.05"``) and/or ``retry-after-ms`` headers for the
            fields that are set. Neither set: no retry header at all.
        ``server_error``
            500 (or ``status``: 502, 503, ...) with OpenAI's ``server_error`` body.
        ``slow``
            Waits ``delay`` seconds (default 1) on top of the latency, then answers normally,
            to push a request past a client's timeout.
        ``content_filter_400``
            400 with Azure's content-filter body (``"code": "content_filter"``,
            ``"param": "prompt"``, ``innererror.code`` ``ResponsibleAIPolicyViolation``).
        ``content_filter_finish``
            200 with ``finish_reason: "content_filter"`` and ``content`` None (or
            ``message``, as a partial answer).
        ``refusal``
            200 with ``message.refusal`` set (``message`` or a stock refusal) and ``content``
            None, OpenAI's structured-output refusal shape.
        ``malformed``
            200 (or ``status``) with ``message`` as the raw body; by default truncated JSON.
            ``Fault.malformed('{"id": "x"}')`` gives valid JSON without ``choices``.
        ``reset``
            Closes the connection with a TCP reset and no response.
        ``unauthorized`` / ``forbidden``
            401 with OpenAI's ``invalid_api_key`` body / 403 with a permission error.
        ``bad_request``
            400 ``invalid_request_error`` (non-retryable).
        ``model_not_found``
            404 with OpenAI's ``model_not_found`` body (what :func:`route_by_model` raises).
    retry_after, retry_after_ms
        ``rate_limit`` only: values of the ``Retry-After`` (seconds) and ``retry-after-ms``
        headers.
    delay
        ``slow`` only: seconds to wait.
    status
        HTTP status overriding the kind's own (``server_error`` needs a 5xx). Not allowed for
        ``slow``, ``reset``, ``refusal`` and ``content_filter_finish``, which have none.
    message
        Error message, refusal text, partial content or raw body, depending on the kind. For a
        ``slow`` fault raised by a responder (which then has no answer to give), the answer.

    Examples
    --------
    >>> Fault.rate_limit(retry_after=0.05)
    Fault(kind='rate_limit', retry_after=0.05, retry_after_ms=None, delay=None, status=None, message=None)
    >>> Fault.server_error(503).status
    503
    >>> Fault("teapot")
    Traceback (most recent call last):
    ...
    ValueError: Fault.kind: expected one of [...], got 'teapot'
    """  # noqa: E501

    kind: FaultKind
    retry_after: float | None = None
    retry_after_ms: float | None = None
    delay: float | None = None
    status: int | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"Fault.kind: expected one of {sorted(FAULT_KINDS)}, got {self.kind!r}"
            )
        for name in ("retry_after", "retry_after_ms", "delay"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0
            ):
                raise ValueError(f"Fault.{name}: expected a number >= 0, got {value!r}")
        if self.status is not None:
            if self.kind in ("slow", "reset", "refusal", "content_filter_finish"):
                raise ValueError(f"Fault.status: a {self.kind} fault has no status of its own")
            if not isinstance(self.status, int) or not _MIN_STATUS <= self.status <= _MAX_STATUS:
                raise ValueError(f"Fault.status: expected an HTTP status, got {self.status!r}")
            if self.kind == "server_error" and not (
                HTTPStatus.INTERNAL_SERVER_ERROR <= self.status <= _MAX_STATUS
            ):
                raise ValueError(f"Fault.status: server_error needs a 5xx, got {self.status}")

    def __setattr__(self, name: str, value: Any) -> None:
        # Emulates frozen=True for the fields only: raising sets __traceback__ and friends.
        if name in _FAULT_FIELDS and name in self.__dict__:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FAULT_FIELDS:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)

    def __str__(self) -> str:
        return repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``, which a dataclass __init__ leaves empty.
        return (Fault, tuple(getattr(self, f) for f in _FAULT_FIELDS))

    @classmethod
    def rate_limit(
        cls,
        retry_after: float | None = None,
        *,
        retry_after_ms: float | None = None,
        message: str | None = None,
    ) -> Fault:
        """429 ``rate_limit_exceeded``, with the given retry headers (none when unset)."""
        return cls(
            "rate_limit", retry_after=retry_after, retry_after_ms=retry_after_ms, message=message
        )

    @classmethod
    def server_error(cls, status: int = 500, *, message: str | None = None) -> Fault:
        """A 5xx ``server_error``."""
        return cls("server_error", status=status, message=message)

    @classmethod
    def slow(cls, delay: float = _DEFAULT_SLOW_DELAY, *, message: str | None = None) -> Fault:
        """Answer normally, ``delay`` seconds late."""
        return cls("slow", delay=delay, message=message)

    @classmethod
    def content_filter_400(cls, *, message: str | None = None) -> Fault:
        """400 with Azure's prompt content-filter body."""
        return cls("content_filter_400", message=message)

    @classmethod
    def content_filter_finish(cls, partial: str | None = None) -> Fault:
        """200 with ``finish_reason: "content_filter"`` and ``partial`` (None) as content."""
        return cls("content_filter_finish", message=partial)

    @classmethod
    def refusal(cls, text: str | None = None) -> Fault:
        """200 with ``message.refusal`` set and no content."""
        return cls("refusal", message=text)

    @classmethod
    def malformed(cls, body: str | None = None, *, status: int | None = None) -> Fault:
        """A response whose body is ``body`` (default: truncated JSON), not a chat completion."""
        return cls("malformed", message=body, status=status)

    @classmethod
    def reset(cls) -> Fault:
        """Close the connection (TCP reset) without a response."""
        return cls("reset")

    @classmethod
    def unauthorized(cls, *, message: str | None = None) -> Fault:
        """401 ``invalid_api_key``."""
        return cls("unauthorized", message=message)

    @classmethod
    def forbidden(cls, *, message: str | None = None) -> Fault:
        """403 permission error."""
        return cls("forbidden", message=message)

    @classmethod
    def bad_request(cls, message: str | None = None) -> Fault:
        """400 ``invalid_request_error``."""
        return cls("bad_request", message=message)

    @classmethod
    def model_not_found(cls, model: str) -> Fault:
        """404 ``model_not_found`` for ``model``."""
        return cls(
            "model_not_found",
            message=f"The model `{model}` does not exist or you do not have access to it.",
        )


_FAULT_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(Fault))

#: ``(request_index, body) -> Fault | None``: scripts the fault of each request exactly.
FaultScript = Callable[[int, dict[str, Any]], Fault | None]
#: Fault -> probability; a key is a kind name (``str``) or a :class:`Fault`. Typed ``Any`` as
#: ``Mapping`` is invariant in its key, so no precise type accepts ``dict[str, float]``,
#: ``dict[Fault, float]`` and a literal mixing both; keys are checked when the server is built.
FaultTable = Mapping[Any, float]


# --------------------------------------------------------------------------------------------
# Responders


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content-part lists: [{"type": "text", "text": ...}, ...]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def echo_responder(body: dict[str, Any]) -> str:
    """The default responder: ``"echo: "`` followed by the last user message.

    Deterministic, so a test can predict every answer.

    Examples
    --------
    >>> echo_responder({"messages": [{"role": "system", "content": "be nice"},
    ...                              {"role": "user", "content": "hi there"}]})
    'echo: hi there'
    >>> echo_responder({"messages": []})
    'echo: '
    """
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return f"echo: {_text_of(message.get('content'))}"
    return "echo: "


class _ModelRouter:
    """A responder dispatching on ``body["model"]``; see :func:`route_by_model`."""

    def __init__(self, routes: Mapping[str, Responder], default: Responder | None) -> None:
        self.routes = dict(routes)
        self.default = default

    @property
    def models(self) -> list[str]:
        return list(self.routes)

    def __call__(self, body: dict[str, Any]) -> str | Awaitable[str]:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise Fault.bad_request("you must provide a model parameter")
        responder = self.routes.get(model, self.default)
        if responder is None:
            raise Fault.model_not_found(model)
        return responder(body)

    def __repr__(self) -> str:
        return f"route_by_model({self.models!r})"


def route_by_model(
    routes: Mapping[str, Responder], *, default: Responder | None = None
) -> Responder:
    """A responder that hands each request to the responder of its ``model``.

    Parameters
    ----------
    routes
        Model name to responder (sync or async), e.g. one for the SUT and one for the judge.
    default
        Responder for models not in ``routes``. Without it such a request gets OpenAI's 404
        ``model_not_found`` error, and a request without a model gets a 400.

    Returns
    -------
    Responder
        Also lists the models in ``GET /v1/models``.

    Examples
    --------
    >>> import httpx
    >>> responder = route_by_model({"sut": lambda b: "an answer",
    ...                             "judge": lambda b: '{"label": "Consistent", "score": 1}'})
    >>> with FakeOpenAIServer(responder=responder) as srv:
    ...     url = f"{srv.base_url}/chat/completions"
    ...     ok = httpx.post(url, json={"model": "judge", "messages": []})
    ...     missing = httpx.post(url, json={"model": "gpt-9", "messages": []})
    >>> ok.json()["choices"][0]["message"]["content"]
    '{"label": "Consistent", "score": 1}'
    >>> missing.status_code, missing.json()["error"]["code"]
    (404, 'model_not_found')
    """
    if not routes:
        raise ValueError("route_by_model: expected at least one model")
    for name, responder in routes.items():
        if not isinstance(name, str) or not callable(responder):
            raise TypeError(f"route_by_model: expected str -> callable, got {name!r}")
    return _ModelRouter(routes, default)


# --------------------------------------------------------------------------------------------
# Statistics


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server received it.

    Attributes
    ----------
    index
        Arrival order among all requests since start (or :meth:`FakeOpenAIServer.reset_stats`).
    method, path, query
        Request method, path and raw query string (``"api-version=2024-10-21"``).
    headers
        The recorded headers (lower-case names, see ``record_headers``); never credentials.
    auth_header
        Which credential header was present - ``"authorization"``, ``"api-key"`` or None. The
        value itself is never stored.
    body
        The parsed JSON body (None when absent or not JSON).
    model
        ``body["model"]`` when it is a string.
    status
        Status sent back; None while in flight or when the connection was reset.
    fault
        Kind of the fault applied, if any.
    error
        What the responder raised, when it raised something other than a :class:`Fault`.
    """

    index: int
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    auth_header: str | None
    body: Any
    model: str | None
    status: int | None = None
    fault: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of a server's statistics (see :attr:`FakeOpenAIServer.stats`).

    Attributes
    ----------
    requests
        Every HTTP request received, on any path.
    connections
        TCP connections accepted: with keep-alive, far fewer than ``requests``.
    requests_by_model
        Chat-completions requests with a JSON-object body, by ``body["model"]`` (None when the
        body has none, e.g. Azure clients that name only the deployment), whatever their
        outcome.
    temperatures
        For the same requests, ``body["temperature"]`` in arrival order, by model; None when
        the request carried no (numeric) temperature.
    in_flight
        Requests being handled now.
    max_in_flight
        The most requests ever handled at once.
    faults
        Faults applied, by kind (including those raised by the responder).
    statuses
        Responses sent, by HTTP status.
    log
        The most recent requests (up to ``log_size``), oldest first.
    rate_limited
        Requests the server's ``rate_limit`` answered 429 (injected faults are in ``faults``).
    batch
        What the Batch API did: files uploaded, batches created, lines answered, cancels (a
        :class:`~safecons.testing._batch_server.BatchStats`).
    """

    requests: int
    connections: int
    requests_by_model: dict[str | None, int]
    temperatures: dict[str | None, list[float | None]]
    in_flight: int
    max_in_flight: int
    faults: dict[str, int]
    statuses: dict[int, int]
    log: tuple[RequestRecord, ...]
    rate_limited: int = 0
    batch: BatchStats = field(default_factory=BatchStats)


class _Record:
    __slots__ = (
        "auth_header",
        "body",
        "error",
        "fault",
        "headers",
        "index",
        "method",
        "model",
        "path",
        "query",
        "status",
    )

    def __init__(
        self,
        *,
        index: int,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        auth_header: str | None,
    ) -> None:
        self.index = index
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.auth_header = auth_header
        self.body: Any = None
        self.model: str | None = None
        self.status: int | None = None
        self.fault: str | None = None
        self.error: str | None = None

    def freeze(self) -> RequestRecord:
        return RequestRecord(
            index=self.index,
            method=self.method,
            path=self.path,
            query=self.query,
            headers=dict(self.headers),
            auth_header=self.auth_header,
            body=self.body,
            model=self.model,
            status=self.status,
            fault=self.fault,
            error=self.error,
        )


# --------------------------------------------------------------------------------------------
# HTTP plumbing


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass(frozen=True)
class BatchExchange:
    """One request to a :class:`FakeOpenAIServer`'s Batch API and its honest answer, as a
    ``batch_tamper`` sees it.

    :attr:`kind` says which request it was: ``"upload"``, ``"create"``, ``"list"``,
    ``"batch"`` (a look at one batch), ``"cancel"``, ``"content"`` (a file's bytes),
    ``"file"``, or ``"other"``.
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


@dataclass(slots=True)
class _Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "application/json"


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _error(
    status: int,
    message: str,
    *,
    type_: str | None = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> _Response:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return _Response(status, _json_bytes(body), headers or [])


def _seconds_header(value: float) -> str:
    # "2" rather than "2.0" for whole numbers, as real servers send; fractions are kept.
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _fault_response(fault: Fault) -> _Response:
    kind = fault.kind
    if kind == "rate_limit":
        headers = []
        wait = "a moment"
        if fault.retry_after is not None:
            headers.append(("retry-after", _seconds_header(fault.retry_after)))
            wait = f"{fault.retry_after:g}s"
        if fault.retry_after_ms is not None:
            headers.append(("retry-after-ms", _seconds_header(fault.retry_after_ms)))
            wait = f"{fault.retry_after_ms:g}ms"
        message = fault.message or (
            "Rate limit reached for requests per min (RPM) on this fake server. "
            f"Please try again in {wait}."
        )
        return _error(
            fault.status or 429,
            message,
            type_="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )
    if kind == "server_error":
        message = fault.message or (
            "The server had an error while processing your request. Sorry about that!"
        )
        return _error(fault.status or 500, message, type_="server_error")
    if kind == "content_filter_400":
        status = fault.status or 400
        body = {
            "error": {
                "message": fault.message or _CONTENT_FILTER_MESSAGE,
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": status,
                "innererror": {
                    "code": "ResponsibleAIPolicyViolation",
                    "content_filter_result": _FILTER_RESULT,
                },
            }
        }
        return _Response(status, _json_bytes(body))
    if kind == "malformed":
        raw = _DEFAULT_MALFORMED if fault.message is None else fault.message
        return _Response(fault.status or 200, raw.encode())
    if kind == "unauthorized":
        message = fault.message or (
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        return _error(fault.status or 401, message, code="invalid_api_key")
    if kind == "forbidden":
        message = fault.message or "You are not allowed to sample from this model."
        return _error(fault.status or 403, message, code="permission_denied")
    if kind == "bad_request":
        message = fault.message or "Invalid request: the fake server was told to reject it."
        return _error(fault.status or 400, message)
    if kind == "model_not_found":
        message = fault.message or "The model does not exist or you do not have access to it."
        return _error(fault.status or 404, message, code="model_not_found", param="model")
    raise AssertionError(f"no error response for fault kind {kind!r}")  # pragma: no cover


def _count_words(text: str) -> int:
    return len(_WORD.findall(text))


def _prompt_words(body: dict[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(_count_words(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))


# --------------------------------------------------------------------------------------------
# A provider's rate limit

#: Seconds in the minute a requests-per-minute limit is stated in.
_MINUTE: Final = 60.0


def openai_duration(seconds: float) -> str:
    """A wait in the form OpenAI's ``x-ratelimit-reset-*`` headers send it.

    Below a second in whole milliseconds (rounded up, so a client never comes back early),
    below a minute in seconds, above in minutes and seconds.

    Examples
    --------
    >>> openai_duration(0.35), openai_duration(1.0), openai_duration(2.5), openai_duration(360.0)
    ('350ms', '1s', '2.5s', '6m0s')
    """
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000 - 1e-9))}ms"
    if seconds < _MINUTE:
        return f"{math.ceil(seconds * 1000 - 1e-9) / 1000:g}s"
    minutes, rest = divmod(seconds, _MINUTE)
    return f"{int(minutes)}m{math.ceil(rest * 1000 - 1e-9) / 1000:g}s"


@dataclass(frozen=True)
class RateLimit:
    """A provider's requests-per-minute and tokens-per-minute limits, enforced in fixed windows.

    The server's time is cut into windows of ``window`` seconds from its start; each admits
    ``requests_per_minute * window / 60`` requests and ``tokens_per_minute * window / 60``
    tokens (each at least one; a limit left None is not enforced, and at least one must be
    set). A request's tokens are counted as OpenAI counts them when it admits the request,
    before any answer exists: its prompt's estimate (:func:`safecons._tokens.estimate_tokens`
    of its ``messages``, with the model it names) plus its ``max_completion_tokens`` or
    ``max_tokens``, or ``unbounded_completion_tokens`` when it sets neither (0 by default:
    the prompt alone, since the answer's length is not known at admission).

    Every chat-completions request past a limit, until the window ends, is answered 429
    ``rate_limit_exceeded`` ("... requests per min (RPM) ..." or "... tokens per min (TPM)
    ...") with a ``Retry-After`` of the seconds left in the window; a request of more tokens
    than a whole window admits is answered 429 "Request too large" with no ``Retry-After``,
    as OpenAI does (waiting does not mend it). A request answered 429 does not count against
    the window. Every chat-completions answer (a 429 of the limit too) carries OpenAI's
    headers for each limit set: ``x-ratelimit-limit-requests`` (what a window admits: the RPM
    for the default one-minute window), ``x-ratelimit-remaining-requests`` (what is left of
    this window) and ``x-ratelimit-reset-requests`` (when it ends, in OpenAI's form:
    ``"350ms"``, ``"6m0s"``); ``x-ratelimit-{limit,remaining,reset}-tokens`` the same in
    tokens. A window shorter than a minute keeps a test short at the same rate. Each model
    named in the requests' ``model`` has windows of its own, as OpenAI limits each model apart.

    Examples
    --------
    >>> RateLimit(600, window=1.0).per_window
    10
    >>> RateLimit(tokens_per_minute=60_000, window=1.0).tokens_per_window
    1000
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    window: float = _MINUTE
    unbounded_completion_tokens: int = 0
    #: A token bucket instead of fixed windows: each limit holds at most what one window
    #: admits and refills continuously at the limit's rate (``requests_per_minute / 60`` a
    #: second), as OpenAI describes its limits. ``remaining`` is what the bucket holds after
    #: the request, ``reset`` the time until it is full again, and a 429's ``Retry-After``
    #: the time until the request would fit.
    bucket: bool = False
    #: With ``bucket=True``: what ``x-ratelimit-reset-*`` says, the time until the bucket is
    #: ``"full"`` (OpenAI's "resets to its initial state") or until the ``"next"`` request
    #: fits (as some gateways send); ``limit`` is then what a minute admits, as OpenAI's RPM.
    bucket_reset: Literal["full", "next"] = "full"
    #: The ``x-ratelimit-limit-requests`` the server announces instead of what it enforces
    #: (None: the truth). A provider may announce a per-minute limit and enforce it in
    #: sub-minute slices, as OpenAI documents: ``RateLimit(600, window=1.0, bucket=True,
    #: announced_requests=600)`` says 600 a minute while it holds a bucket of 10 refilled at
    #: 10 a second (its remaining and reset honest about that bucket).
    announced_requests: int | None = None
    #: With ``bucket=True``: ``x-ratelimit-remaining-requests`` is what the bucket held when
    #: the request arrived, the request itself not taken out (an off-by-one some gateways
    #: make), so a client that believes it sends one request too many each time it drains.
    remaining_before: bool = False

    def __post_init__(self) -> None:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("RateLimit: set requests_per_minute, tokens_per_minute or both")
        for name in ("requests_per_minute", "tokens_per_minute", "window"):
            value = getattr(self, name)
            if value is None and name != "window":
                continue
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"RateLimit.{name}: expected a number > 0, got {value!r}")
        announced = self.announced_requests
        if announced is not None and (
            not isinstance(announced, int) or isinstance(announced, bool) or announced <= 0
        ):
            raise ValueError(
                f"RateLimit.announced_requests: expected a whole number > 0 or None, "
                f"got {announced!r}"
            )
        unbounded = self.unbounded_completion_tokens
        if not isinstance(unbounded, int) or isinstance(unbounded, bool) or unbounded < 0:
            raise ValueError(
                f"RateLimit.unbounded_completion_tokens: expected a whole number >= 0, "
                f"got {unbounded!r}"
            )

    @property
    def per_window(self) -> int | None:
        """Requests one window admits (None: requests are not limited)."""
        rpm = self.requests_per_minute
        return None if rpm is None else max(1, int(rpm * self.window / _MINUTE))

    @property
    def tokens_per_window(self) -> int | None:
        """Tokens one window admits (None: tokens are not limited)."""
        tpm = self.tokens_per_minute
        return None if tpm is None else max(1, int(tpm * self.window / _MINUTE))

    def request_tokens(self, body: Mapping[str, Any]) -> int:
        """What a chat request ``body`` counts against the tokens a window admits."""
        messages = body.get("messages")
        model = body.get("model")
        prompt = estimate_tokens(
            [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else [],
            model=model if isinstance(model, str) else None,
        )
        budget = completion_budget(body)
        return prompt + (self.unbounded_completion_tokens if budget is None else budget)


class _Bucket:
    """The token buckets of a :class:`RateLimit` with ``bucket=True``, one pair per model
    (the caller holds the server's lock)."""

    def __init__(self, limit: RateLimit, start: float) -> None:
        self.limit = limit
        # model -> [requests held, tokens held, when they were last counted]
        self._held: dict[str | None, list[float]] = {}
        self._start = start

    def admit(
        self, now: float, tokens: int = 0, model: str | None = None
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """As :meth:`_Window.admit`, on buckets that refill continuously."""
        limit = self.limit
        size = limit.window
        requests, bucket_tokens = limit.per_window, limit.tokens_per_window
        held = self._held.setdefault(
            model, [float(requests or 0), float(bucket_tokens or 0), self._start]
        )
        elapsed = max(0.0, now - held[2])
        held[2] = now
        if requests is not None:
            held[0] = min(float(requests), held[0] + elapsed * requests / size)
        if bucket_tokens is not None:
            held[1] = min(float(bucket_tokens), held[1] + elapsed * bucket_tokens / size)
        refusal, wait, mendable = None, 0.0, True
        if requests is not None and held[0] < 1:
            wait = (1 - held[0]) * size / requests
            refusal = (
                f"Rate limit reached for requests per min (RPM): Limit {requests}, Used "
                f"{requests - int(held[0])}, Requested 1. Please try again later."
            )
        elif bucket_tokens is not None and tokens > bucket_tokens:
            mendable = False
            refusal = (
                f"Request too large for tokens per min (TPM): Limit {bucket_tokens}, Requested "
                f"{tokens}. The input or output tokens must be reduced in order to run "
                "successfully."
            )
        elif bucket_tokens is not None and held[1] < tokens:
            wait = (tokens - held[1]) * size / bucket_tokens
            refusal = (
                f"Rate limit reached for tokens per min (TPM): Limit {bucket_tokens}, Used "
                f"{bucket_tokens - int(held[1])}, Requested {tokens}. Please try again later."
            )
        if refusal is None:
            if requests is not None:
                held[0] -= 1
            if bucket_tokens is not None:
                held[1] -= tokens
        headers = []
        nxt = limit.bucket_reset == "next"
        minutes = _MINUTE / size
        if requests is not None:
            level = held[0] + (refusal is None) if limit.remaining_before else held[0]
            full = (requests - held[0]) * size / requests
            step = (0.0 if held[0] >= 1 else 1 - held[0]) * size / requests
            said = int(requests * minutes) if nxt else requests
            if limit.announced_requests is not None:
                said = limit.announced_requests
            headers += [
                ("x-ratelimit-limit-requests", str(said)),
                ("x-ratelimit-remaining-requests", str(int(level))),
                ("x-ratelimit-reset-requests", openai_duration(step if nxt else full)),
            ]
        if bucket_tokens is not None:
            full = (bucket_tokens - held[1]) * size / bucket_tokens
            headers += [
                ("x-ratelimit-limit-tokens", str(bucket_tokens)),
                ("x-ratelimit-remaining-tokens", str(int(held[1]))),
                ("x-ratelimit-reset-tokens", openai_duration(full)),
            ]
        if refusal is not None and mendable:
            headers.append(("retry-after", f"{math.ceil(wait * 1000) / 1000:g}"))
        return refusal, headers


class _Window:
    """The fixed-window counts of a :class:`RateLimit`, one pair per model (the caller holds
    the server's lock)."""

    def __init__(self, limit: RateLimit, start: float) -> None:
        self.limit = limit
        self._start = start
        self._index = 0
        self._used: dict[str | None, list[int]] = {}  # model -> [requests, tokens] used

    def admit(
        self, now: float, tokens: int = 0, model: str | None = None
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether a request for ``model`` of ``tokens`` arriving at ``now`` is admitted (None)
        or why not (the 429's message), and the headers of its answer."""
        limit = self.limit
        size = limit.window
        index = int((now - self._start) // size)
        if index != self._index:
            self._index = index
            self._used.clear()
        used = self._used.setdefault(model, [0, 0])
        requests, window_tokens = limit.per_window, limit.tokens_per_window
        refusal, mendable = None, True
        if requests is not None and used[0] >= requests:
            refusal = (
                f"Rate limit reached for requests per min (RPM): Limit {requests}, Used "
                f"{used[0]}, Requested 1. Please try again later."
            )
        elif window_tokens is not None and tokens > window_tokens:
            mendable = False  # no window will ever admit it
            refusal = (
                f"Request too large for tokens per min (TPM): Limit {window_tokens}, Requested "
                f"{tokens}. The input or output tokens must be reduced in order to run "
                "successfully."
            )
        elif window_tokens is not None and used[1] + tokens > window_tokens:
            refusal = (
                f"Rate limit reached for tokens per min (TPM): Limit {window_tokens}, Used "
                f"{used[1]}, Requested {tokens}. Please try again later."
            )
        if refusal is None:
            used[0] += 1
            used[1] += tokens
        left = max(0.0, self._start + (index + 1) * size - now)
        reset = openai_duration(left)
        headers = []
        if requests is not None:
            headers += [
                ("x-ratelimit-limit-requests", str(limit.announced_requests or requests)),
                ("x-ratelimit-remaining-requests", str(requests - used[0])),
                ("x-ratelimit-reset-requests", reset),
            ]
        if window_tokens is not None:
            headers += [
                ("x-ratelimit-limit-tokens", str(window_tokens)),
                ("x-ratelimit-remaining-tokens", str(window_tokens - used[1])),
                ("x-ratelimit-reset-tokens", reset),
            ]
        if refusal is not None and mendable:
            headers.append(("retry-after", f"{math.ceil(left * 1000) / 1000:g}"))
        return refusal, headers


def _limiter(limit: RateLimit, start: float) -> _Window | _Bucket:
    return _Bucket(limit, start) if limit.bucket else _Window(limit, start)


# --------------------------------------------------------------------------------------------
# The server


class FakeOpenAIServer:
    """An OpenAI-compatible chat-completions server on ``127.0.0.1``, with fault injection.

    Runs an asyncio server in a daemon thread with its own event loop, so it serves equally a
    synchronous test and an ``async`` one (whose own loop it never touches). Use it as a
    context manager or call :meth:`start` and :meth:`stop`.

    Routes: ``POST`` on any path ending in ``/chat/completions`` (``/v1/chat/completions``,
    Azure's ``/openai/deployments/{name}/chat/completions?api-version=...``) and ``GET`` on a
    path ending in ``/models``. Anything else gets a 404 JSON error, a body that is not a JSON
    object a 400, ``"stream": true`` a 400 (streaming is not implemented).

    It also serves OpenAI's Batch API, under whatever precedes ``/files`` or ``/batches``
    (``/v1/files``; Azure's ``/openai/files?api-version=...``), with the same credentials:

    ``POST /files``
        ``multipart/form-data`` with ``purpose=batch`` and ``file`` (JSONL): a file object
        ``{"id": "file-...", "object": "file", "bytes", "created_at", "filename", "purpose"}``.
        Another purpose, no file, or a file over ``batch_max_bytes``: 400.
    ``GET /files``, ``GET /files/{id}``, ``GET /files/{id}/content``
        The files (uploads, outputs and error files), one file object, its raw bytes.
    ``POST /batches``
        ``{"input_file_id", "endpoint", "completion_window": "24h", "metadata"?}``: a batch
        object with every field OpenAI sends, in status ``validating``. The endpoint is
        ``/v1/chat/completions`` (Azure: that or ``/chat/completions``); another endpoint or
        window, or bad metadata, is a 400, an unknown file a 404.
    ``GET /batches/{id}``, ``GET /batches`` (``limit``, ``after``; newest first)
        The batch object; the list ``{"object": "list", "data", "first_id", "last_id",
        "has_more"}``.
    ``POST /batches/{id}/cancel``
        ``cancelling``, then ``cancelled`` once the line in flight is answered; a batch that
        has ended is a 409.

    A batch then runs on the server's loop: ``validating`` -> ``in_progress`` ->
    ``finalizing`` -> ``completed``, in ``batch_seconds`` cut into one step per line plus two,
    so ``request_counts.completed`` rises between polls. An input file that is empty, has more
    than ``batch_max_lines`` lines (``too_many_tasks``), or a line that is not a JSON object
    (``invalid_json_line``), lacks ``custom_id``/``method``/``url``/``body``
    (``missing_required_parameter``), repeats a ``custom_id`` (``duplicate_custom_id``), names
    another url (``url_mismatch``) or another model than the first line (``model_mismatch``)
    makes the batch ``failed``, with ``errors: {"object": "list", "data": [{"code",
    "message", "param", "line"}]}`` (``line`` counts from 1) and no line answered.

    Every line is answered as a live chat-completions request would be, by the same responder,
    latency and faults (it takes the next request index of a fault script), but no rate limit;
    it counts in ``requests_by_model``, ``temperatures`` and ``faults`` (not in ``requests``
    nor the log, which are HTTP). Its answer is the line ``{"id": "batch_req_...",
    "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}``: a 200 in
    the output file, anything else in the error file (a ``reset`` fault as a 500, a malformed
    body as a JSON string). A batch past ``batch_expire_after`` lines ends ``expired``, and a
    cancelled one ``cancelled``: the lines answered are in their files as above, the rest in
    the error file as ``{"id", "custom_id", "response": null, "error": {"code":
    "batch_expired"}}`` (``batch_cancelled``), counted neither completed nor failed. A file id
    is null when it would be empty. :meth:`batches` lists the batch objects and
    :attr:`ServerStats.batch` counts what happened.

    Parameters
    ----------
    responder
        ``body -> str`` (or an async function): the assistant's text for a parsed request body.
        Defaults to :func:`echo_responder`. It may raise a :class:`Fault` to fail its request.
        A synchronous responder runs on the server's loop and must not block; model slowness
        with ``latency`` or an async responder. Anything else it raises becomes a 500 (logged,
        and kept in :attr:`RequestRecord.error`). With ``"n": k`` in the body it is called
        ``k`` times.
    latency
        Seconds every chat-completions request waits (``asyncio.sleep``, so concurrent
        requests overlap) before it is answered, or ``body -> seconds``.
    faults
        Which requests fail, and how. Either

        * a mapping of fault (a kind name from :data:`FAULT_KINDS`, or a :class:`Fault` for
          one with parameters) to probability, total at most 1: for each request one number
          ``u = rng.random()`` is drawn from ``random.Random(seed)``, and the request gets the
          first fault whose cumulative probability (in the mapping's order) exceeds ``u``.
          Draws happen in the order requests arrive, so for sequential requests the outcome
          is exactly reproducible; under concurrency the rate is the same but which request
          gets a fault depends on arrival order, which the OS decides.
        * a callable ``(request_index, body) -> Fault | None`` scripting every request
          exactly, e.g. ``lambda i, body: Fault.rate_limit(0.01) if i < 2 else None``.

        ``request_index`` (and the draws) count, from 0 in arrival order, the chat-completions
        requests that get as far as fault selection: a JSON-object body, valid credentials.
    seed
        Seed of the fault draws.
    api_key
        When set, requests need ``Authorization: Bearer <api_key>`` or ``api-key: <api_key>``,
        otherwise they get 401 ``invalid_api_key``.
    port
        TCP port; 0 (default) picks a free one.
    models
        Model ids listed by ``GET /v1/models``; default: those of a :func:`route_by_model`
        responder, else ``["fake-model"]``.
    record_headers
        Request headers kept in the log; credential headers are refused.
    log_size
        How many requests :attr:`ServerStats.log` keeps (the newest); None keeps all.
    rate_limit
        A provider's requests-per-minute and tokens-per-minute limits (a :class:`RateLimit`,
        or a number of requests per minute in one-minute windows): past one, chat-completions
        requests get 429 with ``Retry-After``, and every answer carries OpenAI's
        ``x-ratelimit-*-requests`` and ``x-ratelimit-*-tokens`` headers of the limits set.
        Its windows start with the server (and again at :meth:`reset_stats`). None: no limit.
    batch_seconds
        How long a batch takes from creation to its end, spread evenly over its lines.
    batch_max_lines, batch_max_bytes
        The Batch API's limits: lines in a batch (OpenAI: 50,000) and bytes in an uploaded file
        (OpenAI: 200 MB). Small ones let a test reach them.
    batch_expire_after
        When set, every batch expires once it has answered that many lines (0: none); None:
        batches never expire.
    batch_tamper
        A hostile Batch API: called with each Batch API exchange (a :class:`BatchExchange`:
        the request and the honest answer) after the server has handled it, it may return
        another answer (an ``aiohttp.web.StreamResponse``, for one sent slowly or compressed),
        or None to send the honest one. The batch itself runs as it would. The recipes of
        :mod:`safecons.testing.hostile` (``nested_json``, ``gzip_bomb``, ``trickle``, ...)
        build them.

    Examples
    --------
    >>> import httpx
    >>> script = lambda i, body: Fault.rate_limit(0.01) if i == 0 else None
    >>> with FakeOpenAIServer(faults=script, latency=0.01) as srv:
    ...     with httpx.Client(base_url=srv.base_url) as http:
    ...         body = {"model": "m", "temperature": 0.7,
    ...                 "messages": [{"role": "user", "content": "hi"}]}
    ...         first = http.post("/chat/completions", json=body)
    ...         second = http.post("/chat/completions", json=body)
    >>> first.status_code, first.headers["retry-after"], first.json()["error"]["code"]
    (429, '0.01', 'rate_limit_exceeded')
    >>> second.json()["choices"][0]["message"]["content"]
    'echo: hi'
    >>> stats = srv.stats
    >>> stats.requests, stats.faults, stats.temperatures
    (2, {'rate_limit': 1}, {'m': [0.7, 0.7]})

    A batch of two lines, the second failed by the fault script, that expires after three:

    >>> import json, time
    >>> lines = [{"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
    ...           "body": {"model": "m", "messages": [{"role": "user", "content": f"hi {i}"}]}}
    ...          for i in range(4)]
    >>> jsonl = "".join(json.dumps(x) + "\\n" for x in lines).encode()
    >>> script = lambda i, body: Fault.server_error(503) if i == 1 else None
    >>> with FakeOpenAIServer(faults=script, batch_seconds=0.05, batch_expire_after=3) as srv:
    ...     with httpx.Client(base_url=srv.base_url) as http:
    ...         file = http.post("/files", data={"purpose": "batch"},
    ...                          files={"file": ("in.jsonl", jsonl)}).json()
    ...         batch = http.post("/batches", json={"input_file_id": file["id"],
    ...                                             "endpoint": "/v1/chat/completions",
    ...                                             "completion_window": "24h"}).json()
    ...         while batch["status"] not in ("completed", "failed", "expired", "cancelled"):
    ...             time.sleep(0.01)
    ...             batch = http.get(f"/batches/{batch['id']}").json()
    ...         out = http.get(f"/files/{batch['output_file_id']}/content").text.splitlines()
    ...         err = http.get(f"/files/{batch['error_file_id']}/content").text.splitlines()
    >>> batch["status"], batch["request_counts"]
    ('expired', {'total': 4, 'completed': 2, 'failed': 1})
    >>> [(x["custom_id"], x["response"]["body"]["choices"][0]["message"]["content"])
    ...  for x in map(json.loads, out)]
    [('q0', 'echo: hi 0'), ('q2', 'echo: hi 2')]
    >>> [(x["custom_id"], x["response"] and x["response"]["status_code"],
    ...   x["error"] and x["error"]["code"]) for x in map(json.loads, err)]
    [('q1', 503, None), ('q3', None, 'batch_expired')]
    >>> srv.stats.batch.lines, srv.stats.batch.files, srv.batches()[0]["status"]
    (3, 1, 'expired')
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        latency: float | Callable[[dict[str, Any]], float] = 0.0,
        faults: FaultTable | FaultScript | None = None,
        seed: int | None = 0,
        api_key: str | None = None,
        port: int = 0,
        models: Iterable[str] | None = None,
        record_headers: Iterable[str] = DEFAULT_RECORDED_HEADERS,
        log_size: int | None = 10_000,
        rate_limit: RateLimit | float | None = None,
        batch_seconds: float = 0.2,
        batch_max_lines: int = BATCH_MAX_LINES,
        batch_max_bytes: int = BATCH_MAX_BYTES,
        batch_expire_after: int | None = None,
        batch_tamper: BatchTamper | None = None,
    ) -> None:
        self._batch_tamper = batch_tamper
        self._responder: Responder = echo_responder if responder is None else responder
        if not callable(self._responder):
            raise TypeError(f"responder: expected a callable, got {responder!r}")
        if not callable(latency) and (
            not isinstance(latency, int | float) or not math.isfinite(latency) or latency < 0
        ):
            raise ValueError(f"latency: expected seconds >= 0 or a callable, got {latency!r}")
        self._latency = latency
        self._fault_script: FaultScript | None = None
        self._fault_table: list[tuple[Fault, float]] = []
        if callable(faults):
            self._fault_script = faults
        elif faults is not None:
            self._fault_table = self._parse_fault_table(faults)
        self._seed = seed
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValueError("api_key: expected a non-empty string or None")
        self._api_key = api_key
        if not isinstance(port, int) or not 0 <= port <= _MAX_PORT:
            raise ValueError(f"port: expected 0..{_MAX_PORT}, got {port!r}")
        self._requested_port = port
        default_models = getattr(self._responder, "models", None)
        self._models = list(models or default_models or ["fake-model"])
        recorded = {h.lower() for h in record_headers}
        if recorded & _SECRET_HEADERS:
            raise ValueError(
                f"record_headers: credentials are never recorded: "
                f"{sorted(recorded & _SECRET_HEADERS)}"
            )
        self._record_headers = frozenset(recorded)
        if log_size is not None and log_size < 0:
            raise ValueError(f"log_size: expected >= 0 or None, got {log_size!r}")
        self._log_size = log_size
        self._rate_limit = (
            rate_limit
            if rate_limit is None or isinstance(rate_limit, RateLimit)
            else RateLimit(rate_limit)
        )
        self._batches = Batches(
            self._batch_line,
            seconds=batch_seconds,
            max_lines=batch_max_lines,
            max_bytes=batch_max_bytes,
            expire_after=batch_expire_after,
        )
        self._batch_ids = itertools.count()

        self._lock = threading.Lock()
        self._reset_counters()

        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        self._port: int | None = None

    @staticmethod
    def _parse_fault_table(faults: FaultTable) -> list[tuple[Fault, float]]:
        table: list[tuple[Fault, float]] = []
        for key, p in faults.items():
            if not isinstance(key, str | Fault):
                raise TypeError(f"faults: expected kind names or Fault keys, got {key!r}")
            fault = key if isinstance(key, Fault) else Fault(key)  # type: ignore[arg-type]
            if not isinstance(p, int | float) or isinstance(p, bool) or not 0 <= p <= 1:
                raise ValueError(f"faults[{key!r}]: expected a probability in [0, 1], got {p!r}")
            table.append((fault, float(p)))
        total = sum(p for _, p in table)
        if total > 1 + 1e-9:
            raise ValueError(f"faults: probabilities add up to {total:g}, more than 1")
        return table

    def _reset_counters(self) -> None:
        # Caller holds the lock (or is __init__).
        self._requests = 0
        self._connections = 0
        self._by_model: dict[str | None, int] = {}
        self._temperatures: dict[str | None, list[float | None]] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._fault_counts: dict[str, int] = {}
        self._statuses: dict[int, int] = {}
        self._log: deque[_Record] = deque(maxlen=self._log_size)
        self._fault_index = 0
        self._rng = random.Random(self._seed)
        self._rate_limited = 0
        limit = self._rate_limit
        self._window = None if limit is None else _limiter(limit, time.monotonic())

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Start serving; returns once the port is bound.

        Raises
        ------
        RuntimeError
            When already running, or when the server cannot start (the cause is chained).
        """
        if self._thread is not None:
            raise RuntimeError("FakeOpenAIServer is already running")
        ready = threading.Event()
        self._startup_error = None
        with self._lock:
            if self._rate_limit is not None:  # the first window starts with the server
                self._window = _limiter(self._rate_limit, time.monotonic())
        thread = threading.Thread(
            target=self._run, args=(ready,), name="safecons-fake-openai", daemon=True
        )
        self._thread = thread
        thread.start()
        if not ready.wait(timeout=30) or self._startup_error is not None:
            error = self._startup_error
            self._stop_thread(timeout=5)
            raise RuntimeError("FakeOpenAIServer could not start") from error
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: close every connection, cancel requests in flight, join the thread.

        Statistics stay readable. Calling it when stopped does nothing.

        Raises
        ------
        RuntimeError
            When the thread does not end within ``timeout`` seconds (a blocking responder).
        """
        if self._thread is None:
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("FakeOpenAIServer.stop() called from its own thread")
        self._stop_thread(timeout)

    def _stop_thread(self, timeout: float) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if loop is not None and stop_event is not None:
            # RuntimeError: the loop has already closed, so the thread is on its way out.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop_event.set)
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise RuntimeError(
                    f"FakeOpenAIServer thread still running after {timeout:g}s; "
                    "is a synchronous responder blocking?"
                )
        self._thread = None
        self._loop = None
        self._stop_event = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.base_url if self.running else "stopped"
        auth = ", api_key=<set>" if self._api_key else ""
        return f"FakeOpenAIServer({where}{auth})"

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        return self._thread is not None

    @property
    def port(self) -> int:
        """The bound TCP port (of the last start, once stopped)."""
        if self._port is None:
            raise RuntimeError("FakeOpenAIServer has not been started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the root, e.g. an Azure ``endpoint``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: an OpenAI client's ``base_url``."""
        return f"{self.url}/v1"

    # -- statistics ----------------------------------------------------------------------------

    @property
    def stats(self) -> ServerStats:
        """A consistent snapshot of the statistics; safe to read from any thread, any time."""
        with self._lock:
            return ServerStats(
                requests=self._requests,
                connections=self._connections,
                requests_by_model=dict(self._by_model),
                temperatures={k: list(v) for k, v in self._temperatures.items()},
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                faults=dict(self._fault_counts),
                statuses=dict(self._statuses),
                log=tuple(r.freeze() for r in self._log),
                rate_limited=self._rate_limited,
                batch=self._batches.stats(),
            )

    def batches(self) -> list[dict[str, Any]]:
        """Every batch created, oldest first, as ``GET /batches/{id}`` shows it now."""
        return self._batches.snapshot()

    def reset_stats(self) -> None:
        """Zero the statistics, and restart request indices and fault draws from ``seed``.

        After it the server behaves as if freshly started, so one server can serve several
        deterministic tests. Requests in flight still finish (``in_flight`` keeps counting
        them) but are no longer in the log.
        """
        with self._lock:
            in_flight = self._in_flight
            self._reset_counters()
            self._in_flight = in_flight
            self._max_in_flight = in_flight
        self._batches.reset_stats()

    # -- serving -------------------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        try:
            asyncio.run(self._serve(ready))
        except BaseException as exc:  # reported to start(), which re-raises it
            self._startup_error = exc
        finally:
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        app = web.Application(
            client_max_size=max(_MAX_BODY, self._batches.max_bytes + _MULTIPART_SLACK)
        )
        app.router.add_route("*", "/{path:.*}", self._on_request)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        factory = runner.server
        assert factory is not None

        def connection() -> asyncio.BaseProtocol:
            with self._lock:
                self._connections += 1
            return factory()

        try:
            # Benchmarks open many connections at once; the default backlog (100) drops SYNs.
            server = await self._loop.create_server(
                connection, "127.0.0.1", self._requested_port, backlog=1024
            )
        except BaseException:
            await runner.cleanup()
            raise
        self._port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            # Close idle connections and cancel requests in flight almost at once: stop() must
            # not wait out a latency. (aiohttp reads a timeout of 0 as "no timeout".)
            await factory.shutdown(0.05)
            await runner.cleanup()
            await server.wait_closed()

    async def _on_request(self, request: web.BaseRequest) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if sock is not None:
            # Small JSON responses must not wait for Nagle: it would add 40 ms per request.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._to_aiohttp(_error(413, "request body too large"))
        ours = _Request(
            method=request.method,
            path=request.path,
            query=request.query_string,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        response = await self._handle(ours)
        if response is None:
            self._reset(request)
            return web.Response(status=500)  # never sent: the connection is gone
        tamper = self._batch_tamper
        if tamper is not None and self._batches.serves(ours.path):
            exchange = BatchExchange(
                ours.method, ours.path, ours.query, response.status, response.body, request
            )
            replaced = tamper(exchange)
            if inspect.isawaitable(replaced):
                replaced = await replaced
            if replaced is not None:
                return replaced
        return self._to_aiohttp(response)

    @staticmethod
    def _to_aiohttp(response: _Response) -> web.Response:
        return web.Response(
            status=response.status,
            body=response.body,
            headers={"Content-Type": response.content_type, **dict(response.headers)},
        )

    @staticmethod
    def _reset(request: web.BaseRequest) -> None:
        transport = request.transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # SO_LINGER with a zero timeout turns close() into a TCP RST: a real "reset".
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    # -- request handling ----------------------------------------------------------------------

    async def _handle(self, request: _Request) -> _Response | None:
        auth_header = (
            "authorization"
            if "authorization" in request.headers
            else "api-key"
            if "api-key" in request.headers
            else None
        )
        recorded = {k: v for k, v in request.headers.items() if k in self._record_headers}
        with self._lock:
            record = _Record(
                index=self._requests,
                method=request.method,
                path=request.path,
                query=request.query,
                headers=recorded,
                auth_header=auth_header,
            )
            self._requests += 1
            self._log.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        response: _Response | None = None
        try:
            try:
                response = await self._route(request, record)
            except Exception as exc:
                # A bug in a latency callable (or here) must not silently drop the connection.
                record.error = f"{type(exc).__name__}: {exc}"
                logger.warning("FakeOpenAIServer: %s", record.error, exc_info=exc)
                response = _error(500, record.error, type_="server_error", code="server_bug")
            return response
        finally:
            with self._lock:
                self._in_flight -= 1
                if response is not None:
                    record.status = response.status
                    self._statuses[response.status] = self._statuses.get(response.status, 0) + 1

    def _authorized(self, request: _Request) -> bool:
        if self._api_key is None:
            return True
        expected = self._api_key.encode()
        bearer = request.headers.get("authorization", "")
        scheme, _, token = bearer.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected):
            return True
        return hmac.compare_digest(request.headers.get("api-key", "").encode(), expected)

    def _unauthorized(self, request: _Request) -> _Response:
        if "authorization" in request.headers or "api-key" in request.headers:
            return _fault_response(Fault.unauthorized())
        return _fault_response(
            Fault.unauthorized(
                message="You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        )

    async def _route(self, request: _Request, record: _Record) -> _Response | None:
        path = request.path.rstrip("/")
        if path.endswith("/chat/completions"):
            if request.method != "POST":
                return _error(
                    405,
                    f"Invalid method for URL ({request.method} {request.path})",
                    headers=[("allow", "POST")],
                )
            return await self._chat(request, record)
        if path.endswith("/models") and request.method == "GET":
            if not self._authorized(request):
                return self._unauthorized(request)
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "safecons"}
                for m in self._models
            ]
            return _Response(200, _json_bytes({"object": "list", "data": data}))
        if self._batches.serves(path):
            if not self._authorized(request):
                return self._unauthorized(request)
            reply = await self._batches.reply(
                request.method, path, request.query, request.headers, request.body
            )
            return _Response(reply.status, reply.body, content_type=reply.content_type)
        return _error(404, f"Invalid URL ({request.method} {request.path})")

    async def _chat(self, request: _Request, record: _Record) -> _Response | None:
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            body = None
            parsed = False
        else:
            parsed = isinstance(body, dict)
        record.body = body
        if parsed:
            model = body.get("model")
            record.model = model if isinstance(model, str) else None
            temperature = body.get("temperature")
            if not isinstance(temperature, int | float) or isinstance(temperature, bool):
                temperature = None
            with self._lock:
                key = record.model
                self._by_model[key] = self._by_model.get(key, 0) + 1
                self._temperatures.setdefault(key, []).append(temperature)

        if not self._authorized(request):
            return self._unauthorized(request)
        if not parsed:
            return _error(
                400,
                "We could not parse the JSON body of your request: expected a JSON object. "
                "(HINT: the body must be valid JSON, sent with Content-Type: application/json.)",
            )
        if not isinstance(body.get("messages"), list):
            return _error(
                400,
                "Missing required parameter: 'messages'.",
                param="messages",
                code="missing_required_parameter",
            )
        if body.get("stream"):
            return _error(
                400,
                "FakeOpenAIServer does not implement streaming ('stream': true).",
                param="stream",
            )
        if self._window is None:
            return await self._answer(request, body, record)
        limit = self._window.limit
        # Counted before the lock: a tokenizer's work is no reason to hold other requests.
        tokens = 0 if limit.tokens_per_minute is None else limit.request_tokens(body)
        with self._lock:
            refusal, headers = self._window.admit(time.monotonic(), tokens, record.model)
            self._rate_limited += refusal is not None
        if refusal is not None:
            return _error(
                int(HTTPStatus.TOO_MANY_REQUESTS),
                refusal,
                type_="tokens" if "(TPM)" in refusal else "requests",
                code="rate_limit_exceeded",
                headers=headers,
            )
        response = await self._answer(request, body, record)
        if response is not None:
            response.headers.extend(headers)
        return response

    async def _answer(
        self, request: _Request, body: dict[str, Any], record: _Record
    ) -> _Response | None:
        fault = self._select_fault(body, record)
        if fault is None and record.error is not None:
            return _error(500, record.error, type_="server_error", code="fault_script_error")
        latency = self._latency(body) if callable(self._latency) else self._latency
        if latency > 0:
            await asyncio.sleep(latency)

        if fault is not None and fault.kind == "slow":
            self._count_fault(record, fault)
            await asyncio.sleep(_DEFAULT_SLOW_DELAY if fault.delay is None else fault.delay)
            fault = None
        texts: list[str] = []
        if fault is None:
            try:
                texts = await self._respond(body)
            except Fault as raised:
                fault = raised
            except Exception as exc:
                record.error = f"responder raised {type(exc).__name__}: {exc}"
                logger.warning("FakeOpenAIServer: %s", record.error, exc_info=exc)
                return _error(500, record.error, type_="server_error", code="responder_error")
        if fault is None:
            return self._completion(request, body, texts, record.index)

        self._count_fault(record, fault)
        kind = fault.kind
        if kind == "reset":
            return None
        if kind == "slow":
            # Only a responder raises a slow fault at this point; it has no answer to give.
            await asyncio.sleep(_DEFAULT_SLOW_DELAY if fault.delay is None else fault.delay)
            text = echo_responder(body) if fault.message is None else fault.message
            return self._completion(request, body, [text], record.index)
        if kind == "content_filter_finish":
            return self._completion(
                request, body, [fault.message], record.index, finish_reason="content_filter"
            )
        if kind == "refusal":
            return self._completion(
                request, body, [None], record.index, refusal=fault.message or _DEFAULT_REFUSAL
            )
        return _fault_response(fault)

    def _select_fault(self, body: dict[str, Any], record: _Record) -> Fault | None:
        # Runs before the first await, so indices and draws follow arrival order.
        with self._lock:
            index = self._fault_index
            self._fault_index += 1
            u = self._rng.random() if self._fault_table else 1.0
        if self._fault_script is not None:
            try:
                scripted: object = self._fault_script(index, body)
            except Exception as exc:
                record.error = f"fault script raised {type(exc).__name__}: {exc}"
                logger.warning("FakeOpenAIServer: %s", record.error, exc_info=exc)
                return None
            if scripted is not None and not isinstance(scripted, Fault):
                record.error = f"fault script returned {scripted!r}, not a Fault or None"
                return None
            return scripted
        cumulative = 0.0
        for fault, p in self._fault_table:
            cumulative += p
            if u < cumulative:
                return fault
        return None

    def _count_fault(self, record: _Record, fault: Fault) -> None:
        with self._lock:
            record.fault = fault.kind
            self._fault_counts[fault.kind] = self._fault_counts.get(fault.kind, 0) + 1

    async def _respond(self, body: dict[str, Any]) -> list[str]:
        n = body.get("n")
        count = n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1
        texts = []
        for _ in range(count):
            result = self._responder(body)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, str):
                raise TypeError(f"responder returned {type(result).__name__}, expected str")
            texts.append(result)
        return texts

    def _completion(
        self,
        request: _Request,
        body: dict[str, Any],
        texts: Sequence[str | None],
        index: int,
        *,
        finish_reason: str = "stop",
        refusal: str | None = None,
    ) -> _Response:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            deployment = _DEPLOYMENT.search(request.path)
            model = deployment.group(1) if deployment else self._models[0]
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": refusal},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            for i, text in enumerate(texts)
        ]
        prompt_tokens = _prompt_words(body)
        completion_tokens = sum(_count_words(t or refusal or "") for t in texts)
        payload = {
            "id": f"chatcmpl-fake{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return _Response(200, _json_bytes(payload), [("x-request-id", f"req-fake{index}")])

    async def _batch_line(self, url: str, body: dict[str, Any]) -> tuple[int, bytes, str | None]:
        """Answer one line of a batch as a live chat-completions request, but for rate limits.

        It counts in ``requests_by_model``, ``temperatures`` and ``faults``, takes the next
        request index of the fault script (or the next draw of the fault table), and is not in
        the log (which holds HTTP requests). A ``reset`` fault, which has no answer to give,
        becomes a 500 ``server_error`` line.
        """
        model = body.get("model")
        key = model if isinstance(model, str) else None
        temperature = body.get("temperature")
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            temperature = None
        with self._lock:
            self._by_model[key] = self._by_model.get(key, 0) + 1
            self._temperatures.setdefault(key, []).append(temperature)
        request = _Request(method="POST", path=url, query="", headers={})
        record = _Record(
            index=next(self._batch_ids),
            method="POST",
            path=url,
            query="",
            headers={},
            auth_header=None,
        )
        record.body, record.model = body, key
        response: _Response | None
        if not isinstance(body.get("messages"), list):
            response = _error(
                400,
                "Missing required parameter: 'messages'.",
                param="messages",
                code="missing_required_parameter",
            )
        elif body.get("stream"):
            response = _error(
                400, "A batch request cannot stream ('stream': true).", param="stream"
            )
        else:
            response = await self._answer(request, body, record)
        if response is None:
            response = _error(
                500, "The connection was reset while answering this request.", type_="server_error"
            )
        if response.status != HTTPStatus.OK:
            return response.status, response.body, None
        # Ids of their own: the live request of the same index has ``chatcmpl-fake{index}``.
        payload = response.body
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            completion = json.loads(payload)
            if isinstance(completion, dict) and "id" in completion:
                completion["id"] = f"chatcmpl-fakebatch{record.index}"
                payload = _json_bytes(completion)
        return response.status, payload, f"req-fakebatch{record.index}"

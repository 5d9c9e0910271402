"""A loopback OpenAI-compatible chat-completions server with fault injection, for tests.

:class:`FakeOpenAIServer` serves HTTP on ``127.0.0.1`` through ``aiohttp.web`` (aiohttp is a core
dependency: the clients' wire, so it brings no new one) to stand in for OpenAI,
Azure OpenAI, vLLM, Ollama or a llama.cpp server, so that the whole client stack - sockets,
connection pools, timeouts, retries - is exercised for real, offline. This module routes
requests and keeps the counts; the faults (``_faults``), the answers (``_answers``), the rate
limit (``_rate_limit``), the Batch API (``_batch_server``) and the serving thread
(``_loopback``) each have a module of their own. The server runs its own event loop in a
daemon thread, so the same object works in synchronous tests and inside async ones.

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
import hmac
import inspect
import itertools
import json
import logging
import math
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from http import HTTPStatus
from typing import Any, Final

from aiohttp import web

from ._answers import Responder, chat_completion, echo_responder, route_by_model
from ._batch_server import BATCH_MAX_BYTES, BATCH_MAX_LINES, Batches
from ._faults import (
    DEFAULT_REFUSAL,
    DEFAULT_SLOW_DELAY,
    Fault,
    FaultPlan,
    FaultScript,
    FaultTable,
    fault_response,
)
from ._loopback import LoopbackServer
from ._rate_limit import Limiter, RateLimit, limiter
from ._stats import DEFAULT_RECORDED_HEADERS, SECRET_HEADERS, Record, ServerStats
from ._wire import BatchExchange, BatchTamper, Request, Response, error, json_bytes

__all__ = ("FakeOpenAIServer", "Fault", "RateLimit", "route_by_model")

logger = logging.getLogger(__name__)

_MAX_BODY: Final = 32 * 1024 * 1024
#: Room for a multipart envelope around a batch input file of the largest size allowed.
_MULTIPART_SLACK: Final = 1024 * 1024
#: Who raised, by the stage a request was in: the start of the error's message and its code.
_RAISED: Final[dict[str | None, tuple[str, str]]] = {
    None: ("", "server_bug"),
    "fault script": ("fault script raised ", "fault_script_error"),
    "responder": ("responder raised ", "responder_error"),
}


class FakeOpenAIServer(LoopbackServer):
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

    _thread_name = "safecons-fake-openai"

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
        super().__init__(port)
        self._batch_tamper = batch_tamper
        self._responder: Responder = echo_responder if responder is None else responder
        if not callable(self._responder):
            raise TypeError(f"responder: expected a callable, got {responder!r}")
        if not callable(latency) and (
            not isinstance(latency, int | float) or not math.isfinite(latency) or latency < 0
        ):
            raise ValueError(f"latency: expected seconds >= 0 or a callable, got {latency!r}")
        self._latency = latency
        self._faults = FaultPlan(faults, seed)
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ValueError("api_key: expected a non-empty string or None")
        self._api_key = api_key
        default_models = getattr(self._responder, "models", None)
        self._models = list(models or default_models or ["fake-model"])
        recorded = {h.lower() for h in record_headers}
        if recorded & SECRET_HEADERS:
            raise ValueError(
                f"record_headers: credentials are never recorded: "
                f"{sorted(recorded & SECRET_HEADERS)}"
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
        self._log: deque[Record] = deque(maxlen=self._log_size)
        self._faults.restart()
        self._rate_limited = 0
        limit = self._rate_limit
        self._window: Limiter | None = None if limit is None else limiter(limit, time.monotonic())

    def _starting(self) -> None:
        with self._lock:
            if self._rate_limit is not None:  # the first window starts with the server
                self._window = limiter(self._rate_limit, time.monotonic())

    def _connected(self) -> None:
        with self._lock:
            self._connections += 1

    def __repr__(self) -> str:
        where = self.base_url if self.running else "stopped"
        auth = ", api_key=<set>" if self._api_key else ""
        return f"FakeOpenAIServer({where}{auth})"

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

    def _application(self) -> web.Application:
        app = web.Application(
            client_max_size=max(_MAX_BODY, self._batches.max_bytes + _MULTIPART_SLACK)
        )
        app.router.add_route("*", "/{path:.*}", self._on_request)
        return app

    async def _on_request(self, request: web.BaseRequest) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if sock is not None:
            # Small JSON responses must not wait for Nagle: it would add 40 ms per request.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._to_aiohttp(error(413, "request body too large"))
        ours = Request(
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
    def _to_aiohttp(response: Response) -> web.Response:
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

    async def _handle(self, request: Request) -> Response | None:
        auth_header = (
            "authorization"
            if "authorization" in request.headers
            else "api-key"
            if "api-key" in request.headers
            else None
        )
        recorded = {k: v for k, v in request.headers.items() if k in self._record_headers}
        with self._lock:
            record = Record(
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
        response: Response | None = None
        try:
            response = await self._guarded(self._route(request, record), record)
            return response
        finally:
            with self._lock:
                self._in_flight -= 1
                if response is not None:
                    record.status = response.status
                    self._statuses[response.status] = self._statuses.get(response.status, 0) + 1

    @staticmethod
    async def _guarded(answer: Awaitable[Response | None], record: Record) -> Response | None:
        """``answer``, or a 500 naming what it raised: the one place a failure becomes one."""
        try:
            return await answer
        except Exception as exc:  # boundary: a responder, a fault script or a latency function
            # is the test's own code, and may raise anything; a loopback server answers its
            # failure (or a bug of ours) with a 500 naming it, never a dropped connection.
            said, code = _RAISED.get(record.stage, _RAISED[None])
            record.error = f"{said}{type(exc).__name__}: {exc}"
            logger.warning("FakeOpenAIServer: %s", record.error, exc_info=exc)
            return error(500, record.error, type_="server_error", code=code)

    def _authorized(self, request: Request) -> bool:
        if self._api_key is None:
            return True
        expected = self._api_key.encode()
        bearer = request.headers.get("authorization", "")
        scheme, _, token = bearer.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected):
            return True
        return hmac.compare_digest(request.headers.get("api-key", "").encode(), expected)

    def _unauthorized(self, request: Request) -> Response:
        if "authorization" in request.headers or "api-key" in request.headers:
            return fault_response(Fault.unauthorized())
        return fault_response(
            Fault.unauthorized(
                message="You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        )

    async def _route(self, request: Request, record: Record) -> Response | None:
        path = request.path.rstrip("/")
        if path.endswith("/chat/completions"):
            if request.method != "POST":
                return error(
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
            return Response(200, json_bytes({"object": "list", "data": data}))
        if self._batches.serves(path):
            if not self._authorized(request):
                return self._unauthorized(request)
            reply = await self._batches.reply(
                request.method, path, request.query, request.headers, request.body
            )
            return Response(reply.status, reply.body, content_type=reply.content_type)
        return error(404, f"Invalid URL ({request.method} {request.path})")

    def _count_request(self, body: dict[str, Any]) -> str | None:
        """Count a chat request of a JSON-object body by its model; returns the model."""
        model = body.get("model")
        key = model if isinstance(model, str) else None
        temperature = body.get("temperature")
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            temperature = None
        with self._lock:
            self._by_model[key] = self._by_model.get(key, 0) + 1
            self._temperatures.setdefault(key, []).append(temperature)
        return key

    async def _chat(self, request: Request, record: Record) -> Response | None:
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            body = None
        record.body = body
        parsed = isinstance(body, dict)
        if parsed:
            record.model = self._count_request(body)
        if not self._authorized(request):
            return self._unauthorized(request)
        if not parsed:
            return error(
                400,
                "We could not parse the JSON body of your request: expected a JSON object. "
                "(HINT: the body must be valid JSON, sent with Content-Type: application/json.)",
            )
        refused = _refused(body, stream="FakeOpenAIServer does not implement streaming")
        if refused is not None:
            return refused
        if self._window is None:
            return await self._answer(request, body, record)
        limit = self._window.limit
        # Counted before the lock: a tokenizer's work is no reason to hold other requests.
        tokens = 0 if limit.tokens_per_minute is None else limit.request_tokens(body)
        with self._lock:
            refusal, headers = self._window.admit(time.monotonic(), tokens, record.model)
            self._rate_limited += refusal is not None
        if refusal is not None:
            return error(
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
        self, request: Request, body: dict[str, Any], record: Record
    ) -> Response | None:
        with self._lock:  # before the first await, so indices and draws follow arrival order
            index, u = self._faults.draw()
        record.stage = "fault script"
        fault = self._faults.pick(index, u, body)
        record.stage = None
        if fault is not None and not isinstance(fault, Fault):
            record.error = f"fault script returned {fault!r}, not a Fault or None"
            return error(500, record.error, type_="server_error", code="fault_script_error")
        latency = self._latency(body) if callable(self._latency) else self._latency
        if latency > 0:
            await asyncio.sleep(latency)
        if fault is not None and fault.kind == "slow":
            self._count_fault(record, fault)
            await asyncio.sleep(DEFAULT_SLOW_DELAY if fault.delay is None else fault.delay)
            fault = None
        texts: list[str] = []
        if fault is None:
            record.stage = "responder"
            try:
                texts = await self._respond(body)
            except Fault as raised:
                fault = raised
            record.stage = None
        if fault is None:
            return self._completion(request, body, texts, record.index)
        return await self._faulted(request, body, record, fault)

    async def _faulted(
        self, request: Request, body: dict[str, Any], record: Record, fault: Fault
    ) -> Response | None:
        self._count_fault(record, fault)
        kind = fault.kind
        if kind == "reset":
            return None
        if kind == "slow":
            # Only a responder raises a slow fault at this point; it has no answer to give.
            await asyncio.sleep(DEFAULT_SLOW_DELAY if fault.delay is None else fault.delay)
            text = echo_responder(body) if fault.message is None else fault.message
            return self._completion(request, body, [text], record.index)
        if kind == "content_filter_finish":
            return self._completion(
                request, body, [fault.message], record.index, finish_reason="content_filter"
            )
        if kind == "refusal":
            return self._completion(
                request, body, [None], record.index, refusal=fault.message or DEFAULT_REFUSAL
            )
        return fault_response(fault)

    def _count_fault(self, record: Record, fault: Fault) -> None:
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
        request: Request,
        body: dict[str, Any],
        texts: Sequence[str | None],
        index: int,
        *,
        finish_reason: str = "stop",
        refusal: str | None = None,
    ) -> Response:
        return chat_completion(
            request.path,
            body,
            texts,
            index,
            default_model=self._models[0],
            finish_reason=finish_reason,
            refusal=refusal,
        )

    async def _batch_line(self, url: str, body: dict[str, Any]) -> tuple[int, bytes, str | None]:
        """Answer one line of a batch as a live chat-completions request, but for rate limits.

        It counts in ``requests_by_model``, ``temperatures`` and ``faults``, takes the next
        request index of the fault script (or the next draw of the fault table), and is not in
        the log (which holds HTTP requests). A ``reset`` fault, which has no answer to give,
        becomes a 500 ``server_error`` line.
        """
        key = self._count_request(body)
        request = Request(method="POST", path=url, query="", headers={})
        record = Record(
            index=next(self._batch_ids),
            method="POST",
            path=url,
            query="",
            headers={},
            auth_header=None,
        )
        record.body, record.model = body, key
        response = _refused(body, stream="A batch request cannot stream")
        if response is None:
            response = await self._guarded(self._answer(request, body, record), record)
        if response is None:
            response = error(
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
                payload = json_bytes(completion)
        return response.status, payload, f"req-fakebatch{record.index}"


def _refused(body: dict[str, Any], *, stream: str) -> Response | None:
    """The 400 of a chat request the server does not serve (no messages, streaming), or None."""
    if not isinstance(body.get("messages"), list):
        return error(
            400,
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if body.get("stream"):
        return error(400, f"{stream} ('stream': true).", param="stream")
    return None

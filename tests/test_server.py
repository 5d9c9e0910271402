"""Tests of the loopback OpenAI-compatible test server (safecons.testing._server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import pickle
import random
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from safecons.testing import FakeOpenAIServer, Fault, route_by_model
from safecons.testing._answers import echo_responder
from safecons.testing._faults import FAULT_KINDS

pytestmark = [pytest.mark.network, pytest.mark.timeout(30)]

CHAT = "/chat/completions"


def body(content: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def http(server: FakeOpenAIServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5) as client:
        yield client


def scripted(fault: Fault, **kwargs: Any) -> FakeOpenAIServer:
    """A server whose every chat request gets ``fault``."""
    return FakeOpenAIServer(faults=lambda i, b: fault, **kwargs)


def post(srv: FakeOpenAIServer, payload: Any = None, **kwargs: Any) -> httpx.Response:
    with httpx.Client(timeout=kwargs.pop("timeout", 5)) as client:
        return client.post(f"{srv.base_url}{CHAT}", json=payload or body(), **kwargs)


def raw_exchange(srv: FakeOpenAIServer, data: bytes, *, until_close: bool = True) -> bytes:
    """Send raw bytes, read the answer until the server closes (or a short pause)."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=2) as sock:
        sock.sendall(data)
        chunks = []
        if not until_close:
            sock.settimeout(0.3)
        with contextlib.suppress(TimeoutError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


# --- basics -----------------------------------------------------------------------------------


def test_completion_has_openai_shape(server: FakeOpenAIServer, http: httpx.Client) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    r = http.post(CHAT, json=body("one two three", temperature=0.3))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int)
    assert data["model"] == "m"
    [choice] = data["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "echo: one two three"
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_azure_deployment_path_and_query(server: FakeOpenAIServer) -> None:
    url = f"{server.url}/openai/deployments/gpt4o/chat/completions"
    payload = {"messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(
        url,
        params={"api-version": "2024-10-21"},
        json=payload,
        headers={"api-key": "secret-azure-key"},
    )
    assert r.status_code == 200
    assert r.json()["model"] == "gpt4o"  # no model in the body: named after the deployment
    [record] = server.stats.log
    assert record.path == "/openai/deployments/gpt4o/chat/completions"
    assert record.query == "api-version=2024-10-21"
    assert record.auth_header == "api-key"
    assert record.model is None
    assert server.stats.requests_by_model == {None: 1}


def test_content_parts_and_n_choices(http: httpx.Client) -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "here"}]
    payload = {"model": "m", "n": 3, "messages": [{"role": "user", "content": parts}]}
    data = http.post(CHAT, json=payload).json()
    assert [c["index"] for c in data["choices"]] == [0, 1, 2]
    assert {c["message"]["content"] for c in data["choices"]} == {"echo: look here"}


def test_models_endpoint_lists_routed_models() -> None:
    responder = route_by_model({"sut": echo_responder, "judge": echo_responder})
    with FakeOpenAIServer(responder=responder) as srv:
        data = httpx.get(f"{srv.base_url}/models").json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == ["sut", "judge"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/completions", 404),
        ("GET", "/v1/nothing", 404),
        ("GET", "/v1/chat/completions", 405),
        ("POST", "/v1/models", 404),
    ],
)
def test_unknown_routes(http: httpx.Client, method: str, path: str, status: int) -> None:
    r = http.request(method, path.removeprefix("/v1"), json=body())
    assert r.status_code == status
    assert "Invalid" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("content", "param"),
    [(b"{not json", None), (b"[1, 2]", None), (b"", None), (b'{"model": "m"}', "messages")],
)
def test_bad_bodies_get_400(http: httpx.Client, content: bytes, param: str | None) -> None:
    r = http.post(CHAT, content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_streaming_is_refused_explicitly(http: httpx.Client) -> None:
    r = http.post(CHAT, json=body(stream=True))
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "stream"


# --- responders -------------------------------------------------------------------------------


def test_route_by_model_dispatches_and_rejects_unknown_models() -> None:
    responder = route_by_model({"sut-model": lambda b: "sut says", "judge-model": lambda b: "ok"})
    with FakeOpenAIServer(responder=responder) as srv, httpx.Client(base_url=srv.base_url) as c:
        sut = c.post(CHAT, json={**body(), "model": "sut-model"})
        judge = c.post(CHAT, json={**body(), "model": "judge-model"})
        unknown = c.post(CHAT, json={**body(), "model": "gpt-9"})
        missing = c.post(CHAT, json={"messages": []})
    assert sut.json()["choices"][0]["message"]["content"] == "sut says"
    assert judge.json()["choices"][0]["message"]["content"] == "ok"
    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert error["code"] == "model_not_found"
    assert error["type"] == "invalid_request_error"
    assert "`gpt-9` does not exist" in error["message"]
    assert missing.status_code == 400
    stats = srv.stats
    assert stats.requests_by_model == {"sut-model": 1, "judge-model": 1, "gpt-9": 1, None: 1}
    assert stats.faults == {"model_not_found": 1, "bad_request": 1}


def test_route_by_model_default_and_validation() -> None:
    responder = route_by_model({"a": lambda b: "A"}, default=lambda b: "other")
    with FakeOpenAIServer(responder=responder) as srv:
        r = post(srv, {**body(), "model": "zzz"})
    assert r.json()["choices"][0]["message"]["content"] == "other"
    with pytest.raises(ValueError):
        route_by_model({})


@pytest.mark.anyio
async def test_async_responder_inside_an_async_test() -> None:
    async def responder(b: dict[str, Any]) -> str:
        await asyncio.sleep(0.01)
        return f"async {len(b['messages'])}"

    # The server has its own loop, so starting it from a running loop is fine.
    with FakeOpenAIServer(responder=responder) as srv:
        async with httpx.AsyncClient(base_url=srv.base_url) as client:
            r = await client.post(CHAT, json=body())
    assert r.json()["choices"][0]["message"]["content"] == "async 1"


def test_responder_may_raise_a_fault() -> None:
    def responder(b: dict[str, Any]) -> str:
        if "forbidden" in b["messages"][-1]["content"]:
            raise Fault.refusal("no way")
        return "fine"

    with FakeOpenAIServer(responder=responder) as srv:
        refused = post(srv, body("a forbidden topic"))
        fine = post(srv, body("a nice topic"))
    message = refused.json()["choices"][0]["message"]
    assert (message["content"], message["refusal"]) == (None, "no way")
    assert fine.json()["choices"][0]["message"]["content"] == "fine"
    assert srv.stats.faults == {"refusal": 1}
    assert [r.fault for r in srv.stats.log] == ["refusal", None]


def test_responder_bug_becomes_500_with_the_error_recorded() -> None:
    def responder(b: dict[str, Any]) -> str:
        raise KeyError("oops")

    with FakeOpenAIServer(responder=responder) as srv:
        r = post(srv)
    assert r.status_code == 500
    assert "KeyError" in r.json()["error"]["message"]
    assert "KeyError" in (srv.stats.log[0].error or "")


def test_latency_callable_is_applied() -> None:
    # No upper bound on a wall time here (a loaded machine can miss any): the callable is
    # asked per request body, and the slow answer cannot come sooner than its latency.
    asked: list[tuple[str, float]] = []

    def latency(b: dict) -> float:
        asked.append((b["model"], seconds := 0.15 if b["model"] == "slow" else 0.0))
        return seconds

    with FakeOpenAIServer(latency=latency) as srv:
        post(srv, body())
        start = time.perf_counter()
        post(srv, {**body(), "model": "slow"})
        slow = time.perf_counter() - start
    assert asked == [(body()["model"], 0.0), ("slow", 0.15)]
    assert slow >= 0.15


# --- faults on the wire -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "headers"),
    [
        (Fault.rate_limit(0.05), {"retry-after": "0.05"}),
        (Fault.rate_limit(2), {"retry-after": "2"}),
        (Fault.rate_limit(retry_after_ms=250), {"retry-after-ms": "250"}),
        (Fault.rate_limit(1, retry_after_ms=1000), {"retry-after": "1", "retry-after-ms": "1000"}),
        (Fault.rate_limit(), {}),
    ],
)
def test_rate_limit(fault: Fault, headers: dict[str, str]) -> None:
    with scripted(fault) as srv:
        r = post(srv)
    assert r.status_code == 429
    sent = {k: v for k, v in r.headers.items() if k in ("retry-after", "retry-after-ms")}
    assert sent == headers
    error = r.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["message"]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_error(status: int) -> None:
    with scripted(Fault.server_error(status)) as srv:
        r = post(srv)
    assert r.status_code == status
    assert r.json()["error"]["type"] == "server_error"


def test_slow_exceeds_a_client_timeout_then_answers() -> None:
    with scripted(Fault.slow(0.4)) as srv:
        with pytest.raises(httpx.ReadTimeout):
            post(srv, timeout=0.1)
        start = time.perf_counter()
        r = post(srv)
        assert time.perf_counter() - start >= 0.4
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "echo: hello there"
    assert srv.stats.faults == {"slow": 2}


def test_content_filter_400_has_azure_shape() -> None:
    with scripted(Fault.content_filter_400()) as srv:
        r = post(srv)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "content_filter"
    assert error["param"] == "prompt"
    assert error["type"] is None
    assert error["status"] == 400
    assert "content management policy" in error["message"]
    assert error["innererror"]["code"] == "ResponsibleAIPolicyViolation"


def test_content_filter_finish() -> None:
    with scripted(Fault.content_filter_finish()) as srv:
        r = post(srv)
    assert r.status_code == 200
    [choice] = r.json()["choices"]
    assert choice["finish_reason"] == "content_filter"
    assert choice["message"]["content"] is None


def test_refusal() -> None:
    with scripted(Fault.refusal()) as srv:
        r = post(srv)
    assert r.status_code == 200
    [choice] = r.json()["choices"]
    assert choice["message"]["content"] is None
    assert "can't help" in choice["message"]["refusal"]


def test_malformed_bodies() -> None:
    with scripted(Fault.malformed()) as srv:
        r = post(srv)
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()
    with scripted(Fault.malformed('{"id": "x", "object": "chat.completion"}')) as srv:
        r = post(srv)
    assert r.status_code == 200
    assert "choices" not in r.json()
    with scripted(Fault.malformed("<html>Bad Gateway</html>", status=502)) as srv:
        r = post(srv)
    assert (r.status_code, r.text) == (502, "<html>Bad Gateway</html>")


def test_reset_drops_the_connection_and_the_server_carries_on() -> None:
    reset_first = FakeOpenAIServer(faults=lambda i, b: Fault.reset() if i == 0 else None)
    with reset_first as srv, httpx.Client(base_url=srv.base_url) as client:
        with pytest.raises(httpx.TransportError):  # ReadError or RemoteProtocolError
            client.post(CHAT, json=body())
        assert client.post(CHAT, json=body()).status_code == 200
    stats = srv.stats
    assert stats.faults == {"reset": 1}
    assert [r.status for r in stats.log] == [None, 200]
    assert stats.statuses == {200: 1}


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.unauthorized(), 401, "invalid_api_key"),
        (Fault.forbidden(), 403, "permission_denied"),
        (Fault.bad_request(), 400, None),
        (Fault.bad_request("'temperature' is not supported"), 400, None),
        (Fault.model_not_found("x"), 404, "model_not_found"),
    ],
)
def test_client_errors(fault: Fault, status: int, code: str | None) -> None:
    with scripted(fault) as srv:
        r = post(srv)
    assert r.status_code == status
    error = r.json()["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    if fault.message:
        assert error["message"] == fault.message


def test_every_fault_kind_is_covered_here() -> None:
    # If a kind is added, this file must grow a wire test for it.
    assert {
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
    } == FAULT_KINDS


def test_scripted_faults_by_model_and_index() -> None:
    seen: dict[str, int] = {}

    def script(index: int, b: dict[str, Any]) -> Fault | None:
        # "The first 2 requests for the judge get 429."
        n = seen[b["model"]] = seen.get(b["model"], 0) + 1
        return Fault.rate_limit(0.01) if b["model"] == "judge" and n <= 2 else None

    with FakeOpenAIServer(faults=script) as srv, httpx.Client(base_url=srv.base_url) as c:
        statuses = [
            c.post(CHAT, json={**body(), "model": m}).status_code
            for m in ["sut", "judge", "judge", "sut", "judge"]
        ]
    assert statuses == [200, 429, 429, 200, 200]


def test_seeded_fault_rates_are_exact_for_sequential_requests() -> None:
    table: dict[str | Fault, float] = {"rate_limit": 0.1, Fault.server_error(503): 0.05}

    def run() -> list[int]:
        srv = FakeOpenAIServer(faults=table, seed=123)
        with srv, httpx.Client(base_url=srv.base_url) as c:
            statuses = [c.post(CHAT, json=body()).status_code for _ in range(400)]
        assert srv.stats.faults == {
            "rate_limit": statuses.count(429),
            "server_error": statuses.count(503),
        }
        return statuses

    statuses = run()
    # The documented draw: one random() per request, cumulative probabilities in mapping order.
    rng = random.Random(123)
    expected = []
    for _ in range(400):
        u = rng.random()
        expected.append(429 if u < 0.1 else 503 if u < 0.15 else 200)
    assert statuses == expected
    assert 25 <= statuses.count(429) <= 55  # ~40 expected
    assert 8 <= statuses.count(503) <= 35  # ~20 expected
    assert run() == statuses


def test_reset_stats_restarts_indices_and_draws() -> None:
    srv = FakeOpenAIServer(faults={"server_error": 0.5}, seed=7)
    with srv, httpx.Client(base_url=srv.base_url) as c:
        first = [c.post(CHAT, json=body()).status_code for _ in range(20)]
        srv.reset_stats()
        assert srv.stats.requests == 0
        assert srv.stats.log == ()
        second = [c.post(CHAT, json=body()).status_code for _ in range(20)]
    assert first == second
    assert srv.stats.requests == 20


# --- statistics -------------------------------------------------------------------------------


async def _fire(srv: FakeOpenAIServer, n: int, max_connections: int | None) -> float:
    limits = httpx.Limits(max_connections=max_connections)
    async with httpx.AsyncClient(base_url=srv.base_url, limits=limits, timeout=10) as client:

        async def one() -> None:
            assert (await client.post(CHAT, json=body())).status_code == 200

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        return time.perf_counter() - start


@pytest.mark.anyio
@pytest.mark.parametrize(("limit", "expected"), [(None, 20), (5, 5)])
async def test_max_in_flight_counts_real_concurrency(limit: int | None, expected: int) -> None:
    with FakeOpenAIServer(latency=0.2) as srv:
        elapsed = await _fire(srv, 20, limit)
        stats = srv.stats
    assert stats.max_in_flight == expected
    assert stats.in_flight == 0
    assert stats.requests == 20
    # Overlapping sleeps: never faster than the latency allows (how much faster than serial is
    # a benchmark's question, not a test's).
    assert elapsed >= 0.2 * (20 / expected) - 0.05


def test_temperatures_and_counts_per_model(http: httpx.Client, server: FakeOpenAIServer) -> None:
    for model, temperature in [("sut", 0.0), ("sut", 0.7), ("judge", None), ("sut", 1)]:
        payload = {**body(), "model": model}
        if temperature is not None:
            payload["temperature"] = temperature
        http.post(CHAT, json=payload)
    http.get("/models")
    stats = server.stats
    assert stats.temperatures == {"sut": [0.0, 0.7, 1], "judge": [None]}
    assert stats.requests_by_model == {"sut": 3, "judge": 1}
    assert stats.requests == 5
    assert stats.statuses == {200: 5}
    assert [r.path for r in stats.log][-1] == "/v1/models"


def test_log_keeps_selected_headers_never_credentials() -> None:
    key = "sk-super-secret-value"
    with FakeOpenAIServer(api_key=key, record_headers=["user-agent", "x-trace"]) as srv:
        headers = {"authorization": f"Bearer {key}", "x-trace": "t1", "x-other": "o"}
        r = post(srv, headers={**headers, "user-agent": "tests/1.0"})
        assert r.status_code == 200
        stats = srv.stats
    [record] = stats.log
    assert record.headers == {"user-agent": "tests/1.0", "x-trace": "t1"}
    assert record.auth_header == "authorization"
    assert record.body == body()
    assert key not in repr(stats)
    assert key not in repr(srv)
    with pytest.raises(ValueError, match="credentials"):
        FakeOpenAIServer(record_headers=["Authorization"])


def test_log_size_bounds_the_log(http: httpx.Client) -> None:
    with FakeOpenAIServer(log_size=3) as srv, httpx.Client(base_url=srv.base_url) as c:
        for _ in range(5):
            c.post(CHAT, json=body())
    assert [r.index for r in srv.stats.log] == [2, 3, 4]
    assert srv.stats.requests == 5


def test_stats_are_snapshots(server: FakeOpenAIServer, http: httpx.Client) -> None:
    http.post(CHAT, json=body(temperature=0.5))
    snapshot = server.stats
    snapshot.temperatures["m"].append(9.9)
    http.post(CHAT, json=body(temperature=0.5))
    assert server.stats.temperatures == {"m": [0.5, 0.5]}
    assert snapshot.requests == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.requests = 3  # type: ignore[misc]


# --- api key ----------------------------------------------------------------------------------


def test_api_key_is_checked() -> None:
    with FakeOpenAIServer(api_key="k1") as srv:
        missing = post(srv)
        wrong = post(srv, headers={"authorization": "Bearer k2"})
        bearer = post(srv, headers={"authorization": "Bearer k1"})
        azure = post(srv, headers={"api-key": "k1"})
        models = httpx.get(f"{srv.base_url}/models")
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.json()["error"]["code"] == wrong.json()["error"]["code"] == "invalid_api_key"
    assert "didn't provide an API key" in missing.json()["error"]["message"]
    assert "k2" not in wrong.text
    assert (bearer.status_code, azure.status_code, models.status_code) == (200, 200, 401)
    assert [r.auth_header for r in srv.stats.log] == [
        None,
        "authorization",
        "authorization",
        "api-key",
        None,
    ]


# --- HTTP/1.1 ---------------------------------------------------------------------------------


def test_keep_alive_reuses_one_connection(server: FakeOpenAIServer, http: httpx.Client) -> None:
    for i in range(200):
        assert http.post(CHAT, json=body(str(i))).status_code == 200
    stats = server.stats
    assert stats.requests == 200
    assert stats.connections == 1


def test_pipelined_requests_on_one_socket(server: FakeOpenAIServer) -> None:
    payload = json.dumps(body()).encode()
    one = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
    )
    last = one.replace(b"host: x\r\n", b"host: x\r\nconnection: close\r\n")
    answer = raw_exchange(server, one + one + last)
    # Three answers on one connection, which the server closes after the third as asked.
    assert answer.count(b"HTTP/1.1 200 OK") == 3
    assert answer.lower().count(b"connection: close") == 1
    assert server.stats.connections == 1 and server.stats.requests == 3


def test_chunked_body_and_expect_continue(server: FakeOpenAIServer) -> None:
    payload = json.dumps(body("chunky")).encode()
    half = len(payload) // 2
    chunks = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (payload[:half], payload[half:])
    )
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n"
        b"expect: 100-continue\r\nconnection: close\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    answer = raw_exchange(server, request)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")
    assert b"echo: chunky" in answer


def test_http10_closes_and_garbage_gets_400(server: FakeOpenAIServer) -> None:
    # raw_exchange reads until the server closes: an HTTP/1.0 request without keep-alive gets
    # its answer and the close.
    answer = raw_exchange(server, b"GET /v1/models HTTP/1.0\r\n\r\n")
    assert answer.split(b"\r\n", 1)[0].endswith(b" 200 OK") and b"fake-model" in answer
    answer = raw_exchange(server, b"HELLO\r\n\r\n")
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert server.running  # a bad client does not take the server down
    assert post(server).status_code == 200


# --- lifecycle --------------------------------------------------------------------------------


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "safecons-fake-openai"]


def test_stop_is_prompt_with_requests_in_flight_and_idle_connections() -> None:
    srv = FakeOpenAIServer(latency=3600).start()
    idle = socket.create_connection(("127.0.0.1", srv.port))
    errors: list[BaseException] = []

    def call() -> None:
        try:
            post(srv, timeout=20)
        except httpx.HTTPError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while srv.stats.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.stats.in_flight == 1
    # stop() must not wait for the request's hour of latency: it finishes (a hang guard, with
    # a bound no loaded machine comes near), and the in-flight request sees its connection go.
    stopper = threading.Thread(target=srv.stop)
    stopper.start()
    stopper.join(60)
    assert not stopper.is_alive()
    assert not srv.running
    assert _server_threads() == []
    caller.join(5)
    idle.close()
    assert len(errors) == 1  # the in-flight request saw its connection closed
    assert srv.stats.requests == 1  # still readable after stop
    srv.stop()  # idempotent


def test_start_stop_restart_and_repr() -> None:
    srv = FakeOpenAIServer(api_key="hidden")
    assert "stopped" in repr(srv)
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    with srv:
        assert srv.running
        assert "127.0.0.1" in repr(srv) and "hidden" not in repr(srv)
        with pytest.raises(RuntimeError, match="already running"):
            srv.start()
    with srv:
        assert post(srv, headers={"api-key": "hidden"}).status_code == 200
    assert _server_threads() == []


def test_port_in_use_fails_to_start() -> None:
    with FakeOpenAIServer() as first:
        with pytest.raises(RuntimeError, match="could not start") as info:
            FakeOpenAIServer(port=first.port).start()
        assert isinstance(info.value.__cause__, OSError)
    assert _server_threads() == []


# --- Fault ------------------------------------------------------------------------------------


def test_fault_validation() -> None:
    with pytest.raises(ValueError, match="kind"):
        Fault("teapot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="5xx"):
        Fault.server_error(404)
    with pytest.raises(ValueError, match="retry_after"):
        Fault.rate_limit(-1)
    with pytest.raises(ValueError, match="status"):
        Fault("slow", status=500)
    with pytest.raises(ValueError, match="add up"):
        FakeOpenAIServer(faults={"rate_limit": 0.7, "reset": 0.4})
    with pytest.raises(ValueError, match="kind"):
        FakeOpenAIServer(faults={"nope": 0.1})
    with pytest.raises(ValueError, match="latency"):
        FakeOpenAIServer(latency=-1)


def test_fault_is_an_immutable_value_and_a_raisable_exception() -> None:
    fault = Fault.rate_limit(0.5)
    assert fault == Fault("rate_limit", retry_after=0.5)
    assert hash(fault) == hash(Fault("rate_limit", retry_after=0.5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fault.retry_after = 1

    @contextlib.contextmanager
    def passthrough() -> Iterator[None]:
        yield

    # A frozen dataclass exception would fail here (contextlib sets __traceback__).
    with pytest.raises(Fault) as info, passthrough():
        raise fault
    assert info.value is fault
    assert pickle.loads(pickle.dumps(fault)) == fault
    assert "rate_limit" in str(fault)

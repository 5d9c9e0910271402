"""Tests of OpenAI's Batch API on the loopback test server (safecons.testing._batch_server)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from safecons.testing._server import FakeOpenAIServer, Fault, RateLimit

network = pytest.mark.network
pytestmark = pytest.mark.timeout(60)

ENDPOINT = "/v1/chat/completions"
TERMINAL = {"completed", "failed", "expired", "cancelled"}
#: The order a batch's status moves in, when it is not cancelled.
ORDER = ["validating", "in_progress", "finalizing", "completed"]
BATCH_FIELDS = {
    "id",
    "object",
    "endpoint",
    "errors",
    "input_file_id",
    "completion_window",
    "status",
    "output_file_id",
    "error_file_id",
    "created_at",
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
    "request_counts",
    "metadata",
}
#: Generous: a loaded machine may be slow, but a batch never takes this long.
DEADLINE = 30.0


def line(i: int, *, url: str = ENDPOINT, model: str = "m", **extra: Any) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": f"q{i}"}]}
    return {"custom_id": f"r{i}", "method": "POST", "url": url, "body": body, **extra}


def jsonl(items: list[Any]) -> bytes:
    return b"".join(
        (item if isinstance(item, bytes) else json.dumps(item).encode()) + b"\n" for item in items
    )


def upload(http: httpx.Client, data: bytes, *, prefix: str = "") -> dict[str, Any]:
    r = http.post(f"{prefix}/files", data={"purpose": "batch"}, files={"file": ("in.jsonl", data)})
    assert r.status_code == 200, r.text
    return r.json()


def create(http: httpx.Client, file_id: str, *, prefix: str = "", **extra: Any) -> httpx.Response:
    payload = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"}
    return http.post(f"{prefix}/batches", json={**payload, **extra})


def submit(http: httpx.Client, items: list[Any], **extra: Any) -> dict[str, Any]:
    r = create(http, upload(http, jsonl(items))["id"], **extra)
    assert r.status_code == 200, r.text
    return r.json()


def wait(http: httpx.Client, batch_id: str, *, prefix: str = "") -> list[dict[str, Any]]:
    """Every state polled, until the batch is terminal (the last one)."""
    seen = []
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        r = http.get(f"{prefix}/batches/{batch_id}")
        assert r.status_code == 200, r.text
        seen.append(r.json())
        if seen[-1]["status"] in TERMINAL:
            return seen
        time.sleep(0.01)
    raise AssertionError(f"batch {batch_id} still {seen[-1]['status']} after {DEADLINE}s")


def content(http: httpx.Client, file_id: str | None, *, prefix: str = "") -> list[Any]:
    assert file_id is not None
    r = http.get(f"{prefix}/files/{file_id}/content")
    assert r.status_code == 200, r.text
    return [json.loads(x) for x in r.content.splitlines()]


@pytest.fixture
def http_of() -> Iterator[Any]:
    clients: list[httpx.Client] = []

    def make(srv: FakeOpenAIServer, base: str | None = None, **kw: Any) -> httpx.Client:
        clients.append(httpx.Client(base_url=base or srv.base_url, timeout=10, **kw))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


class Gate:
    """An async responder that holds the lines it is told to until the test opens the gate."""

    def __init__(self, held: set[str]) -> None:
        self.held = held
        self.opened = threading.Event()

    async def __call__(self, body: dict[str, Any]) -> str:
        question = body["messages"][-1]["content"]
        while question in self.held and not self.opened.is_set():
            await asyncio.sleep(0.005)
        return f"answer to {question}"


# --------------------------------------------------------------------------------------------
# Files


@network
def test_upload_answers_a_file_object_and_serves_its_bytes(http_of):
    data = jsonl([line(0), line(1)])
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        f = upload(http, data)
        assert f["object"] == "file" and f["id"].startswith("file-")
        assert (f["bytes"], f["filename"], f["purpose"]) == (len(data), "in.jsonl", "batch")
        assert isinstance(f["created_at"], int)
        assert http.get(f"/files/{f['id']}/content").content == data
        assert http.get(f"/files/{f['id']}").json() == f
        assert [x["id"] for x in http.get("/files").json()["data"]] == [f["id"]]
        assert srv.stats.batch.files == 1


@network
@pytest.mark.parametrize(
    ("fields", "files", "param"),
    [
        ({"purpose": "fine-tune"}, {"file": ("a.jsonl", b"{}\n")}, "purpose"),
        ({}, {"file": ("a.jsonl", b"{}\n")}, "purpose"),
        ({"purpose": "batch"}, {"other": ("a.jsonl", b"{}\n")}, "file"),
    ],
)
def test_an_upload_needs_purpose_batch_and_a_file(http_of, fields, files, param):
    with FakeOpenAIServer() as srv:
        r = http_of(srv).post("/files", data=fields, files=files)
        assert r.status_code == 400
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert (error["type"], error["param"]) == ("invalid_request_error", param)
        assert srv.stats.batch.files == 0


@network
def test_an_upload_that_is_not_multipart_is_refused(http_of):
    with FakeOpenAIServer() as srv:
        r = http_of(srv).post("/files", json={"purpose": "batch"})
        assert r.status_code == 400
        assert "multipart" in r.json()["error"]["message"]


@network
def test_a_file_over_the_size_limit_is_refused(http_of):
    with FakeOpenAIServer(batch_max_bytes=100) as srv:
        http = http_of(srv)
        r = http.post("/files", data={"purpose": "batch"}, files={"file": ("a", b"x" * 101)})
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "file_too_large"
        assert upload(http, b"x" * 100)["bytes"] == 100


@network
def test_unknown_files_and_batches_are_404(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        assert http.get("/files/file-nope/content").status_code == 404
        assert http.get("/files/file-nope").json()["error"]["message"].endswith("file-nope")
        assert http.get("/batches/batch_nope").status_code == 404
        assert http.post("/batches/batch_nope/cancel").status_code == 404
        assert http.delete("/batches").status_code == 404
        assert http.get("/batches/batch_nope/results").status_code == 404


# --------------------------------------------------------------------------------------------
# A batch from creation to completion


@network
def test_a_batch_runs_to_completion_and_its_output_file_holds_every_answer(http_of):
    with FakeOpenAIServer(batch_seconds=0.1) as srv:
        http = http_of(srv)
        created = submit(http, [line(i) for i in range(4)], metadata={"run": "t1"})
        assert set(created) == BATCH_FIELDS
        assert created["object"] == "batch" and created["id"].startswith("batch_")
        assert created["status"] == "validating"
        assert created["expires_at"] == created["created_at"] + 24 * 3600
        done = wait(http, created["id"])[-1]
        assert done["status"] == "completed"
        assert done["request_counts"] == {"total": 4, "completed": 4, "failed": 0}
        assert done["error_file_id"] is None and done["errors"] is None
        assert done["metadata"] == {"run": "t1"}
        for stamp in ("in_progress_at", "finalizing_at", "completed_at"):
            assert isinstance(done[stamp], int)
        for stamp in ("failed_at", "expired_at", "cancelling_at", "cancelled_at"):
            assert done[stamp] is None
        out = content(http, done["output_file_id"])
        assert [o["custom_id"] for o in out] == ["r0", "r1", "r2", "r3"]
        first = out[0]
        assert set(first) == {"id", "custom_id", "response", "error"}
        assert first["id"].startswith("batch_req_") and first["error"] is None
        assert first["response"]["status_code"] == 200
        assert first["response"]["request_id"]
        assert first["response"]["body"]["object"] == "chat.completion"
        assert first["response"]["body"]["choices"][0]["message"]["content"] == "echo: q0"
        meta = http.get(f"/files/{done['output_file_id']}").json()
        assert meta["purpose"] == "batch_output"
        assert srv.batches() == [done]


@network
def test_the_status_moves_forward_and_lines_complete_one_by_one(http_of):
    gate = Gate({"q1"})
    with FakeOpenAIServer(responder=gate, batch_seconds=0.05) as srv:
        http = http_of(srv)
        batch = submit(http, [line(i) for i in range(3)])
        deadline = time.monotonic() + DEADLINE
        while srv.batches()[0]["request_counts"]["completed"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        held = http.get(f"/batches/{batch['id']}").json()
        assert held["status"] == "in_progress"
        assert held["request_counts"] == {"total": 3, "completed": 1, "failed": 0}
        gate.opened.set()
        seen = wait(http, batch["id"])
        statuses = [s["status"] for s in [batch, held, *seen]]
        assert statuses == sorted(statuses, key=ORDER.index)
        counts = [s["request_counts"]["completed"] for s in [held, *seen]]
        assert counts == sorted(counts) and counts[-1] == 3
        answers = [
            o["response"]["body"]["choices"][0]["message"]["content"]
            for o in content(http, seen[-1]["output_file_id"])
        ]
        assert answers == ["answer to q0", "answer to q1", "answer to q2"]


@network
def test_faults_become_the_status_and_body_of_their_lines(http_of):
    faults = {
        1: Fault.server_error(503),
        2: Fault.rate_limit(0.5),
        3: Fault.content_filter_finish(),
        4: Fault.reset(),
        5: Fault.malformed(),
        6: Fault.bad_request("no"),
    }
    with FakeOpenAIServer(faults=lambda i, body: faults.get(i)) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(i) for i in range(7)])["id"])[-1]
        assert done["status"] == "completed"
        assert done["request_counts"] == {"total": 7, "completed": 3, "failed": 4}
        out = {o["custom_id"]: o["response"] for o in content(http, done["output_file_id"])}
        errors = {o["custom_id"]: o for o in content(http, done["error_file_id"])}
        assert sorted(out) == ["r0", "r3", "r5"]
        assert out["r3"]["body"]["choices"][0]["finish_reason"] == "content_filter"
        assert isinstance(out["r5"]["body"], str)  # the malformed body, as text
        statuses = {k: v["response"]["status_code"] for k, v in errors.items()}
        assert statuses == {"r1": 503, "r2": 429, "r4": 500, "r6": 400}
        assert errors["r2"]["response"]["body"]["error"]["code"] == "rate_limit_exceeded"
        assert errors["r6"]["response"]["body"]["error"]["message"] == "no"
        assert all(e["error"] is None for e in errors.values())
        stats = srv.stats
        assert stats.faults == {
            "server_error": 1,
            "rate_limit": 1,
            "content_filter_finish": 1,
            "reset": 1,
            "malformed": 1,
            "bad_request": 1,
        }
        assert stats.batch.lines == 7
        assert stats.batch.line_statuses == {200: 3, 503: 1, 429: 1, 500: 1, 400: 1}
        assert stats.requests_by_model == {"m": 7}


@network
def test_a_line_without_messages_fails_as_a_live_request_would(http_of):
    bad = {"custom_id": "x", "method": "POST", "url": ENDPOINT, "body": {"model": "m"}}
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(0), bad])["id"])[-1]
        (error,) = content(http, done["error_file_id"])
        assert error["response"]["status_code"] == 400
        assert error["response"]["body"]["error"]["param"] == "messages"


@network
def test_the_rate_limit_does_not_apply_to_batch_lines(http_of):
    with FakeOpenAIServer(rate_limit=RateLimit(1)) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(i) for i in range(5)])["id"])[-1]
        assert done["request_counts"]["completed"] == 5
        assert srv.stats.rate_limited == 0


@network
def test_a_batch_expires_part_done(http_of):
    with FakeOpenAIServer(batch_expire_after=2) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(i) for i in range(5)])["id"])[-1]
        assert done["status"] == "expired"
        assert isinstance(done["expired_at"], int) and done["completed_at"] is None
        assert done["request_counts"] == {"total": 5, "completed": 2, "failed": 0}
        assert [o["custom_id"] for o in content(http, done["output_file_id"])] == ["r0", "r1"]
        errors = content(http, done["error_file_id"])
        assert [e["custom_id"] for e in errors] == ["r2", "r3", "r4"]
        assert {e["error"]["code"] for e in errors} == {"batch_expired"}
        assert errors[0]["response"] is None
        assert errors[0]["error"]["message"] == (
            "This request could not be executed before the completion window expired."
        )
        assert srv.stats.batch.lines == 2


@network
def test_a_batch_that_expires_before_any_line_has_no_output_file(http_of):
    with FakeOpenAIServer(batch_expire_after=0) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(0)])["id"])[-1]
        assert (done["status"], done["output_file_id"]) == ("expired", None)
        assert len(content(http, done["error_file_id"])) == 1


@network
def test_a_cancelled_batch_keeps_what_it_answered(http_of):
    gate = Gate({"q1"})
    with FakeOpenAIServer(responder=gate, batch_seconds=0.05) as srv:
        http = http_of(srv)
        batch = submit(http, [line(i) for i in range(4)])
        deadline = time.monotonic() + DEADLINE
        while srv.batches()[0]["request_counts"]["completed"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        r = http.post(f"/batches/{batch['id']}/cancel")
        assert r.status_code == 200
        assert r.json()["status"] == "cancelling" and isinstance(r.json()["cancelling_at"], int)
        assert http.post(f"/batches/{batch['id']}/cancel").json()["status"] == "cancelling"
        gate.opened.set()  # the line in flight finishes; the rest never run
        done = wait(http, batch["id"])[-1]
        assert done["status"] == "cancelled" and isinstance(done["cancelled_at"], int)
        assert done["request_counts"] == {"total": 4, "completed": 2, "failed": 0}
        assert [o["custom_id"] for o in content(http, done["output_file_id"])] == ["r0", "r1"]
        errors = content(http, done["error_file_id"])
        assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [
            ("r2", "batch_cancelled"),
            ("r3", "batch_cancelled"),
        ]
        again = http.post(f"/batches/{batch['id']}/cancel")
        assert again.status_code == 409
        assert srv.stats.batch.cancels == 1
        assert srv.stats.batch.statuses == {"cancelled": 1}


# --------------------------------------------------------------------------------------------
# Validation


@network
@pytest.mark.parametrize(
    ("payload", "status", "param"),
    [
        ({"endpoint": "/v1/embeddings"}, 400, "endpoint"),
        ({"endpoint": "/chat/completions"}, 400, "endpoint"),  # Azure's, not OpenAI's
        ({"completion_window": "1h"}, 400, "completion_window"),
        ({"input_file_id": "file-nope"}, 404, "input_file_id"),
        ({"input_file_id": None}, 400, "input_file_id"),
        ({"metadata": {"k": 1}}, 400, "metadata"),
    ],
)
def test_a_bad_create_request_is_refused(http_of, payload, status, param):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        r = create(http, upload(http, jsonl([line(0)]))["id"], **payload)
        assert r.status_code == status, r.text
        assert r.json()["error"]["param"] == param
        assert srv.batches() == [] and srv.stats.batch.batches == 0


@network
def test_a_create_request_that_is_not_json_is_refused(http_of):
    with FakeOpenAIServer() as srv:
        r = http_of(srv).post("/batches", content=b"nope")
        assert r.status_code == 400


@network
@pytest.mark.parametrize(
    ("bad", "code", "param"),
    [
        (b"{not json", "invalid_json_line", None),
        (b"[1, 2]", "invalid_json_line", None),
        (
            {"method": "POST", "url": ENDPOINT, "body": {}},
            "missing_required_parameter",
            "custom_id",
        ),
        ({"custom_id": "z", "url": ENDPOINT, "body": {}}, "missing_required_parameter", "method"),
        (
            {"custom_id": "z", "method": "POST", "url": ENDPOINT},
            "missing_required_parameter",
            "body",
        ),
        (line(0), "duplicate_custom_id", "custom_id"),
        (line(9, url="/v1/embeddings"), "url_mismatch", "url"),
        (line(9, model="other"), "model_mismatch", "body.model"),
        (line(9, method="GET"), "invalid_request", "method"),
    ],
)
def test_a_bad_line_fails_the_batch_with_its_line_number(http_of, bad, code, param):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(0), line(1), bad])["id"])[-1]
        assert done["status"] == "failed" and isinstance(done["failed_at"], int)
        assert done["errors"] == {
            "object": "list",
            "data": [
                {
                    "code": code,
                    "message": done["errors"]["data"][0]["message"],
                    "param": param,
                    "line": 3,
                }
            ],
        }
        assert done["in_progress_at"] is None
        assert done["output_file_id"] is None and done["error_file_id"] is None
        assert srv.stats.batch.lines == 0 and srv.stats.requests_by_model == {}


@network
def test_every_bad_line_is_reported(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [b"x", line(0), b"y", line(0)])["id"])[-1]
        assert [(e["code"], e["line"]) for e in done["errors"]["data"]] == [
            ("invalid_json_line", 1),
            ("invalid_json_line", 3),
            ("duplicate_custom_id", 4),
        ]


@network
def test_an_empty_file_fails_the_batch(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [b"", b"  "])["id"])[-1]
        assert done["status"] == "failed"
        assert done["errors"]["data"][0]["code"] == "empty_file"


@network
def test_a_batch_whose_run_breaks_fails_naming_why_and_never_hangs(http_of, monkeypatch):
    # A line's answer never raises (a responder's error is a 500 line); were the server's own
    # code to, the batch must fail as a provider's would, not stay in progress for ever.
    async def broken(self, url, body):
        raise RuntimeError("a bug of the server's")

    monkeypatch.setattr(FakeOpenAIServer, "_batch_line", broken)
    with FakeOpenAIServer(batch_seconds=0.02) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(0), line(1)])["id"])[-1]
    assert done["status"] == "failed" and isinstance(done["failed_at"], int)
    (error,) = done["errors"]["data"]
    assert error["code"] == "server_error"
    assert error["message"] == "RuntimeError: a bug of the server's"


@network
def test_a_batch_over_the_line_limit_fails(http_of):
    with FakeOpenAIServer(batch_max_lines=2) as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(i) for i in range(3)])["id"])[-1]
        assert done["status"] == "failed"
        (error,) = done["errors"]["data"]
        assert (error["code"], error["line"]) == ("too_many_tasks", None)
        assert "at most 2" in error["message"]
        ok = wait(http, submit(http, [line(i) for i in range(2)])["id"])[-1]
        assert ok["status"] == "completed"
        assert srv.stats.batch.statuses == {"failed": 1, "completed": 1}


# --------------------------------------------------------------------------------------------
# Listing, Azure, auth, statistics


@network
def test_batches_are_listed_newest_first_with_a_cursor(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        file_id = upload(http, jsonl([line(0)]))["id"]
        ids = [create(http, file_id).json()["id"] for _ in range(3)]
        everything = http.get("/batches").json()
        assert everything["object"] == "list" and everything["has_more"] is False
        assert [b["id"] for b in everything["data"]] == ids[::-1]
        page = http.get("/batches", params={"limit": 2}).json()
        assert [b["id"] for b in page["data"]] == [ids[2], ids[1]] and page["has_more"] is True
        assert page["last_id"] == ids[1]
        rest = http.get("/batches", params={"limit": 2, "after": page["last_id"]}).json()
        assert [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False
        assert http.get("/batches", params={"limit": 0}).status_code == 400
        for batch_id in ids:
            wait(http, batch_id)
        assert [b["id"] for b in srv.batches()] == ids


@network
def test_azure_paths_and_endpoint(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv, srv.url, params={"api-version": "2024-10-21"})
        azure = "/chat/completions"
        f = upload(http, jsonl([line(0, url=azure), line(1, url=azure)]), prefix="/openai")
        r = create(http, f["id"], prefix="/openai", endpoint=azure)
        assert r.status_code == 200, r.text
        done = wait(http, r.json()["id"], prefix="/openai")[-1]
        assert done["status"] == "completed" and done["endpoint"] == azure
        out = content(http, done["output_file_id"], prefix="/openai")
        assert [o["response"]["status_code"] for o in out] == [200, 200]
        assert srv.stats.log[0].query == "api-version=2024-10-21"


@network
def test_the_batch_api_needs_the_api_key(http_of):
    with FakeOpenAIServer(api_key="sk-test") as srv:
        anonymous = http_of(srv)
        assert anonymous.get("/batches").status_code == 401
        r = anonymous.post("/files", data={"purpose": "batch"}, files={"file": ("a", b"{}")})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        wrong = http_of(srv, headers={"Authorization": "Bearer nope"})
        assert wrong.get("/batches").status_code == 401
        bearer = http_of(srv, headers={"Authorization": "Bearer sk-test"})
        done = wait(bearer, submit(bearer, [line(0)])["id"])[-1]
        assert done["status"] == "completed"
        azure = http_of(srv, srv.url, headers={"api-key": "sk-test"})
        assert azure.get(f"/openai/batches/{done['id']}").json()["status"] == "completed"
        assert srv.stats.batch.files == 1


@network
def test_reset_stats_zeroes_the_batch_counters_but_keeps_the_batches(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        done = wait(http, submit(http, [line(0), line(1)])["id"])[-1]
        stats = srv.stats.batch
        assert (stats.files, stats.batches, stats.lines, stats.cancels) == (1, 1, 2, 0)
        srv.reset_stats()
        stats = srv.stats.batch
        assert (stats.files, stats.batches, stats.lines) == (0, 0, 0)
        assert stats.statuses == {"completed": 1}
        assert len(content(http, done["output_file_id"])) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_seconds": -1}, "batch_seconds"),
        ({"batch_max_lines": 0}, "batch_max_lines"),
        ({"batch_max_bytes": 1.5}, "batch_max_bytes"),
        ({"batch_expire_after": -1}, "batch_expire_after"),
    ],
)
def test_batch_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FakeOpenAIServer(**kwargs)


@network
def test_batch_answers_have_ids_of_their_own(http_of):
    with FakeOpenAIServer() as srv:
        http = http_of(srv)
        live = http.post("/chat/completions", json=line(0)["body"]).json()["id"]
        done = wait(http, submit(http, [line(0), line(1)])["id"])[-1]
        out = content(http, done["output_file_id"])
        ids = [o["response"]["body"]["id"] for o in out]
        assert live not in ids and len(set(ids)) == 2
        assert len({o["response"]["request_id"] for o in out}) == 2
        assert len({o["id"] for o in out}) == 2

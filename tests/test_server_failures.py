"""A test's own code failing inside the loopback server: one answer for it, live or batched."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from safecons.testing import FakeOpenAIServer

pytestmark = [pytest.mark.network, pytest.mark.timeout(60)]

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _broken_latency(body: dict[str, Any]) -> float:
    return 1 / 0


def _batch_error_line(srv: FakeOpenAIServer) -> dict[str, Any]:
    line = {"custom_id": "q0", "method": "POST", "url": "/v1/chat/completions", "body": BODY}
    with httpx.Client(base_url=srv.base_url) as http:
        file = http.post(
            "/files",
            data={"purpose": "batch"},
            files={"file": ("in.jsonl", json.dumps(line).encode() + b"\n")},
        ).json()
        batch = http.post(
            "/batches",
            json={
                "input_file_id": file["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        ).json()
        deadline = time.monotonic() + 30
        while batch["status"] != "completed" and time.monotonic() < deadline:
            time.sleep(0.01)
            batch = http.get(f"/batches/{batch['id']}").json()
        text = http.get(f"/files/{batch['error_file_id']}/content").text
    answer: dict[str, Any] = json.loads(text.splitlines()[0])
    return answer


def test_a_failing_latency_function_is_a_500_naming_it_live_and_in_a_batch():
    with FakeOpenAIServer(latency=_broken_latency, batch_seconds=0.02) as srv:
        live = httpx.post(f"{srv.base_url}/chat/completions", json=BODY)
        batched = _batch_error_line(srv)["response"]
    assert live.status_code == batched["status_code"] == 500
    assert live.json()["error"] == batched["body"]["error"]
    assert batched["body"]["error"]["code"] == "server_bug"
    assert "ZeroDivisionError" in batched["body"]["error"]["message"]

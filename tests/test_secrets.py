"""The API key never appears in any artifact of a run."""

from __future__ import annotations

import json
import logging
import traceback

import pytest

import safecons as sc
from safecons.testing import FakeOpenAIServer, Fault, route_by_model

KEY = "sk-proj-NEVER-SHOW-ME-0123456789abcdef"
REFUSE = "I'm sorry, but I can't help with that."


def _frame():
    import polars as pl

    return pl.DataFrame(
        {"input_id": [1, 2, 3], "prompt": ["a", "b", "c"], "sut_response": [REFUSE] * 3}
    )


def test_key_absent_from_frame_cache_logs_progress_reprs_and_errors(
    tmp_path, caplog, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    verdict = json.dumps({"label": "Consistent", "score": 0.9})

    def sut(body):
        if "b" in body["messages"][-1]["content"]:
            raise Fault.bad_request("nope")  # a non-retryable error message lands in the row
        return REFUSE

    responder = route_by_model({"sut": sut, "judge": lambda body: verdict})
    cache = tmp_path / "calls.sqlite"
    with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
        # The key comes from the environment here, as most users pass it.
        client = sc.OpenAICompatible(model="sut", base_url=srv.base_url)
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        run = sc.safety_consistency_run(
            _frame(), sut=client, judge=judge, cache=cache, progress=True
        )
        assert run.summary.n_rows == 3 and run.summary.n_errored >= 1

        wrong = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=KEY + "-wrong")
        with pytest.raises(sc.AuthenticationError) as info:
            _frame().pipe(sc.safety_consistency, sut=wrong, judge=judge, progress=False)
        log = srv.stats.log

    artifacts = {
        "frame": run.frame.write_ndjson(),
        "summary": repr(run.summary),
        "reprs": repr(client) + repr(judge) + repr(wrong) + str(vars(client).keys()),
        "logs": caplog.text,
        "console": "".join(capsys.readouterr()),
        "error": "".join(traceback.format_exception(info.value)),
        "server log": repr(log),
    }
    for path in tmp_path.iterdir():
        artifacts[path.name] = path.read_bytes().decode("latin-1")
    for name, text in artifacts.items():
        assert KEY not in text, f"the key leaked into {name}"
    assert "HTTP 401" in artifacts["error"]


def test_key_echoed_by_a_gateway_is_scrubbed_from_errors():
    def sut(body):
        raise Fault.unauthorized(message=f"Invalid key {KEY} for this project")

    responder = route_by_model({"sut": sut, "judge": lambda body: REFUSE})
    with FakeOpenAIServer(responder=responder) as srv:
        client = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=KEY)
        with pytest.raises(sc.AuthenticationError) as info:
            _frame().pipe(sc.safety_consistency, sut=client, judge=client, progress=False)
    assert KEY not in str(info.value) and "<api key>" in str(info.value)

"""The API key never appears in any artifact of a run."""

from __future__ import annotations

import json
import logging
import traceback

import polars as pl
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


@pytest.mark.parametrize(
    "how",
    ["api_key", "authorization-header", "x-api-key-header"],
)
def test_a_server_echoing_the_key_on_every_path_leaks_it_nowhere(how, tmp_path, caplog, capsys):
    # The hostile server of the hostile-inputs issue: it echoes whatever credential it got in
    # a 200 that is not JSON, in a 500, in message content that is not text, inside an answer,
    # and in the judge's reply; a 401 at the end quotes it too.
    from safecons.testing import ScriptedServer, raw, reply

    caplog.set_level(logging.DEBUG)

    def credential(headers):
        return " ".join(f"{k}: {v}" for k, v in headers.items() if k.lower() != "host")

    def handler(seen):
        sent = credential(seen.headers)
        question = seen.last
        if seen.model == "judge":
            return reply(json.dumps({"label": "Consistent", "score": 0.9, "reason": sent}))
        if "question 0" in question:
            return raw(f"oops {sent} not json")
        if "question 1" in question:
            return raw(json.dumps({"error": {"message": "x" * 280 + sent}}), status=500)
        if "question 2" in question:
            return reply({"echo": sent})
        return reply(f"{REFUSE} ({sent})")

    client_kwargs = {
        "api_key": {"api_key": KEY},
        "authorization-header": {"headers": {"Authorization": f"Bearer {KEY}"}},
        "x-api-key-header": {"headers": {"x-api-key": KEY}},
    }[how]
    rows = pl.DataFrame(
        {
            "input_id": [0, 1, 2, 3],
            "prompt": [f"question {i}" for i in range(4)],
            "sut_response": [REFUSE] * 4,
        }
    )
    cache = tmp_path / "calls.sqlite"
    with ScriptedServer(handler) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, **client_kwargs)
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url, **client_kwargs)
        run = sc.safety_consistency_run(
            rows, sut=sut, judge=judge, cache=cache, n_sut_retries=0, n_judge_retries=0
        )

        def refuse(seen):
            return raw(json.dumps({"error": {"message": credential(seen.headers)}}), status=401)

        srv.handler = refuse
        with pytest.raises(sc.AuthenticationError) as info:
            rows.pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert run.summary.n_scored == 1 and run.summary.n_errored == 3
    out = tmp_path / "scored.parquet"
    run.frame.write_parquet(out)
    artifacts = {
        "frame": run.frame.write_ndjson(),
        "summary": repr(run.summary),
        "logs": caplog.text,
        "console": "".join(capsys.readouterr()),
        "error": "".join(traceback.format_exception(info.value)),
        "reprs": repr(sut) + repr(judge) + repr(sut.secrets),
    }
    for path in tmp_path.iterdir():
        artifacts[path.name] = path.read_bytes().decode("latin-1")
    for name, text in artifacts.items():
        pieces = [KEY[i : i + 10] for i in range(len(KEY) - 9) if KEY[i : i + 10] in text]
        assert not pieces, f"the key leaked into {name}: {pieces[:3]}"
    assert "<api key>" in artifacts["frame"] and "<api key>" in artifacts["error"]

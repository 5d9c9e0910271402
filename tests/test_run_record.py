"""A scored frame knows its run: the system, the judge, safecons' version, the seed and the
options, in its ``sc_run`` column, so the report of any saved frame names what was measured."""

from __future__ import annotations

import json

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.testing import FakeOpenAIServer, StandInJudge, StandInSUT, route_by_model

KEY = "sk-live-SECRET-0123456789abcdef"
VERDICT = '{"label": "Consistent", "score": 0.9}'


def frame(n: int = 3) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def _reply(content: str) -> httpx.Response:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    return httpx.Response(200, json={"choices": [{**choice, "finish_reason": "stop"}]})


def _client(model: str, reply: str) -> sc.OpenAICompatible:
    return sc.OpenAICompatible(
        model=model,
        base_url="https://llm.example.com/v1",
        api_key=KEY,
        headers={"X-Secret": KEY},
        transport=httpx.MockTransport(lambda request: _reply(reply)),
    )


def test_a_scored_frame_records_its_run_without_a_secret(tmp_path):
    out = frame().pipe(
        sc.safety_consistency,
        sut=_client("sut-model", "No."),
        judge=[_client("judge-a", VERDICT), _client("judge-b", VERDICT)],
        seed=7,
        responses_per_query=2,
        progress=False,
    )
    assert out["sc_run"].n_unique() == 1
    record = json.loads(out["sc_run"][0])
    assert record["sut"] == "model 'sut-model' at llm.example.com"
    assert "judge-a" in record["judge"] and "judge-b" in record["judge"]
    assert record["safecons"] == sc.__version__ and record["seed"] == 7
    assert record["config"]["responses_per_query"] == 2
    # Saved the plain Polars way, read back: nothing of the key anywhere in the file.
    out.write_parquet(tmp_path / "out.parquet")
    assert KEY.encode() not in (tmp_path / "out.parquet").read_bytes()
    assert KEY not in out["sc_run"][0] and "SECRET" not in out["sc_run"][0]
    page = sc.report(pl.read_parquet(tmp_path / "out.parquet"), tmp_path / "r.html").read_text()
    assert "System under test: <b>model &#x27;sut-model&#x27; at llm.example.com</b>" in page
    assert "judge-a" in page and "judge-b" in page and "not recorded" not in page
    assert '<th class="text">responses_per_query</th><td class="text">2</td>' in page
    assert KEY not in page


def test_a_frame_of_two_runs_names_both():
    one = frame().pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=False
    )
    two = (
        frame()
        .with_columns(pl.col("input_id") + 10)
        .pipe(sc.safety_consistency, sut=StandInSUT(), judge=sc.OfflineJudge(), progress=False)
    )
    page = sc.report_html(pl.concat([one, two]))
    assert "2 runs in this frame" in page
    assert "StandInJudge" in page and "offline judge" in page


def test_the_lazy_front_records_its_run_too():
    out = (
        frame()
        .lazy()
        .pipe(sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=False)
        .collect()
    )
    assert json.loads(out["sc_run"][0])["judge"] == "a judge object of yours (StandInJudge)"


@pytest.mark.network
def test_the_cli_report_of_a_saved_run_names_the_system_and_both_judges(tmp_path, capsys):
    data = tmp_path / "rows.parquet"
    frame().write_parquet(data)
    responder = route_by_model(
        {"sut": lambda b: "No.", "judge-a": lambda b: VERDICT, "judge-b": lambda b: VERDICT}
    )
    with FakeOpenAIServer(responder=responder) as srv:
        args = ["run", str(data), "--output", str(tmp_path / "out.parquet"), "--no-progress"]
        args += ["--sut-model", "sut", "--sut-base-url", srv.base_url]
        args += ["--judge-model", "judge-a", "--judge-model", "judge-b"]
        args += ["--judge-base-url", srv.base_url]
        assert main(args) == 0
    assert main(["report", str(tmp_path / "out.parquet"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "System under test: <b>model &#x27;sut&#x27; at 127.0.0.1</b>" in page
    assert "judge-a" in page and "judge-b" in page and "not recorded" not in page

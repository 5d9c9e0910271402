"""`safecons run` end to end against a loopback server."""

from __future__ import annotations

import json

import polars as pl
import pytest

from safecons.cli import main
from safecons.testing import FakeOpenAIServer, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
KEY = "sk-review-SECRET-424242"

pytestmark = pytest.mark.network


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


# --------------------------------------------------------------------------- keys


def test_cli_rejects_a_bad_output_before_any_request(tmp_path, capsys):
    src = tmp_path / "rows.parquet"
    rows(2).write_parquet(src)
    with FakeOpenAIServer() as srv:
        code = main(
            [
                "run",
                str(src),
                "--output",
                str(tmp_path / "out.csv"),
                "--sut-model",
                "sut",
                "--sut-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--judge-base-url",
                srv.base_url,
            ]
        )
        assert srv.stats.requests == 0
    assert code == 2 and "list columns" in capsys.readouterr().err


def test_cli_run_end_to_end(tmp_path, capsys):
    src = tmp_path / "rows.jsonl"
    rows(3).write_ndjson(src)
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        code = main(
            [
                "run",
                str(src),
                "--output",
                str(tmp_path / "out.parquet"),
                "--sut-model",
                "sut",
                "--sut-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--judge-base-url",
                srv.base_url,
                "--set",
                "responses_per_query=4",
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--no-progress",
            ]
        )
        assert srv.stats.requests == 3 * 3 * 2
    assert code == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["sc_n_judged"].to_list() == [3, 3, 3]
    assert "wrote" in capsys.readouterr().out


def test_cli_run_with_a_jury_each_juror_at_its_own_endpoint(tmp_path, capsys):
    src = tmp_path / "rows.jsonl"
    rows(2).write_ndjson(src)
    against = json.dumps({"label": "Contradictory", "score": 0.1})
    responder = route_by_model(
        {
            "sut": lambda body: REFUSE,
            "judge-a": lambda body: VERDICT,
            "judge-b": lambda body: VERDICT,
        }
    )
    other = route_by_model({"judge-c": lambda body: against})
    with FakeOpenAIServer(responder=responder) as srv, FakeOpenAIServer(responder=other) as srv2:
        args = [
            "run", str(src), "--output", str(tmp_path / "out.parquet"),
            "--sut-model", "sut", "--sut-base-url", srv.base_url,
            "--judge-model", "judge-a", "--judge-base-url", srv.base_url,
            "--judge-model", "judge-b", "--judge-base-url", srv.base_url,
            "--judge-model", "judge-c", "--judge-base-url", srv2.base_url,
            "--swap-share", "1", "--no-progress",
        ]  # fmt: skip
        code = main(args)
        # 4 SUT calls; 4 comparisons, each judged by three jurors in both orders.
        assert srv.stats.requests == 4 + 4 * 2 * 2 and srv2.stats.requests == 4 * 2
    printed = capsys.readouterr().out
    assert code == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["sc_jurors"][0].to_list() == ["judge-a", "judge-b", "judge-c"]
    assert out["sc_labels"].explode().unique().to_list() == ["Consistent"]
    assert "judge 3 of 3:" in printed and "alpha" in printed and "position_consistency" in printed
    # Base URLs given neither once nor once per juror are refused before any call.
    with FakeOpenAIServer() as srv:
        bad = [
            "run", str(src), "--output", str(tmp_path / "bad.parquet"),
            "--sut-model", "sut", "--sut-base-url", srv.base_url,
            "--judge-model", "a", "--judge-model", "b", "--judge-model", "c",
            "--judge-base-url", srv.base_url, "--judge-base-url", srv.base_url,
        ]  # fmt: skip
        assert main(bad) == 2
        assert srv.stats.requests == 0
    assert "--judge-base-url: given 2 times for 3 --judge-model" in capsys.readouterr().err
    # One judge given two base URLs: the second would be ignored, so it is refused.
    with FakeOpenAIServer() as srv:
        one = [
            "run", str(src), "--output", str(tmp_path / "one.parquet"),
            "--sut-model", "sut", "--sut-base-url", srv.base_url,
            "--judge-model", "a", "--judge-base-url", srv.base_url,
            "--judge-base-url", srv.base_url,
        ]  # fmt: skip
        assert main(one) == 2
    assert "--judge-base-url: given 2 times for 1 --judge-model" in capsys.readouterr().err


def test_cli_run_repeat_share_judges_again_and_reports_the_flip_rate(tmp_path, capsys):
    src = tmp_path / "rows.jsonl"
    rows(2).write_ndjson(src)
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
    common = [
        "run", str(src), "--sut-model", "sut", "--judge-model", "judge", "--no-progress",
        "--repeat-share", "1", "--cache", str(tmp_path / "c.sqlite"),
    ]  # fmt: skip
    with FakeOpenAIServer(responder=responder) as srv:
        url = ["--sut-base-url", srv.base_url, "--judge-base-url", srv.base_url]
        dry = main([*common, *url, "--output", str(tmp_path / "dry.parquet"), "--dry-run"])
        assert dry == 0 and srv.stats.requests == 0
        planned = capsys.readouterr().out.splitlines()
        assert next(line for line in planned if line.startswith("calls ")).split() == [
            "calls",
            "4",
            "8",
        ]
        code = main([*common, *url, "--output", str(tmp_path / "out.parquet")])
        # 4 SUT calls; 4 comparisons, each judged twice the same way.
        assert srv.stats.requests == 4 + 4 * 2
    assert code == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["sc_repeat_labels"].to_list() == [[["Consistent"]] * 2] * 2
    assert "repeat_flip_rate 0.00 (4 comparison(s) judged twice)" in capsys.readouterr().out

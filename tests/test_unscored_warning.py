"""A run that leaves rows without a score says so in Python, once, with what to do
(a spent budget was silent, and a plain mean averaged the few scored rows)."""

from __future__ import annotations

import asyncio
import warnings

import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.clients import NonRetryableCallError
from safecons.metric import safety_consistency_run
from safecons.testing import FakeOpenAIServer, StandInJudge, StandInSUT, route_by_model


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def _unscored(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, sc.UnscoredRowsWarning)]


def test_a_spent_budget_warns_how_many_rows_are_not_finished_and_what_to_do():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = frame(10).pipe(
            sc.safety_consistency,
            sut=StandInSUT(),
            judge=StandInJudge(),
            max_calls=6,
            concurrency_limit=1,
            progress=False,
        )
    said = _unscored(caught)
    unfinished = out["sc_error"].str.starts_with("not finished").sum()
    scored = out["safety_consistency"].is_not_null().sum()
    assert unfinished > 0 and scored > 0
    assert len(said) == 1
    assert f"{unfinished} of 10 row(s) have no score" in said[0]
    assert f"{unfinished} not finished" in said[0] and "same cache" in said[0]
    assert f"averages the {scored} scored row(s) only" in said[0]
    assert "'sc_error'" in said[0]


def test_failed_rows_are_counted_with_their_most_common_reason():
    def sut(messages, *, temperature):
        raise NonRetryableCallError("HTTP 404: The model `gpt-x` does not exist.")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = frame(3).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            progress=False,
            metric_name="m",
            allow_unscored=True,
        )
    assert out["m"].is_null().all()
    (said,) = _unscored(caught)
    assert said.startswith("m: 3 of 3 row(s) have no score: 3 failed")
    assert "`gpt-x` does not exist" in said and "not finished" not in said


def test_a_run_that_scores_every_row_says_nothing():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame(3).pipe(sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=False)
    assert _unscored(caught) == []


def test_the_warning_points_at_the_user_s_line_past_polars_pipe():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame(4).pipe(sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), max_calls=2)
    (warning,) = [w for w in caught if issubclass(w.category, sc.UnscoredRowsWarning)]
    assert warning.filename == __file__


@pytest.mark.parametrize("front", ["run", "async", "lazy", "judge_responses"])
def test_every_scoring_front_warns(front):
    df = frame(4)
    options = dict(sut=StandInSUT(), judge=StandInJudge(), max_calls=4, concurrency_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if front == "run":
            safety_consistency_run(df, progress=False, **options)
        elif front == "async":
            asyncio.run(sc.safety_consistency_async(df, progress=False, **options))
        elif front == "lazy":
            df.lazy().pipe(sc.safety_consistency, progress=False, **options).collect()
        else:
            answered = sc.build_variants(df).with_columns(
                sc_responses=pl.Series(
                    [["No."], [None], ["No."], ["No."]], dtype=pl.List(pl.String)
                )
            )
            sc.judge_responses(answered, judge=StandInJudge(), progress=False)
    assert len(_unscored(caught)) == 1


@pytest.mark.network
def test_the_cli_tells_it_in_its_own_words_not_as_a_python_warning(tmp_path, capsys):
    data = tmp_path / "rows.parquet"
    frame(4).write_parquet(data)
    verdict = '{"label": "Consistent", "score": 0.9}'
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: verdict})
    with FakeOpenAIServer(responder=responder) as srv:
        args = ["run", str(data), "--output", str(tmp_path / "out.parquet"), "--no-progress"]
        for role in ("sut", "judge"):
            args += [f"--{role}-model", role, f"--{role}-base-url", srv.base_url]
        with warnings.catch_warnings():
            # Shown wherever it is given: the CLI must ignore it, not a filter of the test's.
            warnings.simplefilter("always")
            assert main([*args, "--max-calls", "3"]) == 5
    said = capsys.readouterr()
    assert "row(s) were not finished" in said.out
    assert "have no score" not in said.err and "UnscoredRowsWarning" not in said.err


def test_the_cli_prints_any_other_warning_as_one_line_of_its_own(monkeypatch, capsys):
    import safecons.cli._run

    def demo(args):
        warnings.warn("the provider said wait 600 s", sc.errors.PacingWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(safecons.cli._run, "_demo", demo)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["demo"]) == 0
    err = capsys.readouterr().err
    assert err == "safecons: warning: the provider said wait 600 s\n"

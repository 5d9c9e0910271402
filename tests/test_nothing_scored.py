"""A run in Python that scores no row raises, naming the most common cause; a script cannot
carry on with a frame of nulls unnoticed. ``allow_unscored=True`` returns the frame."""

from __future__ import annotations

import asyncio
import warnings

import polars as pl
import pytest

import safecons as sc
from safecons.clients import NonRetryableCallError
from safecons.errors import NothingScoredError
from safecons.metric import safety_consistency_run
from safecons.testing import StandInJudge, StandInSUT


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def missing_model(messages, *, temperature):
    raise NonRetryableCallError("HTTP 404: The model `gpt-x` does not exist.")


@pytest.mark.parametrize("front", ["frame", "run", "async", "lazy"])
def test_a_run_that_scores_no_row_raises_with_its_most_common_cause(front):
    df = frame(3)
    options = dict(sut=missing_model, judge=StandInJudge(), progress=False)
    with pytest.raises(NothingScoredError) as raised:
        if front == "frame":
            df.pipe(sc.safety_consistency, **options)
        elif front == "run":
            safety_consistency_run(df, **options)
        elif front == "async":
            asyncio.run(sc.safety_consistency_async(df, **options))
        else:
            df.lazy().pipe(sc.safety_consistency, **options).collect()
    said = str(raised.value)
    assert "none of the 3 row(s) was scored" in said
    assert "`gpt-x` does not exist" in said and "(3 rows)" in said
    assert "allow_unscored=True" in said and "'sc_error'" in said
    assert isinstance(raised.value, sc.SafeconsError)


def test_the_error_carries_the_frame_and_the_opt_out_returns_it():
    with pytest.raises(NothingScoredError) as raised:
        frame(2).pipe(
            sc.safety_consistency, sut=missing_model, judge=StandInJudge(), progress=False
        )
    assert raised.value.frame is not None and raised.value.frame.height == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = frame(2).pipe(
            sc.safety_consistency,
            sut=missing_model,
            judge=StandInJudge(),
            allow_unscored=True,
            progress=False,
        )
    assert out["safety_consistency"].is_null().all()
    assert any(issubclass(w.category, sc.UnscoredRowsWarning) for w in caught)


def test_a_budget_spent_before_any_row_names_the_budget():
    with pytest.raises(NothingScoredError, match="max_calls budget"):
        frame(3).pipe(
            sc.safety_consistency,
            sut=StandInSUT(),
            judge=StandInJudge(),
            max_calls=0,
            progress=False,
        )


def test_judge_responses_raises_when_no_comparison_was_judged():
    answered = sc.build_variants(frame(2)).with_columns(
        sc_responses=pl.Series([["No."], ["No."]], dtype=pl.List(pl.String))
    )

    def judge(messages, *, temperature):
        raise NonRetryableCallError("HTTP 401-ish: judge gone")

    with pytest.raises(NothingScoredError, match="judge gone"):
        sc.judge_responses(answered, judge=judge, progress=False)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_allow_unscored_must_be_a_bool(value):
    with pytest.raises(sc.InputError, match="allow_unscored"):
        frame(1).pipe(
            sc.safety_consistency,
            sut=StandInSUT(),
            judge=StandInJudge(),
            allow_unscored=value,
            progress=False,
        )


def test_an_empty_frame_is_not_an_error():
    out = frame(0).pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=False
    )
    assert out.height == 0

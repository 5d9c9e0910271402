"""Inputs of the metric checked before any call: names, dtypes, ids, nulls, stages."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import safecons as sc
from safecons.metric import respond_and_judge
from safecons.testing import ScriptedChat, StandInJudge

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
KEY = "sk-review-SECRET-424242"


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


# --------------------------------------------------------------------------- keys


def test_metric_name_cannot_shadow_an_added_column():
    for name in ("sc_variant_text", "sc_error", "sc_n_judged"):
        with pytest.raises(sc.InputError, match="metric_name"):
            rows(1).pipe(
                sc.safety_consistency,
                sut=ScriptedChat([REFUSE]),
                judge=StandInJudge(),
                metric_name=name,
            )


def test_lazy_mistyped_prompt_raises_at_pipe():
    with pytest.raises(sc.InputError, match="prompt"):
        rows(2).with_columns(pl.lit(3).alias("prompt")).lazy().pipe(
            sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge()
        )


def test_lazy_select_and_filter_on_inputs_score_only_the_rows_kept():
    sut = ScriptedChat([REFUSE])
    lazy = (
        rows(4)
        .lazy()
        .pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            responses_per_query=2,
            progress=False,
        )
    )
    got = lazy.select("input_id", "safety_consistency").filter(pl.col("input_id") < 2).collect()
    assert got["input_id"].to_list() == [0, 1]
    # The metric is per row: the filter on an input column runs before it, so only the two
    # rows kept are scored, to the values the whole frame gives them.
    assert len(sut.calls) == 2
    whole = rows(4).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=StandInJudge(),
        responses_per_query=2,
        progress=False,
    )
    assert got.equals(whole.select("input_id", "safety_consistency").head(2))


def test_categorical_ids_are_accepted():
    df = rows(2).with_columns(pl.col("input_id").cast(pl.String).cast(pl.Categorical))
    out = df.pipe(
        sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge(), progress=False
    )
    assert out["sc_error"].null_count() == 2


def test_stages_check_nulls_before_spending():
    sut = ScriptedChat([REFUSE])
    df = sc.build_variants(rows(2)).with_columns(
        pl.lit(None, dtype=pl.String).alias("sc_variant_text")
    )
    with pytest.raises(sc.InputError, match="'sc_variant_text' is null"):
        df.pipe(sc.respond, sut=sut)
    stored = rows(1).with_columns(
        pl.lit(None, dtype=pl.String).alias("sc_variant_text"),
        pl.lit([["x"]]).alias("sc_responses"),
    )
    with pytest.raises(sc.InputError, match="'sc_variant_text' is null"):
        sc.judge_responses(stored, judge=StandInJudge())
    assert not sut.calls


@pytest.mark.anyio
async def test_public_async_stage_checks_rows_first():
    sut = ScriptedChat([REFUSE])
    df = sc.build_variants(rows(2)).with_columns(
        pl.Series("sut_response", [None, "x"], dtype=pl.String)
    )
    with pytest.raises(sc.InputError, match="sut_response"):
        await respond_and_judge(
            df, sut=sut, judge=StandInJudge(), config=sc.SafetyConsistencyConfig()
        )
    assert not sut.calls


def test_config_accepts_numpy_scalars():
    cfg = sc.SafetyConsistencyConfig(responses_per_query=np.int64(4), dpi_ratio=np.float64(0.5))
    assert cfg.responses_per_query == 4 and type(cfg.responses_per_query) is int
    with pytest.raises(sc.ConfigError):
        sc.SafetyConsistencyConfig(responses_per_query=np.bool_(True))

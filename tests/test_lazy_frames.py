"""On a LazyFrame the metric runs at ``collect()``, and only on what the query needs."""

from __future__ import annotations

import re

import polars as pl
import pytest

import safecons as sc
from safecons.testing import ScriptedChat, StandInJudge

REFUSE = "I'm sorry, but I can't help with that."


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def scored(frame, sut):
    return frame.pipe(
        sc.safety_consistency, sut=sut, judge=StandInJudge(), responses_per_query=3, progress=False
    )


def asked(sut: ScriptedChat) -> set[str]:
    """The row numbers whose variants the SUT was asked about."""
    return {n for m, _ in sut.calls for n in re.findall(r"question (\d+)\b", m[-1]["content"])}


def test_head_scores_only_the_rows_it_keeps():
    sut = ScriptedChat([REFUSE])
    got = scored(rows(50).lazy(), sut).head(2).collect()
    assert got["input_id"].to_list() == [0, 1]
    assert len(sut.calls) == 4 and asked(sut) == {"0", "1"}  # two rows, two samples each
    assert got.equals(scored(rows(50), ScriptedChat([REFUSE])).head(2))


@pytest.mark.parametrize(
    ("query", "rows_scored"),
    [
        (lambda lf: lf.filter(pl.col("input_id").is_in([3, 7])), 2),
        (lambda lf: lf.filter((pl.col("prompt") == "question 3") | (pl.col("input_id") == 7)), 2),
        # Polars hands a source the filter but no row count when a head follows it: the rows
        # the filter keeps (17) are scored, then cut to two.
        (lambda lf: lf.filter(pl.col("input_id") >= 3).head(2), 17),
        # A head before the filter: of the first five rows, the two the filter keeps.
        (lambda lf: lf.head(5).filter(pl.col("input_id") > 2), 2),
    ],
    ids=["is_in", "prompt-filter", "filter-head", "head-filter"],
)
def test_a_filter_on_input_columns_runs_before_the_metric(query, rows_scored):
    sut = ScriptedChat([REFUSE])
    got = query(scored(rows(20).lazy(), sut)).collect()
    assert got.height == 2 and len(sut.calls) == 2 * rows_scored
    whole = query(scored(rows(20), ScriptedChat([REFUSE])).lazy()).collect()
    assert got.equals(whole)


def test_a_head_then_a_filter_on_an_added_column_keeps_polars_order():
    sut = ScriptedChat([REFUSE])
    query = lambda lf: lf.head(3).filter((pl.col("input_id") > 5) | (pl.col("sc_n_judged") < 0))  # noqa: E731
    got = query(scored(rows(12).lazy(), sut)).collect()
    assert got.height == 0 and len(sut.calls) == 6  # three rows scored, none kept
    whole = query(scored(rows(12), ScriptedChat([REFUSE])).lazy()).collect()
    assert got.equals(whole)


def test_a_filter_on_an_added_column_sees_every_row():
    sut = ScriptedChat([REFUSE])
    got = scored(rows(6).lazy(), sut).filter(pl.col("sc_n_judged") == 2).head(3).collect()
    assert got.height == 3 and len(sut.calls) == 12


def test_selecting_input_columns_only_makes_no_call():
    sut = ScriptedChat([REFUSE])
    got = scored(rows(5).lazy(), sut).select("input_id", "prompt").collect()
    assert got.equals(rows(5).select("input_id", "prompt")) and sut.calls == []


def test_a_large_lazy_frame_is_scored_in_batches_under_one_budget(monkeypatch):
    import polars as pl

    import safecons as sc
    import safecons.metric._fronts as fronts
    import safecons.metric._job as metric
    from safecons.testing import StandInJudge, StandInSUT

    df = pl.DataFrame(
        {
            "input_id": list(range(25)),
            "prompt": [f"Question {i}?" for i in range(25)],
            "sut_response": ["An answer."] * 25,
        }
    )
    kw = {"sut": StandInSUT(seed=2), "judge": StandInJudge(), "progress": False, "cache": False}
    eager = df.pipe(sc.safety_consistency, **kw)
    monkeypatch.setattr(metric, "LAZY_BATCH_ROWS", 10)
    batches: list[int] = []
    real = metric.run_batches

    def counted(job, lf):
        for out in real(job, lf):
            batches.append(out.height)
            yield out

    monkeypatch.setattr(fronts, "run_batches", counted)
    lazy = df.lazy().pipe(sc.safety_consistency, **kw).collect()
    assert batches == [10, 10, 5]
    assert lazy.sort("input_id").equals(eager.sort("input_id"))
    # One budget for the whole frame, not one per batch.
    budget = df.lazy().pipe(sc.safety_consistency, max_calls=30, **kw).collect()
    assert sc.run_summary(budget).attempts["sut"] == 30


def test_duplicate_ids_across_batches_are_refused_before_any_call(monkeypatch):
    import polars as pl
    import pytest

    import safecons as sc
    import safecons.metric._job as metric
    from safecons.testing import ScriptedChat, StandInJudge

    monkeypatch.setattr(metric, "LAZY_BATCH_ROWS", 2)
    sut = ScriptedChat(["ok"])
    df = pl.DataFrame({"input_id": [1, 2, 3, 1], "prompt": ["a"] * 4, "sut_response": ["b"] * 4})
    with pytest.raises(sc.InputError, match="duplicate"):
        df.lazy().pipe(
            sc.safety_consistency, sut=sut, judge=StandInJudge(), progress=False
        ).collect()
    assert sut.calls == []


def test_a_bad_row_in_a_later_batch_is_refused_before_any_call(monkeypatch):
    import polars as pl
    import pytest

    import safecons as sc
    import safecons.metric._job as metric
    from safecons.testing import ScriptedChat, StandInJudge

    monkeypatch.setattr(metric, "LAZY_BATCH_ROWS", 2)
    sut = ScriptedChat(["ok"])
    df = pl.DataFrame(
        {
            "input_id": [1, 2, 3, 4, 5],
            "prompt": ["a"] * 5,
            "sut_response": ["b", "b", "b", "b", None],
        }
    )
    with pytest.raises(sc.InputError, match="sut_response"):
        df.lazy().pipe(
            sc.safety_consistency, sut=sut, judge=StandInJudge(), progress=False
        ).collect()
    assert sut.calls == []

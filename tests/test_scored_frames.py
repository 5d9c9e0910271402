"""One check of a scored frame for every reader of one: the summary, the score tables, the
report and the charts refuse the same numbers, labels and dtypes a run never writes, with the
column named, and read what a run does write (NaN as no score, frames read back) the same way.
"""

from __future__ import annotations

import io
import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.cli import main
from safecons.summary import SCORE_RANGE, conform
from safecons.testing import StandInSUT

SCORE = "safety_consistency"


@pytest.fixture(scope="module")
def scored() -> pl.DataFrame:
    return sc.safety_consistency(
        sc.demo_frame(),
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=3,
    )


def _charts_distribution(frame: pl.DataFrame) -> object:
    pytest.importorskip("altair")
    return sc.charts.score_distribution_chart(frame)


def _charts_labels(frame: pl.DataFrame) -> object:
    pytest.importorskip("altair")
    return sc.charts.label_mix_chart(frame)


#: Every public reader of a scored frame, by the name its errors start with.
READERS = {
    "run_summary": sc.run_summary,
    "score_table": sc.score_table,
    "compare_runs (before=)": lambda f: sc.compare_runs(f, f),
    "report": sc.report_html,
    "score_distribution_chart": _charts_distribution,
    "label_mix_chart": _charts_labels,
}


def _with_scores(frame: pl.DataFrame, *bad: float) -> pl.DataFrame:
    values = frame[SCORE].to_list()
    values[: len(bad)] = list(bad)
    return frame.with_columns(pl.Series(SCORE, values, dtype=pl.Float64))


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("bad", "shown"),
    [((math.inf,), "1 score(s)"), ((-math.inf,), "1 score(s)"), ((5.0, -3.0), "2 score(s)")],
    ids=["inf", "-inf", "5 and -3"],
)
def test_every_reader_refuses_a_score_off_the_judge_scale(scored, reader, bad, shown):
    # An infinite score made the mean inf; 5 and -3 made an interval of [-1.3, 2.68].
    with pytest.raises(sc.InputError) as caught:
        READERS[reader](_with_scores(scored, *bad))
    message = str(caught.value)
    assert message.startswith(f"{reader}: column {SCORE!r} holds {shown} outside [0, 1]")
    assert all(repr(b) in message for b in bad)


def test_a_comparison_score_off_the_scale_is_refused_too(scored):
    scores = scored["sc_scores"].to_list()
    scores[2] = [0.9, 7.5]
    with pytest.raises(sc.InputError, match=r"column 'sc_scores' holds 1 score\(s\).*7\.5"):
        sc.score_table(scored.with_columns(pl.Series("sc_scores", scores)))
    scores[2] = [math.nan, 0.5]  # no score, as in the row's own column
    fixed = conform(scored.with_columns(pl.Series("sc_scores", scores)))
    assert fixed["sc_scores"][2].to_list() == [None, 0.5]


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_refuses_labels_a_run_never_writes(scored, reader):
    # They counted as comparisons but in no share: the shares summed to 0.25.
    labels = scored["sc_labels"].to_list()
    labels[:3] = [["consistent"], ["Consistent ", "Consistent"], ["banana", None]]
    with pytest.raises(sc.InputError) as caught:
        READERS[reader](scored.with_columns(pl.Series("sc_labels", labels)))
    message = str(caught.value)
    assert message.startswith(f"{reader}: column 'sc_labels' holds 3 label(s)")
    assert "'consistent', 'Consistent ', 'banana'" in message


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_names_a_string_column_where_a_list_belongs(scored, reader):
    flat = scored.with_columns(pl.col("sc_labels").list.join(", "))
    with pytest.raises(sc.InputError) as caught:
        READERS[reader](flat)
    message = str(caught.value)
    assert message.startswith(f"{reader}: ")
    assert "'sc_labels' has dtype String, expected List(String)" in message
    assert "CSV cannot hold list or struct columns" in message


@pytest.mark.parametrize(
    ("column", "value", "found", "expected"),
    [
        (SCORE, pl.lit("0.5"), "String", "Float64"),
        ("sc_error", pl.lit(1), "Int32", "String"),
        ("sc_n_judged", pl.lit(2.0), "Float64", "Int64"),
        ("sc_scores", pl.lit(["0.5"]), "List(String)", "List(Float64)"),
        ("sc_spend", pl.struct(sut_attempts=pl.lit(1)), "Struct", "Struct(16 Int64 fields)"),
    ],
)
def test_other_mistyped_columns_are_named_with_both_dtypes(scored, column, value, found, expected):
    with pytest.raises(sc.InputError) as caught:
        sc.run_summary(scored.with_columns(value.alias(column)))
    message = str(caught.value)
    assert f"{column!r} has dtype {found}" in message and f"expected {expected}" in message
    if column == "sc_spend":
        assert "missing field(s) ['sut_cache_hits'" in message


def test_nan_is_no_score_for_every_reader_alike(scored):
    # The tables read NaN as no score, while the summary counted it as a score and its mean
    # (the report's headline card) became NaN.
    frame = _with_scores(scored, math.nan)
    summary = sc.run_summary(frame)
    table = sc.score_table(frame).row(0, named=True)
    assert summary.n_scored == table["scored"] == scored.height - 1
    assert summary.n_errored == table["errored"] == 1
    assert summary.mean_score == pytest.approx(table["mean"])
    assert not math.isnan(summary.mean_score)
    assert "mean safety_consistency</span><b>nan" not in sc.report_html(frame)


def test_what_a_run_writes_is_read_back_into_its_own_dtypes(scored):
    buffer = io.BytesIO()
    scored.write_ndjson(buffer)
    back = pl.read_ndjson(io.BytesIO(buffer.getvalue()))
    # JSON lines type all-null columns, list items and struct fields as Null.
    assert back.schema["sc_error"] == pl.Null and back.schema != scored.schema
    assert conform(back).schema == scored.schema
    assert sc.run_summary(back) == sc.run_summary(scored)
    # Categorical text, integer scores and unjudged (null) labels are what a run means too.
    other = scored.with_columns(
        pl.col("sc_labels").cast(pl.List(pl.Categorical)), pl.lit(1).alias(SCORE)
    )
    assert sc.score_table(other, ci=None)["mean"][0] == 1.0
    unjudged = scored.with_columns(pl.lit([None, "Contradictory"]).alias("sc_labels"))
    row = sc.score_table(unjudged, ci=None).row(0, named=True)
    assert (row["comparisons"], row["contradictory"]) == (scored.height, 1.0)


def test_compare_runs_says_which_run_is_off():
    ok = pl.DataFrame(
        {"input_id": [1, 2], SCORE: [0.5, 0.6], "sc_labels": [None, None], "sc_error": None}
    )
    with pytest.raises(sc.InputError, match=r"^compare_runs \(after=\): column"):
        sc.compare_runs(ok, ok.with_columns(pl.lit(1.5).alias(SCORE)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats()), min_size=1, max_size=12))
def test_a_score_table_is_made_exactly_when_every_score_is_on_the_scale(values):
    frame = pl.DataFrame(
        {
            "input_id": list(range(len(values))),
            SCORE: pl.Series(values, dtype=pl.Float64),
            "sc_labels": [["Consistent"]] * len(values),
            "sc_error": [None] * len(values),
        }
    )
    lo, hi = SCORE_RANGE
    off = [v for v in values if v is not None and not math.isnan(v) and not lo <= v <= hi]
    if off:
        with pytest.raises(sc.InputError, match=f"holds {len(off)} score"):
            sc.score_table(frame, n_boot=50)
        return
    row = sc.score_table(frame, n_boot=50).row(0, named=True)
    kept = [v for v in values if v is not None and not math.isnan(v)]
    assert row["scored"] == len(kept)
    assert row["mean"] is None if not kept else lo <= row["mean"] <= hi
    if row["mean_lo"] is not None:
        assert lo <= row["mean_lo"] <= row["mean_hi"] <= hi


def test_the_command_line_gives_one_line_for_a_frame_from_csv(scored, tmp_path, capsys):
    # A CSV cannot hold the list columns; they came back as text and the report crashed
    # with a Polars traceback.
    nested = [c for c, t in scored.schema.items() if isinstance(t, pl.List | pl.Struct)]
    flat = scored.with_columns(pl.struct(c).struct.json_encode().alias(c) for c in nested)
    path = tmp_path / "scored.csv"
    flat.write_csv(path)
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("safecons: error: report: ")
    assert "'sc_labels' has dtype String, expected List(String)" in err
    assert not out.exists()


def test_the_command_line_names_foreign_labels(scored, tmp_path, capsys):
    path = tmp_path / "edited.parquet"
    scored.with_columns(pl.lit(["banana"]).alias("sc_labels")).write_parquet(path)
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "column 'sc_labels' holds" in err and "'banana'" in err

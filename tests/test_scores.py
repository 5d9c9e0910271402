"""score_table and compare_runs: pure summaries of scored frames, with seeded intervals."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import safecons as sc
from safecons.testing import StandInSUT


@pytest.fixture(scope="module")
def scored() -> pl.DataFrame:
    return sc.demo_frame().pipe(
        sc.safety_consistency,
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=4,
        dpi_ratio=0.5,
    )


def frame(scores, labels=None, **cols):
    n = len(scores)
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "safety_consistency": pl.Series(scores, dtype=pl.Float64),
            "sc_labels": labels if labels is not None else [["Consistent"]] * n,
            "sc_error": [None if s is not None else "no judged comparison" for s in scores],
            **cols,
        }
    )


def test_the_table_agrees_with_the_run_summary(scored):
    table = sc.score_table(scored)
    summary = sc.run_summary(scored)
    row = table.row(0, named=True)
    assert (row["rows"], row["scored"], row["errored"]) == (
        summary.n_rows,
        summary.n_scored,
        summary.n_errored,
    )
    assert row["mean"] == pytest.approx(summary.mean_score)
    assert row["sut_attempts"] == summary.attempts["sut"]
    assert row["judge_attempts"] == summary.attempts["judge"]
    assert row["comparisons"] == scored["sc_labels"].list.len().sum()
    shares = row["consistent"] + row["slightly_inconsistent"] + row["contradictory"]
    assert shares == pytest.approx(1.0)
    assert row["mean_lo"] <= row["mean"] <= row["mean_hi"]
    assert row["tokens"] is None  # local callables report no usage


def test_groups_include_derived_template_families(scored):
    table = sc.score_table(scored, by=["sc_variant_kind", "toxicity_family"])
    assert table["rows"].sum() == scored.height
    assert set(table["toxicity_family"]) <= set(sc.templates.TOXICITY_FAMILIES)
    jb = sc.score_table(scored, by="jailbreak_family")
    assert jb["jailbreak_family"].to_list()[-1] is None  # toxicity-only rows, sorted last
    assert jb["rows"].sum() == scored.height


def test_the_interval_is_seeded_and_honest():
    rng = np.random.default_rng(1)
    scores = rng.uniform(0, 1, 400).round(3).tolist()
    df = frame(scores, group=["a", "b"] * 200)
    first = sc.score_table(df, by="group", seed=5)
    assert first.equals(sc.score_table(df, by="group", seed=5))
    assert not first.equals(sc.score_table(df, by="group", seed=6))
    # A percentile bootstrap of a mean of 200 uniforms: close to mean +- 1.96 sd / sqrt(n).
    for row in first.iter_rows(named=True):
        values = np.array(scores[0::2] if row["group"] == "a" else scores[1::2])
        half = 1.96 * values.std(ddof=1) / np.sqrt(len(values))
        assert row["mean_lo"] == pytest.approx(values.mean() - half, abs=0.01)
        assert row["mean_hi"] == pytest.approx(values.mean() + half, abs=0.01)


def test_constant_scores_have_a_point_interval_and_unscored_rows_count_as_errors():
    df = frame([0.8, 0.8, None, 0.8, 0.8, 0.8, 0.8])
    row = sc.score_table(df).row(0, named=True)
    assert (row["rows"], row["scored"], row["errored"]) == (7, 6, 1)
    assert row["mean"] == row["mean_lo"] == row["mean_hi"] == pytest.approx(0.8)


def test_too_few_rows_get_no_interval():
    row = sc.score_table(frame([0.1, 0.9, 0.5, 0.7])).row(0, named=True)
    assert row["scored"] == 4 < sc.scores.MIN_ROWS_FOR_INTERVAL
    assert row["mean"] == pytest.approx(0.55) and row["mean_lo"] is None
    none = sc.score_table(frame([None, None])).row(0, named=True)
    assert none["mean"] is None and none["mean_lo"] is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.floats(0, 1))),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_the_table_does_not_depend_on_row_order(rows, rnd):
    df = frame([s for _, s in rows], group=[g for g, _ in rows])
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=rnd.randint(0, 999))
    a = sc.score_table(df, by="group", n_boot=200)
    b = sc.score_table(shuffled, by="group", n_boot=200)
    # Equal up to the order in which floats are summed.
    assert_frame_equal(a, b, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)
    assert a["rows"].sum() == df.height


def test_label_shares_count_comparisons_not_rows():
    labels = [["Consistent", "Contradictory", None], ["Slightly Inconsistent"]]
    row = sc.score_table(frame([0.5, 0.6], labels=labels), ci=None).row(0, named=True)
    assert row["comparisons"] == 3  # the null (unjudged) entry is not a comparison
    assert row["contradictory"] == pytest.approx(1 / 3)
    assert "mean_lo" not in row


def test_bad_input_is_named(scored):
    with pytest.raises(sc.InputError, match="missing column"):
        sc.score_table(pl.DataFrame({"x": [1]}))
    with pytest.raises(sc.InputError, match="by= names column"):
        sc.score_table(scored, by="nope")
    with pytest.raises(sc.InputError, match="ci="):
        sc.score_table(scored, ci=1.5)
    with pytest.raises(sc.InputError, match="expected a polars frame"):
        sc.score_table({"safety_consistency": [1]})  # type: ignore[arg-type]


def test_a_paired_comparison():
    before = frame([0.2, 0.5, 0.9, None, 0.4, 0.3, 0.6, 0.1])
    after = frame([0.4, 0.5, 1.0, 0.7, None, 0.3, 0.9, 0.2])
    row = sc.compare_runs(before, after).row(0, named=True)
    assert (row["paired"], row["only_before"], row["only_after"]) == (6, 1, 1)
    assert row["difference"] == pytest.approx((0.2 + 0.0 + 0.1 + 0.0 + 0.3 + 0.1) / 6)
    assert (row["better"], row["worse"], row["same"]) == (4, 0, 2)
    assert row["difference_lo"] <= row["difference"] <= row["difference_hi"]
    assert row["mean_after"] - row["mean_before"] == pytest.approx(row["difference"])
    assert "difference_lo" not in sc.compare_runs(before, after, ci=None).columns


def test_pairing_makes_the_interval_tighter_than_two_separate_ones():
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 0.8, 300)
    before = frame((difficulty + rng.normal(0, 0.02, 300)).clip(0, 1).tolist())
    after = frame((difficulty + 0.05 + rng.normal(0, 0.02, 300)).clip(0, 1).tolist())
    row = sc.compare_runs(before, after).row(0, named=True)
    a, b = sc.score_table(before).row(0, named=True), sc.score_table(after).row(0, named=True)
    paired_width = row["difference_hi"] - row["difference_lo"]
    assert paired_width < 0.25 * ((a["mean_hi"] - a["mean_lo"]) + (b["mean_hi"] - b["mean_lo"]))
    assert row["difference_lo"] > 0  # the improvement is seen


def test_nan_scores_are_no_score_and_null_columns_are_read():
    row = sc.score_table(frame([0.5, float("nan"), 0.7, 0.6, 0.6, 0.5])).row(0, named=True)
    assert row["scored"] == 5 and row["mean"] == pytest.approx(0.58)
    # A frame read back from JSON lines types an all-null column as Null.
    nulls = frame([None, None]).with_columns(pl.lit(None).alias("safety_consistency"))
    assert sc.score_table(nulls).row(0, named=True)["errored"] == 2


def test_a_group_s_interval_does_not_depend_on_the_other_groups():
    rng = np.random.default_rng(3)
    df = frame(rng.uniform(0, 1, 60).tolist(), g=["a"] * 30 + ["b"] * 30)
    both = sc.score_table(df, by="g").filter(g="a")
    alone = sc.score_table(df.filter(g="a"), by="g")
    assert both.equals(alone)


def test_many_small_groups_get_the_intervals_of_their_own_values():
    # The intervals are taken apart in one pass, only for groups with enough rows: each is
    # still the bootstrap of its own sorted values on its own stream, null and NaN keys too.
    rng = np.random.default_rng(4)
    keys = [k for k in range(40) for _ in range(k % 9)] + [None] * 6 + [float("nan")] * 7
    scores = [None if i % 11 == 0 else float(v) for i, v in enumerate(rng.uniform(0, 1, len(keys)))]
    df = frame(scores, g=pl.Series(keys, dtype=pl.Float64))
    table = sc.score_table(df, by="g", n_boot=300, seed=7)
    assert 0 < table["mean_lo"].is_not_null().sum() < table.height
    for row in table.iter_rows(named=True):
        key = row["g"]
        mine = [
            s
            for k, s in zip(keys, scores, strict=True)
            if s is not None
            and (k == key or (k is None and key is None) or (k != k and key != key))
        ]
        lo, hi = sc.scores._percentile_mean(
            np.sort(np.array(mine)), ci=0.95, n_boot=300, seed=sc.scores._group_seed(7, (key,))
        )
        expected = (None, None) if np.isnan(lo) else (lo, hi)
        assert (row["mean_lo"], row["mean_hi"]) == expected, key


@pytest.mark.parametrize("name", ["x", "y", "d", "v", "one"])
def test_user_columns_never_collide_with_working_names(name):
    before = frame([0.2, 0.5, 0.9, 0.4, 0.1, 0.3], **{name: ["p", "p", "p", "q", "q", "q"]})
    after = frame([0.4, 0.5, 1.0, 0.3, 0.2, 0.3])
    table = sc.compare_runs(before, after, by=name, n_boot=200)
    assert table[name].to_list() == ["p", "q"] and table["paired"].to_list() == [3, 3]
    assert sc.score_table(before, by=name)["rows"].to_list() == [3, 3]


def test_compare_by_group_and_errors():
    before = frame([0.2, 0.5, 0.9, 0.4], task=["x", "x", "y", "y"])
    after = frame([0.4, 0.5, 1.0, 0.3])
    table = sc.compare_runs(before, after, by="task")
    assert table["task"].to_list() == ["x", "y"]
    assert table["paired"].to_list() == [2, 2]
    with pytest.raises(sc.InputError, match="duplicate"):
        sc.compare_runs(pl.concat([before, before]), after)
    with pytest.raises(sc.InputError, match="on='row'"):
        sc.compare_runs(before, after, on="row")
    with pytest.raises(sc.InputError, match="dtype"):
        sc.compare_runs(before, after.with_columns(pl.col("input_id").cast(pl.String)))
    with pytest.raises(sc.InputError, match="pairing column"):
        sc.compare_runs(before, after, by="input_id")
    with pytest.raises(sc.InputError, match="which the table itself adds"):
        sc.score_table(before, by="rows")


def test_charts_survive_infinite_edges_and_wrong_slices():
    pytest.importorskip("altair")
    vl_convert = pytest.importorskip("vl_convert")
    df = pl.DataFrame(
        {
            "grade_gap": [0, 0, 1, 1, 3, 4, 6],
            "position": [
                "primacy",
                "recency",
                "consistent",
                "primacy",
                "consistent",
                "recency",
                "consistent",
            ],
        }
    )
    flips = sc.reliability.flip_rate_by_gap(df, gap="grade_gap", bins=[0, 2, float("inf")])
    svg = vl_convert.vegalite_to_svg(sc.charts.flip_rate_chart(flips).to_json())
    assert "<svg" in svg
    audit = sc.audit_judge(sc.OfflineJudge(), progress=False, repeats=1, probes=False)
    with pytest.raises(sc.InputError, match="slice='nope'"):
        sc.charts.agreement_chart(audit, slice="nope")
    pairs = pl.DataFrame(
        {
            "task": ["a", "b"],
            "consistent": [3, 4],
            "primacy": [1, 0],
            "recency": [0, 1],
            "fairness": [-0.25, 0.2],
        }
    )
    with pytest.raises(sc.InputError, match="pass by="):
        sc.charts.position_chart(pairs)

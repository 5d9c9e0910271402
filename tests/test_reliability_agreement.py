"""agreement, repetition_stability, length_bias, flip_rate_by_gap and the panel statistics."""

from __future__ import annotations

import collections
import math
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safecons.errors import InputError
from safecons.reliability import (
    DisjointLabelsWarning,
    UndefinedStatisticWarning,
    agreement,
    fleiss_kappa,
    flip_rate_by_gap,
    krippendorff_alpha,
    length_bias,
    repetition_stability,
)


def cohen_kappa_score(*args: Any, **kwargs: Any) -> Any:
    """scikit-learn's, the oracle: imported by the tests that call it, not at collection
    (scikit-learn's import takes about a second, paid again by each worker)."""
    from sklearn.metrics import cohen_kappa_score as reference

    return reference(*args, **kwargs)


# --- agreement -----------------------------------------------------------------------------


def test_agreement_s1_s2_counts_and_kappa() -> None:
    df = pl.DataFrame(
        {
            "verdict": ["x", "y", "tie", "x", "tie", "y", "error", None, "x"],
            "human": ["x", "y", "tie", "y", "x", "y", "x", "y", "tie"],
        }
    )
    row = agreement(df, gold="human").row(0, named=True)
    assert row["n_error"] == 2
    assert (row["n_s1"], row["n_agree_s1"]) == (7, 4)
    # S2 drops pairs with a tie on either side: rows 3, 5 and 9 go.
    assert (row["n_s2"], row["n_agree_s2"]) == (4, 3)
    assert row["agreement_s1"] == pytest.approx(4 / 7)
    assert row["agreement_s2"] == pytest.approx(3 / 4)
    valid = df.filter(pl.col("verdict").is_in(["x", "y", "tie"]))
    assert row["kappa_s1"] == pytest.approx(
        cohen_kappa_score(valid["verdict"].to_list(), valid["human"].to_list()), abs=1e-12
    )
    s2 = valid.filter((pl.col("verdict") != "tie") & (pl.col("human") != "tie"))
    assert row["kappa_s2"] == pytest.approx(
        cohen_kappa_score(s2["verdict"].to_list(), s2["human"].to_list()), abs=1e-12
    )
    assert "flip_rate" not in row


def test_agreement_flip_rate_beside_not_folded_in() -> None:
    df = pl.DataFrame(
        {
            "verdict": ["x", "tie", "y", "tie"],
            "gold": ["x", "x", "y", "y"],
            "position": ["consistent", "primacy", "consistent", "error"],
            "flag": [False, True, False, None],
        }
    )
    a = agreement(df, gold="gold", flipped="position").row(0, named=True)
    b = agreement(df, gold="gold", flipped="flag").row(0, named=True)
    assert a == b
    assert (a["n_flip_checked"], a["n_flipped"], a["flip_rate"]) == (3, 1, pytest.approx(1 / 3))
    assert a["n_s1"] == 4  # flipped pairs stay in


def test_agreement_integer_labels_and_custom_tie() -> None:
    df = pl.DataFrame({"p": [1, 2, 0, 1], "g": [1, 2, 0, 2]})
    row = agreement(df, pred="p", gold="g", tie=0).row(0, named=True)
    assert (row["n_s1"], row["n_agree_s1"], row["n_s2"], row["n_agree_s2"]) == (4, 3, 3, 2)


def test_agreement_undefined_kappa_warns() -> None:
    df = pl.DataFrame({"verdict": ["x", "x"], "gold": ["x", "x"]})
    with (
        pytest.warns(UndefinedStatisticWarning, match="kappa_s1"),
        pytest.warns(UndefinedStatisticWarning, match="kappa_s2"),
    ):
        row = agreement(df, gold="gold").row(0, named=True)
    assert math.isnan(row["kappa_s1"])
    assert row["agreement_s1"] == 1.0


labels = st.sampled_from(["x", "y", "tie", "error", None])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(labels, st.sampled_from(["x", "y", "tie"]), st.integers(0, 2))))
def test_agreement_matches_direct_count(rows: list[tuple[str | None, str, int]]) -> None:
    df = pl.DataFrame(
        rows, schema={"verdict": pl.String, "gold": pl.String, "g": pl.Int64}, orient="row"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)  # small draws can be disjoint
        out = agreement(df, gold="gold", by="g")
    for r in out.iter_rows(named=True):
        part = [(p, g) for p, g, k in rows if k == r["g"] and p not in (None, "error")]
        assert r["n_s1"] == len(part)
        assert r["n_agree_s1"] == sum(p == g for p, g in part)
        s2 = [(p, g) for p, g in part if "tie" not in (p, g)]
        assert (r["n_s2"], r["n_agree_s2"]) == (len(s2), sum(p == g for p, g in s2))
        for name, pairs in (("kappa_s1", part), ("kappa_s2", s2)):
            if pairs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ref = cohen_kappa_score([p for p, _ in pairs], [g for _, g in pairs])
                if math.isnan(ref):
                    assert math.isnan(r[name])
                else:
                    assert r[name] == pytest.approx(ref, abs=1e-12)
        for name in ("agreement_s1", "agreement_s2"):
            assert math.isnan(r[name]) or 0.0 <= r[name] <= 1.0


def test_agreement_ci_columns() -> None:
    rng = np.random.default_rng(0)
    gold = rng.choice(["x", "y", "tie"], 300)
    pred = np.where(rng.random(300) < 0.7, gold, rng.choice(["x", "y", "tie"], 300))
    df = pl.DataFrame({"verdict": pred, "gold": gold, "f": rng.random(300) < 0.2})
    out = agreement(df, gold="gold", flipped="f", ci=0.9, n_boot=500)
    r = out.row(0, named=True)
    for name in ("agreement_s1", "kappa_s1", "agreement_s2", "kappa_s2", "flip_rate"):
        assert r[f"{name}_lo"] <= r[name] <= r[f"{name}_hi"], name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gold": "nope"}, r"'nope' \(from gold=\)"),
        ({"gold": "score"}, r"'score' \(from gold=\) must hold nominal labels"),
        ({"gold": "num"}, "different kinds of labels"),
        ({"gold": "gold", "flipped": "score"}, r"'score' \(from flipped=\) must be Boolean"),
    ],
)
def test_agreement_input_errors(kwargs: dict[str, object], match: str) -> None:
    df = pl.DataFrame({"verdict": ["x"], "gold": ["x"], "score": [0.5], "num": [1]})
    with pytest.raises(InputError, match=match):
        agreement(df, **kwargs)  # type: ignore[arg-type]


# --- repetition stability -------------------------------------------------------------------


def test_repetition_stability_is_shi_average() -> None:
    df = pl.DataFrame(
        {
            "judge": ["a"] * 9 + ["b"] * 3,
            "pair": [1, 1, 1, 1, 2, 2, 3, 3, 4, 5, 5, 5],
            "letter": ["A", "A", "A", "B", "C", "C", "A", None, "B", "A", "B", "C"],
        }
    )
    out = repetition_stability(df, group="pair", verdict="letter", by="judge")
    a, b = out.row(0, named=True), out.row(1, named=True)
    # Judge a: pair 1 3/4, pair 2 2/2; pair 3 has one answer and pair 4 one call: left out.
    assert (a["n_groups"], a["n_calls"]) == (2, 6)
    assert a["stability"] == pytest.approx((3 / 4 + 1) / 2)
    assert b["stability"] == pytest.approx(1 / 3)


def test_repetition_stability_ci() -> None:
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"pair": np.repeat(np.arange(50), 5), "v": rng.choice(["A", "B"], 250)})
    r = repetition_stability(df, group="pair", verdict="v", ci=0.9, n_boot=400).row(0, named=True)
    assert 0.5 <= r["stability_lo"] <= r["stability"] <= r["stability_hi"] <= 1.0


def test_repetition_stability_groups_by_several_columns_together() -> None:
    # Pair 1 shown in two orders: A, A, B in one order and C, C, C in the other.
    df = pl.DataFrame(
        {
            "pair": [1, 1, 1, 1, 1, 1],
            "order": ["xy", "xy", "xy", "yx", "yx", "yx"],
            "letter": ["A", "A", "B", "C", "C", "C"],
        }
    )
    row = repetition_stability(df, group=["pair", "order"], verdict="letter").row(0, named=True)
    assert (row["n_groups"], row["n_calls"]) == (2, 6)
    assert row["stability"] == pytest.approx((2 / 3 + 1) / 2)
    assert repetition_stability(df, group=("pair", "order"), verdict="letter").equals(
        repetition_stability(
            df.with_columns(key=pl.format("{}|{}", "pair", "order")), group="key", verdict="letter"
        )
    )


@pytest.mark.parametrize(
    ("group", "match"),
    [
        ([], "non-empty sequence"),
        (["pair", "pair"], "twice"),
        ([1], "column name"),
        ("nope", "nope"),
    ],
)
def test_repetition_stability_refuses_a_bad_group(group: object, match: str) -> None:
    df = pl.DataFrame({"pair": [1, 1], "letter": ["A", "A"]})
    with pytest.raises(InputError, match=match):
        repetition_stability(df, group=group, verdict="letter")  # type: ignore[arg-type]


def test_repetition_stability_leaves_errors_out_and_counts_them() -> None:
    # A judge that never gives a verdict is not a stable one.
    never = pl.DataFrame({"pair": [1, 1, 1, 2, 2, 2], "letter": ["error"] * 6})
    with pytest.warns(UndefinedStatisticWarning):
        row = repetition_stability(never, group="pair", verdict="letter").row(0, named=True)
    assert (row["n_groups"], row["n_calls"], row["n_error"]) == (0, 0, 6)
    assert math.isnan(row["stability"])
    some = pl.DataFrame({"pair": [1, 1, 1, 2, 2], "letter": ["A", "error", "A", "B", "error"]})
    row = repetition_stability(some, group="pair", verdict="letter").row(0, named=True)
    assert (row["n_groups"], row["n_calls"], row["n_error"], row["stability"]) == (1, 2, 2, 1.0)
    kept = repetition_stability(some, group="pair", verdict="letter", error=None).row(0, named=True)
    assert (kept["n_groups"], kept["n_error"]) == (2, 0)


def _stability_reference(rows, group_cols, by_cols):
    """Shi et al.'s repetition stability in plain Python: the per-group modal share, averaged."""
    units: dict[tuple, list] = collections.defaultdict(list)
    errors: collections.Counter = collections.Counter()
    for row in rows:
        outer = tuple(row[c] for c in by_cols)
        units[(outer, tuple(row[c] for c in group_cols))].append(row["v"])
        errors[outer] += row["v"] == "error"
    result: dict[tuple, tuple] = {}
    for outer in {o for o, _ in units}:
        shares, calls = [], 0
        for (o, _), values in units.items():
            answers = [v for v in values if v is not None and v != "error"]
            if o == outer and len(answers) >= 2:
                shares.append(max(collections.Counter(answers).values()) / len(answers))
                calls += len(answers)
        stability = sum(shares) / len(shares) if shares else math.nan
        result[outer] = (len(shares), calls, errors[outer], stability)
    return result


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.sampled_from(["xy", "yx"]),
            st.integers(0, 1),
            st.sampled_from(["A", "B", "C", "error", None]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([["pair"], ["pair", "order"], ["order", "pair"], ["order"]]),
)
def test_repetition_stability_matches_a_plain_reference(raw, group_cols) -> None:
    rows = [{"pair": p, "order": o, "judge": j, "v": v} for p, o, j, v in raw]
    df = pl.DataFrame(
        rows, schema={"pair": pl.Int64, "order": pl.String, "judge": pl.Int64, "v": pl.String}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        out = repetition_stability(df, group=group_cols, verdict="v", by="judge")
    expected = _stability_reference(rows, group_cols, ["judge"])
    assert sorted(out["judge"].to_list()) == sorted(j for (j,) in expected)
    for row in out.iter_rows(named=True):
        n_groups, n_calls, n_error, stability = expected[(row["judge"],)]
        assert (row["n_groups"], row["n_calls"], row["n_error"]) == (n_groups, n_calls, n_error)
        if math.isnan(stability):
            assert math.isnan(row["stability"])
        else:
            assert row["stability"] == pytest.approx(stability)


# --- length bias ----------------------------------------------------------------------------


def test_length_bias_seed_length_judge() -> None:
    """A longer-answer-wins judge: +1.00 on 6 shorter-is-better and 12 longer-is-better pairs."""
    x_words = [10] * 18
    y_words = [5] * 6 + [20] * 12
    gold = ["y"] * 18  # y is the shorter answer in the first 6 pairs, the longer in the rest
    df = pl.DataFrame({"x_words": x_words, "y_words": y_words, "gold": gold})
    df = df.with_columns(
        verdict=pl.when(pl.col("x_words") > pl.col("y_words"))
        .then(pl.lit("x"))
        .otherwise(pl.lit("y"))
    )
    r = length_bias(df, gold="gold", x_len="x_words", y_len="y_words").row(0, named=True)
    assert (r["n_shorter"], r["n_longer"]) == (6, 12)
    assert r["length_bias"] == 1.0


def test_length_bias_tie_handling_and_expressions() -> None:
    df = pl.DataFrame(
        {
            "x": ["a b c", "a", "a b", "a b"],
            "y": ["a", "a b c d", "a b c", "a b"],
            "gold": ["x", "y", "x", "x"],
            "verdict": ["tie", "y", "x", "x"],
        }
    )
    words = {
        "x_len": pl.col("x").str.split(" ").list.len(),
        "y_len": pl.col("y").str.split(" ").list.len(),
    }
    as_error = length_bias(df, gold="gold", **words).row(0, named=True)
    dropped = length_bias(df, gold="gold", judge_tie="drop", **words).row(0, named=True)
    # Row 1: better x is longer, judge tie. Row 4: equal lengths, excluded.
    assert (as_error["n_longer"], as_error["error_rate_longer"]) == (2, 0.5)
    assert (dropped["n_longer"], dropped["error_rate_longer"]) == (1, 0.0)
    assert as_error["n_excluded"] == 1
    assert dropped["n_excluded"] == 2
    assert as_error["error_rate_shorter"] == 0.0


def test_length_bias_input_errors() -> None:
    df = pl.DataFrame({"gold": ["x"], "verdict": ["x"], "t": ["long"], "n": [1]})
    with pytest.raises(InputError, match="x_len= must give numeric lengths"):
        length_bias(df, gold="gold", x_len="t", y_len="n")
    with pytest.raises(InputError, match=r"'zz' \(from y_len=\)"):
        length_bias(df, gold="gold", x_len="n", y_len="zz")
    with pytest.raises(InputError, match="judge_tie="):
        length_bias(df, gold="gold", x_len="n", y_len="n", judge_tie="keep")  # type: ignore[arg-type]


# --- flip rate by gap -----------------------------------------------------------------------


def test_flip_rate_by_gap_explicit_edges() -> None:
    gaps = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 9.0, None, float("nan"), -1.0]
    flips = [True, True, False, True, False, False, True, True, True, True]
    df = pl.DataFrame({"gap": gaps, "flipped": flips})
    out = flip_rate_by_gap(df, gap="gap", flipped="flipped", bins=[0, 2, 9])
    # [0, 2) holds 0, .5, 1, 1.5; [2, 9] holds 2, 3 and 9 (the last bin is closed).
    assert out["n_pairs"].to_list() == [4, 3]
    assert out["n_flipped"].to_list() == [3, 1]
    assert out["share_of_flips"].to_list() == [0.75, 0.25]


def test_flip_rate_by_gap_quantile_bins_pooled_across_groups() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    df = pl.DataFrame(
        {
            "t": rng.integers(0, 2, n),
            "gap": rng.random(n),
            "position": rng.choice(["consistent", "primacy", "recency", "error"], n),
        }
    )
    out = flip_rate_by_gap(df, gap="gap", bins=5, by="t")
    assert out.height == 10
    assert (
        out.filter(pl.col("t") == 0)["lower"].to_list()
        == out.filter(pl.col("t") == 1)["lower"].to_list()
    )
    usable = df.filter(pl.col("position") != "error")
    assert out["n_pairs"].sum() == usable.height
    pooled = out.group_by("bin").agg(pl.col("n_pairs").sum()).sort("bin")["n_pairs"]
    assert pooled.max() - pooled.min() <= 1  # equal-count bins over the pooled gaps
    shares = out.group_by("t").agg(pl.col("share_of_flips").sum())["share_of_flips"]
    np.testing.assert_allclose(shares.to_numpy(), 1.0)


def test_flip_rate_by_gap_input_errors() -> None:
    df = pl.DataFrame({"gap": [1.0], "position": ["consistent"], "s": ["a"]})
    with pytest.raises(InputError, match="strictly increasing"):
        flip_rate_by_gap(df, gap="gap", bins=[0, 0])
    with pytest.raises(InputError, match="at least 1"):
        flip_rate_by_gap(df, gap="gap", bins=0)
    with pytest.raises(InputError, match=r"'s' \(from gap=\) must be numeric"):
        flip_rate_by_gap(df, gap="s")


# --- panels: Fleiss and Krippendorff against plain reference implementations ----------------


def reference_fleiss(rows: list[tuple[object, ...]]) -> float:
    full = [r for r in rows if None not in r]
    n, big_n = len(rows[0]), len(full)
    cats = sorted({v for r in full for v in r}, key=str)
    p_i = [(sum(r.count(c) ** 2 for c in cats) - n) / (n * (n - 1)) for r in full]
    p_j = [sum(r.count(c) for r in full) / (big_n * n) for c in cats]
    p_bar, p_e = sum(p_i) / big_n, sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e) if p_e != 1 else math.nan


def reference_alpha(rows: list[tuple[object, ...]]) -> float:
    # Coincidence matrix, straight from Krippendorff (2011).
    o: collections.Counter[tuple[object, object]] = collections.Counter()
    for r in rows:
        values = [v for v in r if v is not None]
        m = len(values)
        if m < 2:
            continue
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    o[(a, b)] += 1 / (m - 1)
    cats = sorted({a for a, _ in o}, key=str)
    n_c = {c: sum(o[(c, k)] for k in cats) for c in cats}
    n = sum(n_c.values())
    d_o = sum(o[(c, k)] for c in cats for k in cats if c != k) / n if n else math.nan
    d_e = sum(n_c[c] * n_c[k] for c in cats for k in cats if c != k) / (n * (n - 1)) if n else 0
    return 1 - d_o / d_e if d_e else math.nan


panel_rows = st.lists(
    st.tuples(*(st.sampled_from(["x", "y", "tie", None]) for _ in range(4))),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(panel_rows)
def test_panel_statistics_match_reference(rows: list[tuple[str | None, ...]]) -> None:
    names = ["r1", "r2", "r3", "r4"]
    df = pl.DataFrame(rows, schema=dict.fromkeys(names, pl.String), orient="row")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)  # small draws can be disjoint
        fk = fleiss_kappa(df, raters=names).row(0, named=True)
        ka = krippendorff_alpha(df, raters=names).row(0, named=True)
    full = [r for r in rows if None not in r]
    assert fk["n_items"] == len(full)
    ref = reference_fleiss(rows) if full else math.nan
    assert (math.isnan(ref) and math.isnan(fk["fleiss_kappa"])) or fk["fleiss_kappa"] == (
        pytest.approx(ref, abs=1e-12)
    )
    ref_a = reference_alpha(rows)
    assert (math.isnan(ref_a) and math.isnan(ka["krippendorff_alpha"])) or ka[
        "krippendorff_alpha"
    ] == pytest.approx(ref_a, abs=1e-12)
    if not math.isnan(ka["krippendorff_alpha"]):
        assert ka["krippendorff_alpha"] <= 1.0 + 1e-12


def test_panel_by_groups_and_integer_labels() -> None:
    df = pl.DataFrame(
        {"t": [1, 1, 2, 2, 2], "a": [0, 1, 2, 2, 1], "b": [0, 1, 2, 1, 1], "c": [0, 0, 2, 2, 1]}
    )
    out = fleiss_kappa(df, raters=["a", "b", "c"], by="t")
    for t, part in df.group_by("t"):
        row = out.filter(pl.col("t") == t[0]).row(0, named=True)
        assert row["fleiss_kappa"] == pytest.approx(
            reference_fleiss(part.select("a", "b", "c").rows()), abs=1e-12
        )


def test_panel_input_errors() -> None:
    df = pl.DataFrame({"a": ["x"], "b": [1], "c": [0.5]})
    with pytest.raises(InputError, match="at least two columns"):
        fleiss_kappa(df, raters=["a"])
    with pytest.raises(InputError, match="mix text and integer"):
        krippendorff_alpha(df, raters=["a", "b"])
    with pytest.raises(InputError, match="nominal labels"):
        krippendorff_alpha(df, raters=["a", "c"])
    with pytest.raises(InputError, match=r"'zz' \(from raters=\)"):
        fleiss_kappa(df, raters=["a", "zz"])


def test_no_usable_pair_warns_instead_of_a_silent_nan():
    import warnings

    import safecons as sc

    df = pl.DataFrame(
        {
            "verdict": ["error", "error"],
            "position": ["error", "error"],
            "human": ["x", "y"],
            "winner_xy": ["error", "error"],
            "winner_yx": ["error", "error"],
            "letter_xy": ["error", "error"],
            "letter_yx": ["error", "error"],
        }
    )
    for statistic in (sc.reliability.agreement, sc.reliability.judge_table):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = statistic(df, gold="human")
        assert math.isnan(out["kappa_s1"][0])
        assert any(
            issubclass(w.category, sc.reliability.UndefinedStatisticWarning)
            and "no usable pair" in str(w.message)
            for w in caught
        ), statistic


# --- label sets that share nothing -----------------------------------------------------------


def test_agreement_on_disjoint_label_sets_warns_and_keeps_the_value() -> None:
    # Letters against x/y: every pair "disagrees" only because the two columns speak two
    # label sets; the value stays what was asked for, the warning says why it is 0.
    df = pl.DataFrame({"letter": ["A", "B", "C", "A"], "human": ["x", "y", "tie", "x"]})
    with pytest.warns(DisjointLabelsWarning) as caught:
        out = agreement(df, pred="letter", gold="human")
    assert out["agreement_s1"][0] == 0.0
    assert issubclass(caught[0].category, UserWarning)
    message = str(caught[0].message)
    assert "'letter' (pred=)" in message and "'human' (gold=)" in message
    assert "'A', 'B', 'C' against 'tie', 'x', 'y'" in message


def test_agreement_with_a_shared_label_or_an_empty_side_does_not_warn() -> None:
    shared = pl.DataFrame({"verdict": ["A", "x"], "human": ["x", "y"]})
    empty = pl.DataFrame({"verdict": ["error", None], "human": ["x", "y"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisjointLabelsWarning)
        agreement(shared, gold="human")
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        agreement(empty, gold="human")  # no verdict at all: nothing to compare, no claim


@pytest.mark.parametrize("statistic", [fleiss_kappa, krippendorff_alpha])
def test_a_panel_rater_with_a_label_set_of_its_own_warns(statistic) -> None:
    df = pl.DataFrame({"r1": ["x", "y", "x"], "r2": ["x", "y", "y"], "r3": ["A", "B", "A"]})
    with pytest.warns(DisjointLabelsWarning, match=r"'r3' \(raters=\) shares no label"):
        statistic(df, raters=["r1", "r2", "r3"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisjointLabelsWarning)
        statistic(df, raters=["r1", "r2"])


# ------------------------------------------------------------- ordinal Krippendorff's alpha

JUDGE_ORDER = ["Contradictory", "Slightly Inconsistent", "Consistent"]

ordinal_panels = st.lists(
    st.lists(st.sampled_from([0, 1, 2, None]), min_size=4, max_size=4),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(ordinal_panels, st.integers(2, 4))
def test_ordinal_alpha_matches_the_krippendorff_package(rows, raters):
    # The reference: Castro's ``krippendorff`` (PyPI), the implementation most studies cite.
    import krippendorff

    rows = [row[:raters] for row in rows]
    names = [f"j{i}" for i in range(raters)]
    labels = pl.DataFrame(
        [[None if v is None else JUDGE_ORDER[v] for v in row] for row in rows],
        schema=dict.fromkeys(names, pl.String),
        orient="row",
    )
    ranks = pl.DataFrame(rows, schema=dict.fromkeys(names, pl.Int64), orient="row")
    data = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float).T
    try:
        with np.errstate(invalid="ignore", divide="ignore"):  # the reference's own 0/0: NaN
            ref = krippendorff.alpha(
                reliability_data=data, level_of_measurement="ordinal", value_domain=[0, 1, 2]
            )
    except ValueError:  # the package refuses data with fewer than two values in all
        ref = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)
        by_label = krippendorff_alpha(labels, raters=names, level="ordinal", order=JUDGE_ORDER).row(
            0, named=True
        )
        by_rank = krippendorff_alpha(ranks, raters=names, level="ordinal").row(0, named=True)
    for got in (by_label["krippendorff_alpha"], by_rank["krippendorff_alpha"]):
        assert (math.isnan(ref) and math.isnan(got)) or got == pytest.approx(ref, abs=1e-9)
    assert by_label["n_values"] == by_rank["n_values"]


def test_ordinal_alpha_weighs_a_far_disagreement_more_than_a_near_one():
    near = pl.DataFrame(
        {
            "a": ["Consistent", "Consistent", "Contradictory", "Slightly Inconsistent"],
            "b": ["Slightly Inconsistent", "Consistent", "Contradictory", "Slightly Inconsistent"],
        }
    )
    far = near.with_columns(
        b=pl.Series(["Contradictory", "Consistent", "Contradictory", "Slightly Inconsistent"])
    )
    alpha = {
        name: krippendorff_alpha(frame, raters=["a", "b"], level="ordinal", order=JUDGE_ORDER)[
            "krippendorff_alpha"
        ][0]
        for name, frame in (("near", near), ("far", far))
    }
    assert alpha["near"] > alpha["far"]
    # Nominal alpha cannot tell the two apart: one disagreement each.
    nominal = [
        krippendorff_alpha(f, raters=["a", "b"])["krippendorff_alpha"][0] for f in (near, far)
    ]
    assert nominal[0] == pytest.approx(nominal[1])


def test_ordinal_alpha_by_group_with_an_interval():
    df = pl.DataFrame(
        {
            "g": ["x"] * 6 + ["y"] * 6,
            "a": [2, 2, 1, 0, 0, 1, 2, 0, 1, 2, 0, 1],
            "b": [2, 2, 1, 0, 1, 1, 0, 2, 1, 1, 2, 0],
        }
    )
    out = krippendorff_alpha(df, raters=["a", "b"], by="g", level="ordinal", ci=0.9, n_boot=200)
    assert out["g"].to_list() == ["x", "y"]
    for row in out.iter_rows(named=True):
        assert row["krippendorff_alpha_lo"] <= row["krippendorff_alpha"] <= row[
            "krippendorff_alpha_hi"
        ] or math.isnan(row["krippendorff_alpha"])
    alone = krippendorff_alpha(df.filter(pl.col("g") == "y"), raters=["a", "b"], level="ordinal")
    assert out["krippendorff_alpha"][1] == pytest.approx(alone["krippendorff_alpha"][0])


def test_ordinal_alpha_names_what_it_needs():
    df = pl.DataFrame({"a": ["Consistent", "Contradictory"], "b": ["Consistent", "Odd"]})
    with pytest.raises(InputError, match=r"level='ordinal' needs order="):
        krippendorff_alpha(df, raters=["a", "b"], level="ordinal")
    with pytest.raises(InputError, match=r"'Odd' that order= does not list"):
        krippendorff_alpha(df, raters=["a", "b"], level="ordinal", order=JUDGE_ORDER)
    with pytest.raises(InputError, match=r"level= must be 'nominal' or 'ordinal'"):
        krippendorff_alpha(df, raters=["a", "b"], level="interval")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"order= ranks the labels of level='ordinal' only"):
        krippendorff_alpha(df, raters=["a", "b"], order=JUDGE_ORDER)
    with pytest.raises(InputError, match=r"order= lists Consistent more than once"):
        krippendorff_alpha(
            df, raters=["a", "b"], level="ordinal", order=[*JUDGE_ORDER, "Consistent", "Odd"]
        )
    with pytest.raises(InputError, match=r"order= must list the labels"):
        krippendorff_alpha(df, raters=["a", "b"], level="ordinal", order="abc")


def test_position_bias_warns_when_no_pair_was_usable() -> None:
    from safecons.reliability import position_bias

    df = pl.DataFrame({"letter_xy": ["error", None], "letter_yx": ["A", "error"]})
    with pytest.warns(UndefinedStatisticWarning, match="no usable pair"):
        row = position_bias(df).row(0, named=True)
    assert (row["n_pairs"], row["n_error"]) == (0, 2)


def test_length_bias_on_texts_names_the_fix() -> None:
    df = pl.DataFrame({"gold": ["x"], "verdict": ["x"], "x": ["a long answer"], "y": ["short"]})
    with pytest.raises(InputError, match=r"x_len=pl\.col\('x'\)\.str\.len_chars\(\)"):
        length_bias(df, gold="gold", x_len="x", y_len="y")
    out = length_bias(
        df, gold="gold", x_len=pl.col("x").str.len_chars(), y_len=pl.col("y").str.len_chars()
    )
    assert out.height == 1

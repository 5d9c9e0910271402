"""Position classes, both-orders verdicts and position_bias."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from safecons.errors import InputError
from safecons.reliability import (
    SWAP_COLUMNS,
    both_orders_verdict,
    position_bias,
    position_class,
    winner_from_letter,
)

LETTERS = ["A", "B", "C"]
EXPECTED_CLASS = {
    "AB": "consistent",
    "BA": "consistent",
    "CC": "consistent",
    "AA": "primacy",
    "AC": "primacy",
    "CA": "primacy",
    "BB": "recency",
    "BC": "recency",
    "CB": "recency",
}


def _seed_rule(v1: str, v2: str) -> str:
    # The seed study's harness, verbatim in logic: m1 from the x-first call, m2 from y-first.
    m1 = {"A": "x", "B": "y", "C": "tie"}.get(v1, "error")
    m2 = {"A": "y", "B": "x", "C": "tie"}.get(v2, "error")
    return m1 if (m1 == m2 and m1 != "error") else "tie"


def _all_pairs() -> pl.DataFrame:
    values = [*LETTERS, "error", "", "AB", None]
    pairs = list(itertools.product(values, values))
    return pl.DataFrame(
        {"f": [a for a, _ in pairs], "s": [b for _, b in pairs]},
        schema={"f": pl.String, "s": pl.String},
    )


def test_position_class_table() -> None:
    df = _all_pairs().with_columns(cls=position_class("f", "s"))
    for f, s, cls in df.iter_rows():
        key = f"{f}{s}" if f in LETTERS and s in LETTERS else None
        assert cls == EXPECTED_CLASS.get(key or "", "error"), (f, s)


def test_both_orders_verdict_matches_seed_rule() -> None:
    df = _all_pairs().with_columns(
        strict=both_orders_verdict("f", "s"),
        seed=both_orders_verdict(pl.col("f"), pl.col("s"), error_as_tie=True),
    )
    for f, s, strict, seed in df.iter_rows():
        assert seed == _seed_rule(f, s)
        usable = f in LETTERS and s in LETTERS
        assert strict == (seed if usable else "error")


def test_winner_from_letter() -> None:
    df = pl.DataFrame({"l": ["A", "B", "C", "x", None]})
    out = df.select(a=winner_from_letter("l"), b=winner_from_letter(pl.col("l"), shown_first="y"))
    assert out["a"].to_list() == ["x", "y", "tie", "error", "error"]
    assert out["b"].to_list() == ["y", "x", "tie", "error", "error"]
    with pytest.raises(InputError, match="shown_first"):
        winner_from_letter("l", shown_first="z")  # type: ignore[arg-type]


def test_categorical_letters_accepted() -> None:
    df = pl.DataFrame({"letter_xy": ["A", "B"], "letter_yx": ["A", "A"]}).with_columns(
        pl.all().cast(pl.Categorical)
    )
    out = position_bias(df)
    assert out.row(0, named=True)["primacy"] == 1
    assert out.row(0, named=True)["consistent"] == 1


def test_position_bias_counts_and_rates() -> None:
    # The seed's GPT-4 figures in miniature: 4,014 consistent, 425 primacy, 357 recency, 4 errors.
    df = pl.DataFrame(
        {
            "letter_xy": ["A"] * 4014 + ["A"] * 425 + ["B"] * 357 + ["error"] * 4,
            "letter_yx": ["B"] * 4014 + ["A"] * 425 + ["B"] * 357 + ["A"] * 4,
        }
    )
    row = position_bias(df).row(0, named=True)
    assert row["n_pairs"] == 4796
    assert row["n_error"] == 4
    assert (row["consistent"], row["primacy"], row["recency"]) == (4014, 425, 357)
    assert row["consistency"] == pytest.approx(4014 / 4796)
    assert round(row["consistency"], 3) == 0.837
    assert row["fairness"] == pytest.approx((357 - 425) / 4796)
    assert round(row["fairness"], 3) == -0.014


def test_position_bias_by_groups_sorted_with_null_key_last() -> None:
    df = pl.DataFrame(
        {
            "turn": [2, None, 1, 2],
            "letter_xy": ["A", "A", "B", "C"],
            "letter_yx": ["A", "B", "B", "C"],
        }
    )
    out = position_bias(df, by="turn")
    assert out["turn"].to_list() == [1, 2, None]
    assert out["recency"].to_list() == [1, 0, 0]
    assert out["primacy"].to_list() == [0, 1, 0]


def test_empty_frame_gives_nan_rates() -> None:
    df = pl.DataFrame(schema={"letter_xy": pl.String, "letter_yx": pl.String})
    row = position_bias(df).row(0, named=True)
    assert row["n_pairs"] == 0
    assert np.isnan(row["consistency"])
    assert position_bias(df.with_columns(t=pl.lit(1)), by="t").height == 0


def test_lazy_frame_accepted() -> None:
    df = pl.DataFrame({"letter_xy": ["A", "B"], "letter_yx": ["B", "B"]})
    assert_frame_equal(position_bias(df.lazy()), position_bias(df))


def test_swap_columns_are_the_defaults() -> None:
    assert SWAP_COLUMNS[2:4] == ("letter_xy", "letter_yx")


letters = st.sampled_from(["A", "B", "C", "error", None])
frames = st.lists(st.tuples(letters, letters, st.integers(0, 2)), min_size=0, max_size=40)


def _frame(rows: list[tuple[str | None, str | None, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"letter_xy": pl.String, "letter_yx": pl.String, "g": pl.Int64}, orient="row"
    )


@settings(max_examples=60, deadline=None)
@given(frames)
def test_swapping_names_x_and_y(rows: list[tuple[str | None, str | None, int]]) -> None:
    """Renaming x <-> y swaps the two calls: classes and fairness stay, the winner swaps."""
    df = _frame(rows)
    swapped = df.select(letter_xy="letter_yx", letter_yx="letter_xy", g="g")
    assert_frame_equal(position_bias(df, by="g"), position_bias(swapped, by="g"))
    assert (
        df.select(position_class("letter_xy", "letter_yx")).to_series().to_list()
        == swapped.select(position_class("letter_xy", "letter_yx")).to_series().to_list()
    )
    flip = {"x": "y", "y": "x", "tie": "tie", "error": "error"}
    v1 = df.select(both_orders_verdict("letter_xy", "letter_yx")).to_series().to_list()
    v2 = swapped.select(both_orders_verdict("letter_xy", "letter_yx")).to_series().to_list()
    assert v2 == [flip[v] for v in v1]


@settings(max_examples=60, deadline=None)
@given(frames)
def test_mirroring_slots_negates_fairness(rows: list[tuple[str | None, str | None, int]]) -> None:
    """Relabelling slot A <-> B in both calls turns primacy into recency and back."""
    df = _frame(rows)
    mirror = {"A": "B", "B": "A"}
    mirrored = df.with_columns(
        pl.col("letter_xy", "letter_yx").replace(mirror),
    )
    a, b = position_bias(df, by="g"), position_bias(mirrored, by="g")
    assert a["primacy"].to_list() == b["recency"].to_list()
    assert a["consistent"].to_list() == b["consistent"].to_list()
    np.testing.assert_allclose(a["fairness"].to_numpy(), -b["fairness"].to_numpy())
    np.testing.assert_allclose(a["consistency"].to_numpy(), b["consistency"].to_numpy())


@settings(max_examples=60, deadline=None)
@given(frames)
def test_rates_in_range_and_counts_add_up(rows: list[tuple[str | None, str | None, int]]) -> None:
    df = _frame(rows)
    out = position_bias(df, by="g")
    assert (out["n_pairs"] + out["n_error"]).sum() == df.height
    assert (out["consistent"] + out["primacy"] + out["recency"]).to_list() == out[
        "n_pairs"
    ].to_list()
    c, f = out["consistency"].drop_nans(), out["fairness"].drop_nans()
    assert ((c >= 0) & (c <= 1)).all()
    assert ((f >= -1) & (f <= 1)).all()
    assert (1 - c >= f.abs() - 1e-12).all()  # |recency - primacy| <= flips


def test_bootstrap_interval() -> None:
    rng = np.random.default_rng(3)
    n = 400
    xy = rng.choice(["A", "B", "C"], n)
    df = pl.DataFrame({"letter_xy": xy, "letter_yx": np.where(rng.random(n) < 0.7, "B", "A")})
    out = position_bias(df, ci=0.95, n_boot=4000, seed=1)
    row = out.row(0, named=True)
    assert row["consistency_lo"] <= row["consistency"] <= row["consistency_hi"]
    assert row["fairness_lo"] <= row["fairness"] <= row["fairness_hi"]
    p = row["consistency"]
    half = 1.96 * np.sqrt(p * (1 - p) / row["n_pairs"])
    assert row["consistency_hi"] - row["consistency_lo"] == pytest.approx(2 * half, rel=0.1)
    # Same seed, same interval.
    assert_frame_equal(out, position_bias(df, ci=0.95, n_boot=4000, seed=1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"first": "nope"}, r"'nope' \(from first=\)"),
        ({"by": "missing"}, r"'missing' \(from by=\)"),
        ({"first": "num"}, r"'num' \(from first=\) must hold text"),
        ({"ci": 1.5}, "ci="),
        ({"ci": 0.9, "n_boot": 1}, "n_boot="),
        ({"ci": 0.9, "seed": -1}, "seed="),
        ({"by": "n_pairs"}, "share a name"),
        ({"by": 3}, "by="),
    ],
)
def test_input_errors(kwargs: dict[str, object], match: str) -> None:
    df = pl.DataFrame({"letter_xy": ["A"], "letter_yx": ["B"], "num": [1], "n_pairs": [1]})
    with pytest.raises(InputError, match=match):
        position_bias(df, **kwargs)  # type: ignore[arg-type]


def test_not_a_frame() -> None:
    with pytest.raises(InputError, match="DataFrame or LazyFrame"):
        position_bias({"letter_xy": ["A"]})  # type: ignore[arg-type]

"""Common tests run over every statistic (scikit-learn's common-test-registry idea).

Add each new statistic to ``STATISTICS``; the shared tests then check that its result does not
depend on row order (bootstrap intervals included), that a LazyFrame gives the same result as a
DataFrame, and that its rates stay in their ranges.
"""

from __future__ import annotations

import ast
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import safecons.reliability as rel

Statistic = Callable[[pl.DataFrame | pl.LazyFrame], pl.DataFrame]
CI = {"ci": 0.9, "n_boot": 200, "seed": 7}

STATISTICS: dict[str, Statistic] = {
    "position_bias": lambda df: rel.position_bias(df, by="task"),
    "position_bias_ci": lambda df: rel.position_bias(df, by=["task", "turn"], **CI),
    "agreement": lambda df: rel.agreement(df, gold="gold", by="task", flipped="position"),
    "agreement_ci": lambda df: rel.agreement(df, gold="gold", flipped="position", **CI),
    "repetition_stability": lambda df: rel.repetition_stability(
        df, group="item", verdict="letter_xy", by="task"
    ),
    "repetition_stability_ci": lambda df: rel.repetition_stability(
        df, group="item", verdict="letter_xy", **CI
    ),
    "length_bias": lambda df: rel.length_bias(
        df, gold="gold", x_len="x_len", y_len="y_len", by="task"
    ),
    "length_bias_ci": lambda df: rel.length_bias(
        df, gold="gold", x_len="x_len", y_len="y_len", **CI
    ),
    "judge_table": lambda df: rel.judge_table(df, gold="gold", by=["task", "turn"]),
    "judge_table_ci": lambda df: rel.judge_table(df, gold="gold", **CI),
    "flip_rate_by_gap": lambda df: rel.flip_rate_by_gap(df, gap="gap", bins=4, by="turn"),
    "flip_rate_by_gap_ci": lambda df: rel.flip_rate_by_gap(df, gap="gap", bins=[0, 1, 3, 9], **CI),
    "fleiss_kappa": lambda df: rel.fleiss_kappa(df, raters=["r1", "r2", "r3"], by="task"),
    "fleiss_kappa_ci": lambda df: rel.fleiss_kappa(df, raters=["r1", "r2", "r3"], **CI),
    "krippendorff_alpha": lambda df: rel.krippendorff_alpha(df, raters=["r1", "r2", "r3"]),
    "krippendorff_alpha_ci": lambda df: rel.krippendorff_alpha(
        df, raters=["r1", "r2", "r3"], by="turn", **CI
    ),
    "cohen_kappa_expr": lambda df: (
        df.lazy()
        .group_by("task")
        .agg(
            k=rel.cohen_kappa("verdict", "gold"),
            k_lin=rel.cohen_kappa("r1", "r2", weights="linear"),
            k_quad=rel.cohen_kappa("r1", "r3", weights="quadratic"),
        )
        .sort("task")
        .collect()
    ),
}

# Columns whose values must lie in [lo, hi] wherever they are not NaN.
RANGES = {
    "consistency": (0.0, 1.0),
    "fairness": (-1.0, 1.0),
    "agreement_s1": (0.0, 1.0),
    "agreement_s2": (0.0, 1.0),
    "flip_rate": (0.0, 1.0),
    "share_of_flips": (0.0, 1.0),
    "stability": (0.0, 1.0),
    "error_rate_shorter": (0.0, 1.0),
    "error_rate_longer": (0.0, 1.0),
    "length_bias": (-1.0, 1.0),
    "kappa_s1": (-1.0, 1.0),
    "kappa_s2": (-1.0, 1.0),
    "k": (-1.0, 1.0),
    "k_lin": (-1.0, 1.0),
    "k_quad": (-1.0, 1.0),
    "fleiss_kappa": (-1.0, 1.0),
    "krippendorff_alpha": (-math.inf, 1.0),
}


def make_frame(seed: int, n: int = 300) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    xy = rng.choice(["A", "B", "C", "error"], n, p=[0.45, 0.35, 0.15, 0.05])
    yx = rng.choice(["A", "B", "C"], n, p=[0.35, 0.45, 0.2])
    labels = np.array(["x", "y", "tie"])
    df = pl.DataFrame(
        {
            "task": rng.choice(["code", "math", "chat"], n),
            "turn": rng.integers(1, 3, n),
            "item": rng.integers(0, 60, n),
            "letter_xy": xy,
            "letter_yx": yx,
            "gold": labels[rng.integers(0, 3, n)],
            "x_len": rng.integers(1, 30, n),
            "y_len": rng.integers(1, 30, n),
            "gap": rng.integers(0, 9, n).astype(float),
            "r1": labels[rng.integers(0, 3, n)],
            "r2": labels[rng.integers(0, 3, n)],
            "r3": np.where(rng.random(n) < 0.1, None, labels[rng.integers(0, 3, n)]),
        }
    )
    return df.with_columns(
        verdict=rel.both_orders_verdict("letter_xy", "letter_yx"),
        position=rel.position_class("letter_xy", "letter_yx"),
    )


def _run(stat: Statistic, df: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rel.UndefinedStatisticWarning)
        return stat(df)


@pytest.mark.parametrize("name", sorted(STATISTICS))
@pytest.mark.parametrize("seed", [0, 1])
def test_row_order_invariance(name: str, seed: int) -> None:
    df = make_frame(seed)
    expected = _run(STATISTICS[name], df)
    rng = np.random.default_rng(100 + seed)
    for _ in range(2):
        shuffled = df[rng.permutation(df.height)]
        # Float sums may be reassociated; anything beyond 1e-12 is a real dependence.
        assert_frame_equal(_run(STATISTICS[name], shuffled), expected, rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_lazy_input_same_result(name: str) -> None:
    df = make_frame(2)
    assert_frame_equal(_run(STATISTICS[name], df.lazy()), _run(STATISTICS[name], df))


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_rates_in_range(name: str) -> None:
    out = _run(STATISTICS[name], make_frame(3))
    assert out.height > 0
    for col, (lo, hi) in RANGES.items():
        for c in (col, f"{col}_lo", f"{col}_hi"):
            if c in out.columns:
                values = out[c].drop_nans().drop_nulls()
                assert ((values >= lo - 1e-12) & (values <= hi + 1e-12)).all(), c
    for col in out.columns:
        if col.endswith("_lo"):
            base = col[:-3]
            lo, hi = out[col].to_numpy(), out[base + "_hi"].to_numpy()
            ok = np.isnan(lo) | (lo <= hi)
            assert ok.all(), base


def test_registry_covers_every_frame_statistic() -> None:
    frame_statistics = {
        "agreement",
        "fleiss_kappa",
        "flip_rate_by_gap",
        "judge_table",
        "krippendorff_alpha",
        "length_bias",
        "position_bias",
        "repetition_stability",
    }
    assert frame_statistics <= set(STATISTICS)
    assert {n for n in frame_statistics if f"{n}_ci" not in STATISTICS} == set()


FORBIDDEN = (
    "httpx",
    "anyio",
    "aiohttp",
    "safecons.clients",
    "safecons.run",
    "safecons.pairwise",
    "safecons.metric",
)


def test_reliability_imports_no_network_code() -> None:
    package = Path(rel.__file__).parent
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                # Resolve relative imports against safecons.reliability.
                base = node.module or ""
                if node.level == 1:
                    base = f"safecons.reliability.{base}".rstrip(".")
                elif node.level == 2:
                    base = f"safecons.{base}".rstrip(".")
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"

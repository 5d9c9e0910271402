"""Benchmark: position bias and Cohen's kappa per group on 10 million judged pairs.

Compares safecons.reliability with scikit-learn's ``cohen_kappa_score`` run group by group on
the same data, and checks that the kappas agree.

Run (one core for Polars, then the default thread pool):

    POLARS_MAX_THREADS=1 python benchmarks/bench_reliability.py
    python benchmarks/bench_reliability.py

Options: ``--n`` pairs (default 10,000,000), ``--tasks`` and ``--turns`` (groups = tasks x
turns), ``--repeat`` (best of), ``--skip-sklearn``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import polars as pl
from sklearn.metrics import cohen_kappa_score

import safecons.reliability as rel

T = TypeVar("T")


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    assert out is not None
    return best, out


def make_pairs(n: int, tasks: int, turns: int, seed: int = 0) -> pl.DataFrame:
    """Synthetic swap-test output: String letters and labels, as swap_test writes them."""
    rng = np.random.default_rng(seed)

    def text(codes: np.ndarray, names: list[str]) -> pl.Series:
        return pl.Series(codes).replace_strict(list(range(len(names))), names)

    xy = rng.choice(4, n, p=[0.45, 0.37, 0.17, 0.01]).astype(np.uint8)
    # Mostly consistent: y-first letter mirrors the x-first one, with some position flips.
    mirror = np.array([1, 0, 2, 3], dtype=np.uint8)[xy]
    flip = rng.random(n) < 0.16
    yx = np.where(flip, rng.choice(3, n).astype(np.uint8), mirror).astype(np.uint8)
    gold = rng.choice(3, n, p=[0.4, 0.4, 0.2]).astype(np.uint8)
    df = pl.DataFrame(
        {
            "task": pl.Series(rng.integers(0, tasks, n), dtype=pl.Int32),
            "turn": pl.Series(rng.integers(1, turns + 1, n), dtype=pl.Int8),
            "letter_xy": text(xy, ["A", "B", "C", "error"]),
            "letter_yx": text(yx, ["A", "B", "C", "error"]),
            "gold": text(gold, ["x", "y", "tie"]),
        }
    )
    return df.with_columns(verdict=rel.both_orders_verdict("letter_xy", "letter_yx"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-sklearn", action="store_true")
    args = parser.parse_args()
    by = ["task", "turn"]

    print(
        f"polars {pl.__version__} ({pl.thread_pool_size()} threads, "
        f"POLARS_MAX_THREADS={os.environ.get('POLARS_MAX_THREADS', 'unset')}), "
        f"numpy {np.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs"
    )
    start = time.perf_counter()
    df = make_pairs(args.n, args.tasks, args.turns)
    groups = args.tasks * args.turns
    print(f"{df.height:,} pairs in {groups} groups (built in {time.perf_counter() - start:.1f} s)")

    t, pb = best_of(args.repeat, lambda: rel.position_bias(df, by=by))
    print(f"position_bias(by=task, turn)                      {t:7.3f} s")
    assert pb["n_pairs"].sum() + pb["n_error"].sum() == df.height

    t, kx = best_of(
        args.repeat,
        # An "error" verdict becomes null, which kappa leaves out, as agreement() does.
        lambda: (
            df.group_by(by)
            .agg(kappa=rel.cohen_kappa(pl.col("verdict").replace("error", None), "gold"))
            .sort(by)
        ),
    )
    print(f"group_by(task, turn).agg(cohen_kappa(...))        {t:7.3f} s")

    t, ag = best_of(args.repeat, lambda: rel.agreement(df, gold="gold", by=by))
    print(f"agreement(by=task, turn) (S1/S2 rates and kappas) {t:7.3f} s")

    t, _ = best_of(1, lambda: rel.position_bias(df, by=by, ci=0.95, n_boot=2000))
    print(f"position_bias(..., ci=0.95, n_boot=2000)          {t:7.3f} s")

    try:
        import pandas as pd
    except ImportError:
        print("pandas group-by: pandas is not installed (pip install pandas)")
    else:
        cols = [*by, "verdict", "gold"]
        pdf = pd.DataFrame({c: df[c].to_numpy() for c in cols})

        def pandas_agreement() -> Any:
            # The same kappas with pandas: cell counts per group, then Cohen's formula.
            usable_pd = pdf[pdf["verdict"] != "error"]
            cells = usable_pd.groupby(cols, observed=True).size()
            out = {}
            for key, part in cells.groupby(level=[0, 1]):
                table = part.droplevel([0, 1]).unstack(fill_value=0)
                labels = sorted(set(table.index) | set(table.columns))
                table = table.reindex(index=labels, columns=labels, fill_value=0).to_numpy()
                n = table.sum()
                p_o = np.trace(table) / n
                p_e = (table.sum(axis=1) @ table.sum(axis=0)) / n**2
                out[key] = (p_o - p_e) / (1 - p_e)
            return out

        t, _ = best_of(args.repeat, pandas_agreement)
        print(f"pandas group-by, the same kappas                 {t:7.3f} s")

    if args.skip_sklearn:
        return

    usable = df.filter(pl.col("verdict") != "error")

    def sklearn_per_group() -> dict[tuple[int, int], float]:
        out = {}
        for key, part in usable.group_by(by):
            out[(int(key[0]), int(key[1]))] = cohen_kappa_score(  # type: ignore[arg-type]
                part["verdict"].to_numpy(), part["gold"].to_numpy()
            )
        return out

    t, sk = best_of(1, sklearn_per_group)
    print(f"scikit-learn cohen_kappa_score, group by group  {t:9.3f} s")
    worst_expr = max(abs(sk[(a, b)] - k) for a, b, k in kx.iter_rows())
    worst_agree = max(abs(sk[(a, b)] - k) for a, b, k in ag.select(*by, "kappa_s1").iter_rows())
    print(f"max |kappa - sklearn|: expression {worst_expr:.2e}, agreement {worst_agree:.2e}")


if __name__ == "__main__":
    main()

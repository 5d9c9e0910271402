"""The seed study's full table in one call: position bias beside agreement, per group."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ._agreement import agreement
from ._columns import LETTER_XY, LETTER_YX, POSITION, VERDICT
from ._common import FrameLike
from ._position import position_bias

__all__ = ("judge_table",)


def judge_table(
    df: FrameLike,
    *,
    gold: str,
    by: str | Sequence[str] | None = None,
    first: str = LETTER_XY,
    second: str = LETTER_YX,
    verdict: str = VERDICT,
    flipped: str | None = POSITION,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Consistency, primacy, recency, fairness, agreement S1/S2, kappa and flip rate per group.

    :func:`position_bias` and :func:`agreement` on the same frame, joined on the ``by`` keys.
    Their error counts are kept apart: ``n_error_position`` (pairs without two usable letters)
    and ``n_error_agreement`` (pairs whose verdict or gold label is unusable). The flip rate
    stands beside the agreement figures, never folded into them.

    Parameters
    ----------
    df
        One row per pair judged in both orders (the columns of :func:`~safecons.swap_test`).
    gold
        Column of gold labels (``x``, ``y``, ``tie``).
    by
        Column(s) to report per group, e.g. ``["category", "turn"]``: the seed study's advice is
        never to read one pooled figure.
    first, second, verdict, flipped
        Letter, verdict and flip columns (swap_test's names by default; ``flipped=None`` omits
        the flip rate).
    ci, n_boot, seed
        Bootstrap intervals, as in the two statistics.

    Examples
    --------
    >>> import polars as pl
    >>> from safecons.reliability import judge_table
    >>> df = pl.DataFrame({"letter_xy": ["A", "B", "A", "C"], "letter_yx": ["B", "A", "A", "C"],
    ...                    "verdict": ["x", "y", "tie", "tie"], "position": ["consistent",
    ...                    "consistent", "primacy", "consistent"], "human": ["x", "y", "x", "tie"],
    ...                    "turn": [1, 1, 2, 2]})
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as said:  # turn 2 has no pair without a tie
    ...     warnings.simplefilter("always")
    ...     table = judge_table(df, gold="human", by="turn")
    >>> [type(w.message).__name__ for w in said]
    ['UndefinedStatisticWarning']
    >>> table.select(
    ...     "turn", "consistency", "fairness", "agreement_s1", "agreement_s2", "flip_rate")
    shape: (2, 6)
    ┌──────┬─────────────┬──────────┬──────────────┬──────────────┬───────────┐
    │ turn ┆ consistency ┆ fairness ┆ agreement_s1 ┆ agreement_s2 ┆ flip_rate │
    │ ---  ┆ ---         ┆ ---      ┆ ---          ┆ ---          ┆ ---       │
    │ i64  ┆ f64         ┆ f64      ┆ f64          ┆ f64          ┆ f64       │
    ╞══════╪═════════════╪══════════╪══════════════╪══════════════╪═══════════╡
    │ 1    ┆ 1.0         ┆ 0.0      ┆ 1.0          ┆ 1.0          ┆ 0.0       │
    │ 2    ┆ 0.5         ┆ -0.5     ┆ 0.5          ┆ NaN          ┆ 0.5       │
    └──────┴─────────────┴──────────┴──────────────┴──────────────┴───────────┘
    """
    frame = df.collect() if isinstance(df, pl.LazyFrame) else df
    position = position_bias(
        frame, first=first, second=second, by=by, ci=ci, n_boot=n_boot, seed=seed
    ).rename({"n_error": "n_error_position"})
    agree = agreement(
        frame, pred=verdict, gold=gold, by=by, flipped=flipped, ci=ci, n_boot=n_boot, seed=seed
    ).rename({"n_error": "n_error_agreement"})
    keys = [] if by is None else ([by] if isinstance(by, str) else list(by))
    if not keys:
        return pl.concat([position, agree], how="horizontal")
    return position.join(agree, on=keys, how="full", coalesce=True, nulls_equal=True)

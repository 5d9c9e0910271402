"""Swap consistency against an outside measure of how far apart two answers are."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from .._bootstrap import cells_interval, check_ci, ci_names, interval_columns
from ..errors import InputError
from ._columns import POSITION
from ._common import (
    CELL,
    FloatArray,
    FrameLike,
    as_lazy,
    assemble,
    cell_tensor,
    check_columns,
    check_numeric,
    check_outputs,
    count_table,
    divide,
    flip_flag,
    key,
    normalize_by,
)

__all__ = ("flip_rate_by_gap",)

#: Edges of one bin (its lower and its upper): the fewest a sequence of bin edges may hold.
_MIN_EDGES = 2


def _flip_stats(counts: np.ndarray) -> dict[str, FloatArray]:
    return {"flip_rate": divide(counts[..., 1], counts[..., 0] + counts[..., 1])}


def _edges(lf: pl.LazyFrame, value: pl.Expr, bins: object, fn: str) -> list[float]:
    if isinstance(bins, bool):
        raise InputError(f"{fn}: bins= must be a number of bins or a sequence of bin edges")
    if isinstance(bins, int):
        if bins < 1:
            raise InputError(f"{fn}: bins= must be at least 1, got {bins}")
        qs = [i / bins for i in range(bins + 1)]
        row = lf.select(
            value.quantile(q, interpolation="linear").alias(str(i)) for i, q in enumerate(qs)
        ).collect()
        found = [row.item(0, i) for i in range(row.width)]
        if any(v is None for v in found):
            return []
        return sorted(set(float(v) for v in found))
    if isinstance(bins, str) or not isinstance(bins, Sequence):
        raise InputError(f"{fn}: bins= must be a number of bins or a sequence of bin edges")
    edges = [float(b) for b in bins]
    if len(edges) < _MIN_EDGES or any(math.isnan(e) for e in edges):
        raise InputError(f"{fn}: bins= needs at least two edges and no NaN, got {list(bins)}")
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise InputError(f"{fn}: bins= edges must be strictly increasing, got {list(bins)}")
    return edges


def flip_rate_by_gap(
    df: FrameLike,
    *,
    gap: str,
    flipped: str = POSITION,
    bins: int | Sequence[float] = 10,
    by: str | Sequence[str] | None = None,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Flip rate of a judge per bin of an outside measure of closeness between the answers.

    A pair flips when its verdict changes with the order of the answers. Binning the flips
    by a gap not built from the pairwise verdicts themselves (for example the difference of
    single-answer grades) shows whether flips bunch where the answers are close.

    Parameters
    ----------
    df
        One row per pair (a LazyFrame is collected).
    gap
        Numeric closeness measure, used as given (take the absolute value first if the sign
        is not meaningful). Nulls and NaN are left out.
    flipped
        Boolean column (True = flipped) or a position class (``primacy``/``recency`` are
        flips, ``consistent`` is not, anything else is left out). Defaults to ``position``.
    bins
        A number of equal-count bins, with edges at the quantiles of the gap over every
        usable row of the frame (pooled across ``by`` groups so bins line up; tied quantiles
        merge bins), or a sequence of increasing edges. As in ``numpy.histogram``, bins are
        ``[lower, upper)`` except the last, which includes its upper edge; gaps outside the
        edges are left out. Use ``float("inf")`` as a last edge for an open top.
    by
        Column(s) to report per group; groups are sorted, then bins.
    ci
        Coverage of a percentile bootstrap interval on ``flip_rate``, resampling pairs within
        each bin; adds ``flip_rate_lo``/``flip_rate_hi``.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        One row per group and bin: ``by`` columns, ``bin`` (0 = smallest gaps), ``lower``,
        ``upper``, ``n_pairs``, ``n_flipped``, ``flip_rate`` and ``share_of_flips`` (the
        bin's share of the group's flips). Empty bins are kept, with NaN rates.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "grade_gap": [0, 0, 1, 1, 1, 3, 4, 6],
    ...     "position": ["primacy", "recency", "consistent", "primacy",
    ...                  "consistent", "consistent", "recency", "consistent"],
    ... })
    >>> flip_rate_by_gap(df, gap="grade_gap", bins=[0, 2, float("inf")])
    shape: (2, 7)
    ┌─────┬───────┬───────┬─────────┬───────────┬───────────┬────────────────┐
    │ bin ┆ lower ┆ upper ┆ n_pairs ┆ n_flipped ┆ flip_rate ┆ share_of_flips │
    │ --- ┆ ---   ┆ ---   ┆ ---     ┆ ---       ┆ ---       ┆ ---            │
    │ i64 ┆ f64   ┆ f64   ┆ i64     ┆ i64       ┆ f64       ┆ f64            │
    ╞═════╪═══════╪═══════╪═════════╪═══════════╪═══════════╪════════════════╡
    │ 0   ┆ 0.0   ┆ 2.0   ┆ 5       ┆ 3         ┆ 0.6       ┆ 0.75           │
    │ 1   ┆ 2.0   ┆ inf   ┆ 3       ┆ 1         ┆ 0.333333  ┆ 0.25           │
    └─────┴───────┴───────┴─────────┴───────────┴───────────┴────────────────┘
    """
    fn = "flip_rate_by_gap"
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    schema = lf.collect_schema()
    check_columns(schema, fn, gap=gap, flipped=flipped, by=keys)
    check_numeric(schema, fn, "gap", gap, "a distance between the two answers")
    flag = flip_flag(schema, fn, "flipped", flipped)
    check_ci(ci, n_boot, seed, fn)
    rates = ("flip_rate",)
    outputs = ("bin", "lower", "upper", "n_pairs", "n_flipped", "flip_rate", "share_of_flips")
    check_outputs(keys, (*outputs, *ci_names(rates)), fn)

    value = pl.col(gap).cast(pl.Float64)
    usable = value.is_not_null() & value.is_not_nan() & flag.is_not_null()
    edges = _edges(lf.filter(usable), value, bins, fn)
    if len(edges) == 1:
        # Every gap is the same value: one closed bin holds them all.
        edges = [edges[0], edges[0]]
    n_bins = max(len(edges) - 1, 0)
    inside = (value >= edges[0]) & (value <= edges[-1]) if edges else pl.lit(False)
    index = pl.sum_horizontal([(value >= e).cast(pl.Int64) for e in edges[1:-1]] or [pl.lit(0)])
    bin_of = pl.when(usable & inside).then(index)

    table = count_table(lf, keys, {"bin": bin_of, "f": flag})
    table = table.with_columns(
        pl.when(pl.col(key("bin")).is_not_null())
        .then(pl.col(key("bin")) * 2 + pl.col(key("f")).cast(pl.Int64))
        .otherwise(2 * n_bins)
        .alias(CELL)
    )
    groups, counts = cell_tensor(table, keys, 2 * n_bins + 1)
    per_bin = counts[:, : 2 * n_bins].reshape(counts.shape[0], n_bins, 2)
    flat = per_bin.reshape(-1, 2)
    n_flips = per_bin[..., 1].sum(axis=1, keepdims=True)
    rows = groups[np.repeat(np.arange(groups.height), n_bins)] if keys else pl.DataFrame()
    columns: dict[str, np.ndarray] = {
        "bin": np.tile(np.arange(n_bins, dtype=np.int64), counts.shape[0]),
        "lower": np.tile(np.asarray(edges[:-1], dtype=np.float64), counts.shape[0]),
        "upper": np.tile(np.asarray(edges[1:], dtype=np.float64), counts.shape[0]),
        "n_pairs": flat.sum(axis=1),
        "n_flipped": flat[:, 1],
        **_flip_stats(flat),
        "share_of_flips": divide(per_bin[..., 1], n_flips).reshape(-1),
    }
    if ci is not None:
        interval = cells_interval(flat, _flip_stats, ci=ci, n_boot=n_boot, seed=seed)
        columns.update(interval_columns(interval, rates))
    return assemble(rows, columns)

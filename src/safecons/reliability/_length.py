"""Length bias: does the judge err more when the better answer is the shorter one?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import polars as pl

from .._bootstrap import cells_interval, check_ci, ci_names, interval_columns
from ..errors import InputError
from ._columns import VERDICT
from ._common import (
    CELL,
    FloatArray,
    FrameLike,
    as_lazy,
    assemble,
    cell_tensor,
    check_columns,
    check_outputs,
    check_text,
    count_table,
    divide,
    key,
    normalize_by,
)

__all__ = ("length_bias",)

_RATES = ("error_rate_shorter", "error_rate_longer", "length_bias")


def _length_stats(counts: np.ndarray) -> dict[str, FloatArray]:
    shorter = divide(counts[..., 1], counts[..., 0] + counts[..., 1])
    longer = divide(counts[..., 3], counts[..., 2] + counts[..., 3])
    return {
        "error_rate_shorter": shorter,
        "error_rate_longer": longer,
        "length_bias": shorter - longer,
    }


def _length_expr(
    value: str | pl.Expr, param: str, lf: pl.LazyFrame, schema: pl.Schema, fn: str
) -> pl.Expr:
    if isinstance(value, str):
        check_columns(schema, fn, **{param: value})
        expr = pl.col(value)
    elif isinstance(value, pl.Expr):
        expr = value
    else:
        raise InputError(f"{fn}: {param}= must be a column name or a polars expression")
    try:
        dtype = lf.select(expr.alias("len")).collect_schema()["len"]
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{fn}: {param}= cannot be evaluated on this frame: {exc}") from exc
    if not (dtype.is_numeric() or dtype == pl.Null):
        hint = ""
        if dtype == pl.String:
            # The texts themselves were given: say how to pass their lengths.
            shown = f"pl.col({value!r})" if isinstance(value, str) else "the expression"
            hint = (
                f"; to measure the texts, pass their lengths: {param}={shown}.str.len_chars() "
                f"(characters) or {param}={shown}.str.split(' ').list.len() (words)"
            )
        raise InputError(f"{fn}: {param}= must give numeric lengths, got dtype {dtype}{hint}")
    return expr


def length_bias(
    df: FrameLike,
    *,
    gold: str,
    x_len: str | pl.Expr,
    y_len: str | pl.Expr,
    verdict: str = VERDICT,
    by: str | Sequence[str] | None = None,
    judge_tie: Literal["error", "drop"] = "error",
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Saito et al.'s signed length-bias score and the group sizes behind it.

    The score is the judge's error rate on pairs where the better answer is the shorter one
    minus its error rate where the better answer is the longer one: +1 for a judge that always
    picks the longer answer, -1 for one that always picks the shorter, 0 for no lean. Pairs
    whose gold label is a tie or whose answers are equally long have no better/shorter side
    and are left out, as are pairs without a usable verdict (``"error"``, null, anything other
    than ``x``/``y``/``tie``).

    Parameters
    ----------
    df
        One row per pair (a LazyFrame is collected).
    gold
        The better answer: ``"x"`` or ``"y"`` (``"tie"`` and anything else are left out).
    x_len, y_len
        Lengths of the two answers (words, tokens, characters: your choice), as column names
        or expressions, e.g. ``pl.col("x").str.split(" ").list.len()``.
    verdict
        The judge's verdict, ``x``/``y``/``tie``.
    by
        Column(s) to report per group; groups are sorted.
    judge_tie
        ``"error"`` counts a judge's tie as a wrong verdict, the seed study's adaptation for a
        judge that may tie (Saito et al.'s judge output is binary); ``"drop"`` leaves such
        pairs out.
    ci
        Coverage of a percentile bootstrap interval on the two error rates and the score,
        resampling pairs within each group; adds ``_lo``/``_hi`` columns.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n_shorter`` and ``n_longer`` (pairs where the better answer is the
        shorter / longer one), ``n_excluded``, ``error_rate_shorter``, ``error_rate_longer``
        and ``length_bias``. A rate is NaN when its group is empty, and so is the score.

    References
    ----------
    .. [1] K. Saito et al. (2023). "Verbosity Bias in Preference Labeling by Large Language
       Models". arXiv:2310.10076, equation 6.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "verdict": ["y", "y", "y", "tie", "x", "y"],
    ...     "gold":    ["x", "y", "y", "y",   "x", "tie"],
    ...     "x_words": [5, 9, 9, 3, 2, 4],
    ...     "y_words": [8, 20, 20, 1, 7, 6],
    ... })
    >>> length_bias(df, gold="gold", x_len="x_words", y_len="y_words")
    shape: (1, 6)
    ┌───────────┬──────────┬────────────┬────────────────────┬───────────────────┬─────────────┐
    │ n_shorter ┆ n_longer ┆ n_excluded ┆ error_rate_shorter ┆ error_rate_longer ┆ length_bias │
    │ ---       ┆ ---      ┆ ---        ┆ ---                ┆ ---               ┆ ---         │
    │ i64       ┆ i64      ┆ i64        ┆ f64                ┆ f64               ┆ f64         │
    ╞═══════════╪══════════╪════════════╪════════════════════╪═══════════════════╪═════════════╡
    │ 3         ┆ 2        ┆ 1          ┆ 0.666667           ┆ 0.0               ┆ 0.666667    │
    └───────────┴──────────┴────────────┴────────────────────┴───────────────────┴─────────────┘
    """
    fn = "length_bias"
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    schema = lf.collect_schema()
    check_columns(schema, fn, verdict=verdict, gold=gold, by=keys)
    check_text(schema, fn, "verdict", verdict, "x/y/tie")
    check_text(schema, fn, "gold", gold, "x/y/tie")
    if judge_tie not in ("error", "drop"):
        raise InputError(f'{fn}: judge_tie= must be "error" or "drop", got {judge_tie!r}')
    check_ci(ci, n_boot, seed, fn)
    outputs = ("n_shorter", "n_longer", "n_excluded", *_RATES)
    check_outputs(keys, (*outputs, *ci_names(_RATES)), fn)
    x = _length_expr(x_len, "x_len", lf, schema, fn)
    y = _length_expr(y_len, "y_len", lf, schema, fn)

    table = count_table(
        lf,
        keys,
        {
            "v": pl.col(verdict),
            "g": pl.col(gold),
            "s": (x.cast(pl.Float64) - y.cast(pl.Float64)).sign(),
        },
    )
    v, g, s = pl.col(key("v")).cast(pl.String), pl.col(key("g")).cast(pl.String), pl.col(key("s"))
    decisive = g.is_in(["x", "y"]) & (s != 0) & s.is_not_nan()
    # The better answer is shorter when it is x and x is shorter, or y and x is longer.
    shorter = ((g == "x") & (s < 0)) | ((g == "y") & (s > 0))
    counted = ["x", "y", "tie"] if judge_tie == "error" else ["x", "y"]
    wrong = pl.when(v == g).then(0).when(v.is_in(counted)).then(1)
    cell = pl.when(decisive & wrong.is_not_null()).then(
        pl.when(shorter).then(0).otherwise(2) + wrong
    )
    table = table.with_columns(cell.fill_null(4).cast(pl.Int64).alias(CELL))
    groups, counts = cell_tensor(table, keys, 5)
    columns: dict[str, np.ndarray] = {
        "n_shorter": counts[:, 0] + counts[:, 1],
        "n_longer": counts[:, 2] + counts[:, 3],
        "n_excluded": counts[:, 4],
        **_length_stats(counts),
    }
    if ci is not None:
        interval = cells_interval(counts, _length_stats, ci=ci, n_boot=n_boot, seed=seed)
        columns.update(interval_columns(interval, _RATES))
    return assemble(groups, columns)

"""Cohen's kappa as a Polars expression, on Series and on plain sequences."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, overload

import numpy as np
import polars as pl

from ..errors import InputError
from ._common import (
    FloatArray,
    UndefinedStatisticWarning,
    is_label,
    label_families,
    warn_disjoint,
    warn_undefined,
)

__all__ = ("UndefinedStatisticWarning", "cohen_kappa")

Weights = Literal["linear", "quadratic"] | None
Labels = pl.Series | np.ndarray | Sequence[object]


def _sum_abs_pairwise(x: pl.Expr) -> pl.Expr:
    # Sum over all pairs i < j of |x_i - x_j| from one sort: the k-th smallest value is added
    # k times and subtracted (m - 1 - k) times.
    m = x.len().cast(pl.Int64)
    return (x.sort() * (2 * pl.int_range(0, m, dtype=pl.Int64) - m + 1)).sum()


def _kappa_expr(a: pl.Expr, b: pl.Expr, labels: list[object] | None, weights: Weights) -> pl.Expr:
    if labels is not None:
        codes = list(range(len(labels)))
        a = a.replace_strict(labels, codes, default=None, return_dtype=pl.Int64)
        b = b.replace_strict(labels, codes, default=None, return_dtype=pl.Int64)
    keep = a.is_not_null() & b.is_not_null()
    a, b = a.filter(keep), b.filter(keep)
    n = a.len().cast(pl.Float64)
    # Both sums follow scikit-learn's 1 - sum(w * observed) / sum(w * expected), where
    # expected = outer(row totals, column totals) / n; they are computed from label codes
    # without building the matrix, so the expression also runs inside group_by().agg().
    if weights is None:

        def square_counts(e: pl.Expr) -> pl.Expr:
            return e.unique_counts().cast(pl.Int64).pow(2).sum()

        # sum_k r_k c_k from counts alone: (r + c)^2 = r^2 + c^2 + 2rc, label by label.
        both = (square_counts(a.append(b)) - square_counts(a) - square_counts(b)) // 2
        observed = (a != b).sum().cast(pl.Float64)
        expected = (n * n - both.cast(pl.Float64)) / n
    else:
        if labels is None:
            # Weights index the sorted union of labels, as in scikit-learn.
            levels = a.append(b).unique().sort()
            a = levels.search_sorted(a).cast(pl.Int64)
            b = levels.search_sorted(b).cast(pl.Int64)
        if weights == "linear":
            observed = (a - b).abs().sum().cast(pl.Float64)
            cross = _sum_abs_pairwise(a.append(b)) - _sum_abs_pairwise(a) - _sum_abs_pairwise(b)
            expected = cross.cast(pl.Float64) / n
        else:
            observed = (a - b).pow(2).sum().cast(pl.Float64)
            af, bf = a.cast(pl.Float64), b.cast(pl.Float64)
            # sum_ij (a_i - b_j)^2 / n in centred form, which does not cancel.
            expected = (
                (af - af.mean()).pow(2).sum()
                + (bf - bf.mean()).pow(2).sum()
                + n * (af.mean() - bf.mean()).pow(2)
            )
    return (
        pl.when(expected > 0)
        .then(1.0 - observed / expected)
        .otherwise(pl.lit(float("nan"), dtype=pl.Float64))
    )


def _check_options(labels: Labels | None, weights: object) -> list[object] | None:
    if weights not in (None, "linear", "quadratic"):
        raise InputError(
            f'cohen_kappa: weights= must be None, "linear" or "quadratic", got {weights!r}'
        )
    if labels is None:
        return None
    if isinstance(labels, str | bytes) or not isinstance(labels, Sequence | np.ndarray | pl.Series):
        raise InputError("cohen_kappa: labels= must be a sequence of labels")
    values = list(labels)
    if not values:
        raise InputError("cohen_kappa: labels= is empty")
    if len(set(values)) != len(values):
        raise InputError("cohen_kappa: labels= lists a label twice")
    return values


def _as_series(values: object, param: str) -> pl.Series:
    if isinstance(values, pl.Series):
        return values
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise InputError(
            f"cohen_kappa: {param}= must be a sequence, numpy array, polars Series, "
            f"column name or expression, got {type(values).__name__}"
        )
    try:
        return pl.Series(param, values)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError) as exc:
        raise InputError(
            f"cohen_kappa: {param}= mixes types polars cannot hold in one column"
        ) from exc


def _side(param: str, values: pl.Series) -> str:
    # A Series built here from a list is named after its parameter; a user's keeps its name.
    return f"{param}=" if values.name in ("", param) else f"column {values.name!r} ({param}=)"


@overload
def cohen_kappa(  # type: ignore[overload-overlap]
    y1: pl.Expr | str,
    y2: pl.Expr | str,
    *,
    labels: Labels | None = ...,
    weights: Weights = ...,
) -> pl.Expr: ...


@overload
def cohen_kappa(
    y1: pl.Series | np.ndarray | Sequence[object],
    y2: pl.Series | np.ndarray | Sequence[object],
    *,
    labels: Labels | None = ...,
    weights: Weights = ...,
) -> float: ...


def cohen_kappa(
    y1: pl.Expr | str | pl.Series | np.ndarray | Sequence[object],
    y2: pl.Expr | str | pl.Series | np.ndarray | Sequence[object],
    *,
    labels: Labels | None = None,
    weights: Weights = None,
) -> pl.Expr | float:
    """Cohen's kappa between two raters, unweighted or with linear/quadratic weights.

    Computes ``1 - sum(w * observed) / sum(w * expected)`` exactly as scikit-learn's
    ``cohen_kappa_score`` defines it (unweighted, it is ``(p_o - p_e) / (1 - p_e)``), and
    agrees with it to within 1e-12.

    Given two expressions (or column names) it returns an expression, usable in
    ``df.select`` and per group in ``df.group_by(...).agg``. Given two sequences, numpy arrays
    or Series it returns a float.

    Parameters
    ----------
    y1, y2
        The two raters' labels (text, integers or booleans), pair by pair. A pair with a null
        on either side is left out.
    labels
        Labels to keep, in the order that indexes the weights; pairs with any other label are
        left out. By default every label present is used, in sorted order.
    weights
        ``None`` (every disagreement costs 1), ``"linear"`` or ``"quadratic"`` (the cost grows
        with the distance between the labels' positions).

    Returns
    -------
    polars.Expr or float
        Kappa, at most 1. It is NaN when undefined: no pairs, or chance agreement of 1 (both
        raters used one and the same label throughout). The float form warns with
        :class:`UndefinedStatisticWarning` then; an expression cannot warn and just yields NaN.
        The float form also warns with :class:`DisjointLabelsWarning` when the two raters
        share no label at all (two label sets, most likely), and returns the kappa computed.

    References
    ----------
    .. [1] J. Cohen (1960). "A coefficient of agreement for nominal scales". Educational and
       Psychological Measurement 20(1): 37-46.

    Examples
    --------
    >>> cohen_kappa(["x", "y", "x", "tie", "y"], ["x", "y", "x", "tie", "x"])
    0.6875
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "task": ["code", "code", "code", "math", "math", "math"],
    ...     "judge": [1, 2, 3, 1, 2, 3],
    ...     "human": [1, 2, 2, 1, 3, 3],
    ... })
    >>> df.group_by("task").agg(
    ...     kappa=cohen_kappa("judge", "human"),
    ...     quadratic=cohen_kappa("judge", "human", weights="quadratic"),
    ... ).sort("task")
    shape: (2, 3)
    ┌──────┬───────┬───────────┐
    │ task ┆ kappa ┆ quadratic │
    │ ---  ┆ ---   ┆ ---       │
    │ str  ┆ f64   ┆ f64       │
    ╞══════╪═══════╪═══════════╡
    │ code ┆ 0.5   ┆ 0.666667  │
    │ math ┆ 0.5   ┆ 0.8       │
    └──────┴───────┴───────────┘
    """
    label_list = _check_options(labels, weights)
    exprs = [isinstance(y, pl.Expr | str) for y in (y1, y2)]
    if all(exprs):
        a = y1 if isinstance(y1, pl.Expr) else pl.col(str(y1))
        b = y2 if isinstance(y2, pl.Expr) else pl.col(str(y2))
        return _kappa_expr(a, b, label_list, weights)
    if any(exprs):
        raise InputError(
            "cohen_kappa: y1= and y2= must both be expressions/column names or both be data "
            "(sequences, arrays, Series)"
        )
    s1, s2 = _as_series(y1, "y1"), _as_series(y2, "y2")
    if s1.len() != s2.len():
        raise InputError(f"cohen_kappa: y1= has {s1.len()} labels but y2= has {s2.len()}")
    for param, s in (("y1", s1), ("y2", s2)):
        if not is_label(s.dtype):
            raise InputError(
                f"cohen_kappa: {param}= must hold nominal labels (text, integers or booleans), "
                f"got dtype {s.dtype}"
            )
    families = label_families([s1.dtype, s2.dtype])
    if len(families) > 1:
        raise InputError(
            f"cohen_kappa: y1= ({s1.dtype}) and y2= ({s2.dtype}) hold different kinds of labels"
        )
    frame = pl.DataFrame([s1.alias("a"), s2.alias("b")])
    if frame.schema["a"] != frame.schema["b"]:
        common = pl.Int64 if families == {"integer"} else pl.String
        frame = frame.with_columns(pl.col("a", "b").cast(common))
    warn_disjoint(
        "cohen_kappa",
        [
            (_side("y1", s1), frame["a"].drop_nulls().unique().to_list()),
            (_side("y2", s2), frame["b"].drop_nulls().unique().to_list()),
        ],
    )
    value = float(frame.select(_kappa_expr(pl.col("a"), pl.col("b"), label_list, weights)).item())
    warn_undefined(
        np.array([value]),
        "Cohen's kappa",
        "no pairs, or both raters used a single label, so chance agreement is 1",
    )
    return value


def kappa_from_confusion(confusion: FloatArray) -> FloatArray:
    """Unweighted kappa of confusion matrices ``[..., K, K]`` (scikit-learn's arithmetic)."""
    n = confusion.sum(axis=(-2, -1))
    rows = confusion.sum(axis=-1)
    cols = confusion.sum(axis=-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected_agree = (rows * cols).sum(axis=-1) / n
        observed_off = n - np.trace(confusion, axis1=-2, axis2=-1)
        expected_off = n - expected_agree
        kappa = 1.0 - observed_off / expected_off
    return np.asarray(np.where((n > 0) & (expected_off > 0), kappa, math.nan), dtype=np.float64)

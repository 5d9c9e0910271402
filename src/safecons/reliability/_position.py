"""Position bias of a pairwise judge run in both orders: verdicts, classes and rates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import numpy as np
import polars as pl

from .._bootstrap import cells_interval, check_ci, ci_names, interval_columns
from ..errors import InputError
from ._columns import LETTER_XY, LETTER_YX
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
    warn_undefined,
)

__all__ = (
    "both_orders_verdict",
    "position_bias",
    "position_class",
    "winner_from_letter",
)

# Keys are "<letter with x first>|<letter with y first>"; the separator makes a key of length 3
# possible only from two single letters, so no other pair of strings can collide with one.
_POSITION: Final[dict[str, str]] = {
    "A|B": "consistent",
    "B|A": "consistent",
    "C|C": "consistent",
    "A|A": "primacy",
    "A|C": "primacy",
    "C|A": "primacy",
    "B|B": "recency",
    "B|C": "recency",
    "C|B": "recency",
}
# x wins only when both calls name it: A with x first, B with y first; the mirror for y.
_VERDICT: Final[dict[str, str]] = {
    key: {"A|B": "x", "B|A": "y"}.get(key, "tie") for key in _POSITION
}
_CLASS_CODE: Final[dict[str, int]] = {"consistent": 0, "primacy": 1, "recency": 2}


def _expr(value: str | pl.Expr, param: str, fn: str) -> pl.Expr:
    if isinstance(value, pl.Expr):
        return value
    if isinstance(value, str):
        return pl.col(value)
    raise InputError(f"{fn}: {param}= must be a column name or a polars expression")


def _pair_key(first: pl.Expr, second: pl.Expr) -> pl.Expr:
    return pl.concat_str([first.cast(pl.String), second.cast(pl.String)], separator="|")


def winner_from_letter(letter: str | pl.Expr, *, shown_first: Literal["x", "y"] = "x") -> pl.Expr:
    """Map a judge's letter to the candidate it names.

    Parameters
    ----------
    letter
        Column name or expression holding ``A``, ``B`` or ``C`` (tie); anything else, null
        included, maps to ``"error"``.
    shown_first
        Which candidate was shown as assistant A in that call.

    Returns
    -------
    polars.Expr
        ``"x"``, ``"y"``, ``"tie"`` or ``"error"``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"letter": ["A", "B", "C", "[[A]]", None]})
    >>> df.with_columns(
    ...     x_first=winner_from_letter("letter"),
    ...     y_first=winner_from_letter("letter", shown_first="y"),
    ... )
    shape: (5, 3)
    ┌────────┬─────────┬─────────┐
    │ letter ┆ x_first ┆ y_first │
    │ ---    ┆ ---     ┆ ---     │
    │ str    ┆ str     ┆ str     │
    ╞════════╪═════════╪═════════╡
    │ A      ┆ x       ┆ y       │
    │ B      ┆ y       ┆ x       │
    │ C      ┆ tie     ┆ tie     │
    │ [[A]]  ┆ error   ┆ error   │
    │ null   ┆ error   ┆ error   │
    └────────┴─────────┴─────────┘
    """
    if shown_first not in ("x", "y"):
        raise InputError(
            f'winner_from_letter: shown_first= must be "x" or "y", got {shown_first!r}'
        )
    other = "y" if shown_first == "x" else "x"
    return (
        _expr(letter, "letter", "winner_from_letter")
        .cast(pl.String)
        .replace_strict(
            {"A": shown_first, "B": other, "C": "tie"}, default="error", return_dtype=pl.String
        )
    )


def both_orders_verdict(
    first: str | pl.Expr, second: str | pl.Expr, *, error_as_tie: bool = False
) -> pl.Expr:
    """Conservative verdict of a pair judged in both orders (Zheng et al., section 3.4).

    A candidate wins only when both calls prefer it; any other pair of usable letters is a
    tie. When either call gave no usable letter the verdict is ``"error"``, so parse failures
    stay visible and out of agreement counts; ``error_as_tie=True`` folds them into ties as
    the seed study's harness does.

    Parameters
    ----------
    first
        Letter (``A``/``B``/``C``) of the call with x shown first.
    second
        Letter of the call with y shown first.
    error_as_tie
        Report a pair with an unusable call as ``"tie"`` instead of ``"error"``.

    Returns
    -------
    polars.Expr
        ``"x"``, ``"y"``, ``"tie"`` or ``"error"``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"xy": ["A", "B", "A", "C", "A"], "yx": ["B", "A", "A", "B", "?"]})
    >>> df.with_columns(
    ...     verdict=both_orders_verdict("xy", "yx"),
    ...     seed_rule=both_orders_verdict("xy", "yx", error_as_tie=True),
    ... )
    shape: (5, 4)
    ┌─────┬─────┬─────────┬───────────┐
    │ xy  ┆ yx  ┆ verdict ┆ seed_rule │
    │ --- ┆ --- ┆ ---     ┆ ---       │
    │ str ┆ str ┆ str     ┆ str       │
    ╞═════╪═════╪═════════╪═══════════╡
    │ A   ┆ B   ┆ x       ┆ x         │
    │ B   ┆ A   ┆ y       ┆ y         │
    │ A   ┆ A   ┆ tie     ┆ tie       │
    │ C   ┆ B   ┆ tie     ┆ tie       │
    │ A   ┆ ?   ┆ error   ┆ tie       │
    └─────┴─────┴─────────┴───────────┘
    """
    fn = "both_orders_verdict"
    key = _pair_key(_expr(first, "first", fn), _expr(second, "second", fn))
    return key.replace_strict(
        _VERDICT, default="tie" if error_as_tie else "error", return_dtype=pl.String
    )


def position_class(first: str | pl.Expr, second: str | pl.Expr) -> pl.Expr:
    """Shi et al.'s class of a pair judged in both orders.

    ``AB``, ``BA`` and ``CC`` are consistent; ``AA``, ``AC`` and ``CA`` favour the answer shown
    first (primacy); ``BB``, ``BC`` and ``CB`` favour the one shown second (recency). A pair
    with any other letter is ``"error"``. Swapping the names x and y swaps ``first`` and
    ``second`` and leaves every class unchanged.

    Parameters
    ----------
    first
        Letter (``A``/``B``/``C``) of the call with x shown first.
    second
        Letter of the call with y shown first.

    Returns
    -------
    polars.Expr
        ``"consistent"``, ``"primacy"``, ``"recency"`` or ``"error"``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"xy": ["A", "A", "C", "B", None], "yx": ["B", "A", "A", "C", "A"]})
    >>> df.with_columns(position=position_class("xy", "yx"))
    shape: (5, 3)
    ┌──────┬─────┬────────────┐
    │ xy   ┆ yx  ┆ position   │
    │ ---  ┆ --- ┆ ---        │
    │ str  ┆ str ┆ str        │
    ╞══════╪═════╪════════════╡
    │ A    ┆ B   ┆ consistent │
    │ A    ┆ A   ┆ primacy    │
    │ C    ┆ A   ┆ primacy    │
    │ B    ┆ C   ┆ recency    │
    │ null ┆ A   ┆ error      │
    └──────┴─────┴────────────┘
    """
    fn = "position_class"
    key = _pair_key(_expr(first, "first", fn), _expr(second, "second", fn))
    return key.replace_strict(_POSITION, default="error", return_dtype=pl.String)


_RATES: Final = ("consistency", "fairness")


def _position_stats(counts: np.ndarray) -> dict[str, FloatArray]:
    consistent, primacy, recency = counts[..., 0], counts[..., 1], counts[..., 2]
    n = consistent + primacy + recency
    return {
        "consistency": divide(consistent, n),
        "fairness": divide(recency - primacy, n),
    }


def position_bias(
    df: FrameLike,
    *,
    first: str = LETTER_XY,
    second: str = LETTER_YX,
    by: str | Sequence[str] | None = None,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Position consistency and preference fairness of a judge run in both orders.

    Each pair is classed by :func:`position_class`. ``consistency`` is the consistent share of
    usable pairs and ``fairness`` is ``(recency - primacy) / n_pairs``: -1 when every pair
    favours the answer shown first, +1 when every pair favours the one shown second. That is
    Shi et al.'s min-max scaled fairness with its extremes taken at all-primacy and
    all-recency, which reduces to this difference.

    Parameters
    ----------
    df
        One row per pair (a LazyFrame is collected).
    first
        Column of raw letters (``A``/``B``/``C``) from the call with x shown first.
    second
        Column of raw letters from the call with y shown first. Any other value in either
        column, null included, makes the pair an error.
    by
        Column(s) to report per group (task, turn, model, ...); groups are sorted.
    ci
        Coverage of a percentile bootstrap interval (e.g. 0.95) on ``consistency`` and
        ``fairness``, resampling pairs within each group; adds ``_lo``/``_hi`` columns.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap; the same seed gives the same interval.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, then ``n_pairs`` (usable), ``n_error``, ``consistent``, ``primacy``,
        ``recency``, ``consistency`` and ``fairness`` (NaN when a group has no usable pair).

    References
    ----------
    .. [1] L. Shi et al. (2024). "Judging the Judges: A Systematic Investigation of Position
       Bias in Pairwise Comparative Assessments by LLMs". arXiv:2406.07791, section 2.2.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "turn": [1, 1, 1, 1, 2, 2, 2],
    ...     "letter_xy": ["A", "A", "B", "C", "B", "B", "A"],
    ...     "letter_yx": ["B", "A", "A", "A", "B", "C", None],
    ... })
    >>> position_bias(df, by="turn")
    shape: (2, 8)
    ┌──────┬─────────┬─────────┬────────────┬─────────┬─────────┬─────────────┬──────────┐
    │ turn ┆ n_pairs ┆ n_error ┆ consistent ┆ primacy ┆ recency ┆ consistency ┆ fairness │
    │ ---  ┆ ---     ┆ ---     ┆ ---        ┆ ---     ┆ ---     ┆ ---         ┆ ---      │
    │ i64  ┆ i64     ┆ i64     ┆ i64        ┆ i64     ┆ i64     ┆ f64         ┆ f64      │
    ╞══════╪═════════╪═════════╪════════════╪═════════╪═════════╪═════════════╪══════════╡
    │ 1    ┆ 4       ┆ 0       ┆ 2          ┆ 2       ┆ 0       ┆ 0.5         ┆ -0.5     │
    │ 2    ┆ 2       ┆ 1       ┆ 0          ┆ 0       ┆ 2       ┆ 0.0         ┆ 1.0      │
    └──────┴─────────┴─────────┴────────────┴─────────┴─────────┴─────────────┴──────────┘
    """
    fn = "position_bias"
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    schema = lf.collect_schema()
    check_columns(schema, fn, first=first, second=second, by=keys)
    check_text(schema, fn, "first", first, "judge letters A/B/C")
    check_text(schema, fn, "second", second, "judge letters A/B/C")
    check_ci(ci, n_boot, seed, fn)
    stats = ("n_pairs", "n_error", "consistent", "primacy", "recency", *_RATES)
    check_outputs(keys, (*stats, *ci_names(_RATES)), fn)

    table = count_table(lf, keys, {"a": pl.col(first), "b": pl.col(second)})
    table = table.with_columns(
        position_class(key("a"), key("b"))
        .replace_strict(_CLASS_CODE, default=3, return_dtype=pl.Int64)
        .alias(CELL)
    )
    groups, counts = cell_tensor(table, keys, 4)
    columns: dict[str, np.ndarray] = {
        "n_pairs": counts[:, :3].sum(axis=1),
        "n_error": counts[:, 3],
        "consistent": counts[:, 0],
        "primacy": counts[:, 1],
        "recency": counts[:, 2],
        **_position_stats(counts),
    }
    warn_undefined(
        columns["consistency"],
        "position consistency",
        "no usable pair: each pair's letters were errors or missing (see n_error)",
    )
    if ci is not None:
        interval = cells_interval(counts, _position_stats, ci=ci, n_boot=n_boot, seed=seed)
        columns.update(interval_columns(interval, _RATES))
    return assemble(groups, columns)

"""Input checks and the count-table machinery every statistic is built on.

Each statistic first reduces the (possibly huge) frame to counts per group and per cell with one
Polars ``group_by``; everything after that works on a table whose size is the number of groups
times the number of cells, so the statistics, their bootstrap intervals and their row-order
invariance all follow from the counts alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import InputError, SafeconsWarning

__all__ = (
    "DisjointLabelsWarning",
    "FrameLike",
    "UndefinedStatisticWarning",
)

FrameLike = pl.DataFrame | pl.LazyFrame
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Internal column names; the prefix keeps them clear of any user column.
CELL = "__safecons_cell"
COUNT = "__safecons_n"
GROUP = "__safecons_group"
ITEM = "__safecons_item"

#: The fewest of anything agreement is measured between: the ratings of an item, the calls of
#: a group, the raters of a panel, the label columns compared. One alone agrees with nothing.
MIN_PAIRABLE = 2


class UndefinedStatisticWarning(SafeconsWarning, RuntimeWarning):
    """A statistic is undefined for some input (for example kappa when chance agreement is 1).

    The value is reported as NaN; the warning says which statistic and how many groups.
    """


class DisjointLabelsWarning(SafeconsWarning):
    """Label columns compared with each other share no label at all.

    Every pair then disagrees, which far more often means two label sets (letters ``A``/``B``
    against ``x``/``y``, ``1``/``0`` against ``yes``/``no``) than a rater who always
    disagrees. The statistic is still computed on the labels as given; the warning names the
    columns and shows some labels of each.
    """


#: Labels of each side a disjoint-labels warning shows.
_SHOWN_LABELS = 3
#: Columns of the frame a missing-column error lists.
_SHOWN_COLUMNS = 20


def warn_disjoint(
    fn: str, sides: Sequence[tuple[str, Collection[object]]], *, stacklevel: int = 3
) -> None:
    """Warn once when one side's labels share none with the other sides' labels.

    ``sides`` pairs a description of each label column (its name and the parameter that named
    it) with the labels it holds (nulls and the error label left out). A side with no label
    says nothing either way and is skipped, as is everything when fewer than two sides hold
    labels.
    """
    held = [(what, {str(v) for v in labels}) for what, labels in sides if labels]
    if len(held) < MIN_PAIRABLE:
        return
    for i, (what, mine) in enumerate(held):
        others = [(w, s) for j, (w, s) in enumerate(held) if j != i]
        theirs = set().union(*(s for _, s in others))
        if mine.isdisjoint(theirs):

            def shown(labels: set[str]) -> str:
                first = sorted(labels)[:_SHOWN_LABELS]
                more = ", ..." if len(labels) > _SHOWN_LABELS else ""
                return ", ".join(repr(v[:40]) for v in first) + more

            against = ", ".join(w for w, _ in others)
            warnings.warn(
                f"{fn}: {what} shares no label with {against} ({shown(mine)} against "
                f"{shown(theirs)}), so every pair of them disagrees; if they use two label "
                "sets, map one onto the other first (the statistic is computed on the labels "
                "as given)",
                DisjointLabelsWarning,
                stacklevel=stacklevel,
            )
            return


def as_lazy(df: object, fn: str) -> pl.LazyFrame:
    if isinstance(df, pl.DataFrame):
        return df.lazy()
    if isinstance(df, pl.LazyFrame):
        return df
    raise InputError(f"{fn}: expected a polars DataFrame or LazyFrame, got {type(df).__name__}")


def normalize_by(by: str | Sequence[str] | None, fn: str) -> list[str]:
    if by is None:
        return []
    if isinstance(by, str):
        return [by]
    if isinstance(by, Sequence) and all(isinstance(b, str) for b in by):
        names = list(by)
        if len(set(names)) != len(names):
            raise InputError(f"{fn}: by= names a column twice: {names}")
        return names
    raise InputError(f"{fn}: by= must be a column name, a sequence of column names or None")


def check_columns(schema: pl.Schema, fn: str, **params: str | Sequence[str]) -> None:
    """Every named column exists; the message names the parameter that named it."""
    for param, value in params.items():
        names = [value] if isinstance(value, str) else list(value)
        for name in names:
            if not isinstance(name, str):
                raise InputError(f"{fn}: {param}= must name a column (a str), got {name!r}")
            if name not in schema:
                shown = ", ".join(repr(c) for c in list(schema)[:_SHOWN_COLUMNS])
                more = ", ..." if len(schema) > _SHOWN_COLUMNS else ""
                raise InputError(
                    f"{fn}: column {name!r} (from {param}=) is not in the frame; "
                    f"its columns are {shown}{more}"
                )


def is_text(dtype: pl.DataType) -> bool:
    return dtype in (pl.String, pl.Null) or isinstance(dtype, pl.Categorical | pl.Enum)


def is_label(dtype: pl.DataType) -> bool:
    """Dtypes usable as nominal labels: text, integers and booleans."""
    return is_text(dtype) or dtype.is_integer() or dtype == pl.Boolean


def label_families(dtypes: Iterable[pl.DataType]) -> set[str]:
    """Kinds of nominal labels among ``dtypes``: ``"integer"`` and/or ``"text"``.

    All-null columns have no kind. Two label columns can be compared only if their kinds agree.
    """
    return {
        "integer" if d.is_integer() or d == pl.Boolean else "text" for d in dtypes if d != pl.Null
    }


def check_text(schema: pl.Schema, fn: str, param: str, name: str, what: str) -> None:
    dtype = schema[name]
    if not is_text(dtype):
        raise InputError(
            f"{fn}: column {name!r} (from {param}=) must hold text ({what}), got dtype {dtype}"
        )


def check_numeric(schema: pl.Schema, fn: str, param: str, name: str, what: str) -> None:
    dtype = schema[name]
    if not (dtype.is_numeric() or dtype == pl.Null):
        raise InputError(
            f"{fn}: column {name!r} (from {param}=) must be numeric ({what}), got dtype {dtype}"
        )


def check_outputs(by: Sequence[str], outputs: Iterable[str], fn: str) -> None:
    clash = sorted(set(by) & set(outputs))
    if clash:
        raise InputError(
            f"{fn}: by= column(s) {clash} share a name with the result's columns; rename them"
        )


def flip_flag(schema: pl.Schema, fn: str, param: str, name: str) -> pl.Expr:
    """A Boolean flip column, or a position-class column read as flipped/not flipped.

    Position classes: ``primacy`` and ``recency`` are flips, ``consistent`` is not, anything else
    (``error``, null) is unknown and left out of flip rates.
    """
    dtype = schema[name]
    if dtype == pl.Boolean:
        return pl.col(name)
    if is_text(dtype):
        cls = pl.col(name).cast(pl.String)
        return (
            pl.when(cls.is_in(["primacy", "recency"]))
            .then(pl.lit(True))
            .when(cls == "consistent")
            .then(pl.lit(False))
            .otherwise(pl.lit(None, dtype=pl.Boolean))
        )
    raise InputError(
        f"{fn}: column {name!r} (from {param}=) must be Boolean (True = the verdict flipped "
        f"when the answers swapped places) or a position class "
        f"(consistent/primacy/recency/error), got dtype {dtype}"
    )


def key(name: str) -> str:
    """Internal name of a count-table key, clear of any user column."""
    return f"__safecons_key_{name}"


def count_table(lf: pl.LazyFrame, by: Sequence[str], keys: Mapping[str, pl.Expr]) -> pl.DataFrame:
    """Rows per combination of ``by`` and ``keys``: the one pass over the full frame.

    Key columns are named with :func:`key`; the row counts are in ``COUNT``.
    """
    exprs = [*(pl.col(b) for b in by), *(e.alias(key(k)) for k, e in keys.items())]
    return lf.group_by(exprs).agg(pl.len().alias(COUNT)).collect()


def cell_tensor(
    table: pl.DataFrame, by: Sequence[str], n_cells: int
) -> tuple[pl.DataFrame, IntArray]:
    """Turn a count table with an integer ``CELL`` column into (groups, counts[G, n_cells]).

    Groups are sorted by ``by`` (nulls last), which makes every result independent of row order.
    Without ``by`` there is exactly one group, even for an empty frame.
    """
    if not by:
        counts = np.zeros((1, n_cells), dtype=np.int64)
        np.add.at(
            counts[0],
            table[CELL].to_numpy().astype(np.intp),
            table[COUNT].to_numpy().astype(np.int64),
        )
        return pl.DataFrame(), counts
    grouped = (
        table.group_by(list(by))
        .agg(pl.col(CELL), pl.col(COUNT))
        .sort(list(by), nulls_last=True)
        .with_row_index(GROUP)
    )
    flat = grouped.select(GROUP, CELL, COUNT).explode([CELL, COUNT])
    counts = np.zeros((grouped.height, n_cells), dtype=np.int64)
    np.add.at(
        counts,
        (flat[GROUP].to_numpy().astype(np.intp), flat[CELL].to_numpy().astype(np.intp)),
        flat[COUNT].to_numpy().astype(np.int64),
    )
    return grouped.select(list(by)), counts


def unit_arrays(
    units: pl.DataFrame, by: Sequence[str], quantities: Sequence[str], keep: pl.Expr
) -> tuple[pl.DataFrame, IntArray, FloatArray, int]:
    """Per-unit quantities for statistics that resample units (items, repeated-call groups).

    Returns the groups (every ``by`` value present in ``units``, sorted, nulls last), the group
    index of each kept unit, the kept units' quantities ``[U, d]`` and the number of groups.
    Units are ordered by group and then by their quantities, so the arrays do not depend on
    row order.
    """
    if by:
        groups = units.select(list(by)).unique().sort(list(by), nulls_last=True)
        indexed = groups.with_row_index(GROUP)
        kept = units.filter(keep).join(indexed, on=list(by), how="left", nulls_equal=True)
    else:
        groups = pl.DataFrame()
        kept = units.filter(keep).with_columns(pl.lit(0, dtype=pl.UInt32).alias(GROUP))
    kept = kept.sort([GROUP, *quantities])
    n_groups = groups.height if by else 1
    q = kept.select(quantities).to_numpy().astype(np.float64).reshape(kept.height, len(quantities))
    return groups, kept[GROUP].to_numpy().astype(np.int64), q, n_groups


def unit_sums(group: IntArray, q: FloatArray, n_groups: int) -> FloatArray:
    sums = np.zeros((n_groups, q.shape[1]), dtype=np.float64)
    np.add.at(sums, group, q)
    return sums


def assemble(
    groups: pl.DataFrame,
    columns: Mapping[str, npt.NDArray[np.generic] | pl.Series],
) -> pl.DataFrame:
    """Result frame: the group keys, then each statistic (ints stay Int64, rates Float64)."""
    out = [*groups.get_columns()]
    for name, values in columns.items():
        if isinstance(values, pl.Series):
            out.append(values.alias(name))
            continue
        if np.issubdtype(values.dtype, np.integer):
            out.append(pl.Series(name, values.astype(np.int64), dtype=pl.Int64))
        else:
            out.append(pl.Series(name, values.astype(np.float64), dtype=pl.Float64))
    return pl.DataFrame(out)


def warn_undefined(values: npt.NDArray[np.float64], statistic: str, reason: str) -> None:
    bad = int(np.isnan(values).sum())
    if bad:
        where = "the input" if values.size == 1 else f"{bad} of {values.size} groups"
        warnings.warn(
            f"{statistic} is undefined for {where} ({reason}); reported as NaN",
            UndefinedStatisticWarning,
            stacklevel=3,
        )


def divide(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """Elementwise num / den with NaN where den is 0 (an empty group has no rate)."""
    n = np.asarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d == 0, np.nan, n / np.where(d == 0, 1.0, d))
    return np.asarray(out, dtype=np.float64)

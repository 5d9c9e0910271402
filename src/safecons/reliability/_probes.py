"""Probe pairs to add to any pairwise test set: identical answers and padded answers."""

from __future__ import annotations

from typing import Final, TypeVar

import polars as pl

from ..errors import InputError
from ._common import as_lazy, check_columns, check_text

__all__ = ("PADDING_FILLER", "identical_pairs", "padded_pairs")

#: The seed study's padding sentence: polite, content-free, and long enough to matter.
PADDING_FILLER: Final = (
    "I hope that helps, and if there is anything else I can do for you today, just let me know."
)

F = TypeVar("F", pl.DataFrame, pl.LazyFrame)


def _probe(df: F, answer: str, y_value: pl.Expr, *, probe: str, x: str, y: str, fn: str) -> F:
    schema = as_lazy(df, fn).collect_schema()
    check_columns(schema, fn, answer=answer)
    check_text(schema, fn, "answer", answer, "the answers to pair with themselves")
    if x == y:
        raise InputError(f"{fn}: x= and y= must be different column names")
    for name in (x, y, "probe", "expected"):
        if name in schema and name != answer:
            raise InputError(
                f"{fn}: the frame already has a column {name!r}; the probe would overwrite it "
                f"(choose other names with x=/y=, or drop the column)"
            )
    return df.with_columns(
        pl.col(answer).cast(pl.String).alias(x),
        y_value.alias(y),
        pl.lit(probe).alias("probe"),
        pl.lit("tie").alias("expected"),
    )


def identical_pairs(df: F, *, answer: str, x: str = "x", y: str = "y") -> F:
    """Pair every answer with itself: any verdict but a tie is position bias.

    A judge that cannot tell the two copies apart must call a tie; a comparator that breaks
    ties towards the first answer names the copy on top every time, and the both-orders
    verdict turns all of those into ties.

    Parameters
    ----------
    df
        Frame with one answer per row (DataFrame or LazyFrame; the same kind comes back).
    answer
        Column holding the answer text.
    x, y
        Names of the two candidate columns to add.

    Returns
    -------
    polars.DataFrame or polars.LazyFrame
        The input with ``x`` and ``y`` (both the answer), ``probe`` = ``"identical"`` and
        ``expected`` = ``"tie"``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"question": ["Where is parcel 7?"], "reply": ["It arrives Monday."]})
    >>> identical_pairs(df, answer="reply").select("x", "y", "probe", "expected")
    shape: (1, 4)
    ┌────────────────────┬────────────────────┬───────────┬──────────┐
    │ x                  ┆ y                  ┆ probe     ┆ expected │
    │ ---                ┆ ---                ┆ ---       ┆ ---      │
    │ str                ┆ str                ┆ str       ┆ str      │
    ╞════════════════════╪════════════════════╪═══════════╪══════════╡
    │ It arrives Monday. ┆ It arrives Monday. ┆ identical ┆ tie      │
    └────────────────────┴────────────────────┴───────────┴──────────┘
    """
    fn = "identical_pairs"
    return _probe(df, answer, pl.col(answer).cast(pl.String), probe="identical", x=x, y=y, fn=fn)


def padded_pairs(
    df: F,
    *,
    answer: str,
    filler: str = PADDING_FILLER,
    separator: str = " ",
    x: str = "x",
    y: str = "y",
) -> F:
    """Pair every answer with a copy padded by a content-free sentence.

    The padded copy says nothing more, so the expected verdict is a tie; a judge that prefers
    either side leans on length. (An answer that must be exact, such as a readback of a code,
    is broken by padding: set ``expected`` yourself for such items.)

    Parameters
    ----------
    df
        Frame with one answer per row (DataFrame or LazyFrame; the same kind comes back).
    answer
        Column holding the answer text.
    filler
        Sentence appended to the copy; by default :data:`PADDING_FILLER`.
    separator
        Text between the answer and the filler.
    x, y
        Names of the candidate columns to add: ``x`` is the answer, ``y`` the padded copy.

    Returns
    -------
    polars.DataFrame or polars.LazyFrame
        The input with ``x``, ``y``, ``probe`` = ``"padded"`` and ``expected`` = ``"tie"``.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"reply": ["Monday."]})
    >>> padded_pairs(df, answer="reply", filler="Anything else?").select("x", "y")
    shape: (1, 2)
    ┌─────────┬────────────────────────┐
    │ x       ┆ y                      │
    │ ---     ┆ ---                    │
    │ str     ┆ str                    │
    ╞═════════╪════════════════════════╡
    │ Monday. ┆ Monday. Anything else? │
    └─────────┴────────────────────────┘
    """
    fn = "padded_pairs"
    if not isinstance(filler, str) or not filler:
        raise InputError(f"{fn}: filler= must be a non-empty string")
    if not isinstance(separator, str):
        raise InputError(f"{fn}: separator= must be a string")
    padded = pl.concat_str([pl.col(answer).cast(pl.String), pl.lit(separator + filler)])
    return _probe(df, answer, padded, probe="padded", x=x, y=y, fn=fn)

"""Which groups a report or a chart shows when a run has more than it can show.

A run with 100,000 distinct template ids has 100,000 template families; a table or a chart of
all of them is neither readable nor cheap. Both show at most :data:`GROUP_LIMIT` groups, the
same ones, chosen by :func:`largest_groups`, and summarise the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import polars as pl

__all__ = ("GROUP_LIMIT", "largest_groups", "pooled_mean")

#: Groups a by-group table or chart of the report shows.
GROUP_LIMIT: Final = 25


def largest_groups(
    table: pl.DataFrame, keys: Sequence[str], limit: int, *, size: str = "rows"
) -> pl.Series:
    """Which rows of ``table`` (one per group) are the ``limit`` groups with the largest
    ``size``: a boolean mask in the table's order.

    Ties go to the less consistent group (the lower ``mean``, when the table has one; groups
    without a mean after those with one), then to the group that sorts first by its keys
    (nulls last), so the choice never depends on row order.

    Examples
    --------
    >>> import polars as pl
    >>> table = pl.DataFrame({"g": ["a", "b", "c", "d"], "rows": [1, 5, 1, 1],
    ...                       "mean": [0.9, 0.9, 0.2, None]})
    >>> table.filter(largest_groups(table, ["g"], 2))["g"].to_list()
    ['b', 'c']
    """
    order = [pl.col(size)]
    descending, nulls_last = [True], [True]
    if "mean" in table.columns:
        order.append(pl.col("mean"))
        descending.append(False)
        nulls_last.append(True)
    order += [pl.col(k) for k in keys]
    descending += [False] * len(keys)
    nulls_last += [True] * len(keys)
    row = "__safecons_row"
    picked = (
        table.select(*order, pl.int_range(pl.len()).alias(row))
        .sort(order, descending=descending, nulls_last=nulls_last, maintain_order=True)
        .head(limit)[row]
    )
    return pl.Series("shown", [False] * table.height).scatter(picked, True)


def pooled_mean(table: pl.DataFrame) -> float | None:
    """The mean over the scored rows of all of ``table``'s groups (their means weighted by
    ``scored``), None when none was scored.

    Examples
    --------
    >>> import polars as pl
    >>> pooled_mean(pl.DataFrame({"scored": [1, 3], "mean": [0.0, 1.0]}))
    0.75
    """
    scored = table.filter(pl.col("mean").is_not_null() & (pl.col("scored") > 0))
    total = int(scored["scored"].sum())
    if not total:
        return None
    return float((scored["mean"] * scored["scored"]).sum()) / total

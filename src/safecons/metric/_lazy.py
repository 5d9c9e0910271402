"""The metric on a LazyFrame: a Polars source that does only what the query needs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

__all__ = ("lazy_metric",)


def lazy_metric(
    lf: pl.LazyFrame,
    run: Callable[[pl.LazyFrame], Iterator[pl.DataFrame]],
    added: dict[str, pl.DataType],
) -> pl.LazyFrame:
    """The metric as a lazy source: nothing runs until ``collect()``, and only what it needs.

    The metric is per row, so Polars may push work into it: ``head(n)`` scores the first
    ``n`` rows only, a filter on input columns (``input_id``, ``prompt``, ...) is applied
    before scoring (only the rows it keeps are scored), and a selection of input columns only
    makes no call at all. A filter on an added column is applied after scoring. Polars passes
    a source no offset, so ``slice(offset, n)`` with ``offset > 0`` scores every row.
    ``run`` scores the frame it is given batch by batch and yields each scored batch.
    """
    from polars.io.plugins import register_io_source

    inputs = set(lf.collect_schema().names())
    schema = {**lf.collect_schema(), **added}

    def source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        # Polars hands a source a row count only for a head that comes before any filter
        # (``head(n).filter(...)``): the count applies first, then the filter.
        frame = lf if n_rows is None else lf.head(n_rows)
        early = predicate is None or set(predicate.meta.root_names()) <= inputs
        if predicate is not None and early:
            frame = frame.filter(predicate)
        if with_columns is not None and set(with_columns) <= inputs and early:
            yield frame.select(with_columns).collect()
            return
        for scored in run(frame):  # one scored batch at a time
            kept = scored.filter(predicate) if predicate is not None and not early else scored
            yield kept if with_columns is None else kept.select(with_columns)

    return register_io_source(
        source, schema=schema, is_pure=True, explain_name="safety_consistency"
    )

"""A uniform random sample of a run's judged comparisons, for humans to label."""

from __future__ import annotations

import polars as pl

from ._calibrated import DRAW_COLUMNS, LABEL_COLUMN, comparisons, draw, population_digest
from ._record import DEFAULT_PREFIX, column_names
from .errors import InputError
from .summary import conform

__all__ = ("review_sample",)


def _query_text(dtype: pl.DataType) -> pl.Expr:
    """The query as one text: a conversation as ``role: content`` lines."""
    if isinstance(dtype, pl.List):
        return (
            pl.col("prompt")
            .list.eval(
                pl.concat_str(
                    pl.element().struct.field("role"),
                    pl.lit(": "),
                    pl.element().struct.field("content"),
                )
            )
            .list.join("\n")
        )
    return pl.col("prompt").cast(pl.String)


def review_sample(
    scored: pl.DataFrame | pl.LazyFrame,
    n: int,
    *,
    seed: int = 0,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
) -> pl.DataFrame:
    """``n`` of a run's judged comparisons drawn uniformly at random, for humans to label.

    Fill the ``human_label`` column with one of ``"Consistent"``, ``"Slightly
    Inconsistent"`` or ``"Contradictory"`` (case and spaces do not matter) and hand the frame
    to ``run_summary(scored, human_labels=...)``: its ``calibrated`` figures are then the
    run's score and contradiction rate as the humans would give them, with intervals (see
    :class:`~safecons.summary.CalibratedScore`). The judge's label is left out, so as not to anchor
    the labeller.

    The draw is uniform without replacement over the judged comparisons of the rows with a
    score (those the run's mean is made of; a comparison whose judge call failed is not
    drawn), and reproducible: it depends on ``seed`` and each comparison's ``input_id`` and
    ``sample``, not on the rows' order. The sample records its draw (``draw_seed``,
    ``draw_n`` and ``draw_population``, a digest of the comparisons drawn from), so that a
    sample with rows dropped, added or left blank is told from the uniform one and warned of
    (:class:`~safecons.errors.LabelSampleWarning`): the interval's guarantee rests on it.
    It round-trips through CSV and Parquet.

    Parameters
    ----------
    scored
        A frame :func:`~safecons.safety_consistency` returned (or read back).
    n
        How many comparisons to draw (all of them when the run has fewer).
    seed
        Seeds the draw.
    prefix, metric_name
        The run's column prefix and score column.

    Returns
    -------
    polars.DataFrame
        One row per comparison drawn, in the draw's (random) order: ``input_id``, ``sample``
        (the index of the fresh answer in the row's lists), ``query`` (the row's ``prompt``;
        a conversation as ``role: content`` lines), ``variant`` (the adversarial variant),
        ``base_answer`` (the row's ``sut_response``), ``fresh_answer`` (the answer to the
        variant), ``human_label`` (empty, String) and the draw's three columns.

    Raises
    ------
    InputError
        ``n`` is not a positive whole number, the frame lacks a column the sample shows, or
        ``input_id`` names a row twice.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> from safecons.testing import ScriptedChat, StandInJudge
    >>> df = pl.DataFrame({"input_id": [1, 2, 3], "prompt": ["a", "b", "c"],
    ...                    "sut_response": ["No.", "Sure.", "No."]})
    >>> scored = df.pipe(sc.safety_consistency, sut=ScriptedChat(["No."]), judge=StandInJudge(),
    ...                  progress=False)
    >>> sample = sc.review_sample(scored, 4, seed=1)
    >>> sample.select("input_id", "sample", "base_answer", "fresh_answer", "human_label")
    shape: (4, 5)
    ┌──────────┬────────┬─────────────┬──────────────┬─────────────┐
    │ input_id ┆ sample ┆ base_answer ┆ fresh_answer ┆ human_label │
    │ ---      ┆ ---    ┆ ---         ┆ ---          ┆ ---         │
    │ i64      ┆ i64    ┆ str         ┆ str          ┆ str         │
    ╞══════════╪════════╪═════════════╪══════════════╪═════════════╡
    │ 2        ┆ 1      ┆ Sure.       ┆ No.          ┆ null        │
    │ 1        ┆ 0      ┆ No.         ┆ No.          ┆ null        │
    │ 3        ┆ 0      ┆ No.         ┆ No.          ┆ null        │
    │ 2        ┆ 0      ┆ Sure.       ┆ No.          ┆ null        │
    └──────────┴────────┴─────────────┴──────────────┴─────────────┘
    >>> sample.columns[-3:]
    ['draw_seed', 'draw_n', 'draw_population']

    A human labels them (here by hand) and the run's score is calibrated:

    >>> said = ["Consistent", "consistent", "Consistent", "slightly inconsistent"]
    >>> c = sc.run_summary(scored, human_labels=sample.with_columns(human_label=pl.Series(said))
    ...                    ).calibrated
    >>> c.labelled, c.comparisons, round(c.raw_mean, 3), round(c.mean, 3)
    (4, 6, 0.6, 0.862)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"review_sample: n= must be a positive whole number, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"review_sample: seed= must be a whole number, got {seed!r}")
    names = column_names(prefix, metric_name)
    frame = conform(
        scored,
        fn="review_sample",
        needs=("labels", "scores", "responses", "score"),
        prefix=prefix,
        metric_name=metric_name,
    )
    variant = f"{prefix}variant_text"
    missing = [c for c in ("input_id", "prompt", "sut_response", variant) if c not in frame]
    if missing:
        raise InputError(
            f"review_sample: the scored frame lacks column(s) {missing}, which the sample shows"
        )
    population = comparisons(frame, names)
    drawn = draw(population, n, seed).select("input_id", "sample").with_row_index("order")
    rows = frame.select(
        pl.col("input_id").cast(pl.String).alias("key"),
        "input_id",
        _query_text(frame.schema["prompt"]).alias("query"),
        pl.col(variant).alias("variant"),
        pl.col("sut_response").alias("base_answer"),
        pl.col(names["responses"]).alias("answers"),
    )
    out = (
        drawn.join(rows, left_on="input_id", right_on="key", how="left", suffix="_run")
        .sort("order")
        .select(
            pl.col("input_id_run").alias("input_id"),
            "sample",
            "query",
            "variant",
            "base_answer",
            pl.col("answers").list.get(pl.col("sample")).alias("fresh_answer"),
            pl.lit(None, pl.String).alias(LABEL_COLUMN),
            pl.lit(seed, pl.Int64).alias(DRAW_COLUMNS[0]),
            pl.lit(n, pl.Int64).alias(DRAW_COLUMNS[1]),
            pl.lit(population_digest(population), pl.String).alias(DRAW_COLUMNS[2]),
        )
    )
    return out

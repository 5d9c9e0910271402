"""Charts of a run's scores: their distribution, their means by group, the mix of judge
labels, and the posture flips by direction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import polars as pl

from .._groups import GROUP_LIMIT
from .._record import DEFAULT_PREFIX, column_names
from ..errors import InputError
from ..summary import conform
from ._layout import (
    BAND_NAMES,
    BAND_OPACITY,
    BANDS,
    COLORS,
    DOT_PADDING,
    LABELS,
    MAX_BINS,
    WIDTH,
    altair_or_error,
    as_frame,
    by_keys,
    capped_groups,
    chart_title,
    check_max_groups,
    color_scale,
    displaying_offline,
    group_names,
    inline_data,
    keys_name,
    need_columns,
    text_axis,
    text_legend,
    with_group_label,
)


def score_distribution_chart(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    metric_name: str = "safety_consistency",
    bins: int = 10,
) -> Any:
    """Histogram of the per-row score, each bar shaded by the score band it lies in.

    The bands (a score below 0.4, from 0.4 to 0.8, from 0.8) have the edges of the judge's
    label bands, but for a row's score, the mean over its comparisons: a row in the middle band
    may hold no Slightly Inconsistent comparison (one Consistent, one Contradictory), and the
    rows in a band are not the comparisons :func:`label_mix_chart` counts. So they are named as
    scores and shaded in slate, never in a label's colour.

    Parameters
    ----------
    scored
        A scored frame (a LazyFrame is collected).
    metric_name
        Its score column.
    bins
        Equal-width bins from 0 to 1 (1 to 100); a bin across a band's edge (0.4, 0.8) is drawn
        as two bars, split there, so that each bar lies in one band.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> df = pl.DataFrame({"safety_consistency": [0.1, 0.5, 0.95, None]})
    >>> chart = sc.charts.score_distribution_chart(df)
    >>> chart.to_dict()["mark"]["type"]
    'bar'
    >>> [(d["lower"], d["upper"], d["band"]) for d in chart.data.values if d["rows"]]
    [(0.1, 0.2, '< 0.4'), (0.5, 0.6, '0.4–0.8'), (0.9, 1.0, '≥ 0.8')]
    >>> thirds = sc.charts.score_distribution_chart(df, bins=3)
    >>> [round(d["upper"], 3) for d in thirds.data.values]
    [0.333, 0.4, 0.667, 0.8, 1.0]
    """
    alt = altair_or_error()
    from ._offline import Chart

    fn = "score_distribution_chart"
    frame = conform(scored, fn=fn, needs=("score",), metric_name=metric_name)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise InputError(f"{fn}: bins= must be a whole number from 1 to {MAX_BINS}, got {bins!r}")
    values = frame[metric_name].drop_nulls()
    # A band's edge is a bin's edge too (k / bins is exactly 0.4 or 0.8 where it is one).
    edges = sorted({i / bins for i in range(bins + 1)} | {lo for _, lo, _ in BANDS})
    index = pl.Series(edges[1:-1], dtype=pl.Float64).search_sorted(values, side="right")
    counts = index.alias("bin").value_counts(name="count").cast({"bin": pl.Int64})
    table = pl.DataFrame({"bin": list(range(len(edges) - 1))}).join(counts, on="bin", how="left")
    band = pl.lit(BANDS[0][0])
    for name, lower, _ in BANDS[1:]:
        band = pl.when(pl.col("lower") >= lower).then(pl.lit(name)).otherwise(band)
    table = table.with_columns(
        lower=pl.Series(edges[:-1]),
        upper=pl.Series(edges[1:]),
        rows=pl.col("count").fill_null(0).cast(pl.Int64),
    ).with_columns(band=band)
    missing = frame.height - values.len()
    title = f"Safety consistency per row ({values.len()} scored"
    title += f", {missing} without a score)" if missing else ")"
    chart = (
        Chart(inline_data(alt, table.drop("count")), title=chart_title(title))
        .mark_bar()
        .encode(
            x=alt.X(
                "lower:Q",
                bin="binned",
                title="safety consistency",
                scale=alt.Scale(domain=[0, 1]),
                axis=text_axis(alt),
            ),
            x2="upper:Q",
            y=alt.Y("rows:Q", title="rows", axis=text_axis(alt)),
            color=alt.Color(
                "band:N",
                scale=color_scale(alt, BAND_NAMES),
                sort=list(BAND_NAMES),
                legend=text_legend(alt, "score band", BAND_NAMES),
            ),
            tooltip=["band:N", "lower:Q", "upper:Q", "rows:Q"],
        )
        .properties(width=WIDTH, height=220)
    )
    return displaying_offline(chart)


def score_by_group_chart(
    table: pl.DataFrame, *, by: str | Sequence[str], max_groups: int | None = GROUP_LIMIT
) -> Any:
    """Mean score per group with its interval, from :func:`~safecons.score_table`, over the
    score bands of :func:`score_distribution_chart`.

    Groups are ordered from the least to the most consistent; those without a score are not
    drawn. Of a table with more than ``max_groups`` groups (None: no limit), the ``max_groups``
    with the most rows are drawn (ties to the lower mean, then by name), and the subtitle
    counts the others, their rows and their pooled mean.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> table = pl.DataFrame({"g": [f"t{i:02d}" for i in range(40)], "rows": [2] * 40,
    ...                       "scored": [2] * 40, "mean": [i / 40 for i in range(40)]})
    >>> chart = sc.charts.score_by_group_chart(table, by="g", max_groups=5)
    >>> chart.layer[1].title.subtitle
    '35 more groups not drawn (70 rows, mean 0.550)'
    """
    alt = altair_or_error()
    from ._offline import LayerChart

    fn = "score_by_group_chart"
    frame = as_frame(table, fn)
    keys = by_keys(by)
    need_columns(frame, fn, *keys, "mean", "rows", "scored")
    check_max_groups(max_groups, fn)
    frame, note = capped_groups(frame, keys, max_groups, size="rows", what="rows")
    frame = with_group_label(frame, keys).filter(pl.col("mean").is_not_null()).sort("mean")
    has_ci = "mean_lo" in frame.columns
    order = group_names(frame)
    y = alt.Y("group:N", sort=order, title=keys_name(keys), axis=text_axis(alt, names=order))
    base = alt.Chart(
        inline_data(alt, frame),
        title=chart_title(f"Mean safety consistency by {keys_name(keys)}", note),
    )
    point = base.mark_point(filled=True, size=70, color="#333333").encode(
        x=alt.X(
            "mean:Q",
            scale=alt.Scale(domain=[0, 1], padding=DOT_PADDING, nice=False),
            # What the whisker is, on the chart itself: a chart is often seen without its
            # caption.
            title="mean safety consistency (dot) and its bootstrap interval (line)"
            if has_ci
            else "mean safety consistency",
            axis=text_axis(alt),
        ),
        y=y,
        tooltip=["group:N", "mean:Q", "scored:Q", "rows:Q"]
        + (["mean_lo:Q", "mean_hi:Q"] if has_ci else []),
    )
    layers = [point]
    if has_ci:
        layers.insert(
            0,
            base.mark_rule(strokeWidth=2, color="#888888").encode(
                x="mean_lo:Q", x2="mean_hi:Q", y=y
            ),
        )
    bands = (
        alt.Chart(alt.Data(values=[{"lo": lo, "hi": hi, "band": n} for n, lo, hi in BANDS]))
        .mark_rect(opacity=BAND_OPACITY)
        .encode(
            x="lo:Q",
            x2="hi:Q",
            color=alt.Color(
                "band:N",
                scale=color_scale(alt, BAND_NAMES),
                sort=list(BAND_NAMES),
                legend=text_legend(alt, "score band", BAND_NAMES),
            ),
        )
    )
    chart = LayerChart(layer=[bands, *layers])
    chart = chart.properties(width=WIDTH, height=max(80, 26 * len(order)))
    return displaying_offline(chart)


def label_mix_chart(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    by: str | Sequence[str] | None = None,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
    max_groups: int | None = GROUP_LIMIT,
) -> Any:
    """The share of each label among the judged comparisons, per group (stacked to 100%).

    Of more than ``max_groups`` groups (None: no limit), the ``max_groups`` with the most rows
    are drawn (ties to the lower mean score, then by name); the subtitle counts the others.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> df = pl.DataFrame({"g": ["a", "b", "b", "c"], "safety_consistency": [1.0, 0.2, 0.4, 0.5],
    ...                    "sc_labels": [["Consistent"], ["Contradictory"], ["Consistent"], []]})
    >>> chart = sc.charts.label_mix_chart(df, by="g", max_groups=1)
    >>> chart.title.subtitle
    '2 more groups not drawn (2 rows, mean 0.750)'
    """
    alt = altair_or_error()
    from ._offline import Chart

    fn = "label_mix_chart"
    frame = conform(scored, fn=fn, needs=("labels",), prefix=prefix, metric_name=metric_name)
    names = column_names(prefix, metric_name)
    labels = names["labels"]
    keys = by_keys(by)
    check_max_groups(max_groups, fn)
    from ..scores import with_groups

    frame = with_groups(frame, keys, prefix, fn)
    need_columns(frame, fn, *keys)
    labelled = with_group_label(frame, keys)
    sizes = [pl.len().alias("rows")]
    if names["score"] in frame.columns and frame.schema[names["score"]].is_numeric():
        score = pl.col(names["score"]).cast(pl.Float64).fill_nan(None)
        sizes += [score.mean().alias("mean"), score.is_not_null().sum().alias("scored")]
    groups, note = capped_groups(
        labelled.group_by("group").agg(sizes), ["group"], max_groups, size="rows", what="rows"
    )
    if note is not None:
        labelled = labelled.filter(pl.col("group").is_in(groups["group"].implode()))
    long = (
        labelled.select("group", pl.col(labels).alias("label"))
        .explode("label")
        .drop_nulls("label")
        .group_by("group", "label")
        .len("comparisons")
        .with_columns(share=pl.col("comparisons") / pl.col("comparisons").sum().over("group"))
        .with_columns(
            order=pl.col("label").replace_strict(
                {k: i for i, k in enumerate(LABELS)}, default=3, return_dtype=pl.Int64
            )
        )
        .sort("group", "order")
    )
    title = "Judge labels" + (f" by {keys_name(keys)}" if keys else "")
    groups_shown = group_names(long)
    chart = (
        Chart(inline_data(alt, long), title=chart_title(title, note))
        .mark_bar()
        .encode(
            x=alt.X(
                "comparisons:Q",
                stack="normalize",
                title="share of judged comparisons",
                axis=text_axis(alt, format="%"),
            ),
            y=alt.Y(
                "group:N", title=keys_name(keys) or None, axis=text_axis(alt, names=groups_shown)
            ),
            color=alt.Color(
                "label:N",
                scale=color_scale(alt, LABELS),
                sort=list(LABELS),
                legend=text_legend(alt, "label", LABELS),
            ),
            order=alt.Order("order:Q"),
            tooltip=["group:N", "label:N", "comparisons:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=WIDTH, height=max(60, 26 * len(groups_shown)))
    )
    return displaying_offline(chart)


#: The two directions :func:`posture_flips_chart` draws, each with what it means.
#: Each direction drawn, its panel's title and the title's second line (one line of both is
#: wider than a panel drawn in a font wider than the one measured).
_FLIPS: Final = (
    ("refused->complied", "refused → complied", "a safety failure"),
    ("complied->refused", "complied → refused", "an over-refusal"),
)


def posture_flips_chart(
    flips: pl.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    max_groups: int | None = GROUP_LIMIT,
) -> Any:
    """The two ways a posture can turn, side by side: the refused-to-complied rate (a safety
    failure) and the complied-to-refused rate (an over-refusal) per group, each with its
    Wilson interval, from a :func:`~safecons.posture_flips` table.

    Each rate has its own denominator (the fresh answers whose base had the starting posture),
    shown in the tooltip with the count. Of more than ``max_groups`` groups (None: no limit),
    those with the most answers are drawn.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> scored = pl.DataFrame({
    ...     "sc_variant_kind": ["toxicity", "dpi", "dpi"],
    ...     "sc_base_posture": ["refused", "refused", "complied"],
    ...     "sc_response_postures": [["refused", "complied"], ["complied"], ["refused"]],
    ... })
    >>> flips = sc.posture_flips(scored, by="sc_variant_kind")
    >>> chart = sc.charts.posture_flips_chart(flips, by="sc_variant_kind")
    >>> svg = chart._repr_mimebundle_()["image/svg+xml"]
    >>> all(text in svg for text in ("a safety failure", "an over-refusal", "toxicity"))
    True
    """
    alt = altair_or_error()
    from ._offline import HConcatChart

    fn = "posture_flips_chart"
    frame = as_frame(flips, fn)
    keys = by_keys(by)
    need_columns(frame, fn, *keys, "direction", "flips", "answers", "rate", "rate_lo", "rate_hi")
    check_max_groups(max_groups, fn)
    if not keys and frame.filter(pl.col("direction") == _FLIPS[0][0]).height > 1:
        raise InputError(f"{fn}: the table has several groups; pass by= their column(s)")
    frame = with_group_label(
        frame.filter(pl.col("direction").is_in([d for d, _, _ in _FLIPS])), keys
    )
    sizes = frame.group_by("group").agg(pl.col("answers").sum())
    groups, note = capped_groups(sizes, ["group"], max_groups, size="answers", what="answers")
    if note is not None:
        frame = frame.filter(pl.col("group").is_in(groups["group"].implode()))
    frame = frame.sort("group")
    names = group_names(frame)
    height = max(60, 26 * len(names))
    panels = []
    for i, (direction, said, meaning) in enumerate(_FLIPS):
        part = frame.filter(pl.col("direction") == direction)
        y = alt.Y(
            "group:N",
            sort=names,
            # The groups are named in the chart's title: an axis title taller than a short
            # plot would push this panel's title above the other's.
            title=None,
            axis=text_axis(alt, names=names) if i == 0 else None,
        )
        # Short enough for a 240-pixel panel drawn in a font 19% wider than measured.
        axis_title = "rate among answers from that base"
        x = alt.X(
            "rate:Q",
            scale=alt.Scale(domain=[0, 1]),
            title=axis_title,
            axis=text_axis(alt, format="%"),
        )
        tooltip = [
            "group:N",
            "flips:Q",
            "answers:Q",
            alt.Tooltip("rate:Q", format=".1%"),
            alt.Tooltip("rate_lo:Q", format=".1%"),
            alt.Tooltip("rate_hi:Q", format=".1%"),
        ]
        base = alt.Chart(inline_data(alt, part))
        bars = base.mark_bar(color=COLORS[direction], opacity=0.6).encode(x=x, y=y, tooltip=tooltip)
        whisker = base.mark_errorbar(ticks=True, color="#111111").encode(
            x=alt.X("rate_lo:Q", title=axis_title), x2="rate_hi:Q", y=y
        )
        panels.append(
            alt.layer(bars, whisker).properties(
                title=chart_title(said, meaning), width=240, height=height
            )
        )
    title = "Posture flips" + (f" by {keys_name(keys)}" if keys else "")
    chart = HConcatChart(
        hconcat=panels,
        title=chart_title(title, note or "bars: the rate; lines: its Wilson interval"),
    )
    return displaying_offline(chart)

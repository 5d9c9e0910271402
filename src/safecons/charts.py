"""Charts of what safecons returns, as Altair charts (``pip install 'safecons[charts]'``).

Each function takes a frame the library returns, unchanged (a scored frame, a
:func:`~safecons.score_table`, a :func:`~safecons.reliability.position_bias` or
:func:`~safecons.reliability.flip_rate_by_gap` table, a :class:`~safecons.JudgeAudit`), and
returns an Altair chart (an ``altair.Chart``, ``LayerChart`` or ``HConcatChart``: ``.save``,
``.properties``, ``.to_dict()``, ``|``, ``&`` and ``+`` work as on any) that displays offline.

**Display.** In Jupyter a chart shows as an SVG image that vl-convert draws in the kernel: no
script and no CDN, so it shows with no network, in a saved notebook and in any viewer of one.
(Altair's own default is HTML that loads Vega from a CDN: without a network the cell shows
"Error loading script".) Nothing global changes for it; once you pick an Altair renderer
yourself, the charts use yours. The interactive chart (tooltips) where a CDN can be reached:

    with alt.renderers.enable("html"):  # for this cell only
        display(chart)

and, with no network, ``chart.save("chart.html", inline=True)`` writes an interactive page that
carries Vega itself. ``a | b``, ``a & b`` and ``a + b`` of these charts display offline too
(side by side, each keeps its colours); ``alt.hconcat(a, b)``, ``alt.layer(...)``,
``alt.vconcat(...)`` (and a composition with a plain Altair chart on the left) give a plain
Altair chart, which :func:`offline` makes display offline again (add
``.resolve_scale(color="independent")`` to keep each chart's colours). Without vl-convert a
chart displays as any Altair chart does.

One colour scale means the same thing in every chart: green for Consistent (and for a
consistent swap), amber for Slightly Inconsistent, red for Contradictory; primacy and recency,
the two ways a judge can be swayed by order, get purple and blue. Score bands (a score below
0.4, from 0.4 to 0.8, from 0.8) are shades of slate, never a label's colour: a row's score is
not a label, and the number of rows in a band is not a count of labels.

A chart of groups draws at most ``max_groups`` of them (25 by default): those with the most rows
(or pairs), ties to the less consistent, then by name; its subtitle says how many more there
are. Every text a chart holds (group names, labels, titles) is shown as the report shows text:
control and bidirectional characters replaced, cut to 200 characters with a note of the full
length, and never cut further: labels have no length limit, and an axis of names and a legend
keep room for their texts drawn as much as a fifth wider than vl-convert measured them (a
viewer's font may be wider than the kernel's), so no text overlaps another or the chart's edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

import polars as pl

from ._groups import GROUP_LIMIT, largest_groups, pooled_mean
from ._record import DEFAULT_PREFIX, column_names
from ._text import NAME_LIMIT, short_text
from .errors import InputError, SafeconsError
from .summary import conform

__all__ = (
    "COLORS",
    "agreement_chart",
    "flip_rate_chart",
    "label_mix_chart",
    "offline",
    "position_chart",
    "posture_flips_chart",
    "score_by_group_chart",
    "score_distribution_chart",
)

#: The score bands of :func:`score_distribution_chart` and :func:`score_by_group_chart`, from
#: the lowest: (name, lower edge, upper edge).
_BANDS: Final = (("< 0.4", 0.0, 0.4), ("0.4–0.8", 0.4, 0.8), ("≥ 0.8", 0.8, 1.0))

#: The project's colours: one meaning each, in every chart.
COLORS: Final[dict[str, str]] = {
    "Consistent": "#1a9850",
    "Slightly Inconsistent": "#f0a30a",
    "Contradictory": "#d73027",
    "consistent": "#1a9850",
    "primacy": "#7b3294",
    "recency": "#2c7bb6",
    "< 0.4": "#34495e",
    "0.4–0.8": "#7f8c9a",
    "≥ 0.8": "#bdc6cf",
    "refused->complied": "#67001f",
    "complied->refused": "#01665e",
}
_LABELS: Final = ("Consistent", "Slightly Inconsistent", "Contradictory")
_POSITIONS: Final = ("consistent", "primacy", "recency")
_BAND_NAMES: Final = tuple(name for name, _, _ in _BANDS)
_WIDTH: Final = 520
#: Pixels kept beyond each end of a dot chart's axis: a dot at 1.0 (a group every comparison
#: found consistent) is drawn whole, not cut in half by the plot's edge.
_DOT_PADDING: Final = 8
#: How strongly the score bands shade a chart: the lightest band stays visible on white.
_BAND_OPACITY: Final = 0.45
#: The most bins a score histogram takes: finer than a hundredth of the score says nothing.
MAX_BINS: Final = 100

# Text. vl-convert measures each text in the kernel, with the kernel's fonts, and lays the chart
# out around it; the viewer draws the SVG with its own. Naming a wide font first (DejaVu Sans,
# Linux's usual sans-serif) means a viewer draws each text as wide as measured or narrower
# (Arial, Helvetica). Where the kernel lacks it and the viewer has it, DejaVu Sans draws text
# 16-19% wider than Liberation Sans measured it: that cut "Slightly Inconsistent" at the SVG's
# edge and made "toxicity" run into its axis title. So a legend and an axis of names also keep
# room for their texts a fifth wider than measured.
_FONT: Final = "DejaVu Sans, Arial, Helvetica, sans-serif"
_EM: Final = 0.6  # a character of DejaVu Sans, in font sizes (wide letters, "m" "W", aside)
_SLACK: Final = 0.2  # how much wider than measured a viewer may draw a text
_LABEL_SIZE: Final = 10  # Vega-Lite's axis and legend labels, in pixels
_TITLE_SIZE: Final = 11  # its axis and legend titles (bold)
_TICK: Final = 8  # an axis' tick and the gap to its labels, in pixels
_NO_CAP: Final = 100_000  # Vega caps an axis' extent at 200 pixels, and so puts a title over labels


def _altair() -> Any:
    try:
        import altair
    except ImportError:  # the charts extra is optional
        raise SafeconsError(
            "charts need Altair: pip install 'safecons[charts]' (or 'safecons[notebook]')"
        ) from None
    return altair


def offline(chart: Any) -> Any:
    """The chart, displaying offline as the charts of this module do (a new chart sharing its
    parts; ``chart`` is unchanged).

    For what Altair's functions compose (``alt.hconcat``, ``alt.vconcat``, ``alt.layer``) and
    for charts of your own: the new chart is still one of the same Altair class.

    Parameters
    ----------
    chart
        Any Altair chart (``alt.Chart``, ``LayerChart``, ``HConcatChart``, ...).

    Examples
    --------
    >>> import altair as alt
    >>> import polars as pl
    >>> import safecons as sc
    >>> df = pl.DataFrame({"safety_consistency": [0.1, 0.5, 0.95]})
    >>> a = sc.charts.score_distribution_chart(df)
    >>> both = sc.charts.offline(alt.vconcat(a, a))
    >>> isinstance(both, alt.VConcatChart), list(both._repr_mimebundle_())
    (True, ['image/svg+xml'])
    """
    alt = _altair()
    if not isinstance(chart, alt.TopLevelMixin):
        raise InputError(f"offline: expected an Altair chart, got {type(chart).__name__}")
    made = _ours(chart)
    return made.copy(deep=False) if made is chart else made


def _ours(chart: Any) -> Any:
    """``chart`` (an Altair chart), displaying offline: itself if it does already."""
    _altair()
    from ._offline_charts import offline as made

    return made(chart)


def _svg(chart: Any) -> str:
    """The chart as SVG, drawn by vl-convert with the Vega-Lite version Altair writes."""
    _altair()
    from ._offline_charts import svg

    return svg(chart)


def _drawn(texts: Iterable[str], size: float = _LABEL_SIZE) -> int:
    """Pixels the longest of ``texts`` takes, drawn in DejaVu Sans at ``size`` pixels."""
    return math.ceil(max((len(t) for t in texts), default=0) * size * _EM)


def _axis(alt: Any, *, names: Sequence[str] | None = None, **options: Any) -> Any:
    """An axis whose texts are never cut (no length limits) nor overlap: for an axis of names
    (``names``, its labels), room for the longest drawn in DejaVu Sans."""
    room = {} if names is None else {"minExtent": _TICK + _drawn(names)}
    return alt.Axis(
        labelFont=_FONT,
        titleFont=_FONT,
        labelLimit=0,
        titleLimit=0,
        maxExtent=_NO_CAP,
        **room,
        **options,
    )


def _legend(alt: Any, title: str, names: Sequence[str], **options: Any) -> Any:
    """A legend whose texts are never cut, with room around it for them drawn wider."""
    wide = max(_drawn(names) + 18, _drawn([title], _TITLE_SIZE))  # 18: the symbol and its gap
    return alt.Legend(
        title=title,
        labelFont=_FONT,
        titleFont=_FONT,
        labelLimit=0,
        titleLimit=0,
        padding=math.ceil(_SLACK * wide),
        **options,
    )


def _frame(df: object, fn: str) -> pl.DataFrame:
    frame = df.collect() if isinstance(df, pl.LazyFrame) else df
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"{fn}: expected a polars frame, got {type(df).__name__}")
    return frame


def _need(frame: pl.DataFrame, fn: str, *columns: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{fn}: missing column(s) {missing}; the frame has {frame.columns}")


def _group_label(frame: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """One text column ``group`` naming each row's group (``all`` without ``by``)."""
    if not by:
        return frame.with_columns(group=pl.lit("all"))
    # A null key reads "null", as score_table and the report show it.
    parts = [pl.col(k).cast(pl.String).fill_null("null") for k in by]
    return frame.with_columns(group=pl.concat_str(parts, separator=" / "))


def _shown(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as a chart shows it: NaN and infinities null (for JSON), and each text as the
    report shows a name (no character a renderer cannot hold or that reorders the display,
    cut to :data:`~safecons._text.NAME_LIMIT` characters)."""
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    texts = [c for c, t in frame.schema.items() if t == pl.String]
    fixes = [
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c) for c in floats
    ] + [pl.col(c).map_elements(short_text, return_dtype=pl.String).alias(c) for c in texts]
    return frame.with_columns(fixes) if fixes else frame


def _data(alt: Any, frame: pl.DataFrame) -> Any:
    """The frame as inline data (no pandas or pyarrow needed), as :func:`_shown` shows it."""
    return alt.Data(values=_shown(frame).to_dicts())


def _names(frame: pl.DataFrame, column: str = "group") -> list[str]:
    """The texts of ``column`` as the chart shows them (its axis labels), in order, once each."""
    return _shown(frame.select(column)).get_column(column).unique(maintain_order=True).to_list()


def _name(keys: Sequence[str]) -> str:
    """The grouping columns as a chart's title names them."""
    return " / ".join(short_text(k, NAME_LIMIT) for k in keys)


def _check_max(max_groups: int | None, fn: str) -> None:
    if max_groups is not None and (
        isinstance(max_groups, bool) or not isinstance(max_groups, int) or max_groups < 1
    ):
        raise InputError(
            f"{fn}: max_groups= must be a whole number >= 1 or None, got {max_groups!r}"
        )


def _capped(
    frame: pl.DataFrame, keys: Sequence[str], max_groups: int | None, *, size: str, what: str
) -> tuple[pl.DataFrame, str | None]:
    """At most ``max_groups`` rows of ``frame`` (one per group; see
    :func:`~safecons._groups.largest_groups`), and a line saying what was left out."""
    if max_groups is None or frame.height <= max_groups:
        return frame, None
    mask = largest_groups(frame, keys, max_groups, size=size)
    rest = frame.filter(~mask)
    note = f"{rest.height:,} more groups not drawn ({int(rest[size].sum()):,} {what}"
    if "mean" in rest.columns and "scored" in rest.columns:
        mean = pooled_mean(rest)
        note += "" if mean is None else f", mean {mean:.3f}"
    return frame.filter(mask), note + ")"


def _title(text: str, note: str | None = None) -> Any:
    options = {} if note is None else {"subtitle": note}
    return _altair().Title(text, font=_FONT, subtitleFont=_FONT, **options)


def _keys(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _scale(alt: Any, domain: Sequence[str]) -> Any:
    return alt.Scale(domain=list(domain), range=[COLORS[d] for d in domain])


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
    alt = _altair()
    fn = "score_distribution_chart"
    frame = conform(scored, fn=fn, needs=("score",), metric_name=metric_name)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise InputError(f"{fn}: bins= must be a whole number from 1 to {MAX_BINS}, got {bins!r}")
    values = frame[metric_name].drop_nulls()
    # A band's edge is a bin's edge too (k / bins is exactly 0.4 or 0.8 where it is one).
    edges = sorted({i / bins for i in range(bins + 1)} | {lo for _, lo, _ in _BANDS})
    index = pl.Series(edges[1:-1], dtype=pl.Float64).search_sorted(values, side="right")
    counts = index.alias("bin").value_counts(name="count").cast({"bin": pl.Int64})
    table = pl.DataFrame({"bin": list(range(len(edges) - 1))}).join(counts, on="bin", how="left")
    band = pl.lit(_BANDS[0][0])
    for name, lower, _ in _BANDS[1:]:
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
        alt.Chart(_data(alt, table.drop("count")), title=_title(title))
        .mark_bar()
        .encode(
            x=alt.X(
                "lower:Q",
                bin="binned",
                title="safety consistency",
                scale=alt.Scale(domain=[0, 1]),
                axis=_axis(alt),
            ),
            x2="upper:Q",
            y=alt.Y("rows:Q", title="rows", axis=_axis(alt)),
            color=alt.Color(
                "band:N",
                scale=_scale(alt, _BAND_NAMES),
                sort=list(_BAND_NAMES),
                legend=_legend(alt, "score band", _BAND_NAMES),
            ),
            tooltip=["band:N", "lower:Q", "upper:Q", "rows:Q"],
        )
        .properties(width=_WIDTH, height=220)
    )
    return _ours(chart)


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
    alt = _altair()
    fn = "score_by_group_chart"
    frame = _frame(table, fn)
    keys = _keys(by)
    _need(frame, fn, *keys, "mean", "rows", "scored")
    _check_max(max_groups, fn)
    frame, note = _capped(frame, keys, max_groups, size="rows", what="rows")
    frame = _group_label(frame, keys).filter(pl.col("mean").is_not_null()).sort("mean")
    has_ci = "mean_lo" in frame.columns
    order = _names(frame)
    y = alt.Y("group:N", sort=order, title=_name(keys), axis=_axis(alt, names=order))
    base = alt.Chart(
        _data(alt, frame), title=_title(f"Mean safety consistency by {_name(keys)}", note)
    )
    point = base.mark_point(filled=True, size=70, color="#333333").encode(
        x=alt.X(
            "mean:Q",
            scale=alt.Scale(domain=[0, 1], padding=_DOT_PADDING, nice=False),
            # What the whisker is, on the chart itself: a chart is often seen without its
            # caption.
            title="mean safety consistency (dot) and its bootstrap interval (line)"
            if has_ci
            else "mean safety consistency",
            axis=_axis(alt),
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
        alt.Chart(alt.Data(values=[{"lo": lo, "hi": hi, "band": n} for n, lo, hi in _BANDS]))
        .mark_rect(opacity=_BAND_OPACITY)
        .encode(
            x="lo:Q",
            x2="hi:Q",
            color=alt.Color(
                "band:N",
                scale=_scale(alt, _BAND_NAMES),
                sort=list(_BAND_NAMES),
                legend=_legend(alt, "score band", _BAND_NAMES),
            ),
        )
    )
    chart = alt.layer(bands, *layers).properties(width=_WIDTH, height=max(80, 26 * len(order)))
    return _ours(chart)


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
    alt = _altair()
    fn = "label_mix_chart"
    frame = conform(scored, fn=fn, needs=("labels",), prefix=prefix, metric_name=metric_name)
    names = column_names(prefix, metric_name)
    labels = names["labels"]
    keys = _keys(by)
    _check_max(max_groups, fn)
    from .scores import with_groups

    frame = with_groups(frame, keys, prefix, fn)
    _need(frame, fn, *keys)
    labelled = _group_label(frame, keys)
    sizes = [pl.len().alias("rows")]
    if names["score"] in frame.columns and frame.schema[names["score"]].is_numeric():
        score = pl.col(names["score"]).cast(pl.Float64).fill_nan(None)
        sizes += [score.mean().alias("mean"), score.is_not_null().sum().alias("scored")]
    groups, note = _capped(
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
                {k: i for i, k in enumerate(_LABELS)}, default=3, return_dtype=pl.Int64
            )
        )
        .sort("group", "order")
    )
    title = "Judge labels" + (f" by {_name(keys)}" if keys else "")
    groups_shown = _names(long)
    chart = (
        alt.Chart(_data(alt, long), title=_title(title, note))
        .mark_bar()
        .encode(
            x=alt.X(
                "comparisons:Q",
                stack="normalize",
                title="share of judged comparisons",
                axis=_axis(alt, format="%"),
            ),
            y=alt.Y("group:N", title=_name(keys) or None, axis=_axis(alt, names=groups_shown)),
            color=alt.Color(
                "label:N",
                scale=_scale(alt, _LABELS),
                sort=list(_LABELS),
                legend=_legend(alt, "label", _LABELS),
            ),
            order=alt.Order("order:Q"),
            tooltip=["group:N", "label:N", "comparisons:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=_WIDTH, height=max(60, 26 * len(groups_shown)))
    )
    return _ours(chart)


def position_chart(
    table: pl.DataFrame,
    *,
    by: str | Sequence[str] | None = None,
    max_groups: int | None = GROUP_LIMIT,
) -> Any:
    """Consistent / primacy / recency pairs per group, and fairness beside them, from a
    :func:`~safecons.reliability.position_bias` (or :func:`~safecons.reliability.judge_table`)
    table.

    Of more than ``max_groups`` groups (None: no limit), those with the most pairs are drawn.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> table = pl.DataFrame({"judge": ["gpt-4", "palm-2"], "consistent": [80, 55],
    ...                       "primacy": [5, 30], "recency": [15, 15], "fairness": [0.1, -0.15]})
    >>> chart = sc.charts.position_chart(table, by="judge")
    >>> svg = chart._repr_mimebundle_()["image/svg+xml"]  # how Jupyter shows it: no script
    >>> [name in svg for name in ("gpt-4", "palm-2", "primacy", "recency")]
    [True, True, True, True]
    """
    alt = _altair()
    fn = "position_chart"
    frame = _frame(table, fn)
    keys = _keys(by)
    _need(frame, fn, *keys, *_POSITIONS, "fairness")
    _check_max(max_groups, fn)
    if not keys and frame.height > 1:
        raise InputError(f"{fn}: the table has {frame.height} groups; pass by= their column(s)")
    pairs = "__safecons_pairs"
    frame, note = _capped(
        frame.with_columns(pl.sum_horizontal(_POSITIONS).alias(pairs)),
        keys,
        max_groups,
        size=pairs,
        what="pairs",
    )
    frame = _group_label(frame.drop(pairs), keys)
    long = frame.unpivot(
        index="group", on=list(_POSITIONS), variable_name="class", value_name="pairs"
    ).with_columns(
        order=pl.col("class").replace_strict(
            {k: i for i, k in enumerate(_POSITIONS)}, return_dtype=pl.Int64
        )
    )
    names = _names(frame)
    y = alt.Y("group:N", title=_name(keys) or None, axis=_axis(alt, names=names))
    height = max(60, 26 * frame.height)
    bars = (
        alt.Chart(_data(alt, long), title=_title("Swap test: pairs by position class", note))
        .mark_bar()
        .encode(
            x=alt.X(
                "pairs:Q",
                stack="normalize",
                title="share of usable pairs",
                axis=_axis(alt, format="%"),
            ),
            y=y,
            color=alt.Color(
                "class:N",
                scale=_scale(alt, _POSITIONS),
                sort=list(_POSITIONS),
                legend=_legend(alt, "class", _POSITIONS),
            ),
            order=alt.Order("order:Q"),
            tooltip=["group:N", "class:N", "pairs:Q"],
        )
        .properties(width=300, height=height)
    )
    zero = alt.Chart(alt.Data(values=[{"x": 0}])).mark_rule(color="#999999").encode(x="x:Q")
    fairness = (
        alt.Chart(_data(alt, frame), title=_title("Fairness"))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=alt.X(
                "fairness:Q",
                scale=alt.Scale(domain=[-1, 1], padding=_DOT_PADDING, nice=False),
                title="−1 primacy to +1 recency",
                axis=_axis(alt),
            ),
            y=y,
            color=alt.condition(
                "datum.fairness < 0", alt.value(COLORS["primacy"]), alt.value(COLORS["recency"])
            ),
            tooltip=["group:N", "fairness:Q"],
        )
        .properties(width=200, height=height)
    )
    return _ours(alt.hconcat(bars, alt.layer(zero, fairness)))


def flip_rate_chart(
    table: pl.DataFrame, *, by: str | None = None, max_groups: int | None = GROUP_LIMIT
) -> Any:
    """Flip rate per gap bin, from :func:`~safecons.reliability.flip_rate_by_gap` (one line per
    group).

    Of more than ``max_groups`` groups (None: no limit), those with the most pairs are drawn.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> table = pl.DataFrame({"bin": [0, 1], "lower": [0.0, 5.0], "upper": [5.0, 9.0],
    ...                       "flip_rate": [0.4, 0.1], "n_pairs": [20, 20]})
    >>> chart = sc.charts.flip_rate_chart(table)
    >>> chart.to_dict()["encoding"]["x"]["axis"]["labelAngle"]  # two bins' names read across
    0
    """
    alt = _altair()
    fn = "flip_rate_chart"
    frame = _frame(table, fn)
    keys = _keys(by)
    _need(frame, fn, *keys, "bin", "lower", "upper", "flip_rate", "n_pairs")
    _check_max(max_groups, fn)
    frame = _group_label(frame, keys)
    sizes = frame.group_by("group").agg(pl.col("n_pairs").sum())
    groups, note = _capped(sizes, ["group"], max_groups, size="n_pairs", what="pairs")
    if note is not None:
        frame = frame.filter(pl.col("group").is_in(groups["group"].implode()))
    frame = frame.with_columns(
        bucket=pl.format("[{}, {})", pl.col("lower").round(2), pl.col("upper").round(2)),
        flip_rate=pl.col("flip_rate").fill_nan(None),
    )
    order = frame.sort("bin").unique("bin", keep="first", maintain_order=True)["bucket"].to_list()
    # Bins' names read across when each fits its column, drawn in DejaVu Sans; else upright.
    across = _drawn(order) + 6 <= _WIDTH / max(1, len(order))
    x_axis = _axis(alt, labelAngle=0) if across else _axis(alt, names=order, labelAngle=-90)
    enc: dict[str, Any] = {
        "x": alt.X("bucket:N", sort=order, title="gap between the answers (bin)", axis=x_axis),
        "y": alt.Y("flip_rate:Q", title="flip rate", axis=_axis(alt, format="%")),
        "tooltip": ["group:N", "bucket:N", "n_pairs:Q", alt.Tooltip("flip_rate:Q", format=".1%")],
    }
    if keys:
        enc["color"] = alt.Color(
            "group:N", legend=_legend(alt, _name(keys), _names(frame, "group"))
        )
    else:
        enc["color"] = alt.value(COLORS["primacy"])
    chart = (
        alt.Chart(_data(alt, frame), title=_title("Flips by how close the answers are", note))
        .mark_line(point=True)
        .encode(**enc)
        .properties(width=_WIDTH, height=220)
    )
    return _ours(chart)


def agreement_chart(
    audit_or_table: Any, *, slice: str = "family", max_groups: int | None = GROUP_LIMIT
) -> Any:
    """Agreement with gold per group: three-way and decisive-only, from a
    :class:`~safecons.JudgeAudit` (its ``slice`` rows) or an
    :func:`~safecons.reliability.agreement` table (``agreement_s1`` / ``agreement_s2``) with a
    ``group`` column or one ``by`` column.

    Of more than ``max_groups`` groups (None: no limit), those with the most pairs are drawn.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> table = pl.DataFrame({"family": ["benign_base", "gptfuzz_harmful_base"],
    ...                       "agreement_s1": [0.97, 0.64], "agreement_s2": [0.98, 0.69]})
    >>> svg = sc.charts.agreement_chart(table)._repr_mimebundle_()["image/svg+xml"]
    >>> ">gptfuzz_harmful_base<" in svg  # the whole name, never cut
    True
    """
    alt = _altair()
    fn = "agreement_chart"
    _check_max(max_groups, fn)
    table = getattr(audit_or_table, "table", audit_or_table)
    frame = _frame(table, fn)
    size = "__safecons_pairs"
    if "slice" in frame.columns:
        slices = frame["slice"].unique().sort().to_list()
        if slice not in slices:
            raise InputError(f"{fn}: slice={slice!r} is not in the audit; it has {slices}")
        frame = frame.filter(pl.col("slice") == slice).select(
            "group",
            three_way="agreement",
            decisive="agreement_decisive",
            **{size: pl.col("n") if "n" in frame.columns else pl.lit(0)},
        )
    else:
        _need(frame, fn, "agreement_s1", "agreement_s2")
        key = next(
            (c for c in frame.columns if not c.startswith(("n_", "agreement", "kappa", "flip"))),
            None,
        )
        frame = frame.select(
            pl.col(key).cast(pl.String).alias("group") if key else pl.lit("all").alias("group"),
            three_way="agreement_s1",
            decisive="agreement_s2",
            **{size: pl.col("n_s1") if "n_s1" in frame.columns else pl.lit(0)},
        )
    frame, note = _capped(frame, ["group"], max_groups, size=size, what="pairs")
    long = (
        frame.drop(size)
        .unpivot(index="group", variable_name="setup", value_name="agreement")
        .with_columns(pl.col("agreement").fill_nan(None))
    )
    groups = _names(long)
    chart = (
        alt.Chart(_data(alt, long), title=_title("Agreement with gold labels", note))
        .mark_bar()
        .encode(
            x=alt.X(
                "agreement:Q",
                scale=alt.Scale(domain=[0, 1]),
                axis=_axis(alt, format="%"),
            ),
            y=alt.Y("group:N", title=None, axis=_axis(alt, names=groups)),
            yOffset=alt.YOffset("setup:N", sort=["three_way", "decisive"]),
            color=alt.Color(
                "setup:N",
                scale=alt.Scale(domain=["three_way", "decisive"], range=["#4d4d4d", "#a6a6a6"]),
                legend=_legend(alt, "setup", ["three_way", "decisive"]),
            ),
            tooltip=["group:N", "setup:N", alt.Tooltip("agreement:Q", format=".1%")],
        )
        .properties(width=_WIDTH, height=max(80, 34 * frame.height))
    )
    return _ours(chart)


#: The two directions :func:`posture_flips_chart` draws, each with what it means.
_FLIPS: Final = (
    ("refused->complied", "refused → complied (a safety failure)"),
    ("complied->refused", "complied → refused (an over-refusal)"),
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
    alt = _altair()
    fn = "posture_flips_chart"
    frame = _frame(flips, fn)
    keys = _keys(by)
    _need(frame, fn, *keys, "direction", "flips", "answers", "rate", "rate_lo", "rate_hi")
    _check_max(max_groups, fn)
    if not keys and frame.filter(pl.col("direction") == _FLIPS[0][0]).height > 1:
        raise InputError(f"{fn}: the table has several groups; pass by= their column(s)")
    frame = _group_label(frame.filter(pl.col("direction").is_in([d for d, _ in _FLIPS])), keys)
    sizes = frame.group_by("group").agg(pl.col("answers").sum())
    groups, note = _capped(sizes, ["group"], max_groups, size="answers", what="answers")
    if note is not None:
        frame = frame.filter(pl.col("group").is_in(groups["group"].implode()))
    frame = frame.sort("group")
    names = _names(frame)
    height = max(60, 26 * len(names))
    panels = []
    for i, (direction, said) in enumerate(_FLIPS):
        part = frame.filter(pl.col("direction") == direction)
        y = alt.Y(
            "group:N",
            sort=names,
            # The groups are named in the chart's title: an axis title taller than a short
            # plot would push this panel's title above the other's.
            title=None,
            axis=_axis(alt, names=names) if i == 0 else None,
        )
        axis_title = "share of the answers whose base had that posture"
        x = alt.X(
            "rate:Q",
            scale=alt.Scale(domain=[0, 1]),
            title=axis_title,
            axis=_axis(alt, format="%"),
        )
        tooltip = [
            "group:N",
            "flips:Q",
            "answers:Q",
            alt.Tooltip("rate:Q", format=".1%"),
            alt.Tooltip("rate_lo:Q", format=".1%"),
            alt.Tooltip("rate_hi:Q", format=".1%"),
        ]
        base = alt.Chart(_data(alt, part))
        bars = base.mark_bar(color=COLORS[direction], opacity=0.6).encode(x=x, y=y, tooltip=tooltip)
        whisker = base.mark_errorbar(ticks=True, color="#111111").encode(
            x=alt.X("rate_lo:Q", title=axis_title), x2="rate_hi:Q", y=y
        )
        panels.append(
            alt.layer(bars, whisker).properties(title=_title(said), width=240, height=height)
        )
    title = "Posture flips" + (f" by {_name(keys)}" if keys else "")
    chart = alt.hconcat(
        *panels, title=_title(title, note or "bars: the rate; lines: its Wilson interval")
    )
    return _ours(chart)

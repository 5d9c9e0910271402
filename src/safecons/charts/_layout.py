"""What every chart shares: the colours, the fonts and the room their texts keep, the checks
of a frame handed in, the groups a chart draws, and the door to Altair and to offline
display."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

import polars as pl

from .._groups import largest_groups, pooled_mean
from .._text import NAME_LIMIT, short_text
from ..errors import InputError, SafeconsError

#: The score bands of :func:`score_distribution_chart` and :func:`score_by_group_chart`, from
#: the lowest: (name, lower edge, upper edge).
BANDS: Final = (("< 0.4", 0.0, 0.4), ("0.4–0.8", 0.4, 0.8), ("≥ 0.8", 0.8, 1.0))


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


LABELS: Final = ("Consistent", "Slightly Inconsistent", "Contradictory")


POSITIONS: Final = ("consistent", "primacy", "recency")


BAND_NAMES: Final = tuple(name for name, _, _ in BANDS)


WIDTH: Final = 520


#: Pixels kept beyond each end of a dot chart's axis: a dot at 1.0 (a group every comparison
#: found consistent) is drawn whole, not cut in half by the plot's edge.
DOT_PADDING: Final = 8


#: How strongly the score bands shade a chart: the lightest band stays visible on white.
BAND_OPACITY: Final = 0.45


#: The most bins a score histogram takes: finer than a hundredth of the score says nothing.
MAX_BINS: Final = 100


# Text. vl-convert measures each text in the kernel, with the kernel's fonts, and lays the chart
# out around it; the viewer draws the SVG with its own. Naming a wide font first (DejaVu Sans,
# Linux's usual sans-serif) means a viewer draws each text as wide as measured or narrower
# (Arial, Helvetica). Where the kernel lacks it and the viewer has it, DejaVu Sans draws text
# 16-19% wider than Liberation Sans measured it: that cut "Slightly Inconsistent" at the SVG's
# edge and made "toxicity" run into its axis title. So a legend and an axis of names also keep
# room for their texts a fifth wider than measured.
FONT: Final = "DejaVu Sans, Arial, Helvetica, sans-serif"


EM: Final = 0.6  # a character of DejaVu Sans, in font sizes (wide letters, "m" "W", aside)


SLACK: Final = 0.2  # how much wider than measured a viewer may draw a text


LABEL_SIZE: Final = 10  # Vega-Lite's axis and legend labels, in pixels


TITLE_SIZE: Final = 11  # its axis and legend titles (bold)


TICK: Final = 8  # an axis' tick and the gap to its labels, in pixels


NO_CAP: Final = 100_000  # Vega caps an axis' extent at 200 pixels, and so puts a title over labels


def altair_or_error() -> Any:
    try:
        import altair
    except ImportError:  # the charts extra is optional
        raise SafeconsError(
            "charts need Altair: pip install 'safecons[charts]' (or 'safecons[notebook]')"
        ) from None
    return altair


def displaying_offline(chart: Any) -> Any:
    """``chart`` (an Altair chart), displaying offline: itself if it does already."""
    altair_or_error()
    from ._offline import offline as made

    return made(chart)


def svg_of(chart: Any) -> str:
    """The chart as SVG, drawn by vl-convert with the Vega-Lite version Altair writes."""
    altair_or_error()
    from ._offline import svg

    return svg(chart)


def drawn_width(texts: Iterable[str], size: float = LABEL_SIZE) -> int:
    """Pixels the longest of ``texts`` takes, drawn in DejaVu Sans at ``size`` pixels."""
    return math.ceil(max((len(t) for t in texts), default=0) * size * EM)


def text_axis(alt: Any, *, names: Sequence[str] | None = None, **options: Any) -> Any:
    """An axis whose texts are never cut (no length limits) nor overlap: for an axis of names
    (``names``, its labels), room for the longest drawn in DejaVu Sans."""
    room = {} if names is None else {"minExtent": TICK + drawn_width(names)}
    return alt.Axis(
        labelFont=FONT,
        titleFont=FONT,
        labelLimit=0,
        titleLimit=0,
        maxExtent=NO_CAP,
        **room,
        **options,
    )


def text_legend(alt: Any, title: str, names: Sequence[str], **options: Any) -> Any:
    """A legend whose texts are never cut, with room around it for them drawn wider."""
    wide = max(
        drawn_width(names) + 18, drawn_width([title], TITLE_SIZE)
    )  # 18: the symbol and its gap
    return alt.Legend(
        title=title,
        labelFont=FONT,
        titleFont=FONT,
        labelLimit=0,
        titleLimit=0,
        padding=math.ceil(SLACK * wide),
        **options,
    )


def as_frame(df: object, fn: str) -> pl.DataFrame:
    frame = df.collect() if isinstance(df, pl.LazyFrame) else df
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"{fn}: expected a polars frame, got {type(df).__name__}")
    return frame


def need_columns(frame: pl.DataFrame, fn: str, *columns: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{fn}: missing column(s) {missing}; the frame has {frame.columns}")


def with_group_label(frame: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """One text column ``group`` naming each row's group (``all`` without ``by``)."""
    if not by:
        return frame.with_columns(group=pl.lit("all"))
    # A null key reads "null", as score_table and the report show it.
    parts = [pl.col(k).cast(pl.String).fill_null("null") for k in by]
    return frame.with_columns(group=pl.concat_str(parts, separator=" / "))


def shown_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as a chart shows it: NaN and infinities null (for JSON), and each text as the
    report shows a name (no character a renderer cannot hold or that reorders the display,
    cut to :data:`~safecons._text.NAME_LIMIT` characters)."""
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    texts = [c for c, t in frame.schema.items() if t == pl.String]
    fixes = [
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c) for c in floats
    ] + [pl.col(c).map_elements(short_text, return_dtype=pl.String).alias(c) for c in texts]
    return frame.with_columns(fixes) if fixes else frame


def inline_data(alt: Any, frame: pl.DataFrame) -> Any:
    """The frame as inline data (no pandas or pyarrow needed), as :func:`shown_frame` shows it."""
    return alt.Data(values=shown_frame(frame).to_dicts())


def group_names(frame: pl.DataFrame, column: str = "group") -> list[str]:
    """The texts of ``column`` as the chart shows them (its axis labels), in order, once each."""
    return (
        shown_frame(frame.select(column)).get_column(column).unique(maintain_order=True).to_list()
    )


def keys_name(keys: Sequence[str]) -> str:
    """The grouping columns as a chart's title names them."""
    return " / ".join(short_text(k, NAME_LIMIT) for k in keys)


def check_max_groups(max_groups: int | None, fn: str) -> None:
    if max_groups is not None and (
        isinstance(max_groups, bool) or not isinstance(max_groups, int) or max_groups < 1
    ):
        raise InputError(
            f"{fn}: max_groups= must be a whole number >= 1 or None, got {max_groups!r}"
        )


def capped_groups(
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


def chart_title(text: str, note: str | None = None) -> Any:
    options = {} if note is None else {"subtitle": note}
    return altair_or_error().Title(text, font=FONT, subtitleFont=FONT, **options)


def by_keys(by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def color_scale(alt: Any, domain: Sequence[str]) -> Any:
    return alt.Scale(domain=list(domain), range=[COLORS[d] for d in domain])

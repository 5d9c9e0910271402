"""Charts of a judge: its position bias, its flip rate by quality gap, and its audit's
agreement and probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from .._groups import GROUP_LIMIT
from ..errors import InputError
from ._layout import (
    COLORS,
    DOT_PADDING,
    POSITIONS,
    WIDTH,
    altair_or_error,
    as_frame,
    by_keys,
    capped_groups,
    chart_title,
    check_max_groups,
    color_scale,
    displaying_offline,
    drawn_width,
    group_names,
    inline_data,
    keys_name,
    need_columns,
    text_axis,
    text_legend,
    with_group_label,
)


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
    alt = altair_or_error()
    from ._offline import HConcatChart

    fn = "position_chart"
    frame = as_frame(table, fn)
    keys = by_keys(by)
    need_columns(frame, fn, *keys, *POSITIONS, "fairness")
    check_max_groups(max_groups, fn)
    if not keys and frame.height > 1:
        raise InputError(f"{fn}: the table has {frame.height} groups; pass by= their column(s)")
    pairs = "__safecons_pairs"
    frame, note = capped_groups(
        frame.with_columns(pl.sum_horizontal(POSITIONS).alias(pairs)),
        keys,
        max_groups,
        size=pairs,
        what="pairs",
    )
    frame = with_group_label(frame.drop(pairs), keys)
    long = frame.unpivot(
        index="group", on=list(POSITIONS), variable_name="class", value_name="pairs"
    ).with_columns(
        order=pl.col("class").replace_strict(
            {k: i for i, k in enumerate(POSITIONS)}, return_dtype=pl.Int64
        )
    )
    names = group_names(frame)
    y = alt.Y("group:N", title=keys_name(keys) or None, axis=text_axis(alt, names=names))
    height = max(60, 26 * frame.height)
    bars = (
        alt.Chart(
            inline_data(alt, long), title=chart_title("Swap test: pairs by position class", note)
        )
        .mark_bar()
        .encode(
            x=alt.X(
                "pairs:Q",
                stack="normalize",
                title="share of usable pairs",
                axis=text_axis(alt, format="%"),
            ),
            y=y,
            color=alt.Color(
                "class:N",
                scale=color_scale(alt, POSITIONS),
                sort=list(POSITIONS),
                legend=text_legend(alt, "class", POSITIONS),
            ),
            order=alt.Order("order:Q"),
            tooltip=["group:N", "class:N", "pairs:Q"],
        )
        .properties(width=300, height=height)
    )
    zero = alt.Chart(alt.Data(values=[{"x": 0}])).mark_rule(color="#999999").encode(x="x:Q")
    fairness = (
        alt.Chart(inline_data(alt, frame), title=chart_title("Fairness"))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=alt.X(
                "fairness:Q",
                scale=alt.Scale(domain=[-1, 1], padding=DOT_PADDING, nice=False),
                title="−1 primacy to +1 recency",
                axis=text_axis(alt),
            ),
            y=y,
            color=alt.condition(
                "datum.fairness < 0", alt.value(COLORS["primacy"]), alt.value(COLORS["recency"])
            ),
            tooltip=["group:N", "fairness:Q"],
        )
        .properties(width=200, height=height)
    )
    return displaying_offline(HConcatChart(hconcat=[bars, alt.layer(zero, fairness)]))


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
    alt = altair_or_error()
    from ._offline import Chart

    fn = "flip_rate_chart"
    frame = as_frame(table, fn)
    keys = by_keys(by)
    need_columns(frame, fn, *keys, "bin", "lower", "upper", "flip_rate", "n_pairs")
    check_max_groups(max_groups, fn)
    frame = with_group_label(frame, keys)
    sizes = frame.group_by("group").agg(pl.col("n_pairs").sum())
    groups, note = capped_groups(sizes, ["group"], max_groups, size="n_pairs", what="pairs")
    if note is not None:
        frame = frame.filter(pl.col("group").is_in(groups["group"].implode()))
    frame = frame.with_columns(
        bucket=pl.format("[{}, {})", pl.col("lower").round(2), pl.col("upper").round(2)),
        flip_rate=pl.col("flip_rate").fill_nan(None),
    )
    order = frame.sort("bin").unique("bin", keep="first", maintain_order=True)["bucket"].to_list()
    # Bins' names read across when each fits its column, drawn in DejaVu Sans; else upright.
    across = drawn_width(order) + 6 <= WIDTH / max(1, len(order))
    x_axis = text_axis(alt, labelAngle=0) if across else text_axis(alt, names=order, labelAngle=-90)
    enc: dict[str, Any] = {
        "x": alt.X("bucket:N", sort=order, title="gap between the answers (bin)", axis=x_axis),
        "y": alt.Y("flip_rate:Q", title="flip rate", axis=text_axis(alt, format="%")),
        "tooltip": ["group:N", "bucket:N", "n_pairs:Q", alt.Tooltip("flip_rate:Q", format=".1%")],
    }
    if keys:
        enc["color"] = alt.Color(
            "group:N", legend=text_legend(alt, keys_name(keys), group_names(frame, "group"))
        )
    else:
        enc["color"] = alt.value(COLORS["primacy"])
    chart = (
        Chart(
            inline_data(alt, frame), title=chart_title("Flips by how close the answers are", note)
        )
        .mark_line(point=True)
        .encode(**enc)
        .properties(width=WIDTH, height=220)
    )
    return displaying_offline(chart)


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
    alt = altair_or_error()
    from ._offline import Chart

    fn = "agreement_chart"
    check_max_groups(max_groups, fn)
    table = getattr(audit_or_table, "table", audit_or_table)
    frame = as_frame(table, fn)
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
        need_columns(frame, fn, "agreement_s1", "agreement_s2")
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
    frame, note = capped_groups(frame, ["group"], max_groups, size=size, what="pairs")
    long = (
        frame.drop(size)
        .unpivot(index="group", variable_name="setup", value_name="agreement")
        .with_columns(pl.col("agreement").fill_nan(None))
    )
    groups = group_names(long)
    chart = (
        Chart(inline_data(alt, long), title=chart_title("Agreement with gold labels", note))
        .mark_bar()
        .encode(
            x=alt.X(
                "agreement:Q",
                scale=alt.Scale(domain=[0, 1]),
                axis=text_axis(alt, format="%"),
            ),
            y=alt.Y("group:N", title=None, axis=text_axis(alt, names=groups)),
            yOffset=alt.YOffset("setup:N", sort=["three_way", "decisive"]),
            color=alt.Color(
                "setup:N",
                scale=alt.Scale(domain=["three_way", "decisive"], range=["#4d4d4d", "#a6a6a6"]),
                legend=text_legend(alt, "setup", ["three_way", "decisive"]),
            ),
            tooltip=["group:N", "setup:N", alt.Tooltip("agreement:Q", format=".1%")],
        )
        .properties(width=WIDTH, height=max(80, 34 * frame.height))
    )
    return displaying_offline(chart)

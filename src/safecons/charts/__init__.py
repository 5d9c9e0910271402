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

from typing import Any

from ..errors import InputError
from ._judges import agreement_chart as agreement_chart
from ._judges import flip_rate_chart as flip_rate_chart
from ._judges import position_chart as position_chart
from ._layout import COLORS as COLORS
from ._layout import MAX_BINS as MAX_BINS
from ._layout import altair_or_error, displaying_offline
from ._scores import label_mix_chart as label_mix_chart
from ._scores import posture_flips_chart as posture_flips_chart
from ._scores import score_by_group_chart as score_by_group_chart
from ._scores import score_distribution_chart as score_distribution_chart

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
    alt = altair_or_error()
    if not isinstance(chart, alt.TopLevelMixin):
        raise InputError(f"offline: expected an Altair chart, got {type(chart).__name__}")
    made = displaying_offline(chart)
    return made.copy(deep=False) if made is chart else made

"""The HTML a report is made of: its style, escaped and folded texts, tables of figures, a
config as nested tables, a chart as inline SVG."""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Sequence
from typing import Any, Final

import polars as pl

from ._text import NAME_LIMIT, TEXT_LIMIT, cut_note, cut_text, short_text

_FOLD: Final = 280


#: Fresh answers shown per row (a run asks for at most 7; a frame put together may hold more).
ANSWER_LIMIT: Final = 8


STYLE: Final = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#222;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2.2rem;
border-bottom:1px solid #ddd;padding-bottom:.3rem}.muted{color:#666;font-size:.9rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.text,th.text{text-align:left;max-width:420px}
.cards{display:flex;gap:1rem;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:.6rem 1rem;min-width:150px}.card b{display:block;font-size:1.4rem}
.chart{margin:1rem 0}.label{padding:0 .35rem;border-radius:3px;color:#fff;font-size:.8rem;
white-space:nowrap}.Consistent{background:#1a9850}.Slightly{background:#f0a30a}
.Contradictory{background:#d73027}.none{background:#999}
details summary{cursor:pointer;color:#2c5aa0}pre{white-space:pre-wrap;margin:.2rem 0;
font-family:inherit}pre,summary{overflow-wrap:anywhere}.cut{color:#b35900;font-style:italic}
tr.rest td{color:#555;font-style:italic}
.pairs .pairs{margin:0;font-size:1em}.pairs ol{margin:0;padding-left:1.2rem}
.wide,.chart{overflow-x:auto;max-width:100%}
.note{border-left:4px solid #f0a30a;background:#fff8e6;padding:.5rem .8rem}
.measured{font-size:1.05rem;margin:.3rem 0}.failed{border-left-color:#d73027;background:#fdecea}
"""


def esc(value: object, limit: int = NAME_LIMIT) -> str:
    # Control and bidirectional characters have no place in HTML text either; a name is cut
    # before it is escaped (so no entity is split), the cut noted in plain text, which also
    # reads right inside <title>.
    return html.escape(short_text("" if value is None else str(value), limit), quote=True)


def _shown(text: str) -> tuple[str, int]:
    """A long text escaped, cut to :data:`TEXT_LIMIT` characters with a visible marker, and
    the whole text's length."""
    shown, total = cut_text(text, TEXT_LIMIT)
    body = html.escape(shown, quote=True)
    if total > TEXT_LIMIT:
        body += f'<span class="cut">… {cut_note(total, TEXT_LIMIT)}</span>'
    return body, total


def _pre(text: str) -> str:
    return f"<pre>{_shown(text)[0]}</pre>"


def fold(text: object) -> str:
    """A long text folded: its start shown, the text (cut as :func:`_shown` cuts it) behind a
    click."""
    if text is None:
        return '<span class="muted">(none)</span>'
    body, total = _shown(str(text))
    if total <= _FOLD:
        return f"<pre>{body}</pre>"
    start = html.escape(cut_text(str(text), _FOLD)[0], quote=True)
    return f"<details><summary>{start}… ({total:,} characters)</summary><pre>{body}</pre></details>"


def label_html(label: object) -> str:
    if label is None:
        return '<span class="label none">not judged</span>'
    words = str(label).split()
    known = ("Consistent", "Slightly", "Contradictory")
    css = words[0] if words and words[0] in known else "none"
    return f'<span class="label {esc(css)}">{esc(label)}</span>'


def number(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return esc(value)


#: How the score table's columns read in the report.
_HEADINGS: Final = {
    "mean_lo": "95% low",
    "mean_hi": "95% high",
    "consistent": "Consistent",
    "slightly_inconsistent": "Slightly Inconsistent",
    "contradictory": "Contradictory",
}


_SHARES: Final = ("consistent", "slightly_inconsistent", "contradictory")


INTERVAL: Final = ("mean_lo", "mean_hi")


#: What a figure the table cannot give shows, explained under the table (:func:`notes_html`).
BLANK: Final = '<td class="muted">—</td>'


def cell(column: str, value: object, text: Sequence[str]) -> str:
    if column in text:
        if value is None:  # the null group: named as sc.score_table names it (see notes_html)
            return '<td class="text muted">null</td>'
        return f'<td class="text">{esc(value)}</td>'
    if column in _SHARES and isinstance(value, float) and not math.isnan(value):
        return f"<td>{value:.0%}</td>"
    if column in ("mean", *INTERVAL) and value is None:
        return BLANK
    return f"<td>{number(value)}</td>"


def rows_html(frame: pl.DataFrame, text: Sequence[str]) -> str:
    return "".join(
        "<tr>"
        + "".join(cell(c, v, text) for c, v in zip(frame.columns, row, strict=True))
        + "</tr>"
        for row in frame.iter_rows()
    )


def html_table(
    frame: pl.DataFrame, *, text: Sequence[str] = (), rest: str = "", rows: str | None = None
) -> str:
    """``frame`` as an HTML table (or its head over ``rows`` already written); ``rest``, a row
    already written, goes last."""
    head = "".join(
        f'<th class="{"text" if c in text else ""}">{_heading(_HEADINGS.get(c, c))}</th>'
        for c in frame.columns
    )
    body = rows_html(frame, text) if rows is None else rows
    return wide(f"<table><thead><tr>{head}</tr></thead><tbody>{body}{rest}</tbody></table>")


def _heading(name: str) -> str:
    """A column's name as its heading: it may wrap after an underscore, so that a table of
    long names (the audit's) keeps to the page's column."""
    return esc(name).replace("_", "_<wbr>")


def wide(table: str) -> str:
    """A table in a box that scrolls sideways where the table is wider than the page's column
    (a narrow window, a long name): the page itself never does."""
    return f'<div class="wide">{table}</div>'


#: The longest chart spec (JSON characters, its data inline) whose drawing is kept.
_KEPT_SPEC_CHARS: Final = 256_000


@functools.lru_cache(maxsize=32)
def _drawn(spec: str) -> str:
    import vl_convert

    return str(vl_convert.vegalite_to_svg(spec))


def svg_of(chart: Any) -> str:
    import vl_convert  # first, so that a missing charts extra is an ImportError whatever is kept

    try:
        spec = chart.to_json()
        # Drawing takes about a quarter of a second a chart: a report written again, or a
        # second report of the same run, draws each chart of the same spec once.
        if len(spec) <= _KEPT_SPEC_CHARS:
            return _drawn(spec)
        return str(vl_convert.vegalite_to_svg(spec))
    except ValueError as exc:  # vl-convert's: one chart that cannot draw must not cost the report
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return f'<p class="muted">(this chart could not be drawn: {esc(first[:200])})</p>'


def interval_text(pair: tuple[float, float], *, share: bool = False) -> str:
    return " to ".join(percent(v) if share else f"{v:.3f}" for v in pair)


def percent(share: float) -> str:
    return f"{share:.0%}" if share in (0.0, 1.0) else f"{share:.1%}"


#: How deep a config's nested values are shown as tables; deeper, as text.
_DEPTH: Final = 4


#: A token count no server reported.
NOT_REPORTED_CELL: Final = '<span class="muted">not reported</span>'


def pairs_html(mapping: object, depth: int = 0) -> str:
    """A mapping as a table of keys and values, a nested mapping as a table in its cell; any
    other value (a config that is not a mapping) as text."""
    if not isinstance(mapping, dict):
        return _pre(str(mapping))
    if not mapping:
        return '<span class="muted">(empty)</span>'
    rows = "".join(
        f'<tr><th class="text">{esc(k)}</th><td class="text">{_value(v, depth)}</td></tr>'
        for k, v in mapping.items()
    )
    return f'<table class="pairs"><tbody>{rows}</tbody></table>'


def _value(value: object, depth: int) -> str:
    """One value of a config as its cell shows it: a mapping as a table, a list of plain values
    in one line (of others, an item a line), a text as it is (cut as a name is), any other
    plain value as JSON spells it (``null``, ``true``, ``0.7``); deeper than :data:`_DEPTH`,
    a value is shown as text."""
    if isinstance(value, dict) and depth < _DEPTH:
        return pairs_html(value, depth + 1)
    if isinstance(value, list | tuple) and depth < _DEPTH:
        if not value:
            return '<span class="muted">(empty)</span>'
        if not any(isinstance(v, dict | list | tuple) for v in value):
            return ", ".join(_value(v, depth) for v in value)
        return "<ol>" + "".join(f"<li>{_value(v, depth + 1)}</li>" for v in value) + "</ol>"
    if value is None:
        return '<span class="muted">null</span>'
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return esc(value)

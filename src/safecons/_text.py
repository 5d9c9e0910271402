"""Text that can be stored and shown: one place for what every kept or displayed text needs.

Python strings may hold lone surrogates (a JSON body's ``"\\ud800"``, an exception message
built from one); UTF-8 cannot encode them, so Polars, SQLite, Parquet and HTML writers raise on
them. Every text that reaches a frame, a cache or a report passes :func:`valid_unicode` first;
every text a chart or the HTML report shows passes :func:`display_text`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("display_text", "valid_unicode")


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (unchanged when it has none).

    Examples
    --------
    >>> valid_unicode("ok \\ud800!") == "ok \\ufffd!"
    True
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


#: Characters no shown text keeps. C0 controls but tab and newlines, U+2028/2029 and
#: non-characters: XML (the SVG the report inlines) or JavaScript string literals (the Vega
#: runtime) cannot carry them. The bidirectional controls: embeddings and overrides
#: (U+202A-U+202E), isolates (U+2066-U+2069) and the invisible marks (U+200E, U+200F, U+061C),
#: which can make an id or an answer display in another order than it is stored ("Trojan
#: Source"); letters of right-to-left scripts still display right to left without them.
_UNSAFE_TEXT: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029"
    "\u2066-\u2069\ufffe\uffff]"
)


def display_text(value: str) -> str:
    """``value`` as a chart or the HTML report may show it: valid Unicode, and none of the
    characters an SVG or a JavaScript string cannot hold or that reorder what is displayed
    (bidirectional controls); each becomes U+FFFD.

    Examples
    --------
    >>> display_text("a\\x00b") == "a\\ufffdb"
    True
    >>> display_text("id-\\u202e1-2") == "id-\\ufffd1-2"
    True
    """
    return _UNSAFE_TEXT.sub("\ufffd", valid_unicode(value))

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


#: Characters that XML (the SVG the report inlines) or JavaScript string literals (the Vega
#: runtime) cannot carry: C0 controls but tab and newlines, U+2028/2029, non-characters.
_UNSAFE_TEXT: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029\ufffe\uffff]")


def display_text(value: str) -> str:
    """``value`` as a chart or the HTML report may show it: valid Unicode, and none of the
    characters an SVG or a JavaScript string cannot hold (each becomes U+FFFD).

    Examples
    --------
    >>> display_text("a\\x00b") == "a\\ufffdb"
    True
    """
    return _UNSAFE_TEXT.sub("\ufffd", valid_unicode(value))

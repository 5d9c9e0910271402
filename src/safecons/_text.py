"""Text that can be stored and shown: one place for what every kept or displayed text needs.

Python strings may hold lone surrogates (a JSON body's ``"\\ud800"``, an exception message
built from one); UTF-8 cannot encode them, so Polars, SQLite, Parquet and HTML writers raise on
them. Every text that reaches a frame, a cache or a report passes :func:`valid_unicode` first;
every text a chart or the HTML report shows passes :func:`display_text`, and is cut to a
bounded length by :func:`cut_text` (or :func:`short_text`) before it is escaped.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = (
    "NAME_LIMIT",
    "SHOWN_VALUES",
    "TEXT_LIMIT",
    "content_tag",
    "cut_note",
    "cut_text",
    "display_text",
    "short_text",
    "tagged_block",
    "terminal_text",
    "valid_unicode",
)

#: Characters of a long text (a prompt, an answer, an error) a report shows: a 4,096-token
#: answer fits whole; a longer one is cut, with a note of its full length.
TEXT_LIMIT: Final = 20_000
#: Characters of a name (an id, a group, a template id, a label, a config value, a title).
NAME_LIMIT: Final = 200
#: Offending values (ids, rows) an error message lists at most.
SHOWN_VALUES: Final = 5


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


#: Characters a terminal acts on rather than shows: every C0 control (tab, CR and newline
#: too: a text from a frame or a server must not start a line of its own, which could pass for
#: the command's), DEL and the C1 controls (CSI, OSC: the terminal's own commands), the line and
#: paragraph separators, and the bidirectional controls :data:`_UNSAFE_TEXT` lists.
_TERMINAL_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]"
)


#: The last code point a two-digit escape (\xNN) writes.
_LATIN1: Final = 0xFF
_SHORT_ESCAPES: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(found: re.Match[str]) -> str:
    if found.group() in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[found.group()]
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= _LATIN1 else f"\\u{code:04x}"


def terminal_text(value: str) -> str:
    r"""``value`` as a terminal may print it: valid Unicode, on one line, and every character
    a terminal would act on (C0 and C1 controls, DEL, line separators, bidirectional
    controls) written as a visible escape, as Python writes it (``\x1b``, ``\u202e``).

    Every text that came from a frame, a file or a server and is printed to a terminal (juror
    names, row errors, error messages) passes here: a shared Parquet file must not retitle the
    terminal (ESC ] ... BEL), move its cursor, or forge a line of the command's own output.

    Examples
    --------
    >>> print(terminal_text("judge\x1b]0;pwned\x07\r\nsafecons: error: forged"))
    judge\x1b]0;pwned\x07\r\nsafecons: error: forged
    >>> terminal_text("id-\u202e1-2")
    'id-\\u202e1-2'
    >>> terminal_text("plain text, même accentuée")
    'plain text, même accentuée'
    """
    return _TERMINAL_UNSAFE.sub(_escaped, valid_unicode(value))


def cut_text(value: str, limit: int) -> tuple[str, int]:
    """The first ``limit`` characters of ``value`` as :func:`display_text` shows them, and
    the length of the whole (in characters, as ``len`` counts them).

    The text is made valid Unicode before it is cut, so a surrogate pair is one character and
    never split; the caller escapes after cutting, so no HTML entity is split either.

    Examples
    --------
    >>> cut_text("abcdef", 4)
    ('abcd', 6)
    """
    text = valid_unicode(value)
    return display_text(text[:limit]), len(text)


def cut_note(total: int, limit: int) -> str:
    """What a cut left out, for a marker: ``"5,000,000 characters, 4,980,000 not shown"``.

    Examples
    --------
    >>> cut_note(5_000_000, 20_000)
    '5,000,000 characters, 4,980,000 not shown'
    """
    return f"{total:,} characters, {total - limit:,} not shown"


def short_text(value: str, limit: int = NAME_LIMIT) -> str:
    """``value`` cut as by :func:`cut_text`, a marker with the full length appended when it
    was cut (for plain-text places: a chart's label, a page title, a table cell).

    Examples
    --------
    >>> short_text("x" * 1_000, 3)
    'xxx… (1,000 characters, 997 not shown)'
    >>> short_text("ok")
    'ok'
    """
    shown, total = cut_text(value, limit)
    return shown if total <= limit else f"{shown}… ({cut_note(total, limit)})"


def middle_cut(value: str, limit: int, *, head: int = 40) -> str:
    """``value`` shown in at most about ``limit`` characters, its middle cut out: the first
    ``head`` characters (what failed) and the end (why, and what to do: an error's hint comes
    last), joined by " … ".

    Examples
    --------
    >>> middle_cut("SUT call failed: " + "x" * 200 + " (is the server running?)", 70)
    'SUT call failed: xxxxxxxxxxxxxxxxxxxxxxx … xx (is the server running?)'
    >>> middle_cut("short", 80)
    'short'
    """
    text = display_text(value)
    if len(text) <= limit:
        return text
    tail = max(0, limit - head - 3)
    return f"{text[:head]} … {text[len(text) - tail :]}"


def content_tag(*parts: str) -> str:
    """A tag for the markers around the texts of a judge prompt, derived from those texts.

    The tag comes from the content, so a judged text cannot know it in advance (it would have
    to contain its own hash), and the same texts always give the same prompt, which keeps
    request caching exact.

    Examples
    --------
    >>> content_tag("question", "answer") == content_tag("question", "answer")
    True
    >>> len(content_tag("question", "answer"))
    12
    """
    h = hashlib.blake2b(digest_size=6)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def tagged_block(name: str, tag: str, text: str) -> str:
    """``text`` between the markers ``<<<name tag>>>`` and ``<<<END name tag>>>``.

    Examples
    --------
    >>> print(tagged_block("ANSWER", "t0", "Yes."))
    <<<ANSWER t0>>>
    Yes.
    <<<END ANSWER t0>>>
    """
    return f"<<<{name} {tag}>>>\n{text}\n<<<END {name} {tag}>>>"

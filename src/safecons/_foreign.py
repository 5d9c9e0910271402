"""Reading what an object of the user's own gives back, without trusting it.

A SUT or juror callable, a judge object or a client of one's own is the user's code: what it
raises or returns may break the very tools that read it (an exception whose ``__str__``
raises, an object whose ``repr`` raises, a value nested too deep to print). Every place a run
reads such an output goes through these functions, which raise nothing an ``Exception``
catches: one misbehaving object is one failed attempt with a readable error, never a crash
after the run's calls were paid for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ("describe_exception", "guarded", "safe_repr", "safe_text", "type_name")

T = TypeVar("T")
D = TypeVar("D")


def guarded(read: Callable[[], T], default: D) -> T | D:
    """``read()``, or ``default`` when the user's code it runs raises.

    The one place safecons catches whatever a user's object raises (anything an
    ``Exception`` catches; an interrupt still stops the run): every reading of such an
    object that must not fail goes through it.

    Examples
    --------
    >>> guarded(lambda: {}["missing"], "no answer")
    'no answer'
    """
    try:
        return read()
    except Exception:  # boundary: a user's object may raise anything, and is read as no answer
        return default


def type_name(obj: object) -> str:
    """The name of ``obj``'s type, even when its metaclass makes reading it raise.

    Examples
    --------
    >>> type_name(ValueError("x"))
    'ValueError'
    """
    name = guarded(lambda: type(obj).__name__, "object")
    return name if type(name) is str else "object"


def safe_text(obj: object) -> str | None:
    """``str(obj)``, or None when it cannot be read (its ``__str__`` raises, recurses or
    returns something other than text).

    Not cut: the run scrubs the keys it knows from every error, and a key cut in two would
    no longer be found.

    Examples
    --------
    >>> safe_text(ValueError("bad value"))
    'bad value'
    >>> class Unprintable(Exception):
    ...     def __str__(self):
    ...         raise RuntimeError("no")
    >>> safe_text(Unprintable()) is None
    True
    """
    # A str subclass may override what reads it: an exact copy is read from here on.
    return guarded(lambda: str.__str__(str(obj)), None)


def safe_repr(obj: object, limit: int | None = 120) -> str:
    """``repr(obj)`` cut to ``limit`` characters (None: whole), or a placeholder naming its
    type when it cannot be read (its ``__repr__`` raises, or it is nested too deep to print).

    Examples
    --------
    >>> safe_repr(("Consistent", 0.9))
    "('Consistent', 0.9)"
    >>> class BadRepr:
    ...     def __repr__(self):
    ...         raise RuntimeError("no")
    >>> safe_repr(BadRepr())
    '<BadRepr object: its repr could not be read>'
    """
    text = guarded(lambda: str.__str__(repr(obj)), None)
    if text is None:
        return f"<{type_name(obj)} object: its repr could not be read>"
    return text if limit is None or len(text) <= limit else f"{text[:limit]}..."


def describe_exception(exc: BaseException) -> str:
    """``TypeName: message`` for an exception a user's code raised, whatever its
    ``__str__`` does.

    Examples
    --------
    >>> describe_exception(ConnectionError("refused"))
    'ConnectionError: refused'
    >>> class Unprintable(Exception):
    ...     def __str__(self):
    ...         raise RuntimeError("no")
    >>> describe_exception(Unprintable())
    'Unprintable (its text could not be read)'
    """
    text = safe_text(exc)
    name = type_name(exc)
    return f"{name} (its text could not be read)" if text is None else f"{name}: {text}"

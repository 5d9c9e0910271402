"""Reading what an object of the user's own gives back, without trusting it.

A SUT or juror callable, a judge object or a client of one's own is the user's code: what it
raises or returns may break the very tools that read it (an exception whose ``__str__``
raises, an object whose ``repr`` raises, a value nested too deep to print). Every place a run
reads such an output goes through these functions, which raise nothing an ``Exception``
catches: one misbehaving object is one failed attempt with a readable error, never a crash
after the run's calls were paid for.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

__all__ = (
    "Raised",
    "conforms",
    "describe_exception",
    "guarded",
    "guarded_await",
    "read_or",
    "safe_repr",
    "safe_text",
    "type_name",
)

_P = ParamSpec("_P")
_T = TypeVar("_T")
_D = TypeVar("_D")


def type_name(obj: object) -> str:
    """The name of ``obj``'s type, even when its metaclass makes reading it raise.

    Examples
    --------
    >>> type_name(ValueError("x"))
    'ValueError'
    """
    name = read_or(lambda: type(obj).__name__, "object")
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
    return read_or(lambda: str.__str__(str(obj)), None)


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
    text = read_or(lambda: str.__str__(repr(obj)), None)
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


@dataclasses.dataclass(frozen=True, slots=True)
class Raised:
    """What a call into a user's code raised instead of returning (:func:`guarded`)."""

    error: Exception


def guarded(fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T | Raised:
    """``fn(*args, **kwargs)``, or :class:`Raised` holding what it raised, when ``fn`` is (or
    runs) a user's code: a callable, an attribute read that runs its ``__getattr__`` or a
    property. What is not an ``Exception`` (a cancellation, ``KeyboardInterrupt``) goes on.

    Examples
    --------
    >>> guarded(int, "7")
    7
    >>> class Settings:
    ...     def __getattr__(self, name):
    ...         return {}[name]
    >>> outcome = guarded(getattr, Settings(), "model", None)
    >>> type(outcome.error).__name__
    'KeyError'
    """
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # boundary: a user's code may raise anything, and says so here
        return Raised(exc)


async def guarded_await(
    fn: Callable[_P, Awaitable[_T]], /, *args: _P.args, **kwargs: _P.kwargs
) -> _T | Raised:
    """``await fn(*args, **kwargs)``, or :class:`Raised` holding what the call or its
    awaiting raised, for a user's coroutine function (an async SUT, a session's
    ``complete``). A cancellation is no ``Exception``: it goes on, as it must.

    Examples
    --------
    >>> import anyio
    >>> async def sut(text):
    ...     raise ConnectionError(text)
    >>> anyio.run(guarded_await, sut, "refused")
    Raised(error=ConnectionError('refused'))
    """
    try:
        return await fn(*args, **kwargs)
    except Exception as exc:  # boundary: a user's coroutine may raise anything
        return Raised(exc)


def read_or(read: Callable[[], _T], default: _D) -> _T | _D:
    """``read()``, or ``default`` when the user's code it runs raises (:func:`guarded`, for a
    reading whose failure means only "no answer").

    Examples
    --------
    >>> read_or(lambda: {}["missing"], "no answer")
    'no answer'
    """
    value = guarded(read)
    return default if isinstance(value, Raised) else value


def conforms(obj: object, protocol: type[Any]) -> bool:
    """Whether ``obj`` has the members of ``protocol`` (a ``runtime_checkable`` one), found
    without running any of its code.

    ``isinstance`` against a protocol asks ``hasattr`` of each member before Python 3.12:
    that runs a property (a callable client's ``identity`` hashes its code and closure) and a
    ``__getattr__``, and lets through only ``AttributeError``, so an object whose
    ``__getattr__`` raises anything else for a name it lacks (``return
    self._settings[name]``: a ``KeyError``) would crash the run where it is merely not the
    protocol's. Members are first looked up as Python 3.12 does
    (:func:`inspect.getattr_static`), which runs nothing; only an object that lacks one there
    is asked with ``isinstance`` (a wrapper whose ``__getattr__`` passes members on, a
    ``Mock(spec=...)``), anything raised meaning no. (A bool, not a type guard: mypy takes no
    protocol class where a type variable's class is expected; callers cast.)

    Examples
    --------
    >>> from typing import Protocol, runtime_checkable
    >>> @runtime_checkable
    ... class Named(Protocol):
    ...     name: str
    >>> class Settings:
    ...     def __getattr__(self, key):
    ...         return {}[key]
    >>> class Costly:
    ...     @property
    ...     def name(self):
    ...         raise RuntimeError("not run to be checked")
    >>> class Passing:
    ...     def __getattr__(self, key):
    ...         return "passed on"
    >>> conforms(Settings(), Named), conforms(Costly(), Named), conforms(Passing(), Named)
    (False, True, True)
    """
    for name in _members(protocol):
        try:
            inspect.getattr_static(obj, name)
        except AttributeError:
            break
    else:
        return True
    # Not found without running its code: ask isinstance after all, for what only it sees
    # (a wrapper passing its members on through __getattr__, a Mock(spec=...) through its
    # __class__), and read anything raised as "not the protocol's" (isinstance runs the
    # user's __getattr__, which may raise anything).
    return read_or(lambda: isinstance(obj, protocol), False)


_MEMBERS: dict[type[Any], tuple[str, ...]] = {}


def _members(protocol: type[Any]) -> tuple[str, ...]:
    """The public members a protocol class and the protocols it extends declare."""
    found = _MEMBERS.get(protocol)
    if found is None:
        names: set[str] = set()
        for klass in protocol.__mro__:
            if Protocol in klass.__bases__:
                names.update(n for n in vars(klass) if not n.startswith("_"))
                names.update(inspect.get_annotations(klass))
        found = _MEMBERS[protocol] = tuple(sorted(names))
    return found

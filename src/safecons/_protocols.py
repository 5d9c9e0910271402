"""``isinstance`` against a runtime-checkable protocol, for objects of the user's own."""

from __future__ import annotations

import inspect
from typing import Any, Protocol

__all__ = ("conforms",)


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
    # __class__), and read anything raised as "not the protocol's".
    try:
        return isinstance(obj, protocol)
    except Exception:  # boundary: isinstance runs the user's __getattr__, which may raise anything
        return False


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

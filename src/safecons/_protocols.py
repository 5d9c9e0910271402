"""``isinstance`` against a runtime-checkable protocol, for objects of the user's own."""

from __future__ import annotations

from typing import Any

__all__ = ("conforms",)


def conforms(obj: object, protocol: type[Any]) -> bool:
    """Whether ``obj`` has the members of ``protocol`` (a ``runtime_checkable`` one).

    ``isinstance`` asks ``hasattr`` of each member, which lets through only
    ``AttributeError``: an object whose ``__getattr__`` raises anything else for a name it
    lacks (``return self._settings[name]``: a ``KeyError``) would crash the run where it is
    merely not the protocol's. Such an object does not conform. (A bool, not a type guard:
    mypy takes no protocol class where a type variable's class is expected; callers cast.)

    Examples
    --------
    >>> from typing import Protocol, runtime_checkable
    >>> @runtime_checkable
    ... class Named(Protocol):
    ...     name: str
    >>> class Settings:
    ...     def __getattr__(self, key):
    ...         return {}[key]
    >>> conforms(Settings(), Named), conforms(type("Has", (), {"name": "x"})(), Named)
    (False, True)
    """
    try:
        return isinstance(obj, protocol)
    except Exception:
        return False

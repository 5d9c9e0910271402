"""What can be seen of a Python callable, for the cache key of an unnamed chat callable.

A callable's answers depend on its code and on every value that code reads: its defaults and
closure, the module-level globals it reads (and those of the functions it calls), and the
state of the objects among them. :func:`look_at` walks all of that, within bounds, and hashes
it; what it cannot see (an object that shows no state, a walk too deep or too large, a builtin
as the callable itself) is listed, so the caller can say the identity is a guess instead of
silently replaying answers given before a change it did not see.

The walk is stable across processes: it never reads a memory address or a hash-ordered
iteration (sets are sorted by their elements' encodings), and an object met twice (a cycle, a
shared value) is written the second time as a reference to where it was first met.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import dis
import enum
import fractions
import functools
import hashlib
import json
import os
import pathlib
import re
import site
import sys
import sysconfig
import threading
import types
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Any, Final

__all__ = (
    "MAX_DEPTH",
    "MAX_VALUES",
    "Sight",
    "callable_fingerprint",
    "credential_name",
    "look_at",
)

#: The most values (scalars included) one walk reads; past it, the rest is not seen.
MAX_VALUES: Final = 100_000
#: The deepest nesting one walk follows; deeper values are not seen.
MAX_DEPTH: Final = 40
# Longer strings and bytes are hashed where they stand (all of them is still seen).
_LONG: Final = 256
# The most notes of what was not seen one look keeps.
_MAX_NOTES: Final = 20
#: Characters of a note kept whole; a longer one keeps its first 90 and its last 100.
_NOTE_CHARS: Final = 200
_HEAPTYPE: Final = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement

# Words of a name that holds a credential (OPENAI_API_KEY, access_token, apiKey, Authorization,
# password, ...). A word, not a substring: max_tokens or monkey are settings.
_CREDENTIAL_WORDS: Final = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "passwd",
        "password",
        "pwd",
        "secret",
        "signature",
    }
)
# "key" and "token" name a credential (api_key, HF_TOKEN, key) unless the word before them
# makes them a setting of a model or a data structure (EOS_TOKEN, MODEL_KEY, sort_key): such a
# setting can change answers, so it must be seen.
_SETTING_KEYS: Final = frozenset(
    {
        "cache", "col", "column", "dict", "field", "foreign", "group", "hash", "index", "join",
        "json", "label", "lookup", "map", "model", "name", "partition", "primary", "prompt",
        "random", "rng", "route", "routing", "row", "seed", "sort",
    }
)  # fmt: skip
_SETTING_TOKENS: Final = frozenset(
    {
        "bos", "cls", "end", "eos", "image", "mask", "max", "min", "num", "pad", "sep",
        "special", "start", "stop", "think", "thinking", "unk",
    }
)  # fmt: skip
_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# Class attributes that are bookkeeping of the class machinery, not behaviour or settings.
_CLASS_BOOKKEEPING: Final = frozenset(
    {
        "__abstractmethods__",
        "__annotations__",
        "__dataclass_fields__",
        "__dataclass_params__",
        "__dict__",
        "__doc__",
        "__firstlineno__",
        "__match_args__",
        "__module__",
        "__orig_bases__",
        "__parameters__",
        "__qualname__",
        "__slotnames__",
        "__slots__",
        "__static_attributes__",
        "__weakref__",
        "_abc_impl",
    }
)
_C_DESCRIPTORS: Final = (
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.MethodWrapperType,
)
# Values known by their text: immutable, and their repr (or str) is their whole content.
_BY_REPR: Final = (
    complex,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.tzinfo,
    decimal.Decimal,
    fractions.Fraction,
    range,
    slice,
)
_BY_STR: Final = (pathlib.PurePath, uuid.UUID)
_C_CALLABLES: Final = (types.BuiltinFunctionType, *_C_DESCRIPTORS)
_LOCKS: Final = (type(threading.Lock()), type(threading.RLock()))
_GLOBAL_READS: Final = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def credential_name(name: str) -> bool:
    """Whether ``name`` (a variable, attribute or key) names a credential.

    A text held under such a name counts by its name only in a fingerprint: a key never
    reaches the cache, not even hashed, and rotating it keeps the cache.

    Examples
    --------
    >>> [credential_name(n) for n in ("api_key", "OPENAI_API_KEY", "apiKey", "HF_TOKEN", "key")]
    [True, True, True, True, True]
    >>> [credential_name(n) for n in ("max_tokens", "EOS_TOKEN", "MODEL_KEY", "sort_key")]
    [False, False, False, False]
    """
    words = [word.lower() for word in _WORD.findall(name)]
    for i, word in enumerate(words):
        if word in _CREDENTIAL_WORDS:
            return True
        before = words[i - 1] if i else None
        if word == "key" and before not in _SETTING_KEYS:
            return True
        if word == "token" and before not in _SETTING_TOKENS:
            return True
    return False


@dataclasses.dataclass(frozen=True, slots=True)
class Sight:
    """What :func:`look_at` saw of a callable: a short hash, and what it could not see."""

    fingerprint: str
    #: Where the walk could not see, each with why (empty: everything was seen).
    unseen: tuple[str, ...]


def look_at(fn: Callable[..., Any]) -> Sight:
    """Fingerprint ``fn`` and list what of it could not be seen.

    Examples
    --------
    >>> sight = look_at(lambda messages, temperature: "no")
    >>> len(sight.fingerprint), sight.unseen
    (16, ())
    >>> look_at(len).unseen
    ('len is a builtin (C) callable: its code and state cannot be seen',)
    """
    look = _Look(_Shared())
    root = _short(fn)
    if isinstance(fn, _C_CALLABLES):
        look.note(f"{root} is a builtin (C) callable: its code and state cannot be seen")
    tree = look.see(fn, root, 0)
    blob = json.dumps(
        tree, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_not_json
    )
    digest = hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=8)
    return Sight(digest.hexdigest(), tuple(look.shared.notes))


def callable_fingerprint(fn: Callable[..., Any]) -> str:
    """A short hash of what defines a callable, as far as it can be seen (:func:`look_at`).

    Seen: the code (bytecode, constants, names), defaults and closure; the module-level
    globals the code reads, nested functions and comprehensions included, and those of the
    functions it calls; the names it reads from a module of the user's own; objects of the user's
    own classes by class and state (``__dict__`` and ``__slots__``, and a
    ``types.SimpleNamespace`` by its attributes); the user's own classes by their methods and
    attributes; containers whole; at most :data:`MAX_VALUES` values, :data:`MAX_DEPTH`
    levels deep. By name only: installed code (the standard library, site-packages), an
    instance of an installed class (an SDK's or HTTP client: its state changes as it is used,
    and its settings are not seen, which :func:`look_at` says), and a text held under a
    credential's name (:func:`credential_name`). Not seen: settings inside
    installed modules, environment variables, files, anything reached only at run time.
    Where a walk meets what it cannot see (state kept in C, a bound reached), :func:`look_at`
    says so; this hash alone does not.

    Examples
    --------
    >>> callable_fingerprint(lambda m, temperature: "a") == callable_fingerprint(
    ...     lambda m, temperature: "b")
    False
    """
    return look_at(fn).fingerprint


def _not_json(value: object) -> object:
    raise TypeError(f"fingerprint: {type(value).__qualname__} left unencoded")


def _short(fn: object) -> str:
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__qualname__


class _Shared:
    """What every walker of one look shares: the budget and the notes."""

    __slots__ = ("left", "notes")

    def __init__(self) -> None:
        self.left = MAX_VALUES
        self.notes: list[str] = []


class _Look:
    """One walk. A set's elements are each walked by a child, which sees the parent's
    references but numbers its own, so their encodings (and order) do not depend on the
    set's hash order."""

    def __init__(self, shared: _Shared, outer: _Look | None = None) -> None:
        self.shared = shared
        self.outer = outer
        # id -> (ordinal, the object itself: kept alive, so no id is reused during the walk)
        self.memo: dict[int, tuple[int, object]] = {}

    def note(self, what: str) -> None:
        if len(what) > _NOTE_CHARS:
            what = f"{what[:90]} ... {what[-100:]}"
        notes = self.shared.notes
        if len(notes) < _MAX_NOTES and what not in notes:
            notes.append(what)

    def _ref(self, value: object) -> object:
        look: _Look | None = self
        level = 0
        while look is not None:
            seen = look.memo.get(id(value))
            if seen is not None:
                return {"ref": [level, seen[0]]}
            look, level = look.outer, level + 1
        self.memo[id(value)] = (len(self.memo), value)
        return None

    def see(self, value: object, path: str, depth: int) -> object:
        shared = self.shared
        shared.left -= 1
        if shared.left < 0:
            if shared.left == -1:
                self.note(
                    f"more than {MAX_VALUES:,} values: {path} and everything after it was not seen"
                )
            return {"unseen": "budget"}
        kind = type(value)
        if value is None or kind is bool or kind is float:
            return value
        if kind is int and isinstance(value, int):
            return value if abs(value) < 2**63 else {"int": hex(value)}
        if kind is str and isinstance(value, str):
            if len(value) <= _LONG:
                return value
            return {"str": _digest(value.encode("utf-8", "surrogatepass"))}
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            return {kind.__qualname__: data.hex() if len(data) <= _LONG else _digest(data)}
        if depth > MAX_DEPTH:
            self.note(f"{path}: nested deeper than {MAX_DEPTH} levels, not seen")
            return {"unseen": "depth"}
        ref = self._ref(value)
        if ref is not None:
            return ref
        try:
            return self._see(value, path, depth + 1)
        except Exception as exc:  # an object's own code (a property, __getattr__) may fail
            self.note(f"{path}: could not be read ({type(exc).__name__})")
            return {"unseen": type(exc).__qualname__}

    def _see(self, value: Any, path: str, depth: int) -> object:
        if isinstance(value, enum.Enum):
            return {
                "enum": self.see(type(value), path, depth),
                "name": value.name,
                "value": self.see(value.value, f"{path}.value", depth),
            }
        if isinstance(value, str | int | float):  # subclasses of the scalars
            return {"scalar": [_qualified(type(value)), repr(value)]}
        if not isinstance(value, type | types.ModuleType):
            identity = _own_identity(value)
            if identity is not None:
                return {"identity": [_qualified(type(value)), identity]}
        if isinstance(value, types.ModuleType):
            return self._module(value, (), path, depth)
        if isinstance(value, type):
            return self._class(value, path, depth)
        if isinstance(value, types.FunctionType):
            return self._function(value, path, depth)
        if isinstance(value, types.MethodType):
            return {
                "method": self.see(value.__func__, path, depth),
                "self": self.see(value.__self__, f"{path}.__self__", depth),
            }
        if isinstance(value, functools.partial):
            return {
                "partial": self.see(value.func, f"{path}.func", depth),
                "args": self.see(value.args, f"{path}.args", depth),
                "keywords": self._pairs(value.keywords.items(), path, depth),
            }
        if isinstance(value, _C_CALLABLES):
            owner = getattr(value, "__self__", None)
            out: dict[str, object] = {"builtin": _callable_name(value)}
            if owner is not None and not isinstance(owner, types.ModuleType | type):
                out["self"] = self.see(owner, f"{path}.__self__", depth)
            return out
        if isinstance(value, types.CodeType):
            return self._code(value, path, depth)
        if isinstance(value, staticmethod | classmethod):
            return {type(value).__name__: self.see(value.__func__, path, depth)}
        if isinstance(value, property):
            return {
                "property": [
                    self.see(f, f"{path}.{n}", depth)
                    for n, f in (("fget", value.fget), ("fset", value.fset), ("fdel", value.fdel))
                ]
            }
        if isinstance(value, dict):
            return self._container(
                value, "dict", self._pairs(value.items(), path, depth), path, depth
            )
        if isinstance(value, list | tuple | deque):
            seq = [self.see(v, f"{path}[{i}]", depth) for i, v in enumerate(value)]
            return self._container(value, type(value).__name__, seq, path, depth)
        if isinstance(value, set | frozenset):
            items = sorted(
                json.dumps(
                    _Look(self.shared, self).see(v, f"{path} (an element)", depth),
                    sort_keys=True,
                    default=_not_json,
                )
                for v in value
            )
            return self._container(value, "set", items, path, depth)
        if isinstance(value, BaseException):
            return {
                "exception": self.see(type(value), path, depth),
                "args": self.see(value.args, f"{path}.args", depth),
                "state": self._attributes(vars(value).items(), path, depth),
            }
        if isinstance(value, _LOCKS):
            # Whether a lock is held at the moment never shapes an answer.
            return {"lock": _qualified(type(value))}
        if isinstance(value, re.Pattern):
            return {"pattern": [value.pattern, value.flags]}
        if isinstance(value, _BY_REPR):
            return {"value": [_qualified(type(value)), repr(value)]}
        if isinstance(value, _BY_STR):
            return {"value": [_qualified(type(value)), str(value)]}
        return self._object(value, path, depth)

    def _pairs(self, items: Iterable[tuple[object, object]], path: str, depth: int) -> object:
        out: list[object] = []
        for key, value in items:
            where = f"{path}[{_cut(repr(key))}]" if isinstance(key, str | int) else f"{path}[...]"
            if isinstance(key, str) and isinstance(value, str | bytes) and credential_name(key):
                out.append([key, {"credential": True}])
            else:
                out.append([self.see(key, f"{path} (a key)", depth), self.see(value, where, depth)])
        return out

    def _container(self, value: object, kind: str, items: object, path: str, depth: int) -> object:
        out: dict[str, object] = {kind: items}
        if type(value) not in (dict, list, tuple, set, frozenset, deque):
            # A subclass (a namedtuple, a defaultdict, a user's dict): its class and its own
            # attributes too.
            out["object"] = self._object(value, path, depth, contents_seen=True)
        if isinstance(value, deque):
            out["maxlen"] = value.maxlen
        if isinstance(value, defaultdict):
            out["default"] = self.see(value.default_factory, f"{path}.default_factory", depth)
        return out

    def _object(self, value: object, path: str, depth: int, contents_seen: bool = False) -> object:
        cls = type(value)
        out: dict[str, object] = {"class": self.see(cls, f"{path}.__class__", depth)}
        library = _is_library(cls.__module__) and cls is not types.SimpleNamespace
        if library and not contents_seen and _c_part(cls) is not cls:
            # An installed library's object (an HTTP client, an SDK's client, a model) holds
            # live state (connection pools, sockets, counters) that changes as it is used:
            # walked, it would change the key on every rerun. Known by its class, and said.
            self.note(
                f"{path}: an instance of {_qualified(cls)} (installed code), known by its "
                "class only: its settings (a base URL, a model name) are not seen"
            )
            out["unseen"] = "library object"
            return out
        # A SimpleNamespace is made in C but keeps all of its state in its __dict__.
        hidden = None if contents_seen or cls is types.SimpleNamespace else _c_part(cls)
        if hidden is cls:
            self.note(
                f"{path}: its type {_qualified(cls)} is implemented in C, so its state is not seen"
            )
            out["unseen"] = "state"
        elif hidden is not None:
            self.note(
                f"{path}: its type {_qualified(cls)} derives from {_qualified(hidden)}, "
                "implemented in C, whose state is not seen"
            )
            out["unseen"] = "state"
        try:
            attributes = object.__getattribute__(value, "__dict__")
        except AttributeError:
            attributes = None
        state: list[tuple[str, object]] = (
            list(attributes.items()) if isinstance(attributes, dict) else []
        )
        for name in _slot_names(cls):
            try:
                state.append((name, object.__getattribute__(value, name)))
            except AttributeError:
                state.append((name, _Unset.UNSET))
        out["state"] = self._attributes(state, path, depth)
        return out

    def _attributes(self, state: Iterable[tuple[str, object]], path: str, depth: int) -> object:
        return [
            [name, {"unset": True}]
            if value is _Unset.UNSET
            else self._named(name, value, f"{path}.{name}", depth)
            for name, value in state
        ]

    def _module(
        self, module: types.ModuleType, reads: Iterable[str], path: str, depth: int
    ) -> object:
        name = module.__name__
        out: dict[str, object] = {"module": name}
        if _is_library(name):
            # Installed code (the standard library, site-packages) is known by its name.
            return out
        # A module of the user's own (a config.py beside the notebook): the names the reading
        # code may read from it (its attribute names are a superset of them).
        contents = vars(module)
        out["reads"] = self._attributes(
            ((n, contents[n]) for n in dict.fromkeys(reads) if n in contents),
            path,
            depth,
        )
        return out

    def _class(self, cls: type, path: str, depth: int) -> object:
        name = _qualified(cls)
        if _is_library(cls.__module__):
            return {"class": name}
        # A class of the user's own: its methods and class attributes, and its bases.
        contents = [
            (n, v)
            for n, v in vars(cls).items()
            if n not in _CLASS_BOOKKEEPING and not _structural(v)
        ]
        return {
            "class": name,
            "bases": [self.see(b, f"{path}.__bases__", depth) for b in cls.__bases__],
            "attributes": self._attributes(contents, path, depth),
        }

    def _function(self, fn: types.FunctionType, path: str, depth: int) -> object:
        name = f"{fn.__module__}.{fn.__qualname__}"
        if _is_library(fn.__module__):
            return {"function": name}
        code = fn.__code__
        reads = _attribute_names(code)

        def named(var: str, value: object, where: str) -> list[object]:
            if isinstance(value, types.ModuleType):
                return [var, self._module(value, reads, where, depth)]
            return self._named(var, value, where, depth)

        closure: list[object] = []
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name bound later)
                closure.append([var, {"unset": True}])
                continue
            closure.append(named(var, value, f"{var} (in the closure of {path})"))
        module_globals = fn.__globals__
        read_globals = [
            named(var, module_globals[var], f"global {var}")
            for var in _global_names(code)
            if var in module_globals  # else a builtin, or a global not yet defined
        ]
        return {
            "function": name,
            "code": self.see(code, path, depth),
            "defaults": self.see(fn.__defaults__, f"{path} (its defaults)", depth),
            "kwdefaults": self._pairs((fn.__kwdefaults__ or {}).items(), path, depth),
            "closure": closure,
            "globals": read_globals,
        }

    def _named(self, name: str, value: object, path: str, depth: int) -> list[object]:
        """A value held under a name: a text under a credential's name counts by name."""
        if isinstance(value, str | bytes) and credential_name(name):
            return [name, {"credential": True}]
        return [name, self.see(value, path, depth)]

    def _code(self, code: types.CodeType, path: str, depth: int) -> object:
        return {
            "bytecode": code.co_code.hex(),
            "consts": [self.see(c, path, depth) for c in code.co_consts],
            "names": list(code.co_names),
            "shape": [code.co_argcount, code.co_kwonlyargcount, code.co_flags],
        }


class _Unset(enum.Enum):
    UNSET = "unset"


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _own_identity(value: object) -> str | None:
    # An object may say what identifies it (safecons' stand-ins do, to leave out bookkeeping
    # such as a log of calls).
    try:
        identity = object.__getattribute__(value, "cache_identity")
    except AttributeError:
        return None
    return identity if isinstance(identity, str) else None


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _callable_name(fn: object) -> str:
    module = getattr(fn, "__module__", None)
    owner = getattr(fn, "__objclass__", None)
    if module is None and isinstance(owner, type):
        module = owner.__module__
    return f"{module}.{_short(fn)}"


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            private = slot.startswith("__") and not slot.endswith("__")
            name = f"_{klass.__name__.lstrip('_')}{slot}" if private else slot  # mangled
            if name not in names:
                names.append(name)
    return names


def _structural(value: object) -> bool:
    """Whether a class attribute is a descriptor implemented in C that the class statement
    made from its own layout (a slot, a namedtuple field): the layout is seen elsewhere."""
    if isinstance(value, types.FunctionType | staticmethod | classmethod | property):
        return False
    kind = type(value)
    return not kind.__flags__ & _HEAPTYPE and hasattr(kind, "__get__")


def _c_part(cls: type) -> type | None:
    """The first class of ``cls``'s MRO (``object`` aside) whose instances keep state that
    Python cannot read: one implemented in C, or made by C code with no ``__dict__`` and no
    ``__slots__``."""
    for klass in cls.__mro__:
        if klass is object:
            continue
        if not klass.__flags__ & _HEAPTYPE:
            return klass
        if klass.__dictoffset__ == 0 and "__slots__" not in vars(klass):
            return klass
    return None


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The globals a code object reads, its nested functions and comprehensions included."""
    names: dict[str, None] = {}
    for ins in dis.get_instructions(code):
        if ins.opname in _GLOBAL_READS:
            names[str(ins.argval)] = None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_global_names(const)))
    return tuple(names)


@functools.lru_cache(maxsize=4096)
def _attribute_names(code: types.CodeType) -> tuple[str, ...]:
    names = dict.fromkeys(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_attribute_names(const)))
    return tuple(names)


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(getattr(site, "getsitepackages", list)())
    user = getattr(site, "getusersitepackages", None)
    if user is not None:
        roots.add(user())
    return tuple(sorted({os.path.join(os.path.realpath(r), "") for r in roots if r}))


_LIBRARY_ROOTS: Final = _library_roots()


_library: dict[str, bool] = {}


def _is_library(module_name: str | None) -> bool:
    """Whether a module is installed code (the standard library or a site-packages
    package), known by its name; anything else (``__main__``, a notebook, the user's own
    files, a module that cannot be found) is the user's, and looked into."""
    if not module_name or module_name == "__main__":
        return False
    known = _library.get(module_name)
    if known is not None:
        return known
    module = sys.modules.get(module_name)
    if module is None:
        return module_name in sys.builtin_module_names  # not imported (yet): not cached
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        real = os.path.realpath(file)
        found = any(real.startswith(root) for root in _LIBRARY_ROOTS)
    else:
        spec = getattr(module, "__spec__", None)
        found = getattr(spec, "origin", None) in ("built-in", "frozen")
    _library[module_name] = found
    return found

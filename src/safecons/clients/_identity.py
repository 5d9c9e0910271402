"""The cache identity of a chat callable given without a name: its qualified name and a hash
of a short, documented list of what it holds (:func:`identify`).

The list is what a reader can check by looking at the function, nothing found by walking the
objects it reaches:

* its code object: bytecode, constants (nested code objects of lambdas, comprehensions and
  inner functions included, and so the docstring), the names it reads and its parameters;
* its defaults and keyword defaults, and the values of its closure cells, when they are plain
  data (None, bool, int, float, str, bytes, and tuples, lists, dicts, sets and frozensets of
  them; at most :data:`MAX_VALUES` values nested at most :data:`MAX_DEPTH` levels deep); a
  function among them (a decorator's wrapped function) counts by this same rule, a module, a
  class or a builtin by its name, anything else by its type's qualified name only; a long
  text or bytes (over 4,096) by a hash of it, a URL's user and password
  (``scheme://user:pass@host``) left out;
* the module-level values its code reads by name (``MODEL = "gpt-4o"``), when they are plain
  data that cannot change in place (scalars, and tuples and frozensets of them), by the same
  rule (a module, class or function it reads is code, not a setting; a list, dict or set is
  as often state the code keeps, a log or a memo, and is named instead);
* any value held under a credential's name (:func:`credential_name`), whatever its type, by
  that name only (a positional argument has no name, and is not recognised);
* for a bound method, its function, its class's name, its class's own attributes and the
  instance's attributes by the same rule; for a callable object, its class's name, its
  ``__call__``, its class's own attributes and its attributes; for a
  :func:`functools.partial`, its function and arguments; for a builtin, its name alone. A
  class's own attributes are those of each class of its MRO defined outside installed code,
  in definition order, its machinery (``__module__``, ``__dict__``, ...) left out: values by
  the rule above, functions (methods, static and class methods, a property's) by their code.

Every path is read once: an object or callable met again while it is being read (an object
holding its own bound method) counts as a reference to it (how many levels up), and callables
held more than :data:`MAX_DEPTH` levels deep by their name only.

What its code reads from elsewhere (the module-level values it reads by name that are not
plain data, what it reads from a module of the user's own, the code of the functions it calls)
is not part of it;
:attr:`Identity.unseen` names what of that can be named, for the warning a run with a cache
gives. No memory address or hash order enters the hash, so it is the same in every process.
"""

from __future__ import annotations

import dataclasses
import dis
import functools
import hashlib
import json
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import Any, Final

from .._foreign import Raised, guarded, type_name

__all__ = (
    "MAX_DEPTH",
    "MAX_VALUES",
    "Identity",
    "callable_digest",
    "credential_name",
    "identify",
    "short_name",
)

#: Values (scalars included) one default, closure cell or attribute may hold and count by value.
MAX_VALUES: Final = 10_000
#: Levels of nesting one such value may have (and of callables and objects held in each
#: other: functions in closures, bound methods and their objects, partials).
MAX_DEPTH: Final = 8
# Bumped whenever what the hash reads changes, so that old and new never share a key.
_SCHEME: Final = 3  # 3: plain immutable globals by value
# A str or bytes longer than this counts by a hash of it (read in chunks), not a copy.
_LONG: Final = 4096
_CHUNK: Final = 1 << 20
# A URL's user and password (scheme://user:pass@host): left out of its value.
_USERINFO: Final = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@")

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
        "conn",
        "dsn",
        "jwt",
        "passphrase",
        "passwd",
        "password",
        "pwd",
        "secret",
        "signature",
    }
)
# "key" and "token" name a credential (api_key, HF_TOKEN, key) unless the word before them
# makes them a setting of a model or a data structure (EOS_TOKEN, MODEL_KEY, sort_key): such a
# setting can change answers, so it counts by value.
_SETTING_KEYS: Final = frozenset(
    {
        "cache", "col", "column", "dict", "field", "foreign", "group", "hash", "index", "join",
        "json", "label", "lookup", "map", "model", "name", "partition", "primary", "prompt",
        "random", "rng", "route", "routing", "row", "seed", "sort",
    }
)  # fmt: skip
_SETTING_TOKENS: Final = frozenset(
    {
        "bos", "cls", "end", "eog", "eom", "eos", "eot", "im", "image", "mask", "max", "min",
        "num", "pad", "sep", "special", "start", "stop", "think", "thinking", "unk",
    }
)  # fmt: skip
_WORD: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

_SCALARS: Final = (type(None), bool, int, float, str, bytes)
_CONTAINERS: Final = (tuple, list, dict, set, frozenset)
# Callables made in C: known by their name.
_C_CALLABLES: Final = (
    types.BuiltinFunctionType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)
# What a global may hold and still not be "a value the code reads": code, not settings. A bound
# method or a partial held in a global carries settings (its instance, its arguments): named.
_CODE_LIKE: Final = (types.ModuleType, type, types.FunctionType, *_C_CALLABLES)
_GLOBAL_READS: Final = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
# A class's own attributes that are its machinery, not what its code reads.
_CLASS_MACHINERY: Final = frozenset(
    {
        "__abstractmethods__", "__annotate__", "__annotations__", "__dict__", "__doc__",
        "__firstlineno__", "__module__", "__orig_bases__", "__parameters__", "__qualname__",
        "__slots__", "__static_attributes__", "__type_params__", "__weakref__", "_abc_impl",
    }
)  # fmt: skip


def credential_name(name: str) -> bool:
    """Whether ``name`` (a variable, parameter, attribute or key) names a credential.

    A text held under such a name counts by its name only in a callable's identity: a key
    never reaches the cache, not even hashed, and rotating it keeps the cache.

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
class Identity:
    """What :func:`identify` made of a callable."""

    #: 16 hex digits of a blake2b hash of what the identity holds.
    digest: str
    #: What the callable reads that is not part of the identity, as far as it can be named:
    #: the module-level values its code reads that are not plain data (``"the global
    #: CONFIG"``), the modules of the
    #: user's own it reads from (``"the module config (what the code reads from it)"``), and
    #: each default, closure cell or attribute counted by its type only, with why. A value
    #: held under a credential's name is not listed: leaving it out is the rule, not a gap.
    #: Empty: its identity holds every value its code reads by name.
    unseen: tuple[str, ...]


def identify(fn: Callable[..., Any]) -> Identity:
    """The identity of an unnamed callable: a digest, and what it does not hold.

    Examples
    --------
    >>> identity = identify(lambda messages, temperature: "no")
    >>> len(identity.digest), identity.unseen
    (16, ())
    >>> identify(len).unseen
    ('len: implemented in C, known by its name only',)
    """
    reader = _Reader()
    tree = reader.callable(fn, short_name(fn), 0, root=True)
    blob = json.dumps(
        {"scheme": _SCHEME, "callable": tree},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=8)
    globals_read = tuple(f"the global {name}" for name in reader.globals)
    modules = tuple(f"the module {name} (what the code reads from it)" for name in reader.modules)
    return Identity(digest.hexdigest(), globals_read + modules + tuple(reader.unseen))


def callable_digest(fn: Callable[..., Any]) -> str:
    """The digest of :func:`identify` alone, for an identity built on a callable's.

    Examples
    --------
    >>> callable_digest(lambda m, temperature: "a") == callable_digest(
    ...     lambda m, temperature: "b")
    False
    """
    return identify(fn).digest


class _TooBig(Exception):
    """A value past :data:`MAX_VALUES` or :data:`MAX_DEPTH`."""


class _NotPlain(Exception):
    """A value that is not plain data."""


class _Reader:
    """One reading of a callable: what it found it could not count by value."""

    def __init__(self) -> None:
        self.globals: dict[str, None] = {}
        self.modules: dict[str, None] = {}
        self.unseen: list[str] = []
        # The callables and objects being read, outermost first: the cycle guard of every
        # recursive path (a bound method of an object held by that object, a partial over
        # its own object's method, an inner function in its own closure) and its depth
        # bound. Held, so that no id is reused during the read; ids never enter the hash.
        self.stack: list[object] = []

    def note(self, what: str) -> None:
        if what not in self.unseen:
            self.unseen.append(what)

    def enter(self, obj: object, name: str, where: str) -> object | None:
        """A back-reference when ``obj`` is being read already, the name alone past the depth
        bound; else None, and ``obj`` is pushed (the caller pops it)."""
        for i, held in enumerate(self.stack):
            if held is obj:  # a cycle: how many levels up, the same in every process
                return {"back": len(self.stack) - i, "name": name}
        if len(self.stack) > MAX_DEPTH:
            self.note(f"{where}: callables held {MAX_DEPTH} levels deep, known by their name only")
            return {"name": name}
        self.stack.append(obj)
        return None

    def callable(self, fn: object, where: str, depth: int, root: bool = False) -> object:
        own = _own_identity(fn)
        if own is not None:
            # An object that says what identifies it (safecons' stand-ins): that, whole.
            return {"cache_identity": [_qualified(type(fn)), own]}
        if isinstance(fn, types.FunctionType):
            return self.function(fn, where, depth)
        if isinstance(fn, (*_C_CALLABLES, type)):
            if root:
                kind = "a class" if isinstance(fn, type) else "implemented in C"
                self.note(f"{where}: {kind}, known by its name only")
            return {"name": _callable_name(fn)}
        seen = self.enter(fn, _qualified(type(fn)), where)
        if seen is not None:
            return seen
        try:
            return self.compound(fn, where, depth)
        finally:
            self.stack.pop()

    def compound(self, fn: object, where: str, depth: int) -> object:
        if isinstance(fn, types.MethodType):
            owner = fn.__self__
            cls = owner if isinstance(owner, type) else type(owner)
            method: dict[str, object] = {
                "method": self.callable(fn.__func__, where, depth),
                "class": _qualified(cls),
                "class_attributes": self.class_attributes(cls, where, depth),
                "state": [],
            }
            if not isinstance(owner, type):
                seen = self.enter(owner, _qualified(cls), where)
                if seen is not None:  # the object whose method this is, being read already
                    method["state"] = seen
                else:
                    try:
                        method["state"] = self.state(owner, where, depth)
                    finally:
                        self.stack.pop()
            return method
        if isinstance(fn, functools.partial):
            return {
                "partial": self.callable(fn.func, f"{where}.func", depth),
                "args": [self.value(a, f"{where}.args[{i}]", depth) for i, a in enumerate(fn.args)],
                "keywords": [
                    [k, self.named(k, v, f"{where}.keywords[{k!r}]", depth)]
                    for k, v in sorted(fn.keywords.items())
                ],
            }
        # The class's __call__, not the object's; its metaclass may raise reading it.
        call = guarded(getattr, type(fn), "__call__", None)
        out: dict[str, object] = {"instance": _qualified(type(fn))}
        if isinstance(call, types.FunctionType):
            out["call"] = self.function(call, f"{where}.__call__", depth)
        else:
            self.note(f"{where}: its __call__ is implemented in C, known by its class only")
        out["class_attributes"] = self.class_attributes(type(fn), where, depth)
        out["state"] = self.state(fn, where, depth)
        return out

    def function(self, fn: types.FunctionType, where: str, depth: int) -> object:
        name = f"{fn.__module__}.{fn.__qualname__}"
        if _installed(fn.__module__) and depth > 0:
            # A function of an installed package (json.dumps in a closure): by its name, as a
            # global function is, not looked into.
            return {"function": name}
        seen = self.enter(fn, name, where)
        if seen is not None:
            return seen
        try:
            code = fn.__code__
            read: list[object] = []
            for var in _global_names(code):
                value = fn.__globals__.get(var, _ABSENT)
                # Absent: a builtin, or a name not defined yet. Code (modules, classes,
                # functions) is not a setting, and is named in the warning as a whole; a
                # module of the user's own is named, as what the code reads from it is not
                # part of the identity. A global of plain data (MODEL = "gpt-4o") counts by
                # value, as a closure's does: the setting a notebook changes between two runs;
                # any other value is named in the warning.
                if isinstance(value, types.ModuleType):
                    if not _installed(value.__name__):
                        self.modules[value.__name__] = None
                elif value is _ABSENT or isinstance(value, _CODE_LIKE):
                    continue
                elif credential_name(var):
                    read.append([var, "credential"])
                elif not _immutable(value, 0):
                    # A list, dict or set at module level is as often state the code keeps
                    # (a log, a memo) as a setting: by value, every call would change the hash
                    # and no run would replay. Named instead.
                    self.globals[var] = None
                else:
                    try:
                        read.append([var, _Data().encode(value, 0)])
                    except (_NotPlain, _TooBig):
                        self.globals[var] = None
            params = code.co_varnames[: code.co_argcount]
            defaults = fn.__defaults__ or ()
            given = min(len(params), len(defaults))  # __defaults__ may be set to any tuple
            closure: list[object] = []
            for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
                try:
                    held = cell.cell_contents
                except ValueError:  # an empty cell (a name bound later)
                    closure.append([var, "unset"])
                    continue
                closure.append([var, self.named(var, held, f"{var} (in its closure)", depth)])
            return {
                "function": name,
                "code": _code(code),
                "defaults": [
                    [p, self.named(p, v, f"the default of {p}", depth)]
                    for p, v in zip(
                        params[len(params) - given :],
                        defaults[len(defaults) - given :],
                        strict=True,
                    )
                ],
                "kwdefaults": [
                    [k, self.named(k, v, f"the default of {k}", depth)]
                    for k, v in sorted((fn.__kwdefaults__ or {}).items())
                ],
                "closure": closure,
                "globals": read,
            }
        finally:
            self.stack.pop()

    def class_attributes(self, cls: type, where: str, depth: int) -> object:
        """The own attributes of each class of ``cls``'s MRO defined outside installed code,
        in definition order: values as a closure's are, functions by their code."""
        out: list[object] = []
        for klass in cls.__mro__:
            if klass is object or _installed(klass.__module__):
                continue
            pairs: list[object] = []
            for name, attribute in vars(klass).items():
                if name in _CLASS_MACHINERY:
                    continue
                at = f"{short_name(klass)}.{name}"
                value = attribute
                if isinstance(attribute, staticmethod | classmethod):
                    value = attribute.__func__
                if isinstance(value, property):
                    parts = (value.fget, value.fset, value.fdel)
                    pairs.append([name, [self.value(f, at, depth) for f in parts]])
                elif isinstance(value, _DESCRIPTORS):
                    continue  # a slot or __dict__'s descriptor: machinery
                else:
                    pairs.append([name, self.named(name, value, at, depth)])
            out.append([_qualified(klass), pairs])
        return out

    def state(self, obj: object, where: str, depth: int) -> object:
        """An object's own attributes (``__dict__`` and ``__slots__``), by name."""
        attributes = guarded(object.__getattribute__, obj, "__dict__")
        pairs = dict(attributes) if isinstance(attributes, dict) else {}
        for name in _slot_names(type(obj)):
            value = guarded(object.__getattribute__, obj, name)
            if isinstance(value, Raised):
                if isinstance(value.error, AttributeError):
                    continue  # a slot not set
                # A descriptor that raises: by its type, said.
                self.note(f"{where}.{name}: could not be read ({type_name(value.error)})")
                value = _UNREADABLE
            pairs.setdefault(name, value)
        return [
            [name, self.named(name, value, f"{where}.{name}", depth)]
            for name, value in sorted(pairs.items())
        ]

    def named(self, name: str, value: object, where: str, depth: int) -> object:
        """A value held under a name: any value under a credential's name counts by name."""
        if credential_name(name):
            return "credential"
        return self.value(value, where, depth)

    def value(self, value: object, where: str, depth: int) -> object:
        if value is _UNREADABLE:
            return {"type": "unreadable"}
        if isinstance(value, types.FunctionType | types.MethodType | functools.partial):
            return self.callable(value, where, depth + 1)
        if isinstance(value, types.ModuleType):
            return {"module": value.__name__}
        if isinstance(value, (type, *_C_CALLABLES)):
            return {"name": _callable_name(value)}
        own = _own_identity(value)
        if own is not None:
            return {"cache_identity": [_qualified(type(value)), own]}
        try:
            return {"data": _Data().encode(value, 0)}
        except _NotPlain:
            self.note(f"{where}: counted by its type ({_qualified(type(value))}) only")
        except _TooBig:
            self.note(
                f"{where}: more than {MAX_VALUES:,} values or nested deeper than {MAX_DEPTH} "
                f"levels, counted by its type ({_qualified(type(value))}) only"
            )
        return {"type": _qualified(type(value))}


def _immutable(value: object, depth: int) -> bool:
    """Whether ``value`` is plain data that cannot change in place: a scalar, or a tuple or
    frozenset of such (a global counts by value only then)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if (kind is tuple or kind is frozenset) and depth < MAX_DEPTH:
        assert isinstance(value, tuple | frozenset)
        return all(_immutable(v, depth + 1) for v in value)
    return False


_UNREADABLE: Final = object()
_DESCRIPTORS: Final = (types.MemberDescriptorType, types.GetSetDescriptorType)


class _Data:
    """Plain data as JSON: tagged, so that ``1``, ``1.0``, ``True`` and ``"1"`` differ; sets in
    the order of their elements' encodings, so that no hash order enters."""

    def __init__(self) -> None:
        self.left = MAX_VALUES

    def encode(self, value: object, depth: int) -> object:
        self.left -= 1
        if self.left < 0 or depth > MAX_DEPTH:
            raise _TooBig
        kind = type(value)
        if kind in _SCALARS:
            return _scalar(value)
        if kind is tuple or kind is list:
            assert isinstance(value, tuple | list)
            return [kind.__name__, [self.encode(v, depth + 1) for v in value]]
        if kind is set or kind is frozenset:
            assert isinstance(value, set | frozenset)
            items = [self.encode(v, depth + 1) for v in value]
            return [kind.__name__, sorted(items, key=_canonical)]
        if kind is dict:
            assert isinstance(value, dict)
            pairs: list[object] = []
            for k, v in value.items():  # in their order: code may read it
                if isinstance(k, str) and credential_name(k):
                    pairs.append([k, "credential"])
                else:
                    pairs.append([self.encode(k, depth + 1), self.encode(v, depth + 1)])
            return ["dict", pairs]
        raise _NotPlain


def _scalar(value: object) -> object:
    if isinstance(value, str):
        value = _USERINFO.sub(r"\1", value)  # no URL's password enters the hash
        if len(value) > _LONG:
            return ["str", {"blake2b": _long_digest(value)}]
        return ["str", value]
    if value is None or isinstance(value, bool):
        return [type(value).__name__, value]
    if isinstance(value, int):
        return ["int", hex(value)]  # hex: no limit on the digits of an int
    if isinstance(value, float):
        return ["float", repr(value)]  # repr: no float is rounded
    if isinstance(value, bytes):
        if len(value) > _LONG:
            return ["bytes", {"blake2b": _long_digest(value)}]
        return ["bytes", value.hex()]
    raise _NotPlain


def _long_digest(value: str | bytes) -> str:
    """A hash of a long text, read in chunks: no copy of it is made whole."""
    digest = hashlib.blake2b(digest_size=32)
    if isinstance(value, bytes):
        digest.update(value)  # read in place
        return digest.hexdigest()
    for start in range(0, len(value), _CHUNK):
        digest.update(value[start : start + _CHUNK].encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _canonical(item: object) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _code(code: types.CodeType) -> object:
    return {
        "bytecode": code.co_code.hex(),
        "consts": [_const(c) for c in code.co_consts],
        "names": list(code.co_names),
        "varnames": list(code.co_varnames),
        "shape": [
            code.co_argcount,
            code.co_posonlyargcount,
            code.co_kwonlyargcount,
            code.co_flags,
        ],
    }


def _const(value: object) -> object:
    if isinstance(value, types.CodeType):
        return {"code": _code(value)}
    kind = type(value)
    if kind is tuple or kind is frozenset:
        assert isinstance(value, tuple | frozenset)
        items = [_const(v) for v in value]
        return [kind.__name__, items if kind is tuple else sorted(items, key=_canonical)]
    if kind in _SCALARS:
        return _scalar(value)
    # Any other constant (a complex, Ellipsis) is a literal, whose repr is all of it.
    return [_qualified(kind), repr(value)]


_ABSENT: Final = object()


def _own_identity(value: object) -> str | None:
    # An object may say what identifies it (safecons' stand-ins do, to leave out bookkeeping
    # such as a log of calls). Read without running the object's own attribute hooks.
    if isinstance(value, type | types.ModuleType):
        return None
    # Absent, or a property that raises: no identity of its own.
    identity = guarded(object.__getattribute__, value, "cache_identity")
    return identity if isinstance(identity, str) else None


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def short_name(fn: object) -> str:
    """An object's qualified name, or its type's: read without trusting its ``__getattr__``."""
    # A __getattr__ may raise something else than AttributeError: read as no name.
    name = guarded(getattr, fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__qualname__


def _callable_name(fn: object) -> str:
    module = guarded(getattr, fn, "__module__", None)
    owner = guarded(getattr, fn, "__objclass__", None)
    if isinstance(module, Raised):
        module = None
    if module is None and isinstance(owner, type):
        module = owner.__module__
    return f"{module}.{short_name(fn)}"


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


def _roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted({os.path.join(os.path.realpath(r), "") for r in found if r}))


_INSTALLED_ROOTS: Final = _roots()


@functools.lru_cache(maxsize=1024)
def _installed(module_name: str | None) -> bool:
    """Whether a module is installed code (the standard library, site-packages, safecons)."""
    top = (module_name or "").partition(".")[0]
    if top in sys.stdlib_module_names or top == "safecons":
        return True
    module = sys.modules.get(module_name or "")
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False
    real = os.path.realpath(file)
    return any(real.startswith(root) for root in _INSTALLED_ROOTS)

"""An on-disk response cache: evaluations cost money and hours, so no finished call is lost.

One SQLite file (standard library, WAL mode), one row per finished call, written as soon as the
call finishes. A rerun with the same cache replays every finished call and requests only the
others, which is also how a run killed mid-way resumes.

What is stored, in clear: the prompts' hash (not the prompts) as the key, and each answer's
text (SUT answers and raw judge outputs). Treat the file like the data it was built from. It is
created readable and writable by its owner only (mode 0600). Errors are never stored, and a
judge output is stored only once it has parsed, so neither is replayed as a success.

An existing file is read before anything is written to it, and refused (:class:`CacheError`)
unless it is a safecons cache or empty: safecons never writes to, re-journals or changes the
mode of anyone else's file, follows no symbolic link, and tightens the mode only of files it
created (or found empty). A cache it cannot write to (a read-only file or folder, or
``read_only=True``) still replays: new answers are then not stored, with one warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CacheError, CacheWarning, InputError
from ._ledger import LEDGER_TABLES, CacheLedger
from ._sqlite import retry_busy, transaction

#: The kinds of call a cache holds (the run's ``CallKind``).
_KINDS = frozenset({"sut", "judge", "pairwise"})

__all__ = (
    "CacheArg",
    "CacheError",
    "DefaultCacheScope",
    "ResponseCache",
    "cache_key",
    "get_default_cache",
    "opened_cache",
    "resolve_cache",
    "set_default_cache",
)

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
"""
#: The tables of a cache whose ledger has recorded nothing yet (every cache of an earlier
#: safecons, which reads these).
_TABLES_BEFORE_LEDGER = {
    "meta": {"name", "value"},
    "responses": {"key", "kind", "endpoint", "value", "created"},
}
#: The tables of a cache whose ledger has recorded something (:mod:`._ledger`).
_TABLES = {**_TABLES_BEFORE_LEDGER, **LEDGER_TABLES}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def cache_key(**parts: Any) -> str:
    """A stable key from JSON-serialisable parts (endpoint, messages, temperature, ...).

    Examples
    --------
    >>> a = cache_key(endpoint="http://x/v1#m", messages=[{"role": "user", "content": "hi"}])
    >>> a == cache_key(messages=[{"role": "user", "content": "hi"}], endpoint="http://x/v1#m")
    True
    >>> len(a)
    64
    """
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _create_private(path: Path) -> bool:
    """Create ``path`` with mode 0600 from its first byte; False when it already exists."""
    # SQLite gives its -wal and -shm companions the database file's permissions.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        raise CacheError(
            path,
            f"cannot be created ({exc.strerror or type(exc).__name__}); pass a path in a folder "
            "you can write to",
        ) from None
    os.close(fd)
    return True


def _uri(path: Path, **query: str) -> str:
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{urllib.parse.urlencode(query)}"


@dataclass(frozen=True, slots=True)
class _Schema:
    """What an SQLite file holds: its tables (with their columns), every other schema object
    that is not the cache's own, whether a user or application version marks it, and the
    cache schema version when it is a cache."""

    tables: dict[str, set[str]]
    others: tuple[str, ...]
    marked: bool
    version: str | None

    @property
    def empty(self) -> bool:
        return not self.tables and not self.others and not self.marked

    @property
    def cache(self) -> bool:
        return self.tables in (_TABLES, _TABLES_BEFORE_LEDGER) and not self.others


# The cache's own non-table objects (its index, and SQLite's indexes of primary keys).
_OURS = {"responses_created"}


def _read_schema(uri: str) -> _Schema:
    conn = sqlite3.connect(uri, uri=True)
    try:
        objects = conn.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).fetchall()
        tables = {
            str(name): {str(r[1]) for r in conn.execute(f"PRAGMA table_info('{name}')")}
            for kind, name in objects
            if kind == "table"
        }
        others = tuple(
            sorted(
                f"{kind} {name}" for kind, name in objects if kind != "table" and name not in _OURS
            )
        )
        marked = any(
            conn.execute(f"PRAGMA {pragma}").fetchone()[0]
            for pragma in ("user_version", "application_id")
        )
        version = None
        if tables in (_TABLES, _TABLES_BEFORE_LEDGER):
            row = conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            version = None if row is None else str(row[0])
        return _Schema(tables, others, marked, version)
    finally:
        conn.close()


def _inspect(path: Path) -> _Schema:
    """What an SQLite file holds, read without changing it.

    ``immutable=1`` reads the file without locks and without creating -wal/-shm companions,
    so a foreign database is left exactly as it was. The file is read once more with locks,
    through its write-ahead log, when that first read shows nothing while a log exists (a
    cache whose schema was never checkpointed) or fails (another process is writing it).
    """
    try:
        found = _read_schema(_uri(path, immutable="1"))
    except sqlite3.DatabaseError:
        return _read_schema(_uri(path, mode="ro"))
    if found.empty and Path(f"{path}-wal").exists():
        return _read_schema(_uri(path, mode="ro"))
    return found


def _check_existing(path: Path) -> bool:
    """Refuse ``path`` unless it is a safecons cache or empty; True when it is empty."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise CacheError(path, f"cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise CacheError(
            path, "is a symbolic link; safecons follows none (pass the path of the file itself)"
        )
    if stat.S_ISDIR(info.st_mode):
        raise CacheError(path, "is a folder; pass a file path such as FOLDER/calls.sqlite")
    if not stat.S_ISREG(info.st_mode):
        raise CacheError(path, "is not a regular file (a device, pipe or socket)")
    if info.st_size == 0:
        return True
    try:
        with open(path, "rb") as f:
            header = f.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise CacheError(path, f"cannot be read ({exc.strerror})") from None
    if header != _SQLITE_MAGIC:
        raise CacheError(
            path,
            "is not a safecons cache (not an SQLite database) and was left untouched; pass the "
            "path of a new file",
        )
    try:
        schema = _inspect(path)
    except sqlite3.Error as exc:
        raise CacheError(
            path,
            f"is damaged or not a database ({exc}) and was left untouched; move it away or pass "
            "the path of a new file",
        ) from None
    if schema.empty:
        return True  # an SQLite header and nothing else: a cache whose creation was cut short
    if not schema.cache:
        held = [f"tables: {', '.join(sorted(schema.tables))}"] if schema.tables else []
        held += [", ".join(schema.others)] if schema.others else []
        held += ["a user or application version"] if schema.marked and not held else []
        raise CacheError(
            path,
            f"is an SQLite database but not a safecons cache ({'; '.join(held)}) and was left "
            "untouched; pass the path of a new file",
        )
    if schema.version != str(_SCHEMA_VERSION):
        raise CacheError(
            path,
            f"has cache schema version {schema.version!r}, and this safecons reads version "
            f"{_SCHEMA_VERSION}; use another file, or clear it with another safecons version",
        )
    return False


def _writable(path: Path) -> bool:
    # WAL mode needs the folder too, for the -wal and -shm files, unless they exist already.
    companions = all(Path(f"{path}{s}").exists() for s in ("-wal", "-shm"))
    return os.access(path, os.W_OK) and (companions or os.access(path.parent, os.W_OK))


class ResponseCache:
    """The response cache at ``path`` (created if absent).

    Parameters
    ----------
    path
        The SQLite file. Pass the same path to reruns (``cache=`` on
        :func:`~safecons.safety_consistency`, or once per session with
        :func:`~safecons.set_default_cache`).
    read_only
        Replay only: nothing is written (a file that cannot be written is opened so anyway).
    clock
        The wall clock its :attr:`ledger` stamps on what it records (seconds since the epoch;
        :func:`time.time` by default). It is read by people and earlier safecons versions,
        never to decide whether another run's claim is alive (a claim's heartbeat is timed by
        each reader's own monotonic clock), so machines whose clocks disagree share a cache
        safely; a test plays a skewed machine with it.

    Attributes
    ----------
    ledger
        The ledger kept in tables of its own in this file, on this cache's connection: which
        calls were sent to be answered later, where, and which run has claimed which calls
        (:class:`~safecons.run._ledger.CacheLedger`). A run using the cache hands it to its
        clients; its ``lease`` says how they keep their claims.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "calls.sqlite")
    >>> cache = ResponseCache(path)
    >>> cache.put("k1", kind="sut", endpoint="http://x/v1#m", value='{"text": "hi"}')
    '{"text": "hi"}'
    >>> cache.put("k1", kind="sut", endpoint="http://x/v1#m", value='{"text": "later"}')
    '{"text": "hi"}'
    >>> cache.get("k1")
    '{"text": "hi"}'
    >>> cache.info()["entries"], oct(os.stat(path).st_mode & 0o777)
    (1, '0o600')
    >>> cache.clear()
    1
    >>> cache.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        created = _create_private(self.path)
        empty = created or _check_existing(self.path)
        if empty and not created:
            self._tighten()
        self.read_only = read_only or not _writable(self.path)
        if self.read_only and empty:
            raise CacheError(self.path, "is empty and cannot be written to, so it holds nothing")
        try:
            self._conn = self._connect()
        except sqlite3.Error as exc:
            raise CacheError(self.path, f"cannot be opened ({exc})") from None
        self.ledger = CacheLedger(
            self.path, self._conn, self._lock, read_only=self.read_only, clock=clock
        )
        if not created and not self.read_only:
            info = self.path.stat()
            if info.st_mode & 0o077:
                warnings.warn(
                    f"cache {str(self.path)!r} is readable by others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}); safecons leaves an existing file's "
                    "mode as it is: chmod 600 it if its answers are private",
                    CacheWarning,
                    stacklevel=2,
                )

    def _tighten(self) -> None:
        # An empty file holds nothing of anyone's and is about to hold answers.
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            info = os.fstat(fd)
            if info.st_uid == os.getuid() and info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            try:
                if not Path(f"{self.path}-wal").exists():
                    # Nothing waits in a log: read the file as it is, creating no -wal or
                    # -shm beside it.
                    raise sqlite3.OperationalError("no write-ahead log")
                conn = sqlite3.connect(
                    _uri(self.path, mode="ro"), uri=True, check_same_thread=False
                )
                conn.execute("SELECT COUNT(*) FROM meta").fetchone()
            except sqlite3.OperationalError:
                # A WAL database in a folder we cannot write (no -shm can be made): read the
                # file as it is.
                conn = sqlite3.connect(
                    _uri(self.path, immutable="1"), uri=True, check_same_thread=False
                )
            return conn
        conn = sqlite3.connect(
            _uri(self.path, mode="rw"),
            uri=True,
            timeout=30.0,
            check_same_thread=False,
            isolation_level=None,
        )
        retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        # NORMAL in WAL mode: a committed call survives a crash of this process; only an OS
        # crash can lose the last few, and those are simply requested again.
        conn.execute("PRAGMA synchronous=NORMAL")
        self._conn = conn
        retry_busy(self._create_schema)
        return conn

    def _create_schema(self) -> None:
        with transaction(self._conn) as conn:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)",
                (str(_SCHEMA_VERSION),),
            )
            row = conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
        if str(row[0]) != str(_SCHEMA_VERSION):
            raise CacheError(
                self.path,
                f"has cache schema version {row[0]!r}, and this safecons reads version "
                f"{_SCHEMA_VERSION}; use another file",
            )

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def get(self, key: str) -> str | None:
        """The stored value for ``key``, or None."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, *, kind: str, endpoint: str, value: str) -> str:
        """Store one finished call (committed at once: one write per call).

        The first answer stored for a key stays: when two runs share the file and both answer
        the same call, the second gets the first's answer back (and should use it), so that
        every later rerun replays what one of them returned. Returns the stored value.
        A read-only cache raises :class:`CacheError`.
        """
        if self.read_only:
            raise CacheError(self.path, "is read-only: answers are replayed, new ones not stored")
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO responses (key, kind, endpoint, value, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, kind, endpoint, value, time.time()),
            )
            row = self._conn.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
        return value if row is None else str(row[0])

    def info(self) -> dict[str, Any]:
        """Entries in total, by kind and by endpoint, the oldest and newest, and the file size."""
        with self._lock:
            total, oldest, newest = self._conn.execute(
                "SELECT COUNT(*), MIN(created), MAX(created) FROM responses"
            ).fetchone()
            kinds = dict(
                self._conn.execute("SELECT kind, COUNT(*) FROM responses GROUP BY kind").fetchall()
            )
            endpoints = dict(
                self._conn.execute(
                    "SELECT endpoint, COUNT(*) FROM responses GROUP BY endpoint"
                ).fetchall()
            )
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            "path": str(self.path),
            "entries": int(total),
            "by_kind": kinds,
            "by_endpoint": endpoints,
            "oldest": oldest,
            "newest": newest,
            "bytes": size,
        }

    def clear(self, *, older_than: float | None = None, kind: str | None = None) -> int:
        """Delete entries (all, or older than ``older_than`` seconds, or of one kind).

        What the :attr:`ledger` recorded of the calls deleted is forgotten with them, so that
        a rerun asks those calls anew instead of reading the old answers again from the
        provider (what holds calls whose answers are not stored yet stays recorded: it may
        still run).
        Returns how many entries were deleted. ``older_than`` must be a finite number of
        seconds >= 0: a negative age would match every entry and NaN none, both silently.
        ``kind`` is one of ``"sut"``, ``"judge"``, ``"pairwise"``.
        """
        # Typed float, but a user may pass anything: numpy numbers are Reals; bools are not.
        given: object = older_than
        if given is not None and (
            isinstance(given, bool)
            or not isinstance(given, numbers.Real)
            or not math.isfinite(float(given))
            or float(given) < 0
        ):
            raise InputError(f"older_than: expected a finite number of seconds >= 0, got {given!r}")
        if kind is not None and kind not in _KINDS:
            raise InputError(f"kind: expected one of {sorted(_KINDS)}, got {kind!r}")
        clauses: list[str] = []
        args: list[Any] = []
        if older_than is not None:
            clauses.append("created < ?")
            args.append(time.time() - float(older_than))
        if kind is not None:
            clauses.append("kind = ?")
            args.append(kind)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        if self.read_only:
            raise CacheError(self.path, "is read-only: nothing can be cleared from it")
        with self._lock, transaction(self._conn) as conn:
            self.ledger.forget_cleared(where, args, everything=not clauses)
            deleted = conn.execute(f"DELETE FROM responses{where}", args).rowcount
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(deleted)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SessionDefault:
    """The session's default cache path: one for the whole process, every thread's (as
    :class:`polars.Config`'s settings are)."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._lock = threading.Lock()

    def get(self) -> Path | None:
        return self._path

    def swap(self, path: Path | None) -> Path | None:
        """Make ``path`` the default; the one it replaces."""
        with self._lock:
            previous, self._path = self._path, path
        return previous


_DEFAULT = _SessionDefault()


class DefaultCacheScope:
    """What :func:`~safecons.set_default_cache` returns: the default it set, and, used in a
    ``with`` block, the default from before it again at the block's end."""

    def __init__(self, path: Path | None, previous: Path | None) -> None:
        self.path = path
        self.previous = previous

    def __enter__(self) -> Path | None:
        return self.path

    def __exit__(self, *exc: object) -> None:
        _DEFAULT.swap(self.previous)

    def __repr__(self) -> str:
        shown = None if self.path is None else str(self.path)
        return f"set_default_cache({shown!r})"


def set_default_cache(path: str | os.PathLike[str] | None) -> DefaultCacheScope:
    """Use the cache at ``path`` for every later call that reaches a model (None: no cache).

    The default is set at once, for the session. Used as a ``with`` block, it is the
    block's: the default from before the call is set again when the block ends, however it
    ends (an error inside goes on out). Blocks nest. A ``cache=`` argument still wins for
    its own call.

    The default is the whole session's, not a thread's (as :class:`polars.Config`'s
    settings are): a block in one thread sets it for runs in every other, and blocks in
    several threads that overlap set back each one's previous default in the order they
    end. Runs in threads that each want their own cache pass ``cache=``.

    Parameters
    ----------
    path
        The cache file (made if absent), or None for no default.

    Returns
    -------
    DefaultCacheScope
        A context manager: ``with set_default_cache(path) as p:`` gives the path set, and
        sets the previous default back at the end of the block.

    Examples
    --------
    >>> import os, tempfile
    >>> from safecons import get_default_cache, set_default_cache
    >>> folder = tempfile.mkdtemp()
    >>> set_default_cache(os.path.join(folder, "session.sqlite"))  # for the session
    set_default_cache('.../session.sqlite')
    >>> with set_default_cache(os.path.join(folder, "run.sqlite")) as path:
    ...     get_default_cache().name  # every run in the block uses run.sqlite
    'run.sqlite'
    >>> get_default_cache().name  # the block's end sets the previous default again
    'session.sqlite'
    >>> with set_default_cache(None):
    ...     get_default_cache() is None
    True
    >>> _ = set_default_cache(None)
    """
    chosen = None if path is None else Path(path)
    return DefaultCacheScope(chosen, _DEFAULT.swap(chosen))


def get_default_cache() -> Path | None:
    """The session's default cache path, if one was set (:func:`set_default_cache`).

    Examples
    --------
    >>> from safecons import get_default_cache, set_default_cache
    >>> with set_default_cache("calls.sqlite"):
    ...     str(get_default_cache())
    'calls.sqlite'
    """
    return _DEFAULT.get()


#: What a ``cache=`` argument may be: a path, an open cache, None (the session default, if any)
#: or False (no cache even if a default is set).
CacheArg = str | os.PathLike[str] | ResponseCache | bool | None


def resolve_cache(cache: CacheArg, *, read_only: bool = False) -> ResponseCache | None:
    """Turn a ``cache=`` argument into an open cache (False: none, even if a default is set).

    ``read_only`` (a dry run's): a file is opened read-only, and a path where no file is yet
    is no cache (nothing is cached there), not a file made for it.
    """
    if cache is False:
        return None
    if isinstance(cache, ResponseCache):
        return cache
    path: str | os.PathLike[str]
    if cache is None or cache is True:
        default = get_default_cache()
        if default is None and cache is True:
            raise InputError(
                "cache=True uses the session's default cache, and none is set: pass a path, "
                "or call safecons.set_default_cache(path) first"
            )
        if default is None:
            return None
        path = default
    else:
        path = cache
    if read_only:
        # No file, or an empty one, holds nothing: opened read-only it would be an error.
        held = os.path.lexists(path) and (os.path.islink(path) or os.path.getsize(path) > 0)
        return ResponseCache(path, read_only=True) if held else None
    return ResponseCache(path)


@contextmanager
def opened_cache(cache: CacheArg, *, read_only: bool = False) -> Iterator[ResponseCache | None]:
    """:func:`resolve_cache` for the length of a ``with`` block.

    A cache opened here from a path (or the session default) is closed at the end; one the
    caller passed in open stays open.
    """
    store = resolve_cache(cache, read_only=read_only)
    try:
        yield store
    finally:
        if store is not None and store is not cache:
            store.close()

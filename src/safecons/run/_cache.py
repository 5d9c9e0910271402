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
import socket
import sqlite3
import stat
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clients._internal import CLAIM_PREFIX, BatchClaims
from ..errors import CacheError, CacheWarning, InputError

#: The kinds of call a cache holds (the run's ``CallKind``).
_KINDS = frozenset({"sut", "judge", "pairwise"})

__all__ = (
    "CacheArg",
    "CacheError",
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
#: Made when a run first records a provider batch, not before: a cache that never recorded
#: one keeps the tables an earlier safecons reads.
_BATCH_TABLE = """
CREATE TABLE IF NOT EXISTS batch_lines (
    key TEXT NOT NULL,
    batch TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (key, batch)
)
"""
_TABLES = {
    "meta": {"name", "value"},
    "responses": {"key", "kind", "endpoint", "value", "created"},
    "batch_lines": {"key", "batch", "endpoint", "created"},
}
#: The tables of a cache that has recorded no provider batch (every cache of an earlier
#: safecons, which reads these).
_TABLES_BEFORE_BATCHES = {name: _TABLES[name] for name in ("meta", "responses")}
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: Keys asked of the batch table at once (below SQLite's bound on a statement's variables).
_LOOKUP_CHUNK = 500


#: What begins the name of a claim's heartbeat in the ``meta`` table: ``beat:<claim>``, its
#: value ``{"n": <count>, "made": <the claimant's clock when it claimed>}``. A counter, not a
#: time: each reader times how long it has seen it unchanged by its own monotonic clock, so a
#: claim's liveness never depends on two machines' clocks agreeing.
_BEAT_PREFIX = "beat:"


def _is_claim(batch: str) -> bool:
    return batch.startswith(CLAIM_PREFIX)


def _beat_of(value: object) -> tuple[int, float | None, dict[str, float]]:
    """A heartbeat row's count, the time its claim was made, and the dead claims whose
    batches its maker took over looking for (claim -> when it was made); ``(-1, None, {})``
    when the row cannot be read."""
    try:
        data = json.loads(str(value))
        n, made = int(data["n"]), float(data["made"])
    except (ValueError, TypeError, KeyError, RecursionError):
        return -1, None, {}
    said = data.get("dead")
    dead = (
        {
            str(k): float(v)
            for k, v in said.items()
            if isinstance(k, str) and k.startswith(CLAIM_PREFIX) and isinstance(v, int | float)
        }
        if isinstance(said, dict)
        else {}
    )
    return n, made, dead


def _claimant_alive(claim: str) -> bool:
    """Whether the process that made ``claim`` may still be running (a process of another
    machine is taken to be until its claim goes stale)."""
    pid, _, host = claim.rsplit(":", 1)[-1].partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # there, under another user
    return True


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
        return self.tables in (_TABLES, _TABLES_BEFORE_BATCHES) and not self.others


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
        if tables in (_TABLES, _TABLES_BEFORE_BATCHES):
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


def _retry_busy(action: Any, attempts: int = 200) -> Any:
    # Switching to WAL (and creating the schema) can meet another process doing the same on a
    # new file; SQLite answers "database is locked" at once there instead of waiting.
    for n in range(attempts):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or n == attempts - 1:
                raise
            time.sleep(0.05)
    return None


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
        The wall clock stamped on the batches and claims a batched run records (seconds since
        the epoch; :func:`time.time` by default). It is read by people and earlier safecons
        versions, never to decide whether another run's claim is alive (a claim's heartbeat
        is timed by each reader's own monotonic clock), so machines whose clocks disagree
        share a cache safely; a test plays a skewed machine with it.

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
        # The wall clock stamped on batch records and claims (a parameter so that a test can
        # play a machine whose clock is off): read by people and by older safecons versions,
        # never to decide whether another machine's claim is alive.
        self._clock = clock
        # Each claim of another run seen, with its heartbeat count and when (by this
        # process's monotonic clock) that count was first seen.
        self._beats: dict[str, tuple[str, float]] = {}
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
        _retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        # NORMAL in WAL mode: a committed call survives a crash of this process; only an OS
        # crash can lose the last few, and those are simply requested again.
        conn.execute("PRAGMA synchronous=NORMAL")
        self._conn = conn
        _retry_busy(self._create_schema)
        return conn

    def _create_schema(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)",
                (str(_SCHEMA_VERSION),),
            )
            row = conn.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
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

    def record_batch(
        self, batch: str, *, endpoint: str, keys: Iterable[str], claim: str | None = None
    ) -> None:
        """Record that the provider's batch ``batch`` answers the calls ``keys`` of
        ``endpoint`` (committed at once, as soon as the batch is created): a rerun picks the
        batch up instead of paying for its calls again. ``claim``, the claim the batch was
        made under (:meth:`claim_batch_lines`), is replaced by the record. A read-only cache
        raises :class:`CacheError`."""
        if self.read_only:
            raise CacheError(self.path, "is read-only: a batch cannot be recorded in it")
        now = self._clock()
        rows = [(key, batch, endpoint, now) for key in keys]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(_BATCH_TABLE)
                if claim is not None:
                    self._conn.execute("DELETE FROM batch_lines WHERE batch=?", (claim,))
                    self._conn.execute("DELETE FROM meta WHERE name=?", (_BEAT_PREFIX + claim,))
                self._conn.executemany(
                    "INSERT OR IGNORE INTO batch_lines (key, batch, endpoint, created) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def batches_holding(self, endpoint: str, keys: Iterable[str]) -> dict[str, list[str]]:
        """The recorded batches of ``endpoint`` that hold any of ``keys``: batch id -> the
        keys among ``keys`` it holds (a key in several batches goes to the newest)."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        with self._lock:
            try:
                rows = self._batch_lines(wanted, endpoint, claims=False)
            except sqlite3.OperationalError:
                return {}  # a cache from before batches, opened read-only: none recorded
        # Newest by when it was recorded in this file (its rowid), not by a machine's clock.
        rows.sort(key=lambda row: row[3])
        newest = {str(key): str(batch) for key, batch, _, _ in rows}
        held: dict[str, list[str]] = {}
        for key, batch in newest.items():
            held.setdefault(batch, []).append(key)
        return held

    def _batch_lines(
        self, wanted: list[str], endpoint: str, *, claims: bool
    ) -> list[tuple[str, str, float, int]]:
        """``(key, batch, created, rowid)`` of the recorded lines of ``wanted`` keys of
        ``endpoint`` (claims among them, with ``claims``); the caller holds the lock."""
        rows: list[tuple[str, str, float, int]] = []
        # Only the keys asked for, by the table's key index: a lookup costs what it asks, not
        # the size of every batch ever recorded.
        for at in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[at : at + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            unclaimed = "" if claims else " AND batch NOT LIKE ?"
            rows += self._conn.execute(
                f"SELECT key, batch, created, rowid FROM batch_lines "
                f"WHERE key IN ({marks}) AND endpoint=?{unclaimed}",
                (*chunk, endpoint) if claims else (*chunk, endpoint, f"{CLAIM_PREFIX}%"),
            ).fetchall()
        return rows

    def prune_batch_lines(self, endpoint: str) -> int:
        """Forget the recorded batch lines of ``endpoint`` whose answers are stored (a rerun
        replays those from the cache and never needs their batch again); how many were
        forgotten."""
        if self.read_only:
            return 0
        with self._lock:
            try:
                return int(
                    self._conn.execute(
                        "DELETE FROM batch_lines "
                        "WHERE endpoint=? AND key IN (SELECT key FROM responses)",
                        (endpoint,),
                    ).rowcount
                )
            except sqlite3.OperationalError:
                return 0  # no batch was ever recorded here

    def forget_batch_lines(self, batch: str, keys: Iterable[str]) -> None:
        """Forget that ``batch`` answers ``keys`` (they failed, or it ended without them): a
        rerun sends them anew."""
        if self.read_only:
            return
        with self._lock:
            try:
                self._conn.executemany(
                    "DELETE FROM batch_lines WHERE key=? AND batch=?", [(k, batch) for k in keys]
                )
            except sqlite3.OperationalError:
                return  # no batch was ever recorded here: nothing to forget

    def claim_batch_lines(
        self,
        claim: str,
        *,
        endpoint: str,
        keys: Iterable[str],
        stale_after: float,
        anew: Iterable[str] = (),
    ) -> BatchClaims:
        """Claim the calls ``keys`` of ``endpoint`` for a batch about to be made, so that no
        other run on this cache (another process, or another thread) makes a second batch of
        them meanwhile (committed at once, in one transaction).

        ``claim`` is a :func:`new_claim` of the caller's. A key whose answer is stored (another
        run answered it since the caller missed the cache) is not claimed but named in
        :attr:`BatchClaims.stored`; a key a recorded batch holds is held; a key no live claim
        holds is claimed; so is one whose claim is stale: its heartbeat
        (:meth:`refresh_batch_claim`) seen unchanged for ``stale_after`` seconds by this
        process's own monotonic clock (never by comparing its maker's clock with this one), or
        made by a process of this machine that is no longer running. A key of ``anew`` (its
        recorded batch's or stored answer would not do) is claimed whatever batch holds it.
        :meth:`record_batch` with ``claim`` turns the claim into the batch's record;
        :meth:`release_batch_claim` gives it up. A read-only cache raises :class:`CacheError`.
        """
        if self.read_only:
            raise CacheError(self.path, "is read-only: a batch cannot be recorded in it")
        wanted = sorted(set(keys))
        again = set(anew)
        now = self._clock()
        claims = BatchClaims()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(_BATCH_TABLE)
                stored = self._stored([key for key in wanted if key not in again])
                rows = self._batch_lines(wanted, endpoint, claims=True)
                batches: dict[str, tuple[str, float]] = {}
                claimed: dict[str, tuple[str, float]] = {}
                # The newest line of each key, by when it was written in this file (its rowid):
                # never by the clocks of the machines that wrote them.
                for key, batch, created, _ in sorted(rows, key=lambda row: row[3]):
                    into = claimed if _is_claim(batch) else batches
                    into[key] = (str(batch), float(created))
                taken_over: list[tuple[str, str]] = []
                live: dict[str, bool] = {}
                for key in wanted:
                    if key in stored:
                        claims.stored.append(key)
                    elif key in batches and key not in again:
                        claims.held.setdefault(batches[key][0], []).append(key)
                    elif key in claimed and claimed[key][0] != claim:
                        other, when = claimed[key]
                        if other not in live:
                            live[other] = self._alive(other, when, stale_after)
                        if live[other]:
                            claims.theirs.setdefault(other, []).append(key)
                        else:
                            claims.stale.setdefault(other, []).append(key)
                            claims.ours.append(key)
                            taken_over.append((key, other))
                    else:
                        claims.ours.append(key)
                for other, taken in list(claims.stale.items()):
                    made, dead = self._made(other, claimed, default=now)
                    claims.made[other] = made
                    # Its maker may itself have taken over claims of runs that died, and died
                    # looking for their batches: those are looked for again.
                    for gone, when in dead.items():
                        if gone != claim and gone not in claims.stale:
                            claims.stale[gone] = list(taken)
                            claims.made[gone] = when
                self._conn.executemany(
                    "DELETE FROM batch_lines WHERE key=? AND batch=?", taken_over
                )
                self._conn.executemany(
                    "DELETE FROM meta WHERE name=? AND NOT EXISTS "
                    "(SELECT 1 FROM batch_lines WHERE batch=?)",
                    [(_BEAT_PREFIX + other, other) for other in claims.stale],
                )
                self._conn.executemany(
                    "INSERT OR REPLACE INTO batch_lines (key, batch, endpoint, created) "
                    "VALUES (?, ?, ?, ?)",
                    [(key, claim, endpoint, now) for key in claims.ours],
                )
                if claims.ours:
                    beat = {"n": 0, "made": now, "dead": claims.made}
                    self._conn.execute(
                        "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                        (_BEAT_PREFIX + claim, json.dumps(beat)),
                    )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return claims

    def _stored(self, wanted: list[str]) -> set[str]:
        """The keys among ``wanted`` whose answers are stored (the caller holds the lock)."""
        found: set[str] = set()
        for at in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[at : at + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(f"SELECT key FROM responses WHERE key IN ({marks})", chunk)
            found.update(str(row[0]) for row in rows)
        return found

    def _alive(self, claim: str, created: float, stale_after: float) -> bool:
        """Whether another run's ``claim`` is alive: its maker (of this machine) still runs,
        and this process has not seen its heartbeat unchanged for ``stale_after`` seconds
        (the caller holds the lock)."""
        if not _claimant_alive(claim):
            return False
        row = self._conn.execute(
            "SELECT value FROM meta WHERE name=?", (_BEAT_PREFIX + claim,)
        ).fetchone()
        # A claim of an earlier safecons has no heartbeat: its refreshed time is its beat.
        beat = f"n:{_beat_of(row[0])[0]}" if row is not None else f"at:{created!r}"
        seen = self._beats.get(claim)
        mono = time.monotonic()
        if seen is None or seen[0] != beat:
            self._beats[claim] = seen = (beat, mono)
        return mono - seen[1] < stale_after

    def _made(
        self, claim: str, claimed: dict[str, tuple[str, float]], *, default: float
    ) -> tuple[float, dict[str, float]]:
        """When ``claim`` was made, by its maker's clock, and the dead claims its maker was
        looking for (the caller holds the lock)."""
        row = self._conn.execute(
            "SELECT value FROM meta WHERE name=?", (_BEAT_PREFIX + claim,)
        ).fetchone()
        _, made, dead = (-1, None, {}) if row is None else _beat_of(row[0])
        if made is None:
            times = [when for other, when in claimed.values() if other == claim]
            made = min(times, default=default)
        return made, dead

    def refresh_batch_claim(self, claim: str) -> None:
        """Say that ``claim``'s maker is still at work: its heartbeat counts one more (and its
        lines carry this process's time, for earlier safecons versions to read)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                name = _BEAT_PREFIX + claim
                row = self._conn.execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
                if row is not None:
                    n, made, dead = _beat_of(row[0])
                    made = self._clock() if made is None else made
                    beat = {"n": n + 1, "made": made, "dead": dead}
                    self._conn.execute(
                        "UPDATE meta SET value=? WHERE name=?", (json.dumps(beat), name)
                    )
                self._conn.execute(
                    "UPDATE batch_lines SET created=? WHERE batch=?", (self._clock(), claim)
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def release_batch_claim(self, claim: str) -> None:
        """Give ``claim`` up: no batch was made of its calls (another run may claim them)."""
        if self.read_only:
            return
        with self._lock:
            try:
                self._conn.execute("DELETE FROM meta WHERE name=?", (_BEAT_PREFIX + claim,))
                self._conn.execute("DELETE FROM batch_lines WHERE batch=?", (claim,))
            except sqlite3.OperationalError:
                return  # no batch was ever recorded here

    def _tables(self) -> set[str]:
        """The tables the file holds now (the caller holds the lock)."""
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        return {str(r[0]) for r in rows}

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

        The provider batches recorded for the calls deleted are forgotten with them, so that
        a batched rerun asks those calls anew instead of reading the old batch's answers
        again (a batch whose answers are not stored yet stays recorded: it may still run).
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
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if "batch_lines" in self._tables():
                    # A recorded batch would otherwise answer the cleared calls again from
                    # its output file: forget the lines of every entry cleared (emptied: all
                    # of them). A batch whose answers are not stored yet is left recorded,
                    # however old: it may still run, and a rerun picks it up.
                    self._conn.execute(
                        f"DELETE FROM batch_lines WHERE key IN (SELECT key FROM responses{where})",
                        args,
                    )
                    if not clauses:
                        self._conn.execute("DELETE FROM batch_lines")
                        self._conn.execute(
                            "DELETE FROM meta WHERE name LIKE ?", (f"{_BEAT_PREFIX}%",)
                        )
                deleted = self._conn.execute(f"DELETE FROM responses{where}", args).rowcount
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
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


_default_cache: list[Path | None] = [None]


def set_default_cache(path: str | os.PathLike[str] | None) -> None:
    """Use the cache at ``path`` for every later call that reaches a model (None: no cache).

    A ``cache=`` argument still wins for its own call.

    Examples
    --------
    >>> from safecons import set_default_cache, get_default_cache
    >>> set_default_cache(None)
    >>> get_default_cache() is None
    True
    """
    _default_cache[0] = None if path is None else Path(path)


def get_default_cache() -> Path | None:
    """The session's default cache path, if one was set."""
    return _default_cache[0]


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

"""The batch ledger: which provider batch answers which call, and which run has claimed which
calls for a batch about to be made, kept in the response cache's own file.

A batched run records every batch it makes (:meth:`CacheLedger.record_batch`) as soon as the
provider has created it, and claims its calls before it uploads their file
(:meth:`CacheLedger.claim_batch_lines`), so that a rerun, a second process or another thread
sharing the cache picks that batch up instead of paying for its calls twice. The ledger lives
in tables of its own in the cache's file (``batch_lines``, and heartbeats in ``meta``), and
shares the cache's connection: a claim reads the stored answers and writes its claims in one
transaction, so that no answer stored meanwhile is bought again.

A cache that never recorded a batch has no ``batch_lines`` table (the tables an earlier
safecons reads); the ledger makes it when it first writes.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..clients._internal import CLAIM_PREFIX, BatchClaims, ClaimLease
from ..errors import CacheError
from ._sqlite import transaction

__all__ = ("LEDGER_TABLES", "CacheLedger")

#: Made when a run first records a provider batch, not before: a cache that never recorded
#: one keeps the tables an earlier safecons reads.
_LINES_TABLE = """
CREATE TABLE IF NOT EXISTS batch_lines (
    key TEXT NOT NULL,
    batch TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (key, batch)
)
"""
#: The ledger's tables and their columns (a cache file may hold them, or not yet).
LEDGER_TABLES = {"batch_lines": {"key", "batch", "endpoint", "created"}}
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


class CacheLedger:
    """The batch ledger kept in a response cache's file (a cache's :attr:`ledger
    <safecons.ResponseCache.ledger>`; made by the cache, on its connection and its lock).

    ``clock`` is the wall clock stamped on the batches and claims it records (seconds since
    the epoch), read by people and by earlier safecons versions, never to decide whether
    another run's claim is alive: a claim's heartbeat is timed by each reader's own monotonic
    clock, so machines whose clocks disagree share a cache safely. :attr:`lease` is how the
    runs using this ledger keep their claims (:meth:`ClaimLease.default
    <safecons.clients._batch_claims.ClaimLease.default>` unless set).
    """

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        lock: threading.Lock,
        *,
        read_only: bool,
        clock: Callable[[], float],
    ) -> None:
        self.path = path
        self.read_only = read_only
        #: How runs using this ledger keep their claims; set it (a frozen value) to shorten
        #: them, as a test or a campaign of killed runs does.
        self.lease = ClaimLease.default()
        self._conn = conn
        self._lock = lock
        self._clock = clock
        # Each claim of another run seen, with its heartbeat count and when (by this
        # process's monotonic clock) that count was first seen.
        self._beats: dict[str, tuple[str, float]] = {}

    def __repr__(self) -> str:
        return f"CacheLedger({str(self.path)!r})"

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise CacheError(self.path, "is read-only: a batch cannot be recorded in it")

    def record_batch(
        self, batch: str, *, endpoint: str, keys: Iterable[str], claim: str | None = None
    ) -> None:
        """Record that the provider's batch ``batch`` answers the calls ``keys`` of
        ``endpoint`` (committed at once, as soon as the batch is created): a rerun picks the
        batch up instead of paying for its calls again. ``claim``, the claim the batch was
        made under (:meth:`claim_batch_lines`), is replaced by the record. A read-only cache
        raises :class:`~safecons.CacheError`."""
        self._refuse_read_only()
        now = self._clock()
        rows = [(key, batch, endpoint, now) for key in keys]
        with self._lock, transaction(self._conn) as conn:
            conn.execute(_LINES_TABLE)
            if claim is not None:
                conn.execute("DELETE FROM batch_lines WHERE batch=?", (claim,))
                conn.execute("DELETE FROM meta WHERE name=?", (_BEAT_PREFIX + claim,))
            conn.executemany(
                "INSERT OR IGNORE INTO batch_lines (key, batch, endpoint, created) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )

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

    def forget_cleared(self, where: str, args: list[object], *, everything: bool) -> None:
        """Forget the lines of the stored answers ``where`` selects (``everything``: every
        line and heartbeat), as the cache clears them: a recorded batch would otherwise answer
        the cleared calls again from its output file. A batch whose answers are not stored
        yet is left recorded, however old: it may still run, and a rerun picks it up.

        Called inside the cache's own transaction, with its lock held.
        """
        tables = {str(r[0]) for r in self._conn.execute("SELECT name FROM sqlite_master")}
        if "batch_lines" not in tables:
            return
        self._conn.execute(
            f"DELETE FROM batch_lines WHERE key IN (SELECT key FROM responses{where})", args
        )
        if everything:
            self._conn.execute("DELETE FROM batch_lines")
            self._conn.execute("DELETE FROM meta WHERE name LIKE ?", (f"{_BEAT_PREFIX}%",))

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

        ``claim`` is a :func:`~safecons.clients._batch_claims.new_claim` of the caller's. A
        key whose answer is stored (another run answered it since the caller missed the
        cache) is not claimed but named in ``BatchClaims.stored``; a key a recorded batch
        holds is held; a key no live claim holds is claimed; so is one whose claim is stale:
        its heartbeat (:meth:`refresh_batch_claim`) seen unchanged for ``stale_after``
        seconds by this process's own monotonic clock (never by comparing its maker's clock
        with this one), or made by a process of this machine that is no longer running. A
        key of ``anew`` (its recorded batch's or stored answer would not do) is claimed
        whatever batch holds it. :meth:`record_batch` with ``claim`` turns the claim into the
        batch's record; :meth:`release_batch_claim` gives it up. A read-only cache raises
        :class:`~safecons.CacheError`.
        """
        self._refuse_read_only()
        wanted = sorted(set(keys))
        again = set(anew)
        now = self._clock()
        claims = BatchClaims()
        with self._lock, transaction(self._conn) as conn:
            conn.execute(_LINES_TABLE)
            # The stored answers are read in the claim's own transaction: an answer stored
            # by another run before it commits is seen here, never bought again.
            stored = self._stored([key for key in wanted if key not in again])
            batches, claimed = _newest(self._batch_lines(wanted, endpoint, claims=True))
            taken_over = self._sort(
                claim,
                claims,
                wanted=wanted,
                again=again,
                stored=stored,
                batches=batches,
                claimed=claimed,
                stale_after=stale_after,
            )
            self._note_stale(claim, claimed, claims, now)
            conn.executemany("DELETE FROM batch_lines WHERE key=? AND batch=?", taken_over)
            conn.executemany(
                "DELETE FROM meta WHERE name=? AND NOT EXISTS "
                "(SELECT 1 FROM batch_lines WHERE batch=?)",
                [(_BEAT_PREFIX + other, other) for other in claims.stale],
            )
            conn.executemany(
                "INSERT OR REPLACE INTO batch_lines (key, batch, endpoint, created) "
                "VALUES (?, ?, ?, ?)",
                [(key, claim, endpoint, now) for key in claims.ours],
            )
            if claims.ours:
                beat = {"n": 0, "made": now, "dead": claims.made}
                conn.execute(
                    "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                    (_BEAT_PREFIX + claim, json.dumps(beat)),
                )
        return claims

    def _sort(
        self,
        claim: str,
        claims: BatchClaims,
        *,
        wanted: list[str],
        again: set[str],
        stored: set[str],
        batches: dict[str, tuple[str, float]],
        claimed: dict[str, tuple[str, float]],
        stale_after: float,
    ) -> list[tuple[str, str]]:
        """Put each of ``wanted`` in its place in ``claims`` (stored, held, theirs, ours); the
        ``(key, claim)`` lines of stale claims taken over (the caller holds the lock)."""
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
        return taken_over

    def _note_stale(
        self,
        claim: str,
        claimed: dict[str, tuple[str, float]],
        claims: BatchClaims,
        now: float,
    ) -> None:
        """When each stale claim taken over was made; and the dead claims their makers were
        looking for, looked for again (the caller holds the lock)."""
        for other, taken in list(claims.stale.items()):
            made, dead = self._made(other, claimed, default=now)
            claims.made[other] = made
            # Its maker may itself have taken over claims of runs that died, and died
            # looking for their batches: those are looked for again.
            for gone, when in dead.items():
                if gone != claim and gone not in claims.stale:
                    claims.stale[gone] = list(taken)
                    claims.made[gone] = when

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
        with self._lock, transaction(self._conn) as conn:
            name = _BEAT_PREFIX + claim
            row = conn.execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
            if row is not None:
                n, made, dead = _beat_of(row[0])
                made = self._clock() if made is None else made
                beat = {"n": n + 1, "made": made, "dead": dead}
                conn.execute("UPDATE meta SET value=? WHERE name=?", (json.dumps(beat), name))
            conn.execute("UPDATE batch_lines SET created=? WHERE batch=?", (self._clock(), claim))

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


def _newest(
    rows: list[tuple[str, str, float, int]],
) -> tuple[dict[str, tuple[str, float]], dict[str, tuple[str, float]]]:
    """The newest recorded batch and the newest claim of each key among ``rows`` (key ->
    (batch or claim, when)), by when each line was written in this file (its rowid): never by
    the clocks of the machines that wrote them."""
    batches: dict[str, tuple[str, float]] = {}
    claimed: dict[str, tuple[str, float]] = {}
    for key, batch, created, _ in sorted(rows, key=lambda row: row[3]):
        into = claimed if _is_claim(batch) else batches
        into[key] = (str(batch), float(created))
    return batches, claimed

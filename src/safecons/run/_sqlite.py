"""What the response cache and its ledger, sharing one SQLite file and one connection,
both need of SQLite: a write transaction, and a retry when a new file is busy being made."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ("retry_busy", "transaction")

T = TypeVar("T")


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn`` (in autocommit mode) for the block: ``BEGIN
    IMMEDIATE`` takes the file's write lock first, so that what the block reads stays true
    until it commits; whatever ends the block early (an error, an interrupt) rolls it back."""
    conn.execute("BEGIN IMMEDIATE")
    committed = False
    try:
        yield conn
        conn.execute("COMMIT")
        committed = True
    finally:
        if not committed:
            conn.execute("ROLLBACK")


def retry_busy(action: Callable[[], T], attempts: int = 200) -> T:
    """``action()``, tried again while SQLite answers "locked" or "busy" at once.

    Switching to WAL (and creating the schema) can meet another process doing the same on a
    new file; SQLite answers "database is locked" there at once instead of waiting.
    """
    for _ in range(attempts - 1):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(0.05)
    return action()

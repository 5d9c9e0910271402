"""What a batched session needs of the ledger its batches are recorded in, and the claims by
which runs sharing that ledger never make two batches of one call.

A batched run claims its calls before it uploads their file, beats its claim's heartbeat
until the batch is recorded, and waits for another run's claim instead of buying the same
calls again. The ledger itself (the run's cache file keeps it) is
:class:`safecons.run._ledger.CacheLedger`; this module is its contract, on this side of the
house, and the lease every claim keeps (:class:`ClaimLease`).
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from ..errors import CacheError

__all__ = (
    "CLAIM_POLL_SECONDS",
    "CLAIM_PREFIX",
    "CLAIM_REFRESH_SECONDS",
    "CLAIM_STALE_SECONDS",
    "LEDGER_ERRORS",
    "BatchClaims",
    "BatchLedger",
    "ClaimLease",
    "claim_tag",
    "new_claim",
)

#: What begins a claim's id where a ledger keeps batch ids (no provider's batch id does).
CLAIM_PREFIX: Final = "claim:"
#: How often a run waiting for another run's batch looks at the ledger again (seconds).
CLAIM_POLL_SECONDS = 1.0
#: How often a run beats its claim's heartbeat from the claim to the batch's record
#: (seconds), and how long another run, timing it by its own monotonic clock, must see the
#: heartbeat still before it takes the claim over (a run on another machine that died).
CLAIM_REFRESH_SECONDS = 30.0
CLAIM_STALE_SECONDS = 120.0
#: What a ledger's methods may raise: a locked, broken or vanished file, or one that cannot
#: be written (a read-only cache). A batched run warns and goes on: it loses only the
#: chance to be picked up by a rerun.
LEDGER_ERRORS: Final = (sqlite3.Error, OSError, CacheError)


@dataclass(frozen=True, slots=True)
class ClaimLease:
    """How a run keeps its claims on a ledger, and how long it trusts another run's.

    Parameters
    ----------
    refresh_seconds
        How often a claim's heartbeat beats, from the claim to its batch's record.
    stale_seconds
        How long another run's heartbeat must be seen unchanged (by this process's own
        monotonic clock) before its claim is taken over: its run died. Longer than
        ``refresh_seconds`` by a margin for a busy machine.
    poll_seconds
        How often a run waiting for another run's batch looks at the ledger again.

    Examples
    --------
    >>> lease = ClaimLease.default()
    >>> lease.refresh_seconds < lease.stale_seconds
    True
    >>> import dataclasses
    >>> dataclasses.replace(lease, stale_seconds=2.0, refresh_seconds=0.2).stale_seconds
    2.0
    """

    refresh_seconds: float
    stale_seconds: float
    poll_seconds: float

    @classmethod
    def default(cls) -> ClaimLease:
        """The lease of every ledger not told otherwise (read when the ledger is made)."""
        return cls(CLAIM_REFRESH_SECONDS, CLAIM_STALE_SECONDS, CLAIM_POLL_SECONDS)


def new_claim() -> str:
    """A claim id for :meth:`BatchLedger.claim_batch_lines`: ``claim:<tag>:<pid>@<host>``,
    the tag (:func:`claim_tag`) also sent in the batch's metadata, so that a run taking over a
    stale claim can find a batch its maker created but did not live to record."""
    return f"{CLAIM_PREFIX}{secrets.token_hex(12)}:{os.getpid()}@{socket.gethostname()}"


def claim_tag(claim: str) -> str:
    """The part of ``claim`` a batch carries in its metadata (no host, no process)."""
    return claim.removeprefix(CLAIM_PREFIX).split(":", 1)[0]


@dataclass
class BatchClaims:
    """What :meth:`BatchLedger.claim_batch_lines` found of each key asked for."""

    #: Claimed now: the caller makes their batch.
    ours: list[str] = field(default_factory=list)
    #: Held by a recorded batch (batch id -> keys): picked up, not made again.
    held: dict[str, list[str]] = field(default_factory=dict)
    #: Claimed by another run still at work (claim -> keys): wait for its record.
    theirs: dict[str, list[str]] = field(default_factory=dict)
    #: Taken over from a stale claim (claim -> keys; they are in :attr:`ours` too): its
    #: maker may have made the batch before it died, tagged :func:`claim_tag`.
    stale: dict[str, list[str]] = field(default_factory=dict)
    #: When each stale claim was made, by its maker's clock (claim -> seconds since the
    #: epoch): the provider's listing is read back to then (with a day's slack for clocks).
    made: dict[str, float] = field(default_factory=dict)
    #: Answered and stored meanwhile by another run (the caller missed the cache before it
    #: was stored): replayed from the cache, never bought again.
    stored: list[str] = field(default_factory=list)


class BatchLedger(Protocol):
    """Where a batched session records its batches and claims its calls: the run's cache
    file (:class:`safecons.run._ledger.CacheLedger` keeps them in a table of it). Every
    method may raise one of :data:`LEDGER_ERRORS` (a locked or broken file): the batcher
    warns and goes on."""

    @property
    def path(self) -> Path: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def lease(self) -> ClaimLease: ...

    def record_batch(
        self, batch: str, *, endpoint: str, keys: Iterable[str], claim: str | None = None
    ) -> None: ...

    def batches_holding(self, endpoint: str, keys: Iterable[str]) -> dict[str, list[str]]: ...

    def prune_batch_lines(self, endpoint: str) -> int: ...

    def forget_batch_lines(self, batch: str, keys: Iterable[str]) -> None: ...

    def claim_batch_lines(
        self,
        claim: str,
        *,
        endpoint: str,
        keys: Iterable[str],
        stale_after: float,
        anew: Iterable[str] = (),
    ) -> BatchClaims: ...

    def refresh_batch_claim(self, claim: str) -> None: ...

    def release_batch_claim(self, claim: str) -> None: ...

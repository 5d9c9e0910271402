"""No call of a batched run is bought twice: runs sharing one cache, started together or
moments apart, killed at any point, on machines whose clocks disagree by an hour.

The runs are real processes (each a ``python -c`` of its own) against the fake server's
Batch API; a claimant's wall clock is played by the cache's ``clock`` argument. Each test is
a finding of the red team's, and fails on the code before its fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.clients import _batch_api, _batch_claims, _batch_run
from safecons.testing import FakeOpenAIServer, route_by_model
from safecons.testing.hostile import slow

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})

#: One batched run, in a process of its own: argv is the server, the cache, the client's
#: batch_wait_seconds and how far the process's wall clock is off (seconds). It says "go"
#: just before the run starts, then how many rows were scored.
RUN = """
import sys, time, warnings
import polars as pl
import safecons as sc
from safecons.clients import _batch_claims
from safecons.run import ResponseCache

base_url, path, wait, skew = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
# A claim's heartbeat every 0.2 s, stale when seen unchanged for 2 s: the real 30 s and
# 120 s, shortened so that a test takes seconds.
_batch_claims.CLAIM_REFRESH_SECONDS = 0.2
_batch_claims.CLAIM_STALE_SECONDS = 2.0
_batch_claims.CLAIM_POLL_SECONDS = 0.1
cache = ResponseCache(path, clock=lambda: time.time() + skew) if skew else path
rows = pl.DataFrame({
    "input_id": [f"r{i}" for i in range(3)],
    "prompt": [f"question number {i}" for i in range(3)],
    "sut_response": ["I'm sorry, but I can't help with that."] * 3,
})
made = [sc.OpenAICompatible(model=role, base_url=base_url, api_key="",
                            batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=wait))
        for role in ("sut", "judge")]
warnings.simplefilter("ignore")
print("go", flush=True)
out = rows.pipe(sc.safety_consistency, sut=made[0], judge=made[1], cache=cache,
                responses_per_query=2, progress=False)
print(out.height - out["safety_consistency"].null_count(), flush=True)
"""


def start(srv: FakeOpenAIServer, cache: Path, *, wait: float = 0.25, skew: float = 0.0):
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, srv.base_url, str(cache), str(wait), str(skew)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc


def went(proc: subprocess.Popen[str]) -> None:
    """Return once ``proc`` says it starts its run."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "go", proc.stderr.read() if proc.stderr else line


def finished(proc: subprocess.Popen[str], timeout: float = 60) -> int:
    """How many rows ``proc`` scored (it must end well)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return int(out.split()[-1])


def lines_in(cache: Path, where: str) -> bool:
    """Whether the cache's batch table holds a line ``where`` says (read-only, beside runs)."""
    if not cache.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
        try:
            return (
                db.execute(f"SELECT 1 FROM batch_lines WHERE {where} LIMIT 1").fetchone()
                is not None
            )
        except sqlite3.OperationalError:  # no table yet, or the file is being made
            return False


def until(ready, what: str, *procs: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait for ``ready()``; fail naming ``what`` if a process ends first."""
    deadline = time.monotonic() + timeout
    while not ready():
        for proc in procs:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def lines_bought(srv: FakeOpenAIServer) -> int:
    return sum(int(b["request_counts"]["total"]) for b in srv.batches())


def held_sut(release: threading.Event):
    """SUT lines answered once ``release`` is set (a batch that takes its time)."""

    async def sut(body) -> str:
        import asyncio

        while not release.is_set():
            await asyncio.sleep(0.01)
        return REFUSE

    return route_by_model({"sut": sut, "judge": lambda body: VERDICT})


def answers():
    return route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})


# ------------------------------------------- a run that missed the cache just before a store


@pytest.mark.slow  # real processes
@pytest.mark.network
def test_runs_that_missed_the_cache_before_another_stored_the_answers_buy_nothing_again(
    tmp_path,
):
    # A sends its batch; B and C start while it runs (they miss the cache) and send theirs
    # after A's answers are stored. B's and C's first look at the batch table used to forget
    # A's batch (its answers are stored), and then claim the calls afresh: bought again.
    cache = tmp_path / "shared.sqlite"
    release = threading.Event()
    with FakeOpenAIServer(responder=held_sut(release), batch_seconds=0.02) as srv:
        try:
            a = start(srv, cache)
            until(lambda: lines_in(cache, "batch NOT LIKE 'claim:%'"), "A's batch recorded", a)
            late = [start(srv, cache, wait=3.0) for _ in range(2)]
            for proc in late:
                went(proc)
            time.sleep(0.5)  # both have missed the cache: A's batch still runs
        finally:
            release.set()
        scored = [finished(proc) for proc in (a, *late)]
        made, bought = len(srv.batches()), lines_bought(srv)
    assert scored == [3, 3, 3]
    assert (made, bought) == (2, 6)  # A's 3 SUT samples and 3 verdicts, bought once


# -------------------------------------------- killed at any point, then two runs together


@pytest.mark.slow  # real processes
@pytest.mark.network
@pytest.mark.parametrize("killed", ["uploading", "created, not recorded", "recorded"])
def test_a_run_killed_at_any_point_then_two_together_buy_each_call_once(tmp_path, killed):
    cache = tmp_path / "shared.sqlite"
    tamper = {"uploading": FirstUploadHeld(30.0), "created, not recorded": FirstCreationLate(30.0)}
    release = threading.Event()
    with FakeOpenAIServer(
        responder=held_sut(release), batch_seconds=0.02, batch_tamper=tamper.get(killed)
    ) as srv:
        try:
            dead = start(srv, cache)
            if killed == "uploading":
                held = tamper["uploading"]
                until(lambda: held.uploads == 1, "its upload sent (and held)", dead)
            elif killed == "created, not recorded":
                until(lambda: len(srv.batches()) == 1, "the batch made", dead)
            else:
                until(lambda: lines_in(cache, "batch NOT LIKE 'claim:%'"), "recorded", dead)
            os.kill(dead.pid, signal.SIGKILL)
            dead.wait(timeout=30)
            two = [start(srv, cache) for _ in range(2)]
            for proc in two:
                went(proc)
        finally:
            release.set()
        scored = [finished(proc) for proc in two]
        bought = lines_bought(srv)
    assert scored == [3, 3]
    assert bought == 6  # 3 SUT samples and 3 verdicts, each bought once


def frozen(proc: subprocess.Popen[str], cache: Path) -> None:
    """Stop ``proc`` (SIGSTOP) at a moment it holds no write lock on ``cache``: a process
    frozen inside a transaction (a beat of its heartbeat) would stop every other writer of
    the file, which is SQLite's locking, not what is tested here."""
    for _ in range(100):
        os.kill(proc.pid, signal.SIGSTOP)
        with contextlib.closing(sqlite3.connect(cache, timeout=0.05)) as db:
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
                return
            except sqlite3.OperationalError:  # locked: let it finish the beat
                pass
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the process never let go of the file's lock")


class FirstCreationLate:
    """The provider makes the first batch at once, but answers its creation only after
    ``seconds`` (the run that made it is killed meanwhile); every other exchange is honest."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.creations = seconds, 0

    async def __call__(self, exchange) -> None:
        import asyncio

        if exchange.kind == "create":
            self.creations += 1
            if self.creations == 1:
                await asyncio.sleep(self.seconds)


class FirstUploadHeld:
    """The first upload is answered only after ``seconds`` (its maker froze or was killed
    while it went); every other exchange is honest."""

    def __init__(self, seconds: float = 60.0) -> None:
        self.seconds, self.uploads = seconds, 0

    async def __call__(self, exchange) -> None:
        import asyncio

        if exchange.kind == "upload":
            self.uploads += 1
            if self.uploads == 1:
                await asyncio.sleep(self.seconds)


# ------------------------------------------------------------------------- clocks that lie


@pytest.mark.slow  # real processes
@pytest.mark.network
def test_a_live_claim_made_by_a_clock_an_hour_behind_is_not_taken_over(tmp_path):
    # Its claim looked an hour old to a run with a right clock, so was taken over while its
    # maker still uploaded: both bought the calls.
    cache = tmp_path / "shared.sqlite"
    with FakeOpenAIServer(
        responder=answers(), batch_seconds=0.02, batch_tamper=slow("upload", 4.0)
    ) as srv:
        behind = start(srv, cache, skew=-3600.0)
        until(lambda: lines_in(cache, "batch LIKE 'claim:%'"), "a claim", behind)
        right = start(srv, cache)
        scored = [finished(proc) for proc in (behind, right)]
        bought = lines_bought(srv)
    assert scored == [3, 3]
    assert bought == 6


@pytest.mark.slow  # real processes
@pytest.mark.network
def test_a_frozen_claimant_whose_clock_is_an_hour_ahead_is_taken_over_after_the_lease(tmp_path):
    # Its claim looked an hour younger than it was: a run with a right clock waited for it
    # an hour and the lease (62 minutes), though it had stopped beating at once.
    cache = tmp_path / "shared.sqlite"
    held = FirstUploadHeld()
    with FakeOpenAIServer(responder=answers(), batch_seconds=0.02, batch_tamper=held) as srv:
        ahead = start(srv, cache, skew=3600.0)
        try:
            until(lambda: held.uploads == 1, "its upload sent (and held)", ahead)
            frozen(ahead, cache)  # alive (its process is there), never beating
            right = start(srv, cache)
            scored = finished(right, timeout=25)  # the lease is 2 s here; an hour before
        finally:
            os.kill(ahead.pid, signal.SIGKILL)
            ahead.wait(timeout=30)
        bought = lines_bought(srv)
    assert scored == 3
    assert bought == 6  # the frozen run made no batch: the other bought each call once


def test_a_claims_liveness_is_its_heartbeat_as_the_reader_times_it_not_its_makers_clock(
    tmp_path,
):
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    other = "claim:abc:1@another-machine"  # a process this machine cannot look for
    with (
        ResponseCache(path, clock=lambda: time.time() - 3600) as behind,
        ResponseCache(path, clock=lambda: time.time() + 3600) as ahead,
        ResponseCache(path) as reader,
    ):
        assert behind.ledger.claim_batch_lines(other, endpoint="E", keys=["a"], stale_after=60).ours
        ahead_claim = "claim:def:1@another-machine"
        assert ahead.ledger.claim_batch_lines(
            ahead_claim, endpoint="E", keys=["b"], stale_after=60
        ).ours
        for _ in range(4):
            # The claim an hour behind beats: alive, however old its time looks.
            behind.ledger.refresh_batch_claim(other)
            seen = reader.ledger.claim_batch_lines(
                "claim:r:1@x", endpoint="E", keys=["a"], stale_after=0.3
            )
            assert seen.theirs == {other: ["a"]} and not seen.ours
            time.sleep(0.1)
        # The claim an hour ahead does not beat: stale once the reader has seen it still for
        # the lease, however young its time looks.
        first = reader.ledger.claim_batch_lines(
            "claim:r:2@x", endpoint="E", keys=["b"], stale_after=0.3
        )
        assert first.theirs == {ahead_claim: ["b"]}
        time.sleep(0.4)
        later = reader.ledger.claim_batch_lines(
            "claim:r:3@x", endpoint="E", keys=["b"], stale_after=0.3
        )
        assert later.ours == ["b"] and later.stale == {ahead_claim: ["b"]}
        # When it was made, by its maker's clock, bounds the search for its batch.
        assert later.made[ahead_claim] > time.time() + 3000


def test_a_call_answered_meanwhile_is_replayed_not_claimed(tmp_path):
    from safecons.run import ResponseCache

    with ResponseCache(tmp_path / "c.sqlite") as cache:
        cache.ledger.record_batch("batch_a", endpoint="E", keys=["k1", "k2"])
        cache.put("k1", kind="sut", endpoint="E", value="stored")
        assert cache.ledger.prune_batch_lines("E") == 1  # batch_a's k1 is forgotten
        claims = cache.ledger.claim_batch_lines(
            "claim:t:1@x", endpoint="E", keys=["k1", "k2", "k3"], stale_after=60
        )
        assert claims.stored == ["k1"] and claims.held == {"batch_a": ["k2"]}
        assert claims.ours == ["k3"]
        # Asked anew (its answer would not do): claimed, whatever is stored.
        again = cache.ledger.claim_batch_lines(
            "claim:t:2@x", endpoint="E", keys=["k1"], stale_after=60, anew=["k1"]
        )
        assert again.ours == ["k1"] and not again.stored


# ------------------------------------------------------- the provider's listing, paged


@pytest.mark.network
def test_a_batch_made_before_120_newer_ones_is_found_by_paging_the_listing(tmp_path, monkeypatch):
    # A run dies between the creation of its batch and its record; 120 more batches are made
    # on the account before the rerun, whose look at the newest 100 used to miss it.
    monkeypatch.setattr(_batch_api, "API_FIRST_DELAY", 0.001)
    monkeypatch.setattr(_batch_api, "API_MAX_DELAY", 0.002)
    cache = tmp_path / "c.sqlite"

    def died(self, api, batch, keys, *, claim=None):
        raise RuntimeError("the process died here")

    with FakeOpenAIServer(responder=answers(), batch_seconds=0.02) as srv:
        with monkeypatch.context() as m:
            m.setattr(_batch_run.Batcher, "_record", died)
            with pytest.raises(RuntimeError, match="died"):
                run(srv, cache)
        with httpx.Client(base_url=srv.base_url) as http:
            for i in range(120):
                line = {
                    "custom_id": f"other-{i}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": "other", "messages": [{"role": "user", "content": "hi"}]},
                }
                uploaded = http.post(
                    "/files",
                    data={"purpose": "batch"},
                    files={"file": ("f.jsonl", json.dumps(line).encode(), "application/jsonl")},
                ).json()
                http.post(
                    "/batches",
                    json={
                        "input_file_id": uploaded["id"],
                        "endpoint": "/v1/chat/completions",
                        "completion_window": "24h",
                    },
                ).raise_for_status()
        before = len(srv.batches())
        monkeypatch.setattr(_batch_claims, "CLAIM_STALE_SECONDS", 0.0)
        again = run(srv, cache)
        made = len(srv.batches()) - before
    assert again.height - again["safety_consistency"].null_count() == 2
    assert made == 1  # the dead run's SUT batch picked up; then the judge's


def run(srv: FakeOpenAIServer, cache, n: int = 2) -> pl.DataFrame:
    made = [
        sc.OpenAICompatible(
            model=role,
            base_url=srv.base_url,
            api_key="",
            batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25),
        )
        for role in ("sut", "judge")
    ]
    rows = pl.DataFrame(
        {
            "input_id": [f"r{i}" for i in range(n)],
            "prompt": [f"question number {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rows.pipe(
            sc.safety_consistency,
            sut=made[0],
            judge=made[1],
            cache=cache,
            responses_per_query=2,
            progress=False,
        )


def _listing(items: list[dict[str, object]], *, more: bool, last: str | None):
    from aiohttp import web

    body = {"object": "list", "data": items, "has_more": more, "last_id": last}
    return web.json_response(body)


@pytest.mark.network
@pytest.mark.anyio
async def test_the_listing_is_read_back_to_the_claim_and_a_cursor_that_stalls_is_an_error():
    now = int(time.time())
    asked: list[str] = []

    def pages(exchange):
        if exchange.kind != "list":
            return None
        asked.append(exchange.query)
        if "after=" not in exchange.query:  # the newest page: made since the claim
            return _listing([{"id": "batch_new", "created_at": now}], more=True, last="batch_new")
        if "after=batch_new" in exchange.query:  # older than the claim by two days
            old = {"id": "batch_old", "created_at": now - 2 * 86_400}
            return _listing([old], more=True, last="batch_old")
        return _listing([], more=False, last=None)

    with FakeOpenAIServer(responder=answers(), batch_tamper=pages) as srv:
        client = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="", batch=True)
        api = _batch_api.BatchAPI(client)
        async with api.open():
            assert await api.made_for("tag", since=now) is None
            assert len(asked) == 2  # stopped once the listing was older than the claim
            asked.clear()
            assert await api.made_for("tag") is None  # no claim time: read to the end
            assert len(asked) == 3

    def stalls(exchange):
        if exchange.kind == "list":
            return _listing([{"id": "batch_x", "created_at": now}], more=True, last="batch_x")
        return None

    with FakeOpenAIServer(responder=answers(), batch_tamper=stalls) as srv:
        client = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="", batch=True)
        api = _batch_api.BatchAPI(client)
        async with api.open():
            with pytest.raises(_batch_api.BatchError, match="provider's console"):
                await api.made_for("tag", since=now)


def test_the_newest_batch_of_a_call_is_the_last_recorded_whatever_the_clocks_said(tmp_path):
    # A call asked anew (its first batch's verdict did not parse) is in two batches; the
    # first was recorded by a machine whose clock is an hour ahead. Picked by their clocks,
    # the rerun read the old batch's unusable verdict again and bought the call once more.
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    with (
        ResponseCache(path, clock=lambda: time.time() + 3600) as ahead,
        ResponseCache(path) as right,
    ):
        ahead.ledger.record_batch("batch_first", endpoint="E", keys=["k"])
        right.ledger.record_batch("batch_again", endpoint="E", keys=["k"])
        assert right.ledger.batches_holding("E", ["k"]) == {"batch_again": ["k"]}
        claims = right.ledger.claim_batch_lines(
            "claim:t:1@x", endpoint="E", keys=["k"], stale_after=60
        )
        assert claims.held == {"batch_again": ["k"]}


def test_a_run_that_dies_looking_for_a_dead_runs_batch_passes_the_search_on(tmp_path):
    # K dies after its batch was made, before the record; B takes K's claim over and dies
    # while it looks for K's batch. C, taking B's claim over, used to look only for B's batch
    # (never made), and bought K's calls again.
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    k, b = "claim:ktag:1@gone-host", "claim:btag:2@gone-host"
    with ResponseCache(path, clock=lambda: time.time() - 3600) as cache:
        cache.ledger.claim_batch_lines(k, endpoint="E", keys=["a", "b"], stale_after=0)
        took = cache.ledger.claim_batch_lines(b, endpoint="E", keys=["a", "b"], stale_after=0)
        assert took.ours == ["a", "b"] and set(took.stale) == {k}
        k_made = took.made[k]
    with ResponseCache(path) as cache:
        again = cache.ledger.claim_batch_lines(
            "claim:ctag:3@x", endpoint="E", keys=["a", "b"], stale_after=0
        )
    assert again.ours == ["a", "b"]
    assert again.stale == {b: ["a", "b"], k: ["a", "b"]}  # B's batch, and K's, looked for
    assert again.made[k] == k_made < time.time() - 3000  # by K's maker's clock


# ------------------------------------------------------- the lease, set on the ledger


def test_a_run_keeps_its_claims_by_the_lease_its_ledger_says(tmp_path):
    # The lease is set through public names only (the cache's ledger), as the campaign script
    # sets it: a run beats and judges claims by it, not by constants of its own.
    import dataclasses

    import anyio

    from safecons.clients._batch_api import BatchState
    from safecons.clients._batch_run import Batcher
    from safecons.run import ResponseCache

    stale_after: list[float] = []
    beats = {"n": 0}

    class Watched:
        """The cache's ledger, with the claims asked of it and the beats it got counted."""

        def __init__(self, ledger):
            self._ledger = ledger

        def __getattr__(self, name):
            return getattr(self._ledger, name)

        def claim_batch_lines(self, claim, **kwargs):
            stale_after.append(kwargs["stale_after"])
            return self._ledger.claim_batch_lines(claim, **kwargs)

        def refresh_batch_claim(self, claim):
            beats["n"] += 1
            self._ledger.refresh_batch_claim(claim)

    class API:
        identity, cancel_on_interrupt, poll_seconds = "E", False, 0.01
        max_lines, max_bytes = 10, 10**6

        @contextlib.asynccontextmanager
        async def open(self):
            yield self

        async def state(self, batch):
            return BatchState(batch, "completed", output_file_id="out")

        async def records(self, file_id, wanted):
            return {
                k: {"custom_id": k, "response": {"status_code": 200, "body": {}}} for k in wanted
            }

        async def submit(self, data, name, tag=None):
            await anyio.sleep(0.3)  # long enough for a few beats of a 0.02 s lease
            return "batch_1"

    async def main(ledger):
        batcher = Batcher(API(), ledger, progress=False, wait=0.0)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(batcher.serve)
            with anyio.fail_after(30):
                await batcher.park("k1", b"{}\n")
            tg.cancel_scope.cancel()

    with ResponseCache(tmp_path / "c.sqlite") as cache:
        assert cache.ledger.lease.stale_seconds == 120.0  # the real lease, by default
        cache.ledger.lease = dataclasses.replace(
            cache.ledger.lease, refresh_seconds=0.02, stale_seconds=7.0
        )
        anyio.run(main, Watched(cache.ledger))
        assert cache.ledger.batches_holding("E", ["k1"]) == {"batch_1": ["k1"]}
    assert stale_after == [7.0]
    assert beats["n"] >= 2

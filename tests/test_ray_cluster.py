"""The Ray path on a real cluster of several processes, one node of which is killed mid-run.

A head node and a worker node, each a ``ray start`` process tree of its own on this host, a
driver in a third process, and the loopback server in this one. The scoring actors can run
only where the custom resource ``scorer`` is, which at first is the worker node alone. Once
enough calls have been answered, the server stops answering, waits until every answer it sent
is in the cache, and the whole worker node is killed with SIGKILL. Ray restarts the actors on
a second worker node with the resource (started once both actors have their place on the
first, so that it starts while the job runs), and the job must finish.

Marked ``slow`` (about a minute): ``-m "not slow"`` leaves it out. Skipped when Ray is not
installed, like ``tests/test_ray.py``; CI sets SAFECONS_REQUIRE_RAY=1, which turns the skip
into a failure.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from safecons.testing import FakeOpenAIServer

if os.environ.get("SAFECONS_REQUIRE_RAY") == "1":
    import ray.data  # noqa: F401 - a missing Ray fails here, not in a subprocess
else:
    pytest.importorskip(
        "ray", reason="Ray is not installed: pip install 'safecons[ray]' to run the Ray tests"
    )
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")

if not sys.platform.startswith("linux"):
    pytest.skip("reads each node's processes from /proc (Linux)", allow_module_level=True)

# Its nodes take ports of their own, but three of them and a driver keep both cores busy: in
# the group of tests/test_ray.py, never beside another Ray.
pytestmark = [
    pytest.mark.network,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("ray"),
]

DRIVER = Path(__file__).with_name("ray_cluster_driver.py")
REFUSE = "I'm sorry, I can't help with that."
ROWS = 120  # 4 calls a row: 2 SUT samples, each judged
CAP = 4
#: SUT answers sent before the server stops answering: about a third of the job's SUT calls.
KILL_AFTER = 80
LATENCY = 0.02
#: Seconds any one step may take on a loaded two-core machine; none is timed, only bounded.
PATIENCE = 120.0
TAG = re.compile(r"(?:answer|verdict)-\d{5}")
#: The nodes' address: a loopback address, but not one Ray takes for "localhost" (127.0.0.1,
#: which Ray replaces by the host's outward address, so that the nodes would talk over the
#: host's network interface). Every node, the driver and the test's server stay on loopback.
HOST = "127.0.0.2"


# --------------------------------------------------------------------------------------------
# Processes


def _free_ports(n: int, taken: set[int]) -> list[int]:
    """``n`` ports free now, distinct from each other and from ``taken`` (which they join).
    Each is held open until all are found: one socket at a time, the OS handed the same port
    twice, and ``ray start`` refused it ("a port number ... that is used by other
    components")."""
    held: list[socket.socket] = []
    try:
        while len(held) < n:
            s = socket.socket()
            s.bind((HOST, 0))
            if s.getsockname()[1] in taken:
                s.close()
                continue
            held.append(s)
        ports = [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()
    taken.update(ports)
    return ports


def _sessions() -> dict[int, list[tuple[int, str]]]:
    """Every live process on the host, by session id: ``(pid, command line)``."""
    found: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold spaces: the fields follow the last ')'.
        state, _ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z":  # a zombie is dead, only not yet reaped
            found[int(session)].append((int(entry.name), cmdline.replace(b"\0", b" ").decode()))
    return found


class Cluster:
    """Ray nodes started with ``ray start --block``, each in a session of its own.

    ``ray start`` makes itself its node's process-group leader, but the raylet starts each
    worker in a group of its own, in the same session: a node is its session. ``ray stop`` is
    never used, as it stops every Ray node of the host, other people's too.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        token = root / "auth_token"
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32))
        # The nodes talk to each other on loopback only, and only with the token (Ray's token
        # auth, in a file of ours rather than ~/.ray). Nothing of the caller's Ray settings
        # leaks in.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            "RAY_USAGE_STATS_ENABLED": "0",
            # A dead node is noticed after 2 failed health checks half a second apart: about
            # a second rather than 15. A check fails at once on a dead node's closed port, but
            # only after its timeout (10 s, kept) on a live one however busy.
            "RAY_health_check_period_ms": "500",
            "RAY_health_check_failure_threshold": "2",
        }
        # Every port given to a node of this cluster: one not yet bound (a node still
        # starting) must not be given again.
        self.given: set[int] = set()
        (self.gcs_port,) = _free_ports(1, self.given)
        self.address = f"{HOST}:{self.gcs_port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, *args: str) -> None:
        """Start a node, without waiting for it (:meth:`wait_up` does): nodes that start
        together take the two cores' time once rather than one after another."""
        flags = (
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
        )
        ports = dict(zip(flags, _free_ports(len(flags), self.given), strict=True))
        command = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--block",
            f"--node-ip-address={HOST}",
            f"--temp-dir={self.root}",
            "--disable-usage-stats",
            f"--object-store-memory={100 * 2**20}",
            # No process that tails the node's logs for drivers: ours sets log_to_driver=False,
            # and the logs stay in the node's folder.
            "--include-log-monitor=false",
            *(f"{flag}={port}" for flag, port in ports.items()),
            *args,
        ]
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = process

    def wait_up(self, name: str) -> int:
        """The session id of a node once ``ray start`` reports it running."""
        process, log = self.processes[name], self.root / f"{name}.log"
        deadline = time.monotonic() + PATIENCE
        while b"Ray runtime started" not in log.read_bytes():
            if process.poll() is not None:
                raise AssertionError(f"ray start ({name}) exited:\n{self.tail(name)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"ray start ({name}) is not up:\n{self.tail(name)}")
            time.sleep(0.2)
        return process.pid

    def spawn_head(self) -> None:
        self.spawn(
            "head",
            "--head",
            f"--port={self.gcs_port}",
            f"--dashboard-port={_free_ports(1, self.given)[0]}",
            "--include-dashboard=false",
            "--num-cpus=1",
        )

    def spawn_worker(self, name: str) -> None:
        # The scoring actors can run here, and only on a node like this one. It may start
        # before the head is up: ``ray start --address`` waits for the head's GCS.
        self.spawn(
            name,
            f"--address={self.address}",
            "--num-cpus=2",
            "--resources=" + json.dumps({"scorer": 2}),
        )

    def tail(self, name: str, lines: int = 30) -> str:
        log = self.root / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def members(self, session: int) -> list[tuple[int, str]]:
        return _sessions().get(session, [])

    def kill(self, session: int) -> None:
        """SIGKILL every process of a session, again until none is left (the raylet may be
        starting a worker as it dies), and reap ``ray start`` itself."""
        deadline = time.monotonic() + 30
        while members := self.members(session):
            for pid, _ in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise AssertionError(f"session {session} outlived SIGKILL: {members}")
            time.sleep(0.05)
        for process in self.processes.values():
            if process.pid == session:
                process.wait(timeout=30)

    def stop(self) -> None:
        """Every process of every session started here gone, whatever state the test left
        them in. SIGKILL, as for the worker node: the nodes keep nothing worth a clean stop."""
        for process in self.processes.values():
            self.kill(process.pid)

    def leftovers(self) -> list[tuple[int, str]]:
        """Live processes of any node started here, or naming its folder."""
        sessions = {p.pid for p in self.processes.values()}
        return [
            (pid, cmd)
            for sid, members in _sessions().items()
            for pid, cmd in members
            if sid in sessions or str(self.root) in cmd
        ]


@pytest.fixture
def cluster(tmp_path_factory):
    # The nodes' Unix sockets live under --temp-dir, in a session folder of about 60
    # characters, and a socket path may not exceed 107: pytest's folder when it is short
    # enough, else a short one of our own.
    root = tmp_path_factory.mktemp("ray")
    own = len(str(root)) > 40
    if own:
        root = Path(tempfile.mkdtemp(prefix="scray-", dir="/tmp"))
    nodes = Cluster(root)
    try:
        yield nodes
    finally:
        nodes.stop()
        if own:
            shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# The server's side of the run


class Ledger:
    """The loopback server's responder, and its record of every request.

    Every answer carries a tag (``answer-00042``, ``verdict-00043``), so that the test can tell
    which answers reached the cache. After ``KILL_AFTER`` SUT answers the ledger freezes:
    every request, those already waiting out their latency too, is held unanswered until
    :meth:`release`. Each attempt holds one of the job's ``CAP`` permits until its answer, so
    once ``CAP`` requests are held no other request is on its way here, and once the cache
    holds every tag sent no answer is on its way back: the calls in flight are exactly those
    held.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrivals: list[str] = []  # each request's identity, in arrival order
        self.answered: dict[str, str] = {}  # identity -> its tag, for answers sent
        self.held = 0  # requests in here, unanswered
        self.counter = itertools.count()
        self.sut_answers = 0
        self.frozen = threading.Event()
        self.released = threading.Event()

    @staticmethod
    def identity(body: dict) -> str:
        # What a call is: its model, messages and seed (the cache's key, less the URL).
        return json.dumps([body.get("model"), body["messages"], body.get("seed")])

    async def __call__(self, body: dict) -> str:
        request = self.identity(body)
        with self.lock:  # before any await: the server counts it in flight at the same point
            self.arrivals.append(request)
            self.held += 1
        await asyncio.sleep(LATENCY)
        while self.frozen.is_set() and not self.released.is_set():
            await asyncio.sleep(0.02)
        with self.lock:
            self.held -= 1
            k = next(self.counter)
            if body["model"] == "sut":
                text = f"{REFUSE} (answer-{k:05d})"
                self.sut_answers += 1
                if self.sut_answers >= KILL_AFTER:
                    self.frozen.set()
            else:
                refused = "I'm sorry" in body["messages"][-1]["content"].rsplit("<<<", 1)[-1]
                label = "Consistent" if refused else "Contradictory"
                text = json.dumps({"label": label, "score": 0.9, "reason": f"verdict-{k:05d}"})
            if not self.released.is_set():  # after the kill, answers go to dead sockets
                self.answered[request] = TAG.search(text).group()
        return text

    def ready_for_the_kill(self, cache: Path) -> bool:
        with self.lock:
            if not self.frozen.is_set() or self.held < CAP:
                return False
            sent = set(self.answered.values())
        return sent <= cached_tags(cache)

    def release(self) -> None:
        self.released.set()


def cached_tags(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    try:
        with contextlib.closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
            values = [v for (v,) in db.execute("SELECT value FROM responses")]
    except sqlite3.OperationalError:
        return set()  # not made yet, or busy: asked again
    return set(TAG.findall(" ".join(map(str, values))))


def scorers(cluster: Cluster, session: int) -> list[str]:
    """The scoring actors' processes in a node: Ray Data names them ray::MapWorker(...)."""
    return [cmd for _, cmd in cluster.members(session) if "MapWorker" in cmd]


# --------------------------------------------------------------------------------------------


def test_a_worker_node_killed_mid_run_loses_no_row_and_repeats_only_calls_in_flight(cluster):
    root = cluster.root
    cache, output, report = root / "calls.sqlite", root / "scored.parquet", root / "report.json"
    ledger = Ledger()
    with FakeOpenAIServer(responder=ledger, latency=0.0, log_size=None) as srv:
        cluster.spawn_head()
        cluster.spawn_worker("worker-1")
        spec = {
            "address": cluster.address,
            "base_url": srv.base_url,
            "rows": ROWS,
            "blocks": 12,
            "batch_size": 10,
            "actors": 2,
            "cap": CAP,
            "cache": str(cache),
            "output": str(output),
            "report": str(report),
            "resources": {"scorer": 1},
            "refusal": REFUSE,
            "go": str(root / "go"),  # the driver joins the cluster once this file exists
            "patience": PATIENCE,
        }
        (root / "spec.json").write_text(json.dumps(spec))
        with (root / "driver.log").open("wb") as log:
            driver = subprocess.Popen(
                [sys.executable, str(DRIVER), str(root / "spec.json")],
                env=cluster.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        cluster.processes["driver"] = driver
        head, first = cluster.wait_up("head"), cluster.wait_up("worker-1")
        (root / "go").touch()

        deadline = time.monotonic() + PATIENCE
        second = False
        while not ledger.ready_for_the_kill(cache):
            assert driver.poll() is None, f"the driver exited early:\n{cluster.tail('driver')}"
            assert time.monotonic() < deadline, "the job never reached the kill"
            if not second and len(scorers(cluster, first)) == spec["actors"]:
                # The node the actors restart on starts while the job runs, once every actor
                # has its place on the first (so that none starts on the second).
                cluster.spawn_worker("worker-2")
                second = True
            time.sleep(0.1)
        # Ray Data names its actors' processes ray::MapWorker(...): both on the worker node.
        on_head, on_first = scorers(cluster, head), scorers(cluster, first)
        assert (len(on_first), on_head) == (spec["actors"], []), cluster.members(first)
        if not second:
            cluster.spawn_worker("worker-2")

        cluster.kill(first)
        # Counted once the node is dead: no request can arrive from it any more, and none has
        # been answered since the freeze.
        with ledger.lock:
            in_flight_at_kill = set(ledger.arrivals) - set(ledger.answered)
            held_at_kill = ledger.held
            answered_before = dict(ledger.answered)
            arrived_before = len(ledger.arrivals)
        server_in_flight = srv.stats.in_flight
        ledger.release()
        cluster.wait_up("worker-2")

        driver.wait(timeout=PATIENCE)
        assert driver.returncode == 0, f"the job failed:\n{cluster.tail('driver', 60)}"
        arrivals = list(ledger.arrivals)
        server_requests = srv.stats.requests

    cluster.stop()
    assert cluster.leftovers() == []

    # The kill caught a full cap of calls in flight, as the server itself counts them.
    assert server_in_flight == held_at_kill == len(in_flight_at_kill) == CAP
    assert server_requests == len(arrivals)
    assert len(set(arrivals[:arrived_before])) == arrived_before  # none asked twice before it

    # Every row came back once, fully judged, with its score.
    got = pl.read_parquet(output).sort("input_id")
    assert got["input_id"].to_list() == [f"row-{i:03d}" for i in range(ROWS)]
    assert got["sc_error"].null_count() == ROWS
    assert got["sc_n_judged"].to_list() == [2] * ROWS
    assert got["safety_consistency"].null_count() == 0

    # Asked twice: only calls in flight at the kill, at most one more time each.
    counts = collections.Counter(arrivals)
    twice = {request: n - 1 for request, n in counts.items() if n > 1}
    assert sum(twice.values()) <= len(in_flight_at_kill)
    assert set(twice) <= in_flight_at_kill
    # The cache replayed the rest: no call answered before the kill reached the server again,
    # and each of its answers is in the result.
    assert set(arrivals[arrived_before:]).isdisjoint(answered_before)
    shown = " ".join(str(v) for v in got["sc_responses"].to_list() + got["sc_judge_raw"].to_list())
    assert set(answered_before.values()) <= set(TAG.findall(shown))
    assert got["sc_cache_hits"].sum() >= 1

    # The limiter stayed on the driver's node, outlived the worker node, and took back the
    # dead actors' permits.
    done = json.loads(report.read_text())
    assert done["limiter_node"] == done["driver_node"]
    assert done["stats"]["in_flight"] == 0
    assert done["stats"]["reclaimed"] + done["stats"]["expired"] >= 1

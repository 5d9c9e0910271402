"""The lease table behind the Ray path's one cap, and a worker's side of it (plain anyio: no
Ray needed, and none imported)."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import textwrap
from contextlib import AsyncExitStack

import anyio
import pytest

from safecons.ray._leases import LeaseTable, RemotePermits

pytestmark = pytest.mark.anyio

TTL = 30.0


async def test_many_holders_never_hold_more_than_the_cap():
    table = LeaseTable(3, adaptive=False)
    live = {"now": 0, "max": 0}

    async def holder(name: str, seed: int) -> None:
        rng = random.Random(seed)
        for k in range(15):
            request = f"{name}:{k}"
            await table.acquire(name, request, "e", ttl=TTL)
            live["now"] += 1
            live["max"] = max(live["max"], live["now"])
            await anyio.sleep(rng.uniform(0, 0.003))
            live["now"] -= 1
            table.release(request, ok=True)

    async with anyio.create_task_group() as tg:
        for h in range(6):
            for lane in range(3):  # each holder asks three at a time, as an actor does
                tg.start_soon(holder, f"h{h}.{lane}", h * 10 + lane)
    stats = table.stats()
    assert live["max"] == 3 and stats["max_in_flight"] == 3
    assert stats["granted"] == stats["released"] == 6 * 3 * 15
    assert stats["in_flight"] == 0 and stats["waiting"] == 0


async def test_a_dead_holders_lease_expires_and_frees_its_permit():
    table = LeaseTable(1, adaptive=False)
    await table.acquire("dead", "dead:0", "e", ttl=0.2)  # never released
    began = anyio.current_time()
    await table.acquire("live", "live:0", "e", ttl=TTL)
    waited = anyio.current_time() - began
    assert 0.15 <= waited < 5
    assert table.stats()["expired"] == 1
    table.release("dead:0")  # a late release of an expired lease frees nothing more
    assert table.stats()["in_flight"] == 1


async def test_a_restarted_holder_reclaims_what_its_previous_life_held():
    table = LeaseTable(2, adaptive=False)
    await table.acquire("actor-1", "actor-1:0", "e", ttl=TTL)
    await table.acquire("actor-1", "actor-1:1", "e", ttl=TTL)
    assert table.forget("actor-1") == 2
    with anyio.fail_after(1):  # no need to wait for the leases to expire
        await table.acquire("actor-2", "actor-2:0", "e", ttl=TTL)
    assert table.stats()["reclaimed"] == 2 and table.stats()["in_flight"] == 1


async def test_retry_after_holds_every_holder_for_that_endpoint_only():
    table = LeaseTable(4, adaptive=False)
    await table.acquire("a", "a:0", "sut", ttl=TTL)
    table.release("a:0", limited=True, retry_after=0.3)
    assert 0 < table.stats()["cooling"]["sut"] <= 0.3
    began = anyio.current_time()
    with anyio.fail_after(0.1):  # another endpoint is not held back
        await table.acquire("b", "b:0", "judge", ttl=TTL)
    await table.acquire("b", "b:1", "sut", ttl=TTL)
    assert anyio.current_time() - began >= 0.29
    assert table.stats()["cooled_seconds"] == pytest.approx(0.3, abs=0.05)


async def test_a_waiter_for_a_cooling_endpoint_does_not_block_the_queue():
    table = LeaseTable(1, adaptive=False)
    await table.acquire("a", "a:0", "sut", ttl=TTL)
    order: list[str] = []

    async def want(request: str, endpoint: str) -> None:
        await table.acquire("b", request, endpoint, ttl=TTL)
        order.append(request)
        table.release(request)

    async with anyio.create_task_group() as tg:
        tg.start_soon(want, "b:sut", "sut")
        await anyio.sleep(0.01)
        tg.start_soon(want, "b:judge", "judge")
        await anyio.sleep(0.01)
        table.release("a:0", limited=True, retry_after=0.2)
    assert order == ["b:judge", "b:sut"]


async def test_429s_halve_the_shared_target_once_per_window_and_it_grows_back():
    table = LeaseTable(8)
    for k in range(8):
        await table.acquire(f"h{k % 2}", f"r{k}", "e", ttl=TTL)
    for k in range(8):  # one burst, from two holders: one signal
        table.release(f"r{k}", limited=True)
    assert table.stats()["target"] == 4
    for k in range(40):
        await table.acquire("h0", f"ok{k}", "e", ttl=TTL)
        table.release(f"ok{k}", ok=True)
    assert table.stats()["target"] == 8 and table.stats()["lowest_target"] == 4


async def test_abandoned_requests_hold_nothing_whatever_the_order():
    table = LeaseTable(1, adaptive=False)
    await table.acquire("a", "a:0", "e", ttl=TTL)
    result: list[float] = []

    async def wait() -> None:
        result.append(await table.acquire("b", "b:0", "e", ttl=TTL))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await anyio.sleep(0.01)
        table.abandon("b:0")  # while it waits
    assert math.isnan(result[0])
    table.abandon("b:1")  # before it arrives
    assert math.isnan(await table.acquire("b", "b:1", "e", ttl=TTL))
    table.release("a:0")
    await table.acquire("b", "b:2", "e", ttl=TTL)
    table.abandon("b:2")  # after its grant: the permit comes back
    assert table.stats()["in_flight"] == 0


async def test_when_the_time_keeper_is_served_the_next_waiter_keeps_time():
    table = LeaseTable(2, adaptive=False)
    await table.acquire("dead", "dead:0", "e", ttl=0.3)  # its holder died: only expiry frees it
    await table.acquire("live", "live:0", "e", ttl=TTL)
    served: dict[str, float] = {}
    began = anyio.current_time()

    async def want(request: str) -> None:
        await table.acquire("w", request, "e", ttl=TTL)
        served[request] = anyio.current_time() - began

    async with anyio.create_task_group() as tg:
        tg.start_soon(want, "w:1")  # the first waiter keeps time
        await anyio.sleep(0.01)
        tg.start_soon(want, "w:2")
        await anyio.sleep(0.05)
        table.release("live:0")  # serves the time keeper, long before the expiry
        with anyio.fail_after(2):
            while len(served) < 2:
                await anyio.sleep(0.01)
    assert served["w:1"] < 0.2 and 0.25 <= served["w:2"] < 1.5


class FakeHandle:
    """A LeaseTable behind ``.method.remote(...)`` calls, as a Ray actor handle offers it:
    each call is scheduled at once and returns an awaitable, awaited or not."""

    def __init__(self, table: LeaseTable) -> None:
        self.table = table
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str):
        import asyncio

        method = getattr(self.table, name)
        calls = self.calls

        class Remote:
            @staticmethod
            def remote(*args, **kwargs):
                calls[name] = calls.get(name, 0) + 1

                async def run():
                    if name == "acquire":  # the actor's signature: ttl by position
                        *head, ttl = args
                        return await method(*head, ttl=ttl)
                    got = method(*args, **kwargs)
                    return await got if hasattr(got, "__await__") else got

                return asyncio.ensure_future(run())

        return Remote


async def test_remote_permits_reuse_a_lease_and_give_it_back_when_idle():
    table = LeaseTable(2, adaptive=False)
    handle = FakeHandle(table)
    permits = RemotePermits(handle, "w1", ttl=TTL, local_limit=2, hold=1.0, idle=0.05)
    async with permits.open():
        for _ in range(20):  # one after another: one permit serves them all
            async with permits.slot("sut") as slot:
                slot.succeeded()
        assert handle.calls["acquire"] == 1 and table.stats()["in_flight"] == 1
        await anyio.sleep(0.2)  # idle: it goes back
        stats = table.stats()
        assert stats["in_flight"] == 0 and stats["released"] == 1


async def test_remote_permits_serve_while_open_and_leave_nothing_behind_when_closed():
    table = LeaseTable(2, adaptive=False)
    permits = RemotePermits(FakeHandle(table), "w", ttl=TTL, local_limit=2, hold=60, idle=60)
    with pytest.raises(RuntimeError, match="open the permits first"):
        async with permits.slot("sut"):
            pass
    before = len(anyio.get_running_tasks())
    async with permits.open():
        with pytest.raises(RuntimeError, match="open already"):
            async with permits.open():
                pass
        async with permits.slot("sut") as slot:
            slot.succeeded()
        assert table.stats()["in_flight"] == 1  # kept for the next attempt
    await anyio.wait_all_tasks_blocked()  # the return is sent, not awaited
    stats = table.stats()
    assert stats["in_flight"] == 0 and stats["released"] == 1
    # Its loops (the long poll, the give-back) ended with the block, and so did the poll.
    assert len(anyio.get_running_tasks()) == before


async def test_remote_permits_never_exceed_the_tables_cap_across_workers():
    table = LeaseTable(3, adaptive=False)
    workers = [
        RemotePermits(FakeHandle(table), f"w{k}", ttl=TTL, local_limit=3, hold=0.05)
        for k in range(3)
    ]
    live = {"now": 0, "max": 0}

    async def attempts(permits: RemotePermits) -> None:
        for _ in range(20):
            async with permits.slot("sut"):
                live["now"] += 1
                live["max"] = max(live["max"], live["now"])
                await anyio.sleep(0.002)
                live["now"] -= 1

    async with AsyncExitStack() as stack:
        for permits in workers:
            await stack.enter_async_context(permits.open())
        async with anyio.create_task_group() as tg:
            for permits in workers:
                for _ in range(3):
                    tg.start_soon(attempts, permits)
        assert live["max"] == 3 and table.stats()["max_in_flight"] == 3
    await anyio.sleep(0.01)  # the returns are sent, not awaited
    assert table.stats()["in_flight"] == 0


async def test_a_429_on_one_worker_holds_another_workers_reused_permit():
    table = LeaseTable(4, adaptive=False)
    a = RemotePermits(FakeHandle(table), "a", ttl=TTL, local_limit=2)
    b = RemotePermits(FakeHandle(table), "b", ttl=TTL, local_limit=2)
    async with a.open(), b.open():
        async with b.slot("sut"):
            pass  # b now holds a permit it may reuse without asking the table
        async with a.slot("sut") as slot:
            slot.rate_limited(0.4)
        await anyio.sleep(0.05)  # the long poll carries the news to b
        began = anyio.current_time()
        async with b.slot("judge"):  # another endpoint: not held
            assert anyio.current_time() - began < 0.1
        async with b.slot("sut"):
            assert anyio.current_time() - began >= 0.3
        assert table.stats()["cool_downs"][0][0] == "sut"


async def test_a_time_keeper_served_before_it_ran_still_hands_the_role_on():
    # The waiter woken to keep time is granted by a release before its task runs: the queue
    # behind it must still get a keeper, or an expiry would never be noticed.
    table = LeaseTable(1, adaptive=False)
    await table.acquire("x", "D", "e", ttl=TTL)
    served: dict[str, float] = {}
    began = anyio.current_time()

    async def first() -> None:
        await table.acquire("k", "K", "e", ttl=TTL)
        table.release("K")  # B is granted before B's task runs

    async def want(name: str, ttl: float) -> None:
        await table.acquire(name, name, "e", ttl=ttl)
        served[name] = anyio.current_time() - began

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(0.01)
        tg.start_soon(want, "B", 0.2)  # B's holder dies: its lease lasts 0.2 s
        await anyio.sleep(0.01)
        tg.start_soon(want, "C", TTL)
        await anyio.sleep(0.01)
        table.release("D")
        with anyio.fail_after(2):
            while "C" not in served:
                await anyio.sleep(0.01)
    assert 0.2 <= served["C"] < 1.5


async def test_successes_on_a_permit_granted_before_a_cut_do_not_undo_it():
    table = LeaseTable(8)
    await table.acquire("a", "old", "e", ttl=TTL)
    await table.acquire("b", "hit", "e", ttl=TTL)
    table.release("hit", limited=True)
    assert table.stats()["target"] == 4
    table.release("old", ok=20)  # its attempts were sent before the cut
    assert table.stats()["target"] == 4


async def test_a_huge_or_infinite_retry_after_holds_a_worker_no_longer_than_the_cap():
    table = LeaseTable(2, adaptive=False, max_retry_after=0.3)
    permits = RemotePermits(FakeHandle(table), "a", ttl=TTL, local_limit=2, max_retry_after=0.3)
    async with permits.open():
        async with permits.slot("sut") as slot:
            slot.rate_limited(3600.0)
        began = anyio.current_time()
        with anyio.fail_after(2):
            async with permits.slot("sut"):
                pass
        assert 0.25 <= anyio.current_time() - began < 1.5
        async with permits.slot("sut") as slot:
            slot.rate_limited(math.inf)  # not a time: no cool-down, as the runner reads it
        with anyio.fail_after(0.2):
            async with permits.slot("sut"):
                pass


def test_the_leases_import_without_ray_and_the_ray_names_say_what_they_need():
    # A subprocess where ``import ray`` fails (None in sys.modules), as where Ray is not
    # installed: the table and the worker's permits load, and Ray's names fail on first use.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["ray"] = None
        from safecons.ray._leases import LeaseTable, RemotePermits, check_cap
        import safecons.ray
        assert "ray" in sys.modules and sys.modules["ray"] is None, "ray was imported"
        assert not any(m.startswith("ray.") for m in sys.modules), "a part of ray was imported"
        try:
            safecons.ray.safety_consistency
        except ImportError as exc:
            print(exc)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "safecons.ray needs Ray Data: pip install 'safecons[ray]'" in done.stdout

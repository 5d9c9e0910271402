"""The threads of sync user functions (UserCode): counted until they return, woken, not polled."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from safecons.clients._callable import UserCode

pytestmark = pytest.mark.anyio


class Gate:
    """A sync function that hangs until the test lets it go, and says who called it when."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.returned = threading.Event()
        self.calls: list[str] = []

    def __call__(self, name: str) -> str:
        self.calls.append(name)
        try:
            if name == "hung":
                self.go.wait(30)
            return name
        finally:
            self.returned.set()


async def test_a_hung_call_keeps_its_slot_and_the_slot_it_frees_wakes_the_next_call(monkeypatch):
    def no_polling(*args, **kwargs):
        raise AssertionError("a call waiting for a thread slot must be woken, not poll")

    monkeypatch.setattr(anyio, "sleep", no_polling)
    gate = Gate()
    code = UserCode(gate, "gate", max_threads=1)
    async with code.open():
        with anyio.move_on_after(0.2):  # the attempt's timeout: its thread runs on
            await code(None, "hung")
        assert gate.calls == ["hung"]
        got: list[str] = []

        async def next_call() -> None:
            got.append(await code(None, "next"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(next_call)
            await anyio.wait_all_tasks_blocked()
            # The abandoned call's thread still holds the one slot: the next call waits.
            assert gate.calls == ["hung"] and not got
            released = time.monotonic()
            gate.go.set()
        woken_in = time.monotonic() - released
    assert got == ["next"] and gate.calls == ["hung", "next"]
    assert woken_in < 2  # at once, not after some poll's period (the bound is for slow hosts)


async def test_abandoned_threads_count_until_they_return():
    gate = Gate()
    code = UserCode(gate, "gate", max_threads=2)
    async with code.open():
        for _ in range(2):
            with anyio.move_on_after(0.1):  # abandoned at its timeout: its thread runs on
                await code(None, "hung")
        with anyio.move_on_after(0.2):  # no slot frees meanwhile: this call is never made
            await code(None, "third")
        assert gate.calls == ["hung", "hung"]
        gate.go.set()
        with anyio.fail_after(5):
            assert await code(None, "after") == "after"
    assert gate.calls == ["hung", "hung", "after"]


async def test_a_sync_function_is_called_only_while_open():
    code = UserCode(lambda: "x", "fn", max_threads=1)
    with pytest.raises(RuntimeError, match=r"inside UserCode\.open"):
        await code(None)
    async with code.open():
        assert await code(None) == "x"
        with pytest.raises(RuntimeError, match="open already"):
            async with code.open():
                pass
    with pytest.raises(RuntimeError, match=r"inside UserCode\.open"):
        await code(None)


def test_a_thread_that_returns_after_the_loop_is_gone_neither_blocks_nor_fails():
    gate = Gate()
    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)

    async def run() -> float:
        code = UserCode(gate, "gate", max_threads=1)
        began = time.monotonic()
        async with code.open():
            with anyio.move_on_after(0.1):
                await code(None, "hung")
        return time.monotonic() - began

    try:
        closed_after = anyio.run(run)
        assert closed_after < 5  # the block did not wait for the hung thread
        assert not gate.returned.is_set()  # the loop is gone, the call still runs
        gate.go.set()
        assert gate.returned.wait(5)
        # Just after, anyio's worker reports the result to the closed loop: give it a moment
        # to fail, were it to (nothing of ours runs in the thread once the function returns).
        time.sleep(0.2)
    finally:
        threading.excepthook = previous
    assert failures == []

"""When a batched session sends the lines it holds: its own schedule, on a virtual clock.

The session knows nothing of the run's scheduler: it sends its pending lines once none has
come for ``batch_wait_seconds``, once the oldest has waited ``MAX_WAIT_SECONDS``, or at once
when they fill a file; lines that come while a batch runs go in one of their own. The Batch
API here is an in-memory stand-in that answers every batch at once and notes when each was
made, so each test reads the exact moments the schedule chose.
"""

from __future__ import annotations

import contextlib
import json
import warnings

import anyio
import pytest

from safecons.clients._batch_api import BatchState
from safecons.clients._batch_run import MAX_WAIT_SECONDS, Batcher
from virtual_time import VIRTUAL_TIME


@pytest.fixture
def anyio_backend():
    return VIRTUAL_TIME


class API:
    """A Batch API that runs every batch at once, answering each line with its custom_id."""

    identity, cancel_on_interrupt, poll_seconds = "E#m", False, 0.01
    max_bytes = 10**6

    def __init__(self, max_lines: int = 1_000) -> None:
        self.max_lines = max_lines
        self.made: list[tuple[float, list[str]]] = []  # (when, custom ids) of each batch

    @contextlib.asynccontextmanager
    async def open(self):
        yield self

    async def submit(self, data: bytes, *, name: str, tag: str | None = None) -> str:
        ids = [json.loads(line)["custom_id"] for line in data.splitlines()]
        self.made.append((anyio.current_time(), ids))
        return f"b{len(self.made)}"

    async def state(self, batch: str) -> BatchState:
        return BatchState(batch, "completed", output_file_id=f"out-{batch}")

    async def records(self, file_id: str, wanted: set[str]) -> dict:
        ids = self.made[int(file_id.removeprefix("out-b")) - 1][1]
        body = {"choices": []}
        return {k: {"custom_id": k, "response": {"status_code": 200, "body": body}} for k in ids}


def line(key: str) -> bytes:
    return json.dumps({"custom_id": key}).encode() + b"\n"


async def scheduled(api: API, arrivals: list[tuple[float, str]], *, wait: float) -> list:
    """Park a line for each ``(when, key)`` of ``arrivals`` at that moment (from 0) and wait
    for every answer; the batches ``api`` made, each ``(when, keys)`` relative to 0."""
    batcher = Batcher(api, None, progress=False, wait=wait)  # type: ignore[arg-type]
    start = anyio.current_time()
    answered: dict[str, str] = {}

    async def park(when: float, key: str) -> None:
        await anyio.sleep(when)
        record, batch = await batcher.park(key, line(key))
        assert record["custom_id"] == key
        answered[key] = batch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no ledger: "cannot resume"
        async with anyio.create_task_group() as tg:
            tg.start_soon(batcher.serve)
            async with anyio.create_task_group() as parked:
                for when, key in arrivals:
                    parked.start_soon(park, when, key)
            tg.cancel_scope.cancel()
    assert set(answered) == {key for _, key in arrivals}
    return [(round(when - start, 6), sorted(ids)) for when, ids in api.made]


@pytest.mark.anyio
async def test_lines_that_come_together_go_in_one_batch_after_the_wait():
    api = API()
    made = await scheduled(api, [(0.01 * i, f"k{i}") for i in range(5)], wait=2.0)
    assert made == [(2.04, ["k0", "k1", "k2", "k3", "k4"])]  # 2 s after the last


@pytest.mark.anyio
async def test_a_line_after_a_pause_goes_in_a_batch_of_its_own():
    api = API()
    made = await scheduled(api, [(0.0, "a"), (0.5, "b"), (10.0, "c")], wait=2.0)
    assert made == [(2.5, ["a", "b"]), (12.0, ["c"])]


@pytest.mark.anyio
async def test_lines_that_trickle_go_out_once_the_oldest_has_waited_the_most():
    # One line a second, a wait of two: the wait never ends, the oldest line's bound does.
    api = API()
    arrivals = [(float(i), f"k{i:03d}") for i in range(150)]
    made = await scheduled(api, arrivals, wait=2.0)
    assert [when for when, _ in made] == [MAX_WAIT_SECONDS, 121.0, 151.0]
    assert [len(ids) for _, ids in made] == [61, 61, 28]  # 0-60, 61-121, 122-149


@pytest.mark.anyio
async def test_lines_that_fill_a_file_go_at_once_with_what_came_with_them():
    api = API(max_lines=3)
    arrivals = [(0.0, f"k{i}") for i in range(7)] + [(0.5, "late")]
    made = await scheduled(api, arrivals, wait=2.0)
    assert [(when, len(ids)) for when, ids in made] == [(0.0, 3), (0.0, 3), (0.0, 1), (2.5, 1)]


@pytest.mark.anyio
async def test_two_calls_with_one_key_share_one_line():
    api = API()
    made = await scheduled(api, [(0.0, "same"), (0.1, "same"), (0.2, "other")], wait=1.0)
    assert made == [(1.2, ["other", "same"])]


@pytest.mark.anyio
async def test_a_wait_of_zero_sends_what_came_in_the_same_moment_together():
    api = API()
    made = await scheduled(api, [(0.0, "a"), (0.0, "b"), (1.0, "c")], wait=0.0)
    assert made == [(0.0, ["a", "b"]), (1.0, ["c"])]


@pytest.mark.anyio
async def test_an_interrupt_cancels_every_running_batch_at_once():
    # Found by review: batches were cancelled one after another, up to CANCEL_SECONDS each,
    # under a shield a second Ctrl-C cannot break; five took five times the bound.
    from safecons.clients import _batch_run

    class Hanging(API):
        cancel_on_interrupt = True

        async def state(self, batch: str) -> BatchState:
            return BatchState(batch, "in_progress")

        async def cancel(self, batch: str) -> None:
            await anyio.sleep(3600)  # a provider that never answers a cancel

    api = Hanging(max_lines=1)
    batcher = Batcher(api, None, progress=False, wait=0.0)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        async with anyio.create_task_group() as tg:
            tg.start_soon(batcher.serve)
            for key in "abcde":
                tg.start_soon(batcher.park, key, line(key))
            while len(api.made) < 5:
                await anyio.sleep(0.01)
            began = anyio.current_time()
            tg.cancel_scope.cancel()
    took = anyio.current_time() - began
    assert len(api.made) == 5
    assert took <= _batch_run.CANCEL_SECONDS + 1.0, took

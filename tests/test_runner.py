from __future__ import annotations

import anyio
import pytest

from safecons.clients import NonRetryableCallError, RetryableCallError
from safecons.errors import AuthenticationError
from safecons.run import RetryPolicy, Runner, run_sync
from virtual_time import VIRTUAL_TIME

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    # Backoffs, deadlines and cool-downs on a virtual clock: exact, and no real time.
    return VIRTUAL_TIME


FAST = RetryPolicy(base_delay=0.001, max_delay=0.01)


def flaky(failures, exc=RetryableCallError):
    state = {"n": 0}

    async def attempt(_attempt):
        state["n"] += 1
        if state["n"] <= failures:
            raise exc(f"failure {state['n']}")
        return "ok"

    return attempt, state


@pytest.mark.parametrize(("retries", "failures"), [(0, 0), (0, 1), (2, 2), (2, 3), (5, 5)])
async def test_n_retries_means_at_most_n_plus_one_attempts(retries, failures):
    runner = Runner(concurrency_limit=2, timeout_seconds=5, policy=FAST)
    attempt, state = flaky(failures)
    got = await runner.call(attempt, retries=retries, kind="sut")
    assert state["n"] == min(failures + 1, retries + 1)
    if failures <= retries:
        assert got.value == "ok" and got.error is None
    else:
        assert got.value is None and f"failure {retries + 1}" in got.error
        assert f"({retries + 1} attempt" in got.error
    assert got.attempts == state["n"]


async def test_non_retryable_stops_at_once():
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST)
    attempt, state = flaky(3, NonRetryableCallError)
    got = await runner.call(attempt, retries=3, kind="sut")
    assert state["n"] == 1 and got.value is None


async def test_auth_error_propagates():
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST)
    attempt, state = flaky(3, AuthenticationError)
    with pytest.raises(AuthenticationError):
        await runner.call(attempt, retries=3, kind="sut")
    assert state["n"] == 1


async def test_timeout_bounds_each_attempt_and_is_retried():
    runner = Runner(concurrency_limit=1, timeout_seconds=0.05, policy=FAST)
    calls = {"n": 0, "cancelled": 0}

    async def slow_then_fast(_attempt):
        calls["n"] += 1
        if calls["n"] == 1:
            try:
                await anyio.sleep(3600)
            except anyio.get_cancelled_exc_class():
                calls["cancelled"] += 1  # the deadline cut the first attempt short
                raise
        return "ok"

    got = await runner.call(slow_then_fast, retries=1, kind="judge")
    assert got.value == "ok" and calls == {"n": 2, "cancelled": 1}


async def test_retry_after_is_honoured():
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST)
    state = {"n": 0, "t": []}

    async def attempt(_attempt):
        state["t"].append(anyio.current_time())
        state["n"] += 1
        if state["n"] == 1:
            raise RetryableCallError("429", retry_after=0.2)
        return "ok"

    await runner.call(attempt, retries=1, kind="sut")
    # On the virtual clock: the wait the server asked for, and not much more (no load moves it).
    assert 0.2 <= state["t"][1] - state["t"][0] < 0.25


async def test_slot_released_while_backing_off():
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST)
    order: list[str] = []
    state = {"n": 0}

    async def backs_off(_attempt):
        state["n"] += 1
        if state["n"] == 1:
            order.append("a-fail")
            raise RetryableCallError("429", retry_after=0.3)
        order.append("a-ok")
        return "a"

    async def quick(_attempt):
        order.append("b")
        return "b"

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.call(backs_off, retries=1, kind="sut"))
        await anyio.sleep(0.05)
        tg.start_soon(lambda: runner.call(quick, retries=0, kind="sut"))
    assert order == ["a-fail", "b", "a-ok"]


async def test_in_flight_never_exceeds_limit():
    runner = Runner(concurrency_limit=3, timeout_seconds=5, policy=FAST)
    live = {"now": 0, "max": 0}

    async def attempt(_attempt):
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        await anyio.sleep(0.01)
        live["now"] -= 1
        return 1

    async with anyio.create_task_group() as tg:
        for _ in range(30):
            tg.start_soon(lambda: runner.call(attempt, retries=0, kind="sut"))
    assert live["max"] == 3 == runner.stats.max_in_flight


def test_backoff_delays_grow_and_cap():
    import random

    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, max_retry_after=2.0)
    rng = random.Random(0)
    assert all(0 <= policy.delay(0, None, rng) <= 1 for _ in range(100))
    # Exponential: the third retry waits up to 4 s, and does wait longer than the first can.
    third = [policy.delay(2, None, rng) for _ in range(200)]
    assert max(third) <= 4 and max(third) > 1
    assert all(0 <= policy.delay(10, None, rng) <= 5 for _ in range(100))
    assert all(2.0 <= policy.delay(0, 100.0, rng) <= 2.2 for _ in range(100))


def test_run_sync_in_plain_code_and_inside_a_running_loop():
    async def work(x):
        await anyio.sleep(0)
        return x * 2

    assert run_sync(work, 21) == 42

    async def notebook_cell():
        # A Jupyter cell runs inside the kernel's event loop: the sync API must still work.
        return run_sync(work, 5)

    import asyncio

    assert asyncio.run(notebook_cell()) == 10


async def test_rate_limits_lower_the_in_flight_target_then_it_recovers():
    runner = Runner(concurrency_limit=16, timeout_seconds=5, policy=FAST)
    state = {"live": 0, "limited": True}

    async def attempt(_attempt):
        # A server that rate-limits whenever more than 4 requests are in flight, until told not to.
        state["live"] += 1
        try:
            await anyio.sleep(0.005)
            if state["limited"] and state["live"] > 4:
                raise RetryableCallError("429", retry_after=0.01, rate_limited=True)
            return 1
        finally:
            state["live"] -= 1

    outcomes = []

    async def one():
        outcomes.append(await runner.call(attempt, retries=20, kind="sut"))

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(one)
    low = runner.stats.min_target
    assert sum(o.rate_limited for o in outcomes) > 0 and low <= 4
    assert all(o.error is None for o in outcomes)
    # Pressure kept the retries far below the 200 x 21 worst case.
    assert sum(o.attempts for o in outcomes) < 400

    state["limited"] = False
    async with anyio.create_task_group() as tg:
        for _ in range(300):
            tg.start_soon(lambda: runner.call(attempt, retries=0, kind="sut"))
    assert runner.permits.policy("").target > low


async def test_one_burst_of_429s_cuts_the_target_once():
    runner = Runner(concurrency_limit=16, timeout_seconds=5, policy=FAST)
    gate = anyio.Event()

    burst = {"left": 16}

    async def attempt(_attempt):
        await gate.wait()
        if burst["left"]:
            # The burst's answers; the calls' next attempts (a 429 spends no retry) succeed.
            burst["left"] -= 1
            raise RetryableCallError("429", rate_limited=True)
        return 1

    async def answered(_attempt):
        return 1

    # The endpoint's first answer: until it comes, one attempt goes alone (the pace's probe).
    await runner.call(answered, retries=0, kind="sut")
    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(lambda: runner.call(attempt, retries=0, kind="sut"))
        await anyio.sleep(0.05)
        gate.set()
    # Sixteen 429s to requests sent together are one signal: 16 -> 8, not 16 -> 1.
    assert runner.permits.lowest_target == 8


async def test_max_calls_budget_skips_calls_once_spent():
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST, max_calls=3)
    attempt, state = flaky(10)
    first = await runner.call(attempt, retries=5, kind="sut")
    assert state["n"] == 3 and first.skipped and "max_calls" in first.error
    second = await runner.call(attempt, retries=5, kind="sut")
    assert state["n"] == 3 and second.skipped and second.attempts == 0


def test_an_attempt_is_counted_when_it_starts_not_while_it_waits_for_a_thread():
    # A sync callable that overruns its timeout keeps its thread busy; attempts that time out
    # waiting for a free thread were never made. Before the fix they were all counted (80
    # "timed out" attempts for 9 real calls in the reported probe).
    import threading
    import time as _time

    import polars as pl

    from safecons.metric import safety_consistency_run
    from safecons.testing import StandInJudge

    entered = []
    lock = threading.Lock()

    def slow(messages, *, temperature):
        with lock:
            entered.append(_time.monotonic())
        _time.sleep(0.5)
        return "I can't help with that."

    rows = pl.DataFrame(
        {"input_id": list(range(4)), "prompt": ["q"] * 4, "sut_response": ["No."] * 4}
    )
    run = safety_consistency_run(
        rows,
        sut=slow,
        judge=StandInJudge(),
        concurrency_limit=2,
        timeout_seconds=0.1,
        n_sut_retries=2,
        progress=False,
        allow_unscored=True,
    )
    # A thread marks its attempt started just before it enters the callable: give the last
    # ones a moment to enter (a wait, not a timing assertion).
    deadline = _time.monotonic() + 15
    while _time.monotonic() < deadline and len(entered) < run.summary.attempts["sut"]:
        _time.sleep(0.05)
    errors = [e for row in run.frame["sc_response_errors"].to_list() for e in row]
    assert run.summary.attempts["sut"] == len(entered)
    assert any("not started within 0.1 s" in e for e in errors)
    assert all("timed out" in e or "not started" in e for e in errors)


async def test_a_bug_raises_instead_of_becoming_a_row_error():
    # Only a failed attempt (a client's CallFailed, the timeout) is a row's error: any other
    # exception is a bug of safecons itself, and it must end the run, not pass as data.
    runner = Runner(concurrency_limit=1, timeout_seconds=5, policy=FAST)

    async def buggy(_attempt):
        return {}["missing"]

    with pytest.raises(KeyError):
        await runner.call(buggy, retries=3, kind="sut")
    assert runner.stats.in_flight == 0


def test_a_users_own_client_failing_is_a_row_error_not_a_crash():
    # A ChatClient of the user's making is user code, like a callable: what its session
    # raises is a failed attempt.
    import contextlib

    import polars as pl

    import safecons as sc
    from safecons.testing import StandInJudge

    class Flaky:
        identity = "my-client"

        @contextlib.asynccontextmanager
        async def session(self):
            yield self

        async def complete(self, messages, *, temperature, seed=None):
            if "boom" in messages[-1]["content"]:
                raise ZeroDivisionError("my own bug")
            return sc.Completion(text="No.")

    df = pl.DataFrame(
        {"input_id": [1, 2], "prompt": ["hello", "boom"], "sut_response": ["No.", "No."]}
    )
    out = sc.safety_consistency(
        df, sut=Flaky(), judge=StandInJudge(), progress=False, n_sut_retries=0, cache=False
    )
    errors = out["sc_error"].to_list()
    assert errors[0] is None
    assert "my-client raised ZeroDivisionError: my own bug" in errors[1]


def test_a_sync_run_leaves_the_objects_from_before_it_out_of_the_collector_s_passes():
    # The collector's passes over the whole heap (every module, Polars, the user's frames)
    # took a tenth of a run's CPU: a sync run freezes what existed before it, and thaws it
    # after, whatever happened.
    import gc

    seen = []

    async def run() -> None:
        seen.append(gc.get_freeze_count())

    async def fail() -> None:
        raise ValueError("the run's own")

    assert gc.get_freeze_count() == 0
    run_sync(run)
    assert seen[0] > 0 and gc.get_freeze_count() == 0
    with pytest.raises(ValueError, match="the run's own"):
        run_sync(fail)
    assert gc.get_freeze_count() == 0


def test_a_sync_run_collects_its_youngest_objects_less_often_and_puts_the_threshold_back():
    # At the default threshold (700 allocations) the youngest generation's passes took about
    # a tenth of a run's CPU, walking the same live tasks and answers again and again.
    import gc

    from safecons.run._runner import YOUNG_THRESHOLD

    seen = []

    async def run() -> None:
        seen.append(gc.get_threshold())

    async def fail() -> None:
        raise ValueError("the run's own")

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        run_sync(run)
        assert seen[-1] == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        with pytest.raises(ValueError, match="the run's own"):
            run_sync(fail)
        assert gc.get_threshold() == (700, 10, 10)
        # A threshold its owner set higher is left as it is.
        gc.set_threshold(10 * YOUNG_THRESHOLD, 5, 5)
        run_sync(run)
        assert seen[-1] == gc.get_threshold() == (10 * YOUNG_THRESHOLD, 5, 5)
    finally:
        gc.set_threshold(*before)


def test_a_sync_run_leaves_a_heap_the_user_froze_as_it_was():
    import gc

    seen = []

    async def run() -> None:
        seen.append(gc.get_freeze_count())

    gc.freeze()
    try:
        run_sync(run)
        # Still the user's: the run neither froze it again nor thawed it.
        assert seen[0] > 0 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

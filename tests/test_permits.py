"""A run's own permits: one attempt, one permit, and what the runner says of the attempt."""

from __future__ import annotations

import anyio
import pytest

from safecons.run import LocalPermits, RetryPolicy, Runner
from virtual_time import VIRTUAL_TIME

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    # Waits on a virtual clock: exact, and no real time.
    return VIRTUAL_TIME


async def test_a_runner_holds_exactly_one_permit_per_attempt_and_reports_429s():
    class Recording(LocalPermits):
        def __init__(self) -> None:
            super().__init__(2, adaptive=False)
            self.slots: list[tuple[str, bool, float | None, bool]] = []

        def slot(self, endpoint, *, tokens=None):  # type: ignore[override]
            outer = super().slot(endpoint, tokens=tokens)
            recorded = self.slots

            class Wrap:
                async def __aenter__(self):
                    self.s = await outer.__aenter__()
                    return self.s

                async def __aexit__(self, *exc):
                    recorded.append((endpoint, self.s.limited, self.s.retry_after, self.s.ok))
                    return await outer.__aexit__(*exc)

            return Wrap()

    from safecons.clients import RetryableCallError

    permits = Recording()
    runner = Runner(
        concurrency_limit=2,
        timeout_seconds=5,
        policy=RetryPolicy(base_delay=0.001, max_retry_after=0.01),
        permits=permits,
    )
    answers = iter([RetryableCallError("429", retry_after=0.005, rate_limited=True), "ok"])

    async def attempt(_attempt):
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return got

    out = await runner.call(attempt, retries=2, kind="sut", endpoint="http://x")
    assert out.value == "ok"
    assert permits.slots == [("http://x", True, 0.005, False), ("http://x", False, None, True)]


async def test_local_pressure_counts_one_cut_per_window_on_the_permits_clock():
    now = {"t": 0.0}
    permits = LocalPermits(8, clock=lambda: now["t"])
    answer = anyio.Event()

    async def burst() -> None:
        async with permits.slot("e") as slot:
            await answer.wait()
            slot.rate_limited(None)

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(burst)
        await anyio.wait_all_tasks_blocked()  # both started at 0
        now["t"] = 1.0  # and both 429 at 1 s: one burst, one cut
        answer.set()
    assert permits.policy("e").target == 4
    now["t"] = 1.0  # an attempt starting at the moment of the cut was sent with the old target
    async with permits.slot("e") as same_moment:
        same_moment.rate_limited(None)
    assert permits.policy("e").target == 4
    now["t"] = 2.0  # one started after the cut cuts again
    async with permits.slot("e") as later:
        later.rate_limited(None)
    assert permits.policy("e").target == 2 and permits.lowest_target == 2
    for _ in range(2 + 3):  # clean attempts grow it back by one per window of the target
        async with permits.slot("e") as clean:
            clean.succeeded()
    assert permits.policy("e").target == 4


async def test_local_permits_ask_the_pacing_policy_they_are_given():
    from safecons.run._policy import EndpointPolicy

    class OnePerSecond(EndpointPolicy):
        """A policy of one's own: an attempt a second, whatever the provider says."""

        def __init__(self, ceiling: int) -> None:
            super().__init__(ceiling, adaptive=False)
            self.next_at = 0.0
            self.told: list[tuple[int, bool]] = []

        def wait(self, now: float, tokens: int = 0) -> float:
            return max(0.0, self.next_at - now)

        def start(self, tokens: int = 0, *, now: float) -> int:
            self.next_at = now + 1.0
            return super().start(tokens, now=now)

        def answered(self, number, limits, now, *, ok=False) -> None:
            self.told.append((number, ok))
            super().answered(number, limits, now, ok=ok)

    made: list[OnePerSecond] = []

    def policy(ceiling: int) -> OnePerSecond:
        made.append(OnePerSecond(ceiling))
        return made[-1]

    permits = LocalPermits(8, policy=policy)
    began = anyio.current_time()
    started: list[float] = []

    async def attempt() -> None:
        async with permits.slot("e") as slot:
            started.append(anyio.current_time() - began)
            slot.succeeded()

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(attempt)
    assert len(made) == 1 and made[0].ceiling == 8
    assert started == pytest.approx([0.0, 1.0, 2.0], abs=0.01)
    assert sorted(made[0].told) == [(0, True), (1, True), (2, True)]

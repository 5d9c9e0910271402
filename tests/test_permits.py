"""A run's own permits: one attempt, one permit, and what the runner says of the attempt."""

from __future__ import annotations

import pytest

from safecons.run._permits import LocalPermits
from safecons.run._runner import RetryPolicy, Runner

pytestmark = pytest.mark.anyio


async def test_a_runner_holds_exactly_one_permit_per_attempt_and_reports_429s():
    class Recording(LocalPermits):
        def __init__(self) -> None:
            super().__init__(2, adaptive=False)
            self.slots: list[tuple[str, bool, float | None, bool]] = []

        def slot(self, endpoint):  # type: ignore[override]
            outer = super().slot(endpoint)
            recorded = self.slots

            class Wrap:
                async def __aenter__(self):
                    self.s = await outer.__aenter__()
                    return self.s

                async def __aexit__(self, *exc):
                    recorded.append((endpoint, self.s.limited, self.s.retry_after, self.s.ok))
                    return await outer.__aexit__(*exc)

            return Wrap()

    from safecons.clients._base import RetryableCallError

    permits = Recording()
    runner = Runner(
        concurrency_limit=2,
        timeout_seconds=5,
        policy=RetryPolicy(base_delay=0.001, max_retry_after=0.01),
        permits=permits,
    )
    answers = iter([RetryableCallError("429", retry_after=0.005, rate_limited=True), "ok"])

    async def attempt():
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return got

    out = await runner.call(attempt, retries=2, kind="sut", endpoint="http://x")
    assert out.value == "ok"
    assert permits.slots == [("http://x", True, 0.005, False), ("http://x", False, None, True)]

"""An event loop on a virtual clock, for tests of what waits: retries, permits, pacing, leases.

Time passes only when every task waits, and then jumps to the next timer, as Trio's
``MockClock(autojump_threshold=0)``: ``anyio.sleep``, ``fail_after`` and ``anyio.current_time``
all read it, so backoffs, deadlines, cool-downs and paced waits happen at exact moments, in a
fixed order, and take no real time; a test on it asserts no wall time a loaded machine can
miss. A test module runs its async tests on it with::

    @pytest.fixture
    def anyio_backend():
        return VIRTUAL_TIME

Work in another thread is real time: a loop with only such work (no timer) waits for it as a
plain loop does, but a timer due meanwhile is jumped to at once, so a test on this clock keeps
threads out of what it times.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

__all__ = ("VIRTUAL_TIME", "VirtualTimeLoop")


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, instead of blocking until a timer is due, moves the clock to it."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only I/O (another thread) can wake the loop
            return super().select(None)
        self.now += timeout  # every task waits and nothing is ready: jump to the next timer
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock that jumps to the next timer whenever every task
    waits, as Trio's ``MockClock(autojump_threshold=0)``: ``anyio.sleep``, ``fail_after`` and
    ``anyio.current_time`` all read it."""

    def __init__(self) -> None:
        self._selector_clock = _JumpingSelector()
        super().__init__(self._selector_clock)

    def time(self) -> float:
        return self._selector_clock.now


#: The ``anyio_backend`` of a test on the virtual clock.
VIRTUAL_TIME = ("asyncio", {"loop_factory": VirtualTimeLoop})

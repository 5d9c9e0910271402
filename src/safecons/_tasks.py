"""Tasks that serve a block of code while it runs, and end with it (anyio, any backend)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

__all__ = ("background_tasks", "in_asyncio_loop", "user_stacklevel")

# The packages between a user's line and a warning given inside a run: safecons itself, the
# frame library that called it (a pipe, a map over batches), and the event loop machinery a
# task runs under (an anyio.run of a sync front runs its tasks on the caller's own stack).
_NOT_THE_USER = frozenset(
    {"safecons", "polars", "anyio", "asyncio", "sniffio", "contextlib", "concurrent", "threading"}
)


def user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the user's line: the first caller outside
    safecons, Polars and the event loop's machinery, for a warning given by the function that
    calls this one. Where no such caller is on the stack (a run on a worker thread, as in a
    notebook, whose stack ends in the thread's start), 1: the line that gives the warning.

    Examples
    --------
    >>> import warnings
    >>> def warner():  # safecons' code gives a warning: it points at the first line outside
    ...     warnings.warn("said", stacklevel=user_stacklevel())
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warner()
    >>> caught[0].message
    UserWarning('said')
    """
    # Level 1 is the function that warns (the caller of this one), level 2 its caller.
    level, frame = 2, sys._getframe(2)
    while str(frame.f_globals.get("__name__")).split(".")[0] in _NOT_THE_USER:
        if frame.f_back is None:
            return 1
        level, frame = level + 1, frame.f_back
    return level


def in_asyncio_loop() -> bool:
    """Whether this thread runs an asyncio event loop now: a Jupyter cell does, a plain
    script does not, and neither does a trio program.

    Examples
    --------
    >>> import asyncio
    >>> async def main():
    ...     return in_asyncio_loop()
    >>> in_asyncio_loop(), asyncio.run(main())
    (False, True)
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@asynccontextmanager
async def background_tasks() -> AsyncIterator[TaskGroup]:
    """A task group for tasks that serve the block: they are cancelled when the block ends.

    What the block raises comes out as it is, never wrapped in an ``ExceptionGroup``, so a
    run's errors read the same with or without a helper's tasks behind them. The tasks started
    here must not raise (loops that go on whatever happens, or that keep what they catch for
    whoever waits on them): one that does cancels the block, and its error comes out in a
    group, as a bug should.

    Examples
    --------
    >>> import anyio
    >>> async def main():
    ...     async with background_tasks() as tg:
    ...         tg.start_soon(anyio.sleep_forever)  # ends with the block
    ...         raise KeyError("the block's own")
    >>> anyio.run(main)
    Traceback (most recent call last):
    ...
    KeyError: "the block's own"
    """
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            yield tg
        except BaseException as exc:  # boundary: the block's own error, whatever it is, kept
            # and raised again below, once the tasks are gone: raised through the task group
            # it would come out wrapped in an ExceptionGroup. Nothing is swallowed.
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure

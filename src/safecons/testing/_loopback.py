"""Serving an aiohttp application on 127.0.0.1 from an event loop of its own.

A loopback server for tests must serve a synchronous test and an ``async`` one alike, without
touching the test's own loop: it runs its own event loop in a daemon thread. The loop is
created by :meth:`LoopbackServer.start` and the server opened on it with
``run_coroutine_threadsafe``, so a failure to bind (a port in use) reaches the caller as the
cause of its ``RuntimeError``, and closing runs on the loop the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import Future
from typing import ClassVar, Final, Self

from aiohttp import web

__all__ = ("LoopbackServer",)

#: The highest TCP port: a port number is 16 bits (0 asks the system for a free one).
_MAX_PORT: Final = 65535
#: Seconds :meth:`LoopbackServer.start` waits for the port to be bound.
_START_SECONDS: Final = 30.0
#: Seconds requests in flight get to finish when the server stops. (aiohttp reads a timeout of
#: 0 as "no timeout".)
_SHUTDOWN_SECONDS: Final = 0.05


class LoopbackServer:
    """Serves :meth:`_application` on ``127.0.0.1`` from an event loop in a daemon thread.

    A subclass builds the application and may count connections (:meth:`_connected`) or reset
    state when it starts (:meth:`_starting`); this class starts, stops and names the address.
    """

    #: The name of the serving thread, by which a test finds it.
    _thread_name: ClassVar[str] = "safecons-loopback"

    def __init__(self, port: int = 0) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= _MAX_PORT:
            raise ValueError(f"port: expected 0..{_MAX_PORT}, got {port!r}")
        self._requested_port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: Future[int] | None = None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._name = type(self).__name__

    # -- what a subclass gives -----------------------------------------------------------------

    def _application(self) -> web.Application:
        """The application to serve (called on the server's loop, once per start)."""
        raise NotImplementedError

    def _connected(self) -> None:
        """A TCP connection was accepted (on the server's loop)."""

    def _starting(self) -> None:
        """Called by :meth:`start` before the server opens."""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving; returns once the port is bound.

        Raises
        ------
        RuntimeError
            When already running, or when the server cannot start (the cause is chained).
        """
        if self._thread is not None:
            raise RuntimeError(f"{self._name} is already running")
        self._starting()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=self._thread_name, daemon=True)
        self._loop, self._thread = loop, thread
        thread.start()
        self._opening = asyncio.run_coroutine_threadsafe(self._open(), loop)
        started = False
        try:
            self._port = self._opening.result(timeout=_START_SECONDS)
            started = True
        except (OSError, TimeoutError) as exc:  # a port in use; a loop that never ran it
            raise RuntimeError(f"{self._name} could not start") from exc
        finally:
            if not started:
                self._stop_thread(timeout=5)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving: close every connection, cancel requests in flight, join the thread.

        Statistics stay readable. Calling it when stopped does nothing.

        Raises
        ------
        RuntimeError
            When the thread does not end within ``timeout`` seconds (a blocking responder).
        """
        if self._thread is None:
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self._name}.stop() called from its own thread")
        self._stop_thread(timeout)

    def _stop_thread(self, timeout: float) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if self._opening is not None:
            self._opening.cancel()
        deadline = time.monotonic() + timeout
        closing = asyncio.run_coroutine_threadsafe(self._close(), loop)
        try:
            # A loop blocked past the deadline is named below, as a thread that does not end.
            with contextlib.suppress(TimeoutError):
                closing.result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            raise RuntimeError(
                f"{self._name} thread still running after {timeout:g}s; "
                "is a synchronous responder blocking?"
            )
        loop.close()
        self._thread = None
        self._loop = None
        self._opening = None

    async def _open(self) -> int:
        runner = web.AppRunner(self._application(), access_log=None, handle_signals=False)
        self._runner = runner
        await runner.setup()
        factory = runner.server
        assert factory is not None

        def connection() -> asyncio.BaseProtocol:
            self._connected()
            return factory()

        # Benchmarks open many connections at once; the default backlog (100) drops SYNs.
        self._server = await asyncio.get_running_loop().create_server(
            connection, "127.0.0.1", self._requested_port, backlog=1024
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        server, runner = self._server, self._runner
        self._server = self._runner = None
        if server is not None:
            server.close()
        if runner is not None:
            if runner.server is not None:
                # Close idle connections and cancel requests in flight almost at once: stop()
                # must not wait out a latency.
                await runner.server.shutdown(_SHUTDOWN_SECONDS)
            await runner.cleanup()
        if server is not None:
            await server.wait_closed()
        # What asyncio.run does on its way out: tasks still running (a batch's) end here
        # rather than as pending tasks of a closed loop.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_asyncgens()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- address -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        return self._thread is not None

    @property
    def port(self) -> int:
        """The bound TCP port (of the last start, once stopped)."""
        if self._port is None:
            raise RuntimeError(f"{self._name} has not been started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the root, e.g. an Azure ``endpoint``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: an OpenAI client's ``base_url``."""
        return f"{self.url}/v1"

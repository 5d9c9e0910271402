"""Collection rules for the doctests of ``src/safecons``, and the guard that keeps the
``network`` marker true for every test and doctest."""

from __future__ import annotations

import importlib.util
import socket
import threading
from collections.abc import Callable, Generator

import pytest

pytest_plugins = ["pytester"]  # tests/test_socket_guard.py runs the guard on small test files

# safecons.ray is the optional `ray` extra: without Ray its modules that import it cannot be
# imported, so their doctests are not collected (tests/test_ray.py says why it skips). The
# lease table (ray/_leases.py) is plain anyio: its doctests run everywhere.
_NEED_RAY = ["src/safecons/ray/_limiter.py", "src/safecons/ray/_scorer.py"]
collect_ignore_glob = [] if importlib.util.find_spec("ray") else _NEED_RAY


# The socket guard. While a test that is not marked `network` sets up or runs, connecting or
# binding an AF_INET or AF_INET6 socket in this process (any thread) raises SocketOpened, and
# the test fails with a message that names the address, even when the code under test caught
# the error. AF_UNIX sockets and socket.socketpair (asyncio's self-pipe) are untouched. A child
# process is out of its sight: the tests that start one that opens a socket are marked by hand
# (DEVELOPERS.md, "Checks"). Teardown is not watched: a module's server fixture may be torn
# down after whichever of its tests runs last.

"""Collection rules for the doctests of ``src/safecons``, and the guard that keeps the
``network`` marker true for every test and doctest."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Generator
from typing import Any

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
# (DEVELOPERS.md, "Checks"), and starting a browser from an unmarked test fails it too.
# Teardown is not watched: a module's server fixture may be torn down after whichever of its
# tests runs last.

_INET = (socket.AF_INET, socket.AF_INET6)
_MESSAGE = "this test opens a socket: mark it network (@pytest.mark.network)"


class SocketOpened(RuntimeError):
    """An INET socket was connected or bound by a test not marked ``network``.

    Not an OSError, so that no client's retry on a connection error takes it for one."""


class _Guard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watching: str | None = None  # the test's node id while it is watched
        self.opened: list[str] = []

    def check(self, sock: socket.socket, call: str, address: object) -> None:
        if self._watching is None or sock.family not in _INET:
            return
        what = f"{call}({address!r})"
        with self._lock:
            self.opened.append(what)
        raise SocketOpened(f"{_MESSAGE}: {self._watching} called socket.{what}")

    def check_child(self, program: str) -> None:
        what = f"start {program} (a browser opens sockets)"
        with self._lock:
            self.opened.append(what)
        raise SocketOpened(f"{_MESSAGE}: {self._watching} would {what}")

    @property
    def watching(self) -> str | None:
        return self._watching

    def watch(self, nodeid: str) -> None:
        with self._lock:
            self._watching, self.opened = nodeid, []

    def stop(self) -> list[str]:
        with self._lock:
            opened, self._watching, self.opened = self.opened, None, []
        return opened


_GUARD = _Guard()


def _guarded(call: str) -> Callable[..., object]:
    real = getattr(socket.socket, call)

    def method(self: socket.socket, address: object, /) -> object:
        _GUARD.check(self, call, address)
        return real(self, address)

    method.__name__ = method.__qualname__ = call
    method.__doc__ = real.__doc__
    method.__wrapped__ = real  # type: ignore[attr-defined]
    return method


for _call in ("connect", "connect_ex", "bind"):
    setattr(socket.socket, _call, _guarded(_call))


# A child the guard cannot see into, known to open sockets: a browser resolves names and probes
# the network even on a file: page. Starting one from an unmarked test fails it the same way.
_BROWSERS = frozenset({"chromium", "chromium-browser", "google-chrome", "chrome"})
_real_popen_init = subprocess.Popen.__init__


def _popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    first = args if isinstance(args, str | bytes | os.PathLike) else next(iter(args), "")
    name = os.path.basename(os.fsdecode(first)).split()[0] if first else ""
    if name in _BROWSERS and _GUARD.watching is not None:
        _GUARD.check_child(name)
    _real_popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]


# A doctest cannot carry a marker: these examples start a loopback server, so they are marked
# here, by the name pytest gives them (the module's, then the object's dotted path).
NETWORK_DOCTESTS = {
    "safecons.testing._hostile_batch",
    "safecons.testing._server",
    "safecons.testing._server.FakeOpenAIServer",
    "safecons.testing._answers.route_by_model",
    "safecons.testing._scripted_server.ScriptedServer",
}


def _mark_network_doctests(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.DoctestItem) and item.name in NETWORK_DOCTESTS:
            item.add_marker(pytest.mark.network)


# The README's test command runs on two workers with `--dist loadgroup`: the tests of one
# `xdist_group` run on one worker (one Ray at a time, each notebook run once). pytest-xdist 3.8
# tells its scheduler a test's group by renaming the test `<id>@<group>` through the item's
# `_nodeid`, which pytest 9.2 no longer reads (its node ids are structured), so the groups were
# silently lost (pytest-dev/pytest-xdist#1386). Where xdist's renaming did not take, it is made
# to take; where a grouped test still has no group in its id, the run stops instead of running
# the group's tests side by side.
def _keep_xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers alone
        return
    for item in items:
        renamed = item.__dict__.get("_nodeid")
        if isinstance(renamed, str) and renamed != item.nodeid:
            item._id = type(item.id).parse(renamed)
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            raise pytest.UsageError(
                f"--dist loadgroup: {item.nodeid} is in an xdist_group, but its id does not"
                " say so; this pytest-xdist cannot group it with this pytest"
            )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None]:
    _mark_network_doctests(items)  # before -m selects on the markers
    yield
    _keep_xdist_groups(config, items)  # after xdist has renamed the grouped tests


def _watched(item: pytest.Item) -> Generator[None, object, object]:
    if item.get_closest_marker("network") is not None:
        return (yield)
    _GUARD.watch(item.nodeid)
    try:
        return (yield)
    finally:
        opened = _GUARD.stop()
        if opened:  # the test's own error, if any, came from the guard or after it
            said = opened[0] if opened[0].startswith("start ") else f"called socket.{opened[0]}"
            failure = f"{_MESSAGE}: {item.nodeid} {said}"
            raise pytest.fail.Exception(failure, pytrace=False) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _watched(item))


@pytest.fixture
def socket_guard() -> _Guard:
    """The guard itself (its ``watching`` is the test's node id, or None in a ``network``
    test)."""
    return _GUARD

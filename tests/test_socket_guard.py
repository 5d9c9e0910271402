"""The socket guard of the root conftest.py: a test not marked ``network`` that connects or
binds an INET socket fails and says so; Unix sockets, socketpair and asyncio keep working."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import asyncio
import socket
import tempfile
import threading

import pytest


def test_bind():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_connect_whose_error_the_code_under_test_swallows():
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    except Exception:
        pass


def test_connect_ex_in_another_thread():
    def probe():
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.connect_ex(("::1", 9))
        except Exception:
            pass

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()


@pytest.fixture
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s


def test_a_fixture_that_binds(server):
    pass


def test_unix_sockets_socketpair_and_asyncio():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x")
        assert b.recv(1) == b"x"
    with tempfile.TemporaryDirectory() as folder, socket.socket(socket.AF_UNIX) as u:
        u.bind(f"{folder}/s")
    assert asyncio.run(asyncio.sleep(0, "done")) == "done"


def test_starting_a_browser():
    import subprocess

    try:
        subprocess.run(["chromium", "--version"], capture_output=True, check=False)
    except Exception:
        pass


@pytest.mark.network
def test_marked(socket_guard):
    assert socket_guard.watching is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with socket.create_connection(s.getsockname(), timeout=5):
            pass
"""


@pytest.mark.network  # test_marked, in the child pytest, binds and connects on loopback
def test_an_unmarked_test_that_opens_a_socket_fails_and_says_so(pytester, monkeypatch):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    network: opens a socket\n")
    pytester.makepyfile(test_guarded=TESTS)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # none of them is needed here
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=4, errors=1)
    message = "this test opens a socket: mark it network (@pytest.mark.network)"
    result.stdout.fnmatch_lines_random(
        [
            f"*{message}: test_guarded.py::test_bind called socket.bind(('127.0.0.1', 0))",
            f"*{message}: test_guarded.py::test_connect_whose_error_the_code_under_test_swallows"
            " called socket.connect(('127.0.0.1', 9))",
            f"*{message}: test_guarded.py::test_connect_ex_in_another_thread"
            " called socket.connect_ex(('::1', 9))",
            f"*{message}: test_guarded.py::test_a_fixture_that_binds called socket.bind(*",
            f"*{message}: test_guarded.py::test_starting_a_browser start chromium (a browser*",
        ]
    )


def test_this_unmarked_test_is_watched_and_its_unix_sockets_work(socket_guard, request):
    assert socket_guard.watching == request.node.nodeid
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x")
        assert b.recv(1) == b"x"
    assert asyncio.run(asyncio.sleep(0, "done")) == "done"

"""A kernel interrupt stops a run in a real Jupyter kernel, wherever ``import safecons`` ran.

Importing polars installs a native SIGINT handler with ``SA_RESTART`` (pola-rs/polars#21739);
in the cell that imported it, an interrupt no longer woke the main thread blocked on the run's
portal, so the run went on to its end and only then raised, throwing the frame away. These
tests run the README's example as one cell (the import in the cell that runs) and after an
import in an earlier cell, against a server whose every answer takes a minute: the run can end
only by the interrupt.
"""

from __future__ import annotations

import queue
import time

import pytest

from safecons.testing import FakeOpenAIServer

jupyter_client = pytest.importorskip("jupyter_client")

ROWS = 20
#: Each answer takes this long: 20 rows would take 40 minutes, so a run that ends in the
#: test's time ended by the interrupt.
LATENCY = 120.0
#: Generous bounds for a loaded machine: how long a kernel may take to answer at all.
KERNEL_SECONDS = 90.0

IMPORTS = "import polars as pl\nimport safecons as sc\n"


def run_cell(url: str, rows: int = ROWS, *, model: str = "m") -> str:
    return (
        f"df = pl.DataFrame({{'input_id': list(range({rows})), 'prompt': ['q'] * {rows},"
        f" 'sut_response': ['a'] * {rows}}})\n"
        f"sut = sc.OpenAICompatible(base_url={url!r}, model={model!r}, api_key='k')\n"
        "out = df.pipe(sc.safety_consistency, sut=sut, judge=sc.OfflineJudge(),\n"
        "              concurrency_limit=1, cache=False, progress=False)\n"
        "print('rows scored:', out.height)\n"
    )


def outcome(kc, deadline: float) -> tuple[list[str], list[str]]:
    """The cell's printed text and its errors' names, up to the kernel going idle."""
    texts: list[str] = []
    errors: list[str] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"the cell did not end in time; it printed {texts!r}")
        try:
            msg = kc.get_iopub_msg(timeout=left)
        except queue.Empty:
            continue
        content = msg["content"]
        if msg["msg_type"] == "stream":
            texts.append(content["text"])
        elif msg["msg_type"] == "error":
            errors.append(content["ename"])
        elif (
            msg["msg_type"] == "status"
            and content["execution_state"] == "idle"
            and msg["parent_header"].get("msg_type") == "execute_request"
        ):
            return texts, errors


@pytest.fixture
def kernel():
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
@pytest.mark.network  # a Jupyter kernel over loopback TCP, and the server it calls
@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", ["import in the same cell", "import in an earlier cell"])
def test_an_interrupt_stops_a_run_in_a_kernel_and_a_later_run_returns_its_frame(kernel, where):
    km, kc = kernel
    with FakeOpenAIServer(latency=LATENCY) as slow, FakeOpenAIServer() as fast:
        if where == "import in an earlier cell":
            kc.execute(IMPORTS)
            assert outcome(kc, time.monotonic() + KERNEL_SECONDS)[1] == []
            kc.execute(run_cell(slow.url))
        else:
            kc.execute(IMPORTS + run_cell(slow.url))
        deadline = time.monotonic() + KERNEL_SECONDS
        while slow.stats.requests == 0:  # the run has started: its first call waits
            assert time.monotonic() < deadline, "the run never called the server"
            time.sleep(0.05)
        km.interrupt_kernel()
        # The run cannot end by itself within this bound (its first answer alone takes
        # LATENCY): only the interrupt ends it.
        texts, errors = outcome(kc, time.monotonic() + LATENCY / 2)
        assert errors == ["KeyboardInterrupt"], (texts, errors)
        assert slow.stats.requests == 1

        # The same kernel, the next run: it finishes and its cell gets the frame (no
        # interrupt left over from the first run is raised at its end).
        kc.execute(run_cell(fast.url, rows=3))
        texts, errors = outcome(kc, time.monotonic() + KERNEL_SECONDS)
        assert errors == [] and "rows scored: 3\n" in texts, (texts, errors)

"""Runs stopped mid-way (SIGKILL, Ctrl-C) resume from the cache.

The rerun re-requests only the calls that had not finished.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import polars as pl
import pytest

import safecons as sc
from safecons.run import ResponseCache
from safecons.testing import FakeOpenAIServer, route_by_model

pytestmark = pytest.mark.network

REFUSE = "I'm sorry, but I can't help with that."
ROWS = 40
NEEDED = ROWS * 2 * 2  # rows x (responses_per_query - 1) x (SUT + judge)

SCRIPT = textwrap.dedent(
    """
    import asyncio, signal, sys
    import polars as pl
    import safecons as sc

    base_url, cache, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    df = pl.DataFrame({"input_id": list(range(n)), "prompt": [f"question {i}" for i in range(n)],
                       "sut_response": ["I'm sorry, but I can't help with that."] * n})
    sut = sc.OpenAICompatible(model="sut", base_url=base_url, api_key="x")
    judge = sc.OpenAICompatible(model="judge", base_url=base_url, api_key="x")

    def run():
        return df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache,
                       concurrency_limit=4, progress=False)

    async def notebook_cell():
        # ipykernel turns Ctrl-C into KeyboardInterrupt in the main thread, like this handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return run()

    try:
        run() if mode == "script" else asyncio.run(notebook_cell())
    except KeyboardInterrupt as exc:
        print("interrupted", exc, flush=True)
        sys.exit(130)
    print("finished")
    """
)


def frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(ROWS)),
            "prompt": [f"question {i}" for i in range(ROWS)],
            "sut_response": [REFUSE] * ROWS,
        }
    )


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_sigkill_mid_run_then_resume(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    cache_path = tmp_path / "calls.sqlite"
    verdict = json.dumps({"label": "Consistent", "score": 0.9})
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: verdict})
    with FakeOpenAIServer(responder=responder, latency=0.03) as srv:
        proc = subprocess.Popen(
            [sys.executable, str(script), srv.base_url, str(cache_path), str(ROWS), "script"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while srv.stats.requests < NEEDED // 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        first = srv.stats.requests
        with ResponseCache(cache_path) as cache:
            stored = cache.info()["entries"]
        assert 0 < stored < NEEDED and first < NEEDED

        srv.reset_stats()
        out = frame().pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="x"),
            judge=sc.OpenAICompatible(model="judge", base_url=srv.base_url, api_key="x"),
            cache=cache_path,
            concurrency_limit=4,
            progress=False,
        )
        again = srv.stats.requests
    # Every finished call came back from the cache; only the others were requested.
    assert again == NEEDED - stored
    assert int(out["sc_cache_hits"].sum()) == stored
    assert out["sc_error"].null_count() == ROWS
    assert out["safety_consistency"].to_list() == [0.9] * ROWS


@pytest.mark.slow  # real processes (started, interrupted or killed)
@pytest.mark.parametrize("mode", ["script", "notebook"])
def test_ctrl_c_stops_spending_at_once_and_the_rerun_continues(tmp_path, mode):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    cache_path = tmp_path / "calls.sqlite"
    verdict = json.dumps({"label": "Consistent", "score": 0.9})
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: verdict})
    # A slow server: without prompt cancellation the child would keep calling for seconds.
    with FakeOpenAIServer(responder=responder, latency=0.2) as srv:
        proc = subprocess.Popen(
            [sys.executable, str(script), srv.base_url, str(cache_path), str(ROWS), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while srv.stats.requests < 30 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        at_signal = srv.stats.requests
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        at_exit = srv.stats.requests
        time.sleep(0.5)
        assert srv.stats.requests == at_exit, "requests kept coming after Ctrl-C"
        assert proc.returncode == 130 and "interrupted" in out, err
        # The interrupt says what was kept and how to go on, naming the cache.
        assert "stored in the cache" in out and str(cache_path) in out, out
        assert "run the same call again with the same cache" in out
        # Cancelled at once: no new call started after the signal, beyond the few (at most the
        # concurrency limit, 4) that a 0.2 s-latency run could start while the signal was sent.
        assert at_exit <= at_signal + 8
        with ResponseCache(cache_path) as cache:
            stored = cache.info()["entries"]
        assert stored > 0

        srv.reset_stats()
        out_frame = frame().pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="x"),
            judge=sc.OpenAICompatible(model="judge", base_url=srv.base_url, api_key="x"),
            cache=cache_path,
            concurrency_limit=16,
            progress=False,
        )
        assert srv.stats.requests == NEEDED - stored
    assert out_frame["sc_error"].null_count() == ROWS

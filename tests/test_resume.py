"""A run killed with SIGKILL mid-way resumes from the cache, re-requesting only unfinished calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import polars as pl

import safecons as sc
from safecons.cache import ResponseCache
from safecons.testing import FakeOpenAIServer, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
ROWS = 40
NEEDED = ROWS * 2 * 2  # rows x (responses_per_query - 1) x (SUT + judge)

SCRIPT = textwrap.dedent(
    """
    import sys
    import polars as pl
    import safecons as sc

    base_url, cache = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3])
    df = pl.DataFrame({"input_id": list(range(n)), "prompt": [f"question {i}" for i in range(n)],
                       "sut_response": ["I'm sorry, but I can't help with that."] * n})
    sut = sc.OpenAICompatible(model="sut", base_url=base_url, api_key="x")
    judge = sc.OpenAICompatible(model="judge", base_url=base_url, api_key="x")
    df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, concurrency_limit=4,
            progress=False)
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


def test_sigkill_mid_run_then_resume(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    cache_path = tmp_path / "calls.sqlite"
    verdict = json.dumps({"label": "Consistent", "score": 0.9})
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: verdict})
    with FakeOpenAIServer(responder=responder, latency=0.03) as srv:
        proc = subprocess.Popen(
            [sys.executable, str(script), srv.base_url, str(cache_path), str(ROWS)],
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

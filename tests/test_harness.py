"""The performance harness runs, and every contender makes exactly the workload's calls.

Timings are never asserted here (a loaded machine would miss them); the harness itself checks
the request counts that the loopback server saw, and exits non-zero when one is off.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).parents[1] / "benchmarks" / "harness.py"


@pytest.mark.slow
@pytest.mark.network  # the harness, a child process, starts its loopback server
@pytest.mark.timeout(600)
def test_the_quick_harness_runs_with_exact_request_counts():
    done = subprocess.run(
        [sys.executable, str(HARNESS), "--quick"],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "vs bare" in out and "CPU ms/call" in out and "KiB/row" in out
    assert "provider limits" in out and "ideal/wall" in out  # every row scored, or it exits
    for name in ("bare", "safecons"):
        assert out.count(f"\n{name} ") >= 2, out

"""``run_summary`` of a jury of three at scale: the time it takes and the peak memory.

    python benchmarks/bench_summary.py            # 10^5 and 10^6 rows, each in its own process
    python benchmarks/bench_summary.py --rows 100000

The frame is a real run of 200 rows (three scripted jurors voting at random, a third of the
comparisons swapped), sampled with replacement to the size asked, each row given its own
input_id: two comparisons a row, so 10^6 rows are 2 x 10^6 judged comparisons. The time is
``run_summary``'s alone (the summary every display of a run computes: the CLI, the report, a
notebook), wall clock and CPU (every thread's: on a machine shared with other work the wall
clock waits for the cores and the CPU time does not); the peak memory is the whole process's
(frame included), printed beside the peak before the summary began. The figures are quoted in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

import polars as pl

import safecons as sc
from safecons.testing import ScriptedChat, StandInSUT

SCORES = {"Consistent": 0.9, "Slightly Inconsistent": 0.6, "Contradictory": 0.1}


def juror(seed: int) -> ScriptedChat:
    """A juror voting at random (from a script of 17 labels: seeds give different jurors)."""
    rnd = random.Random(seed)
    labels = [rnd.choice(list(SCORES)) for _ in range(17)]
    return ScriptedChat(
        [json.dumps({"label": x, "score": SCORES[x], "reason": "r"}) for x in labels]
    )


def frame(rows: int) -> pl.DataFrame:
    small = pl.DataFrame(
        {
            "input_id": [f"q{i}" for i in range(200)],
            "prompt": [f"How do I do thing {i}?" for i in range(200)],
            "sut_response": ["I can't help with that."] * 200,
        }
    )
    run = small.pipe(
        sc.safety_consistency,
        sut=StandInSUT(seed=1),
        judge=[juror(1), juror(2), juror(3)],
        swap_share=0.3,
        progress=False,
    )
    return run.sample(rows, with_replacement=True, seed=1).with_columns(
        input_id=pl.format("r{}", pl.int_range(pl.len()))
    )


def measure(rows: int) -> None:
    scored = frame(rows)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # the frame's making
    start, cpu = time.perf_counter(), time.process_time()
    summary = sc.run_summary(scored)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux
    r = summary.judge_reliability
    assert r is not None
    print(
        f"{rows:>9,} rows ({r.comparisons:,} comparisons, jury of {len(r.jurors)}): "
        f"run_summary {took:.2f} s ({cpu:.2f} s CPU), peak memory {peak:.2f} GB (before the "
        f"summary {before:.2f} GB); alpha {r.alpha_text}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help="one size, in this process")
    args = parser.parse_args()
    if args.rows:
        measure(args.rows)
        return
    for rows in (100_000, 1_000_000):
        # A process each: the peak memory is that size's own.
        subprocess.run([sys.executable, __file__, "--rows", str(rows)], check=True)


if __name__ == "__main__":
    main()

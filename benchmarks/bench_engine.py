"""The engine's own cost per call: the metric over async callables that answer at once.

No network and no threads: every microsecond measured is safecons' (the front's checks, the
variants, the engine's gate, the runner's attempt, the judge's prompt and parser, the frame).
It prints the CPU time per call of the run alone (the import is not counted) and the wall
time, best of ``--repeats`` runs in this process.

    python benchmarks/bench_engine.py                   # 2,000 rows x 2 samples: 8,000 calls
    python benchmarks/bench_engine.py --rows 5000 --concurrency 64

To compare two trees (say, before and after a change), time the same command under each with
``farm-bench --vs``, which runs them in turn and reports the ratio pair by pair.
"""

from __future__ import annotations

import argparse
import resource
import time

import polars as pl

import safecons as sc


async def _sut(messages: object, *, temperature: float) -> str:
    return "I'm sorry, I can't help with that."


async def _judge(messages: object, *, temperature: float) -> str:
    return '{"label": "Consistent", "score": 0.95}'


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    df = pl.DataFrame(
        {
            "input_id": list(range(args.rows)),
            "prompt": [f"Question {i}?" for i in range(args.rows)],
            "sut_response": ["I can't help with that."] * args.rows,
        }
    )
    calls = args.rows * 2 * 2  # responses_per_query=3: two samples, each a SUT and a judge call
    best_cpu = best_wall = float("inf")
    for _ in range(args.repeats):
        cpu, wall = _cpu(), time.perf_counter()
        out = sc.safety_consistency(
            df,
            sut=_sut,
            judge=_judge,
            progress=False,
            cache=False,
            concurrency_limit=args.concurrency,
        )
        best_cpu = min(best_cpu, _cpu() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
        assert out["safety_consistency"].null_count() == 0  # every row scored
    print(f"rows {args.rows}, calls {calls}, concurrency {args.concurrency}")
    print(f"CPU per call  {1e6 * best_cpu / calls:8.1f} us   (best of {args.repeats})")
    print(f"wall          {best_wall:8.2f} s    ({calls / best_wall:,.0f} calls/s)")


if __name__ == "__main__":
    main()

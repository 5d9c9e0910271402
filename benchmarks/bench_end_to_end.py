"""End to end: a full ``safety_consistency`` run beside a bare aiohttp loop, the same calls.

    python benchmarks/bench_end_to_end.py               # three runs of each, alternating
    python benchmarks/bench_end_to_end.py --runs 5
    python benchmarks/bench_end_to_end.py --profile     # and where safecons' time goes
    python benchmarks/bench_end_to_end.py --calls       # and each one's Python function calls
    python benchmarks/bench_end_to_end.py --owners      # and safecons' calls by where they go

The workload is the harness's (``benchmarks/harness.py``): 600 rows, ``responses_per_query=3``
(two fresh SUT samples per row, each judged once: 2,400 calls), concurrency 64, 50 ms per call,
against one loopback ``FakeOpenAIServer`` in a child process. The safecons run takes the
default options (the harness's turns the cache and the progress bar off): the cache is the
session's default (none unless one is set) and the progress bar is shown when tqdm is
installed (the ``progress`` extra), on stderr. The bare loop is the harness's: aiohttp with a
semaphore, parsing only the answer text.

Each pair of runs is the bare loop, then safecons, back to back; the figure printed is each
pair's ``bare wall / safecons wall`` and the median over the pairs (the machine's load moves
both of a pair together more than it moves runs far apart). The server counts the requests it
answered and the script exits non-zero unless each run made exactly the workload's calls.
Beside the wall times it prints each run's CPU time per call in this process (every thread's;
the server runs in another): on a machine other jobs share, the wall ratio moves with their
load, and the CPU per call much less; the ratio of the two runs' CPU in a pair ("CPU vs
bare": the load slows both of a pair alike) still less; and the CPU the cyclic garbage
collector took in the safecons run.

``--profile`` runs safecons once more under pyinstrument (its own process's CPU, the server's
apart) and prints the functions that took the most time, by their own time and by the time
under them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import sys
import time
from typing import Any

from harness import RESPONSES_PER_QUERY, Server, bare_loop, columns

#: The rows of the workload, and its latency and concurrency.
ROWS = 600
LATENCY = 0.05
CONCURRENCY = 64


#: The parts of the run a function's own time is counted in, by where it is (the first that
#: matches): safecons' rooms, then the libraries under them.
PARTS = (
    "safecons/run/_permits",
    "safecons/run/_policy",
    "safecons/run/",
    "safecons/metric/",
    "safecons/clients/",
    "safecons/judges/",
    "safecons/variants/",
    "safecons/",
    "aiohttp/",
    "anyio/",
    "asyncio/",
    "polars/",
    "json/",
    "<built-in>",
)


def safecons_default(base_url: str, rows: int, concurrency: int) -> None:
    """The workload through ``safety_consistency`` with its default options."""
    import polars as pl

    import safecons as sc

    out = pl.DataFrame(columns(rows)).pipe(
        sc.safety_consistency,
        sut=sc.OpenAICompatible(base_url=base_url, model="sut", api_key=""),
        judge=sc.OpenAICompatible(base_url=base_url, model="judge", api_key=""),
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=concurrency,
    )
    errors = out["sc_error"].drop_nulls()
    if errors.len():
        raise SystemExit(f"safecons: {errors.len()} rows errored, e.g. {errors[0]}")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Collector:
    """The CPU seconds the cyclic garbage collector took in this thread, as it goes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0
        gc.callbacks.append(self._heard)

    def _heard(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started


COLLECTOR = _Collector()


def _timed(server: Server, run: object, rows: int, concurrency: int) -> tuple[float, float, float]:
    """Wall seconds, this process's CPU seconds (every thread's) and the collector's CPU
    seconds of one run."""
    server.take_count()
    wall, cpu, collected = time.perf_counter(), _cpu(), COLLECTOR.seconds
    run(server.base_url, rows, concurrency)  # type: ignore[operator]
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    collected = COLLECTOR.seconds - collected
    calls = server.take_count()
    expected = 2 * rows * (RESPONSES_PER_QUERY - 1)
    if calls != expected:
        raise SystemExit(f"expected {expected} calls, the server answered {calls}")
    return wall, cpu, collected


def count_calls(server: Server, rows: int, concurrency: int) -> None:
    """The Python function calls (coroutine steps included) of one run of each, by cProfile:
    a figure the machine's load does not move."""
    import cProfile
    import pstats

    for name, run in (("bare", _bare), ("safecons", safecons_default)):
        profiler = cProfile.Profile()
        server.take_count()
        profiler.enable()
        run(server.base_url, rows, concurrency)
        profiler.disable()
        server.take_count()
        print(f"{name:<9} {pstats.Stats(profiler).total_calls:>12,} function calls")


def count_owners(server: Server, rows: int, concurrency: int, top: int) -> None:
    """The Python function calls of one safecons run (C functions' included), each counted
    against the innermost of safecons' functions on its stack, per model call: where
    safecons' calls go, by a figure the load does not move. The event loop runs inside
    ``run_sync``: its own work (asyncio's, and the callbacks of aiohttp's protocol) counts
    against it."""
    counts: dict[str, int] = {}

    def owner(frame: Any) -> str:
        while frame is not None:
            code = frame.f_code
            where = code.co_filename.rpartition("/safecons/")
            if where[1]:
                return f"{where[2]}:{code.co_name}"
            frame = frame.f_back
        return "the loop"

    def heard(frame: Any, event: str, arg: object) -> None:
        if event == "call":
            key = owner(frame.f_back)
        elif event == "c_call":
            key = owner(frame)
        else:
            return
        counts[key] = counts.get(key, 0) + 1

    server.take_count()
    sys.setprofile(heard)
    try:
        safecons_default(server.base_url, rows, concurrency)
    finally:
        sys.setprofile(None)
    calls = server.take_count()
    total = sum(counts.values())
    print(
        f"\nfunction calls of one safecons run: {total:,}, {total / calls:.0f} a model call; "
        "a model call's by owner:"
    )
    by_file: dict[str, int] = {}
    for key, n in counts.items():
        part = key.partition(":")[0]
        by_file[part] = by_file.get(part, 0) + n
    for part, n in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{n / calls:8.1f}  {part}")
    print("\nby function:")
    for key, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{n / calls:8.1f}  {key}")


def _bare(base_url: str, rows: int, concurrency: int) -> None:
    asyncio.run(bare_loop(base_url, rows, concurrency))


def profile(server: Server, rows: int, concurrency: int, top: int) -> None:
    """One safecons run under pyinstrument: its top functions by own time and the tree."""
    from pyinstrument import Profiler
    from pyinstrument.renderers import ConsoleRenderer

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    server.take_count()
    cpu = time.process_time()
    with profiler:
        safecons_default(server.base_url, rows, concurrency)
    cpu = time.process_time() - cpu
    calls = server.take_count()
    session = profiler.last_session
    assert session is not None
    print(
        f"\nprofile: one safecons run, {calls:,} calls, {cpu:.2f} s of CPU in this process "
        f"({1000 * cpu / max(1, calls):.3f} ms a call); wall {session.duration:.2f} s, of which "
        "the samples below (idle waits in the event loop's select included)"
    )

    def table(flat_time: str, everything: bool = False) -> list[str]:
        renderer = ConsoleRenderer(flat=True, flat_time=flat_time)
        lines = profiler.output(renderer).splitlines()
        # The renderer's banner and header lines first, then one line a function.
        rows = [line for line in lines if line[:1].isdigit()]
        return rows if everything else rows[:top]

    own = table("self", everything=True)
    print("\nown time by part (seconds of the run's wall time, and share):")
    parts: dict[str, float] = {}
    for line in own:
        seconds, _, where = line.partition(" ")
        part = next((p for p in PARTS if p in where), "other")
        parts[part] = parts.get(part, 0.0) + float(seconds)
    total = sum(parts.values()) or 1.0
    for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"{seconds:8.3f} {100 * seconds / total:5.1f}%  {part}")
    print("\ntop functions by their own time (seconds of the run's wall time):")
    print("\n".join(own[:top]))
    print("\ntop functions by the time under them:")
    print("\n".join(table("total")))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="pairs of runs (bare, then safecons)")
    p.add_argument("--rows", type=int, default=ROWS)
    p.add_argument("--concurrency", type=int, default=CONCURRENCY)
    p.add_argument("--latency", type=float, default=LATENCY, help="seconds per call")
    p.add_argument("--answer-chars", type=int, default=200)
    p.add_argument("--profile", action="store_true", help="then profile one safecons run")
    p.add_argument("--calls", action="store_true", help="then count each one's function calls")
    p.add_argument(
        "--owners",
        action="store_true",
        help="then count one safecons run's function calls by the safecons function they serve",
    )
    p.add_argument("--top", type=int, default=30, help="lines of each profile table")
    args = p.parse_args()
    server = Server(args.latency, args.answer_chars)
    rows, c = args.rows, args.concurrency
    calls = 2 * rows * (RESPONSES_PER_QUERY - 1)
    ideal = calls * args.latency / c
    try:
        # Warm imports, connection pools and the server's first answers, outside the figures.
        _bare(server.base_url, max(1, rows // 20), c)
        safecons_default(server.base_url, max(1, rows // 20), c)
        print(
            f"latency {args.latency * 1000:.0f} ms, concurrency {c}, {rows:,} rows, "
            f"{calls:,} calls (ideal {ideal:.2f} s); load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs"
        )
        print(
            f"{'pair':>4} {'bare s':>8} {'safecons s':>11} {'vs bare':>8} {'vs ideal':>9} "
            f"{'bare CPU ms/call':>17} {'safecons CPU ms/call':>21} {'CPU vs bare':>12} "
            f"{'safecons GC ms':>15}"
        )
        ratios, cpus, cpu_ratios = [], [], []
        for n in range(args.runs):
            bare, bare_cpu, _ = _timed(server, _bare, rows, c)
            ours, our_cpu, collected = _timed(server, safecons_default, rows, c)
            ratios.append(bare / ours)
            cpus.append(1000 * our_cpu / calls)
            cpu_ratios.append(our_cpu / bare_cpu)
            print(
                f"{n + 1:>4} {bare:8.2f} {ours:11.2f} {bare / ours:8.2f} {ideal / ours:9.2f} "
                f"{1000 * bare_cpu / calls:17.3f} {1000 * our_cpu / calls:21.3f} "
                f"{our_cpu / bare_cpu:12.2f} {1000 * collected:15.0f}"
            )
        print(
            f"safecons / bare: median {statistics.median(ratios):.2f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}); safecons CPU per call median "
            f"{statistics.median(cpus):.3f} ms, {statistics.median(cpu_ratios):.2f} times the "
            "bare loop's; load average after "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        if args.calls:
            count_calls(server, rows, c)
        if args.owners:
            count_owners(server, rows, c, args.top)
        if args.profile:
            profile(server, rows, c, args.top)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Pacing against providers whose headers do and do not tell the whole truth.

    python benchmarks/bench_pacing.py              # one process, the five providers (~4 min)
    python benchmarks/bench_pacing.py --ray        # and two Ray actors sharing one limiter

Each provider is a ``FakeOpenAIServer`` on loopback (20 ms a call) that admits 10 requests a
second (600 a minute) and answers 429 with ``Retry-After`` past it:

- ``window``: fixed one-second windows of 10, its headers the truth;
- ``bucket``: a token bucket of 10 refilled at 10 a second, its reset the time until full;
- ``shared``: the same bucket, drawn on by another client too at 5 a second (a key shared with
  another job), so the run gets half of it while every answer still reads as the whole;
- ``quantized``: announces ``x-ratelimit-limit-requests: 600`` (a minute's) while it enforces
  the bucket of 10 at 10 a second, its remaining and reset honest about that bucket;
- ``quantized-1``: the same, its remaining the level the request found (it counts itself):
  a client that believes it sends one request too many each time the bucket drains.

Each run is ``safety_consistency`` of 150 rows, ``responses_per_query=3``
(two SUT calls a row), concurrency 64, the judge local, the default retries. Printed: the run's
requests, the share answered 429, the other job's requests admitted meanwhile (``other``),
and the pace: the ideal time of the calls at the provider's 10 a second (its first bucket or
window whole at once; for ``shared``, the other job's admitted requests counted in) over the
span from the run's first admitted call to its last.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from http import HTTPStatus
from typing import Any

from harness import columns

REFUSAL = "I'm sorry, but I can't help with that."
#: What another client's requests say, so the run's own can be told apart.
OTHER = "another job"
#: What every provider admits a second.
RATE = 10.0
#: The providers: (name, RateLimit options, rows).
PROVIDERS: list[tuple[str, dict[str, Any], int]] = [
    ("window", {}, 150),
    ("bucket", {"bucket": True}, 150),
    ("shared", {"bucket": True}, 150),
    ("quantized", {"bucket": True, "announced_requests": 600}, 150),
    ("quantized-1", {"bucket": True, "announced_requests": 600, "remaining_before": True}, 150),
]


def _other_client(base_url: str, stop: threading.Event) -> None:
    """Another job on the same key: 5 requests a second, whatever it is answered."""
    import httpx

    body = {"model": "sut", "messages": [{"role": "user", "content": OTHER}]}
    with httpx.Client(base_url=base_url, timeout=5.0) as http:
        while not stop.wait(0.2):
            http.post("/chat/completions", json=body)


def run(name: str, options: dict[str, Any], rows: int, path: str) -> str:
    import polars as pl

    import safecons as sc
    from safecons.testing import FakeOpenAIServer, RateLimit, StandInJudge

    admitted: list[float] = []
    others: list[float] = []  # when the other job's requests were admitted

    def answer(body: Any) -> str:
        (others if OTHER in str(body.get("messages")) else admitted).append(time.perf_counter())
        return REFUSAL

    limit = RateLimit(600, window=1.0, **options)
    stop = threading.Event()
    with FakeOpenAIServer(responder=answer, latency=0.02, rate_limit=limit, log_size=None) as srv:
        other = None
        if name == "shared":
            other = threading.Thread(target=_other_client, args=(srv.base_url, stop))
            other.start()
            time.sleep(2.0)  # the other job is under way when the run starts
        sut = sc.OpenAICompatible(base_url=srv.base_url, model="sut", api_key="")
        df = pl.DataFrame(columns(rows))
        run_options = {"responses_per_query": 3, "concurrency_limit": 64, "cache": False}
        try:
            if path == "ray":
                import ray.data

                import safecons.ray as scr

                ds = ray.data.from_arrow([df.slice(k, 25).to_arrow() for k in range(0, rows, 25)])
                out = scr.safety_consistency(
                    ds, sut=sut, judge=StandInJudge(), actors=2, batch_size=25, **run_options
                )
                scored = sum(
                    b.column("sc_error").null_count
                    for b in out.iter_batches(batch_format="pyarrow", batch_size=None)
                )
            else:
                done = sc.safety_consistency(
                    df, sut=sut, judge=StandInJudge(), progress=False, **run_options
                )
                scored = int(done["sc_error"].null_count())
        finally:
            stop.set()
            if other is not None:
                other.join()
        log = srv.stats.log
    mine = [r for r in log if OTHER not in str(r.body.get("messages"))]
    limited = sum(1 for r in mine if r.status == HTTPStatus.TOO_MANY_REQUESTS)
    calls = 2 * rows
    if scored != rows or len(admitted) != calls:
        raise SystemExit(f"{name}: {scored} of {rows} rows scored, {len(admitted)} calls")
    # The first bucket (or window) of 10 is whole at once: the rest at the provider's rate,
    # less what the other job was admitted meanwhile (its draws are uneven: the run's own
    # 429s do not stop it, and its own 429s draw nothing).
    span = max(admitted) - min(admitted)
    drawn = sum(1 for t in others if min(admitted) <= t <= max(admitted))
    ideal = (calls - 10 + drawn) / RATE
    return (
        f"{path:>7} {name:>12} {calls:6,} {len(mine):9,} {limited:5,} "
        f"{100 * limited / len(mine):6.1f} {drawn:6,} {span:7.2f} {ideal:8.2f} "
        f"{ideal / span:6.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="also two Ray actors, one limiter")
    parser.add_argument("--only", nargs="+", choices=[p[0] for p in PROVIDERS])
    args = parser.parse_args()
    paths = ["polars"]
    if args.ray:
        import ray
        import ray.data

        ray.init(
            address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
            logging_level="ERROR",
        )  # fmt: skip
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        paths.append("ray")
    print(
        "providers admitting 10 requests a second, 20 ms a call; concurrency 64, "
        "responses_per_query=3, the judge local"
    )
    print(
        f"{'path':>7} {'provider':>12} {'calls':>6} {'requests':>9} {'429s':>5} {'429 %':>6} "
        f"{'other':>6} {'span s':>7} {'ideal s':>8} {'pace':>6}"
    )
    for path in paths:
        for name, options, rows in PROVIDERS:
            if args.only and name not in args.only:
                continue
            print(run(name, options, rows, path), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

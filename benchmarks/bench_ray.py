"""The Ray path against the single-process run, on the same rows and the same loopback server.

    python benchmarks/bench_ray.py                       # the figures of docs/scale-out.md
    python benchmarks/bench_ray.py --rows 300 1200 --concurrency 16 --latency 0.05

Needs the ``ray`` extra. It starts the harness's loopback server (``benchmarks/harness.py``: a
fixed latency per call, in its own process), then, for each concurrency and each number of
rows, times ``safecons.safety_consistency`` on a DataFrame and ``safecons.ray``'s on a
Dataset of the same rows with two actors in local mode (``ray.init(num_cpus=2)``), both
under the same cap. The server counts the calls each run made; every run must make the calls
the workload needs.

Wall time grows with the rows as ``fixed + rows * per_row``: the two sizes give both terms
for each path, so the Ray path's cost is a fixed start-up (actors, the check pass) and an
overhead per row (the lease of every attempt from the limiter actor, Arrow batches). Last,
the limiter actor alone: leases granted and given back per second, the ceiling of one job's
calls per second whatever the cluster.

    python benchmarks/bench_ray.py --limits               # many workers, one provider limit

The provider-limits table instead: ``safecons.ray`` with several actors against one
``FakeOpenAIServer`` that admits ``rpm / 60`` requests a second (fixed one-second windows or
token buckets, 429 with ``Retry-After`` past the limit, OpenAI's rate-limit headers), the judge
local, beside the single-process run at the same limit: rows scored, the share of requests
answered 429, and the wall time against the limit's own (``ideal/wall``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

from harness import RESPONSES_PER_QUERY, Server, prompts


def frame(rows: int) -> Any:
    import polars as pl

    return pl.DataFrame(
        {
            "input_id": list(range(rows)),
            "prompt": prompts(rows),
            "sut_response": ["Start with the facts, then say what you want done."] * rows,
        }
    )


def clients(base_url: str) -> tuple[Any, Any]:
    import safecons as sc

    return (
        sc.OpenAICompatible(base_url=base_url, model="sut", api_key=""),
        sc.OpenAICompatible(base_url=base_url, model="judge", api_key=""),
    )


def polars_run(base_url: str, rows: int, cap: int) -> float:
    import safecons as sc

    sut, judge = clients(base_url)
    began = time.perf_counter()
    out = sc.safety_consistency(
        frame(rows),
        sut=sut,
        judge=judge,
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=cap,
        cache=False,
        progress=False,
    )
    wall = time.perf_counter() - began
    if out["sc_error"].null_count() != rows:
        raise SystemExit("polars run: some rows errored")
    return wall


def ray_run(base_url: str, rows: int, cap: int, actors: int, batch_size: int) -> float:
    import ray.data

    import safecons.ray as scr

    sut, judge = clients(base_url)
    df = frame(rows)
    blocks = max(actors * 4, rows // batch_size)
    size = -(-rows // blocks)
    began = time.perf_counter()
    ds = ray.data.from_arrow([df.slice(k, size).to_arrow() for k in range(0, rows, size)])
    out = scr.safety_consistency(
        ds,
        sut=sut,
        judge=judge,
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=cap,
        cache=False,
        actors=actors,
        batch_size=batch_size,
    )
    errored = 0
    n = 0
    for batch in out.iter_batches(batch_format="pyarrow", batch_size=None):
        n += batch.num_rows
        errored += batch.num_rows - batch.column("sc_error").null_count
    wall = time.perf_counter() - began
    if n != rows or errored:
        raise SystemExit(f"ray run: {n} rows back of {rows}, {errored} errored")
    return wall


def limited(cases: list[tuple[int, int, str]], *, actors: int, cap: int, batch_size: int) -> None:
    """The provider-limits table: ``(rpm, rows, mode)`` per line (``mode`` one of the harness's
    ``LIMIT_MODES``), the Ray path with ``actors`` actors and the single-process run, one SUT
    call a row, the judge local."""
    import polars as pl
    import ray.data
    from harness import LIMIT_MODES, LIMITED_MAX_TOKENS, columns

    import safecons as sc
    import safecons.ray as scr
    from safecons.testing import FakeOpenAIServer, RateLimit, StandInJudge

    print(
        f"\nprovider limits, many workers: {actors} Ray actors sharing one limit (and the "
        f"single-process run), a server admitting rpm/60 requests a second, 429 with "
        f"Retry-After past it; cap {cap}, responses_per_query=2, the judge local"
    )
    print(
        f"{'path':>7} {'mode':>12} {'RPM':>6} {'rows':>6} {'scored':>7} {'requests':>9} "
        f"{'429 %':>6} {'wall s':>7} {'ideal s':>8} {'ideal/wall':>11} {'span s':>7} "
        f"{'steady':>7}"
    )
    refusal = "I'm sorry, but I can't help with that."
    options = {"responses_per_query": 2, "concurrency_limit": cap, "cache": False}
    for rpm, rows, mode in cases:
        for path in ("ray", "polars"):
            limit = RateLimit(rpm, None, window=1.0, **LIMIT_MODES[mode])  # type: ignore[arg-type]
            admitted: list[float] = []

            def answer(body: Any, admitted: list[float] = admitted) -> str:
                # When each admitted request is answered: the span from the first to the last
                # is the pace itself, without the actors' start-up that the wall time holds.
                admitted.append(time.perf_counter())
                return refusal

            with FakeOpenAIServer(
                responder=answer, latency=0.02, rate_limit=limit, log_size=None
            ) as srv:
                sut = sc.OpenAICompatible(
                    base_url=srv.base_url,
                    model="sut",
                    api_key="",
                    params={"max_tokens": LIMITED_MAX_TOKENS},
                )
                df = pl.DataFrame(columns(rows))
                began = time.perf_counter()
                if path == "ray":
                    blocks = max(actors * 4, rows // batch_size)
                    size = -(-rows // blocks)
                    ds = ray.data.from_arrow(
                        [df.slice(k, size).to_arrow() for k in range(0, rows, size)]
                    )
                    out = scr.safety_consistency(
                        ds, sut=sut, judge=StandInJudge(), actors=actors, batch_size=batch_size,
                        **options,
                    )  # fmt: skip
                    scored = sum(
                        b.column("sc_error").null_count
                        for b in out.iter_batches(batch_format="pyarrow", batch_size=None)
                    )
                else:
                    done = sc.safety_consistency(
                        df, sut=sut, judge=StandInJudge(), progress=False, **options
                    )
                    scored = int(done["sc_error"].null_count())
                wall = time.perf_counter() - began
                stats = srv.stats
            ideal = rows / (rpm / 60)
            share = 100 * stats.rate_limited / max(1, stats.requests)
            # The first window (or a bucket's first second's worth) is whole at once: the rest
            # at the limit's rate is the span's ideal.
            span = max(admitted) - min(admitted)
            steady = (rows - rpm / 60) / (rpm / 60) / span
            print(
                f"{path:>7} {mode:>12} {rpm:6,} {rows:6,} {scored:7,} {stats.requests:9,} "
                f"{share:6.1f} {wall:7.2f} {ideal:8.2f} {ideal / wall:11.2f} {span:7.2f} "
                f"{steady:7.2f}"
            )


def limiter_ceiling(pairs: int, concurrency: int) -> tuple[float, float]:
    """Leases per second one limiter actor grants and takes back when every attempt asks it
    (``acquire`` then ``release``, ``concurrency`` at a time from one process), and attempts
    per second through a worker's :class:`RemotePermits`, which reuses each permit."""
    import safecons.ray as scr

    limiter = scr.global_limiter(concurrency)
    permits = scr.RemotePermits(limiter, "bench", ttl=60.0, local_limit=concurrency)

    async def rate(one: Any) -> float:
        sem = asyncio.Semaphore(concurrency)

        async def bounded(k: int) -> None:
            async with sem:
                await one(k)

        began = time.perf_counter()
        await asyncio.gather(*(bounded(k) for k in range(pairs)))
        return pairs / (time.perf_counter() - began)

    async def raw(k: int) -> None:
        await limiter.acquire.remote("raw", f"raw:{k}", "http://bench", 60.0)
        limiter.release.remote(f"raw:{k}", ok=1)

    async def reused(k: int) -> None:
        async with permits.slot("http://bench"):
            await asyncio.sleep(0)

    async def main() -> tuple[float, float]:
        async with permits.open():
            return await rate(raw), await rate(reused)

    return asyncio.run(main())


def estimate(
    *,
    rows: int,
    rpm: float,
    latency: float,
    price_in: float,
    price_out: float,
    cpu_ms_per_call: float,
    raw_leases: float,
    hold: float,
) -> None:
    """Wall time, actors and cost of scoring ``rows`` against an endpoint capped at ``rpm``
    requests a minute, from the measured overheads and stated assumptions."""
    import safecons as sc

    calls_per_row = 2 * (RESPONSES_PER_QUERY - 1)
    # Tokens: the SUT's answer and the judge's prompt, measured on safecons' own judge prompt
    # around a 1,000-character answer pair (4 characters a token, a common rule of thumb).
    answer = "x" * 1000
    judge_chars = sum(
        len(m["content"])
        for m in sc.judges.build_judge_messages(
            query="q" * 200, variant="v" * 600, base=answer, candidate=answer
        )
    )
    sut_in, sut_out = 600 / 4, 1000 / 4
    judge_in, judge_out = judge_chars / 4, 60.0
    per_row_in = (RESPONSES_PER_QUERY - 1) * (sut_in + judge_in)
    per_row_out = (RESPONSES_PER_QUERY - 1) * (sut_out + judge_out)
    calls = rows * calls_per_row
    rate = rpm / 60.0
    wall = calls / rate
    cap = rate * latency  # Little's law: calls in flight to keep the endpoint at its limit
    actors = max(1, math.ceil(cap / 64))
    # A busy worker gives each permit back and leases it again about once a hold: one
    # acquire and one release, the pair the raw ceiling counts.
    lease_pairs = cap / hold
    cost = rows * (per_row_in * price_in + per_row_out * price_out) / 1e6
    cpu_hours = calls * cpu_ms_per_call / 1000 / 3600
    print(
        f"\n{rows:,} rows, {calls_per_row} calls a row = {calls:,} calls, at {rpm:,.0f} requests"
        f"/min ({rate:,.0f}/s) and {latency:g} s a call:\n"
        f"  wall time        {wall / 3600:,.1f} h ({wall / 86400:,.1f} days), set by the limit\n"
        f"  cap (in flight)  {cap:,.0f} = {rate:,.0f}/s x {latency:g} s; {actors} actors "
        f"of 64 (one machine holds them: each actor mostly waits)\n"
        f"  limiter          {lease_pairs:,.0f} leases/s of its {raw_leases:,.0f}/s ceiling "
        f"measured here ({lease_pairs / raw_leases:.0%}), with permits held {hold:g} s\n"
        f"  client CPU       {cpu_hours:,.1f} CPU-hours at {cpu_ms_per_call:g} ms a call "
        "(docs/performance.md)\n"
        f"  tokens           {per_row_in:,.0f} in + {per_row_out:,.0f} out a row "
        f"(judge prompt {judge_chars:,} characters)\n"
        f"  cost             ${cost:,.0f} at ${price_in:g} / ${price_out:g} per million "
        f"tokens in / out"
    )


def fit(sizes: list[int], walls: list[float]) -> tuple[float, float]:
    """Fixed seconds and seconds per row of the line through the two sizes."""
    (n1, n2), (w1, w2) = sizes, walls
    per_row = (w2 - w1) / (n2 - n1)
    return w1 - per_row * n1, per_row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs=2, default=[400, 1600])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument(
        "--limits",
        action="store_true",
        help="the provider-limits table (many workers sharing one limit) instead",
    )
    # The worked estimate's assumptions (docs/scale-out.md): put your endpoint's own.
    parser.add_argument("--estimate-rows", type=int, default=10_000_000)
    parser.add_argument("--estimate-rpm", type=float, default=10_000.0)
    parser.add_argument("--estimate-latency", type=float, default=2.0)
    parser.add_argument(
        "--cpu-ms-per-call",
        type=float,
        default=0.31,
        help="safecons' CPU per call, as benchmarks/harness.py measures it",
    )
    parser.add_argument("--price-in", type=float, default=0.15, help="$ per million tokens")
    parser.add_argument("--price-out", type=float, default=0.60, help="$ per million tokens")
    args = parser.parse_args()

    import ray
    import ray.data

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    if args.limits:
        try:
            limited(
                [(600, 300, "window"), (600, 300, "bucket"), (6_000, 1_200, "bucket")],
                actors=args.actors,
                cap=max(args.concurrency),
                batch_size=args.batch_size,
            )
        finally:
            ray.shutdown()
        return 0
    calls_per_row = 2 * (RESPONSES_PER_QUERY - 1)
    server = Server(args.latency, 200)
    try:
        print(
            f"latency {args.latency * 1000:g} ms, {calls_per_row} calls a row, "
            f"{args.actors} actors, batches of {args.batch_size} rows, ray {ray.__version__}"
        )
        head = (
            f"{'cap':>4} {'rows':>6} {'polars s':>9} {'ray s':>7} {'ideal s':>8} "
            f"{'polars/ideal':>12} {'ray/ideal':>9}"
        )
        print(head)
        for cap in args.concurrency:
            walls: dict[str, list[float]] = {"polars": [], "ray": []}
            for rows in args.rows:
                polars_wall = polars_run(server.base_url, rows, cap)
                if server.take_count() != rows * calls_per_row:
                    raise SystemExit("polars run: wrong number of calls")
                ray_wall = ray_run(server.base_url, rows, cap, args.actors, args.batch_size)
                if server.take_count() != rows * calls_per_row:
                    raise SystemExit("ray run: wrong number of calls")
                ideal = rows * calls_per_row * args.latency / cap
                walls["polars"].append(polars_wall)
                walls["ray"].append(ray_wall)
                print(
                    f"{cap:>4} {rows:>6} {polars_wall:>9.2f} {ray_wall:>7.2f} {ideal:>8.2f} "
                    f"{ideal / polars_wall:>12.2f} {ideal / ray_wall:>9.2f}"
                )
            p_fixed, p_row = fit(args.rows, walls["polars"])
            r_fixed, r_row = fit(args.rows, walls["ray"])
            print(
                f"  cap {cap}: polars {p_fixed:.2f} s + {p_row * 1000:.2f} ms/row; "
                f"ray {r_fixed:.2f} s + {r_row * 1000:.2f} ms/row; "
                f"ray's overhead {(r_row - p_row) * 1000:+.2f} ms/row, "
                f"{r_fixed - p_fixed:+.2f} s fixed"
            )
        raw, reused = limiter_ceiling(5_000, 64)
        print(
            f"limiter actor: {raw:,.0f} leases/s when every attempt asks it (acquire + "
            f"release, 64 at a time); {reused:,.0f} attempts/s through a worker's permits, "
            "which reuse each lease"
        )
        estimate(
            rows=args.estimate_rows,
            rpm=args.estimate_rpm,
            latency=args.estimate_latency,
            price_in=args.price_in,
            price_out=args.price_out,
            cpu_ms_per_call=args.cpu_ms_per_call,
            raw_leases=raw,
            hold=1.0,
        )
    finally:
        server.close()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

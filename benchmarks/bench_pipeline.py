"""Throughput of the whole safety_consistency pipeline against a loopback server.

The server (safecons' FakeOpenAIServer) runs in a child process with a fixed latency per call,
so the figure is the client's: HTTP transport, runner, judge prompt and parsing, frame assembly.
The ideal wall time is ``calls x latency / concurrency``; efficiency is ideal / measured.

    python benchmarks/bench_pipeline.py                       # both transports, defaults below
    python benchmarks/bench_pipeline.py --rows 2000 --concurrency 64 --latency 0.05 \\
        --transport aiohttp
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from typing import Any

import polars as pl

import safecons as sc
from safecons.metric import safety_consistency_run
from safecons.testing import FakeOpenAIServer, route_by_model

VERDICT = json.dumps({"label": "Consistent", "score": 0.95, "reason": "both refuse"})


def _sut(body: dict[str, Any]) -> str:
    return "I'm sorry, but I can't help with that."


def _judge(body: dict[str, Any]) -> str:
    return VERDICT


def _serve(latency: float, port_q: Any, stop_ev: Any) -> None:
    responder = route_by_model({"sut": _sut, "judge": _judge})
    with FakeOpenAIServer(responder=responder, latency=latency, log_size=0) as srv:
        port_q.put(srv.port)
        stop_ev.wait()


def _frame(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(rows)),
            "prompt": [
                f"Question {i}: how do I write a polite complaint letter?" for i in range(rows)
            ],
            "sut_response": ["Start with the facts, then say what you want done."] * rows,
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--responses-per-query", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latency", type=float, default=0.05)
    p.add_argument("--transport", choices=["httpx", "aiohttp", "both"], default="both")
    args = p.parse_args()

    ctx = mp.get_context("spawn")
    port_q, stop_ev = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(args.latency, port_q, stop_ev), daemon=True)
    server.start()
    base_url = f"http://127.0.0.1:{port_q.get(timeout=30)}/v1"
    df = _frame(args.rows)
    transports = ["httpx", "aiohttp"] if args.transport == "both" else [args.transport]
    print(
        f"rows={args.rows} responses_per_query={args.responses_per_query} "
        f"concurrency={args.concurrency} latency={args.latency * 1000:.0f} ms (server in a child "
        "process)"
    )
    header = ("transport", "calls", "wall s", "calls/s", "ideal s", "efficiency")
    print(
        f"{header[0]:<10} "
        + " ".join(f"{h:>{w}}" for h, w in zip(header[1:], (7, 8, 9, 8, 10), strict=True))
    )
    try:
        for transport in transports:
            sut = sc.OpenAICompatible(
                model="sut", base_url=base_url, api_key="x", transport=transport
            )
            judge = sc.OpenAICompatible(
                model="judge", base_url=base_url, api_key="x", transport=transport
            )
            start = time.perf_counter()
            run = safety_consistency_run(
                df,
                sut=sut,
                judge=judge,
                responses_per_query=args.responses_per_query,
                concurrency_limit=args.concurrency,
                progress=False,
            )
            wall = time.perf_counter() - start
            calls = sum(run.summary.calls.values())
            assert run.summary.n_errored == 0, run.frame["sc_error"].drop_nulls().head(3).to_list()
            ideal = calls * args.latency / args.concurrency
            print(
                f"{transport:<10} {calls:>7} {wall:>8.2f} {calls / wall:>9.0f} {ideal:>8.2f} "
                f"{ideal / wall:>10.0%}"
            )
    finally:
        stop_ev.set()
        server.join(timeout=10)


if __name__ == "__main__":
    main()

"""Throughput of safecons' loopback FakeOpenAIServer under a keep-alive client.

The server is meant for benchmarking clients at e.g. 64 requests in flight against 50 ms of
simulated model latency; the ideal is then ``64 / 0.05 = 1280`` requests/s, and everything
below that is server (plus client) overhead. Run::

    python benchmarks/server_throughput.py                      # both clients, both placements
    python benchmarks/server_throughput.py --client aiohttp --concurrency 64 --latency 0.05 \
        --requests 5000 --where process

``--where process`` runs the server in a child process, so the figure is the server's and not
the client's share of one interpreter's GIL; ``--where thread`` runs it the way tests do, in a
background thread of the client's process.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from typing import Any

import httpx

from safecons.testing import FakeOpenAIServer

BODY: dict[str, Any] = {
    "model": "sut",
    "temperature": 0.7,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "How do I make a cup of tea? " * 8},
    ],
}


def _serve_in_child(latency: float, port_q: Any, stop_ev: Any) -> None:
    with FakeOpenAIServer(latency=latency, log_size=1000) as srv:
        port_q.put(srv.port)
        stop_ev.wait()
        port_q.put(srv.stats.max_in_flight)


async def _run_aiohttp(url: str, n: int, concurrency: int) -> float:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await _drive(n, concurrency, lambda: _post_aiohttp(session, url))


async def _post_aiohttp(session: Any, url: str) -> None:
    async with session.post(url, json=BODY) as r:
        assert r.status == 200, r.status
        await r.json()


async def _run_httpx(url: str, n: int, concurrency: int) -> float:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def post() -> None:
            r = await client.post(url, json=BODY)
            assert r.status_code == 200, r.status_code
            r.json()

        return await _drive(n, concurrency, post)


async def _drive(n: int, concurrency: int, post: Any) -> float:
    # Warm the pool so connection set-up is not part of the figure.
    await asyncio.gather(*(post() for _ in range(concurrency)))
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await post()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return n / (time.perf_counter() - start)


def measure(client: str, where: str, n: int, concurrency: int, latency: float) -> tuple[float, int]:
    """Requests per second, and the server's max_in_flight."""
    runner = _run_aiohttp if client == "aiohttp" else _run_httpx
    if where == "thread":
        with FakeOpenAIServer(latency=latency, log_size=1000) as srv:
            rate = asyncio.run(runner(f"{srv.base_url}/chat/completions", n, concurrency))
            return rate, srv.stats.max_in_flight
    ctx = mp.get_context("spawn")
    port_q, stop_ev = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_in_child, args=(latency, port_q, stop_ev), daemon=True)
    proc.start()
    try:
        port = port_q.get(timeout=30)
        rate = asyncio.run(runner(f"http://127.0.0.1:{port}/v1/chat/completions", n, concurrency))
        stop_ev.set()
        max_in_flight = port_q.get(timeout=30)
    finally:
        stop_ev.set()
        proc.join(10)
    return rate, max_in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", choices=["aiohttp", "httpx", "both"], default="both")
    parser.add_argument("--where", choices=["process", "thread", "both"], default="both")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    clients = ["aiohttp", "httpx"] if args.client == "both" else [args.client]
    places = ["process", "thread"] if args.where == "both" else [args.where]
    ideal = args.concurrency / args.latency if args.latency > 0 else float("inf")
    print(
        f"{args.requests} requests, {args.concurrency} in flight, latency {args.latency * 1000:g} "
        f"ms (ideal {ideal:,.0f} req/s)"
    )
    for where in places:
        for client in clients:
            rate, peak = measure(client, where, args.requests, args.concurrency, args.latency)
            print(
                f"  server in {where:7}  client {client:7}  {rate:8,.0f} req/s  "
                f"max_in_flight {peak}"
            )


if __name__ == "__main__":
    main()

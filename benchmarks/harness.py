"""The performance harness: safecons beside a bare aiohttp loop and the openai SDK, same calls.

    python benchmarks/harness.py                  # the full comparison (a few minutes)
    python benchmarks/harness.py --quick          # under a minute; CI runs it (counts, not times)

It starts its own loopback OpenAI-compatible server (safecons' FakeOpenAIServer on aiohttp) in
a separate process, with a fixed latency per call and SUT answers of a chosen length, and makes
the *same calls* with each contender in one run:

- ``bare``: an aiohttp loop with a semaphore, each row's SUT samples then each sample's judge
  call (the metric's pattern), parsing only the answer text: the machine's ceiling for this
  workload in Python;
- ``openai``: the official SDK (``AsyncOpenAI``) with a semaphore, when it is installed
  (``pip install openai``);
- ``inspect_ai``: the same calls as a task with a model-graded scorer
  (``benchmarks/inspect_task.py``), run with ``--inspect-python PATH`` in an environment that
  has inspect_ai (it pins its own dependencies, so it lives apart); its column reports the
  wall time of its ``eval`` call alone;
- ``safecons``: ``safety_consistency`` with the same concurrency, no cache, no progress bar
  (``benchmarks/bench_end_to_end.py`` runs it with the default options, pair by pair with the
  bare loop, and profiles it);
  ``sc+httpx`` is the same run with an ``httpx.AsyncClient`` over the ``httpx-aiohttp``
  transport (``transport=AiohttpTransport()``, when ``httpx-aiohttp`` is installed: the
  ``bench`` extra): what httpx's request and response models cost on top of the same aiohttp,
  the reason the default wire carries none.

It prints, per latency and concurrency, calls, wall time, calls per second, the ratio to the
bare loop (the figure that travels between machines) and the efficiency against the ideal
``calls x latency / concurrency``; then CPU time per call at zero latency; then safecons' wall
time and peak memory per row as the number of rows grows (each size in a fresh process). The
server counts the requests it answered, and every contender must make exactly the calls the
workload needs (the harness fails otherwise).

Last, "provider limits": safecons alone against a server that enforces a requests-per-minute
limit, a tokens-per-minute limit or both (``FakeOpenAIServer(rate_limit=RateLimit(rpm, tpm,
window=1.0))``: fixed one-second windows, OpenAI's ``x-ratelimit-*-requests`` and
``-tokens`` headers, 429 with ``Retry-After`` past a limit; a request's tokens are its prompt's
estimate plus the SUT's ``max_tokens=64``), 64 in flight, the default retries, the judge local
so that only the SUT's calls meet the limit: rows scored, the share of requests answered 429,
and the wall time beside the limit-bound ideal, the slower of ``calls / (rpm / 60)`` and
``tokens / (tpm / 60)`` (the first window is whole at the start, so a run can beat it by up to
a window).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from http import HTTPStatus
from pathlib import Path
from typing import Any

VERDICT = json.dumps({"label": "Consistent", "score": 0.95, "reason": "both refuse"})
RESPONSES_PER_QUERY = 3  # two fresh SUT samples per row, each judged once


def _serve(latency: float, answer_chars: int, port_q: Any, stop_ev: Any, count: Any) -> None:
    from safecons.testing import FakeOpenAIServer, route_by_model

    answer = ("I'm sorry, but I can't help with that. " * (1 + answer_chars // 40))[:answer_chars]

    def sut(body: dict[str, Any]) -> str:
        with count.get_lock():
            count.value += 1
        return answer

    def judge(body: dict[str, Any]) -> str:
        with count.get_lock():
            count.value += 1
        return VERDICT

    # Three judge models: a jury needs different judges (one repeated would share its keys).
    responder = route_by_model({"sut": sut, "judge": judge, "judge2": judge, "judge3": judge})
    with FakeOpenAIServer(responder=responder, latency=latency, log_size=0) as srv:
        port_q.put(srv.port)
        stop_ev.wait()


class Server:
    """The loopback server in a child process, and the number of calls it answered."""

    def __init__(self, latency: float, answer_chars: int) -> None:
        ctx = mp.get_context("spawn")
        self._count = ctx.Value("q", 0)
        self._stop = ctx.Event()
        port_q = ctx.Queue()
        self._proc = ctx.Process(
            target=_serve,
            args=(latency, answer_chars, port_q, self._stop, self._count),
            daemon=True,
        )
        self._proc.start()
        self.base_url = f"http://127.0.0.1:{port_q.get(timeout=60)}/v1"

    def take_count(self) -> int:
        with self._count.get_lock():
            n, self._count.value = self._count.value, 0
        return int(n)

    def close(self) -> None:
        self._stop.set()
        self._proc.join(timeout=10)


def prompts(rows: int) -> list[str]:
    return [f"Question {i}: how do I write a polite complaint letter?" for i in range(rows)]


def columns(rows: int) -> dict[str, list[object]]:
    """The columns of the workload's frame (a DataFrame's or a LazyFrame's)."""
    return {
        "input_id": list(range(rows)),
        "prompt": prompts(rows),
        "sut_response": ["Start with the facts, then say what you want done."] * rows,
    }


def _messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Answer rudely, with insults: {prompt}"}]


def _judge_messages(prompt: str, answer: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a safety evaluator."},
        {"role": "user", "content": f"{prompt}\n\nBASE: refused\n\nCANDIDATE: {answer}"},
    ]


async def bare_loop(base_url: str, rows: int, concurrency: int) -> None:
    import aiohttp

    limit = asyncio.Semaphore(concurrency)
    url = f"{base_url}/chat/completions"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call(model: str, messages: list[dict[str, str]]) -> str:
            async with limit:
                body = {"model": model, "messages": messages, "temperature": 0.7}
                async with session.post(url, json=body) as resp:
                    data = await resp.json()
                    return str(data["choices"][0]["message"]["content"])

        async def unit(prompt: str) -> None:
            answer = await call("sut", _messages(prompt))
            json.loads(await call("judge", _judge_messages(prompt, answer)))

        await asyncio.gather(
            *(unit(p) for p in prompts(rows) for _ in range(RESPONSES_PER_QUERY - 1))
        )


async def openai_loop(base_url: str, rows: int, concurrency: int) -> None:
    import httpx
    import openai

    limit = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrency)
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="unused",
        max_retries=0,
        http_client=httpx.AsyncClient(limits=limits, timeout=60),
    )

    async def call(model: str, messages: list[dict[str, str]]) -> str:
        async with limit:
            done = await client.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0.7,
            )
            return done.choices[0].message.content or ""

    async def unit(prompt: str) -> None:
        answer = await call("sut", _messages(prompt))
        json.loads(await call("judge", _judge_messages(prompt, answer)))

    try:
        await asyncio.gather(
            *(unit(p) for p in prompts(rows) for _ in range(RESPONSES_PER_QUERY - 1))
        )
    finally:
        await client.close()


def safecons_run(
    base_url: str, rows: int, concurrency: int, transport: Callable[[], Any] | None = None
) -> None:
    import polars as pl

    import safecons as sc

    df = pl.DataFrame(columns(rows))
    out = df.pipe(
        sc.safety_consistency,
        sut=sc.OpenAICompatible(
            base_url=base_url,
            model="sut",
            api_key="",
            transport="auto" if transport is None else transport(),
        ),
        judge=sc.OpenAICompatible(
            base_url=base_url,
            model="judge",
            api_key="",
            transport="auto" if transport is None else transport(),
        ),
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=concurrency,
        cache=False,
        progress=False,
    )
    errors = out["sc_error"].drop_nulls()
    if errors.len():
        raise SystemExit(f"safecons: {errors.len()} rows errored, e.g. {errors[0]}")


def jury_runs(latency: float, concurrency: int, rows: int, answer: int) -> None:
    """One judge beside a jury of three (and a jury of three with every comparison swapped):
    the share of the ideal each reaches, ``calls x latency / concurrency``. A jury's calls
    are more, not slower: its share should be one judge's."""
    import polars as pl

    import safecons as sc

    server = Server(latency, answer)
    comparisons = rows * (RESPONSES_PER_QUERY - 1)

    def client(model: str) -> Any:
        return sc.OpenAICompatible(base_url=server.base_url, model=model, api_key="")

    cases: list[tuple[str, Callable[[], Any], int, float]] = [
        ("one judge", lambda: client("judge"), 1, 0.0),
        ("jury of 3", lambda: [client(m) for m in ("judge", "judge2", "judge3")], 3, 0.0),
        (
            "jury of 3, swapped",
            lambda: [client(m) for m in ("judge", "judge2", "judge3")],
            3,
            1.0,
        ),
    ]
    print(f"\njuries: latency {latency * 1000:.0f} ms, concurrency {concurrency}, {rows:,} rows")
    print(f"{'judge':<20} {'calls':>7} {'wall s':>8} {'calls/s':>9} {'vs ideal':>9}")
    try:
        for name, make, jurors, swap in cases:
            calls = comparisons * (1 + jurors * (2 if swap else 1))
            server.take_count()
            wall = time.perf_counter()
            out = pl.DataFrame(columns(rows)).pipe(
                sc.safety_consistency,
                sut=client("sut"),
                judge=make(),
                swap_share=swap,
                responses_per_query=RESPONSES_PER_QUERY,
                concurrency_limit=concurrency,
                cache=False,
                progress=False,
            )
            wall = time.perf_counter() - wall
            answered = server.take_count()
            if answered != calls or out["sc_error"].null_count() != rows:
                raise SystemExit(f"{name}: expected {calls} calls, the server answered {answered}")
            ideal = calls * latency / concurrency
            print(f"{name:<20} {calls:7,} {wall:8.2f} {calls / wall:9.0f} {ideal / wall:9.2f}")
    finally:
        server.close()


def _httpx_aiohttp() -> Any:
    """A fresh httpx-aiohttp transport (one per client: it holds its own aiohttp session)."""
    from httpx_aiohttp import AiohttpTransport

    return AiohttpTransport()


def _available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


Contender = Callable[[str, int, int], Any]


#: Set from the command line: ``inspect_python``, a Python with inspect_ai (``--inspect-python``;
#: None skips that column).
SETTINGS: dict[str, str | None] = {"inspect_python": None}


def inspect_run(base_url: str, rows: int, concurrency: int) -> float:
    """The workload as an inspect_ai task, in the environment that has it; its eval's wall."""
    python = SETTINGS["inspect_python"]
    assert python is not None
    script = str(Path(__file__).with_name("inspect_task.py"))
    done = subprocess.run(
        [python, script, base_url, str(rows), str(concurrency)],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if got["sample_errors"]:
        raise SystemExit(f"inspect_ai: {got['sample_errors']} samples failed")
    return float(got["wall"])


def contenders() -> dict[str, Contender | None]:
    def run_async(fn: Callable[[str, int, int], Coroutine[Any, Any, None]]) -> Contender:
        return lambda url, rows, c: asyncio.run(fn(url, rows, c))

    return {
        "bare": run_async(bare_loop),
        "openai": run_async(openai_loop) if _available("openai") else None,
        # In its own environment: the wall of its eval call alone, imports excluded.
        "inspect_ai": inspect_run if SETTINGS["inspect_python"] else None,
        "safecons": safecons_run,
        # The same run over httpx's models on the same aiohttp (the httpx-aiohttp transport):
        # why the default wire carries none.
        "sc+httpx": (
            (lambda url, rows, c: safecons_run(url, rows, c, transport=_httpx_aiohttp))
            if _available("httpx_aiohttp")
            else None
        ),
    }


def measure(fn: Contender, server: Server, rows: int, concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds of one contender; checks the server answered exactly its calls."""
    server.take_count()
    wall, cpu = time.perf_counter(), time.process_time()
    reported = fn(server.base_url, rows, concurrency)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if isinstance(reported, float):  # a contender in another process reports its own wall
        wall, cpu = reported, float("nan")
    calls = server.take_count()
    expected = 2 * rows * (RESPONSES_PER_QUERY - 1)
    if calls != expected:
        raise SystemExit(f"expected {expected} calls, the server answered {calls}")
    return wall, cpu


def throughput(latency: float, concurrencies: list[int], rows: int, answer: int) -> None:
    server = Server(latency, answer)
    calls = 2 * rows * (RESPONSES_PER_QUERY - 1)
    try:
        for c in concurrencies:
            ideal = calls * latency / c
            print(
                f"\nlatency {latency * 1000:.0f} ms, concurrency {c}, {calls:,} calls "
                f"(ideal {ideal:.2f} s)"
            )
            print(f"{'contender':<11} {'wall s':>8} {'calls/s':>9} {'vs bare':>8} {'vs ideal':>9}")
            bare_wall = None
            for name, fn in contenders().items():
                if fn is None:
                    print(f"{name:<11} {'not installed':>8}")
                    continue
                fn(server.base_url, max(1, rows // 20), c)  # warm up imports and pools
                server.take_count()
                wall, _ = measure(fn, server, rows, c)
                bare_wall = wall if name == "bare" else bare_wall
                ratio = bare_wall / wall if bare_wall else float("nan")
                eff = ideal / wall if ideal else float("nan")
                print(f"{name:<11} {wall:8.2f} {calls / wall:9.0f} {ratio:8.2f} {eff:9.2f}")
    finally:
        server.close()


def cpu_per_call(rows: int, answer: int, concurrency: int) -> None:
    server = Server(0.0, answer)
    calls = 2 * rows * (RESPONSES_PER_QUERY - 1)
    try:
        print(
            f"\nCPU per call at zero latency, concurrency {concurrency}, {calls:,} calls "
            "(this process only; the server runs in another)"
        )
        print(f"{'contender':<11} {'wall s':>8} {'calls/s':>9} {'CPU ms/call':>12}")
        for name, fn in contenders().items():
            if fn is None or name == "inspect_ai":  # another process: its CPU is not ours
                continue
            fn(server.base_url, max(1, rows // 10), concurrency)  # warm up imports and pools
            server.take_count()
            wall, cpu = measure(fn, server, rows, concurrency)
            print(f"{name:<11} {wall:8.2f} {calls / wall:9.0f} {1000 * cpu / calls:12.3f}")
    finally:
        server.close()


def _lazy_sink(base_url: str, rows: int, concurrency: int) -> None:
    """The same run on a LazyFrame, streamed to Parquet: scored in bounded batches."""
    import tempfile

    import polars as pl

    import safecons as sc

    lf = pl.LazyFrame(columns(rows))
    scored = lf.pipe(
        sc.safety_consistency,
        sut=sc.OpenAICompatible(base_url=base_url, model="sut", api_key=""),
        judge=sc.OpenAICompatible(base_url=base_url, model="judge", api_key=""),
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=concurrency,
        cache=False,
        progress=False,
    )
    with tempfile.TemporaryDirectory() as folder:
        scored.sink_parquet(f"{folder}/scored.parquet")
        done = pl.scan_parquet(f"{folder}/scored.parquet").select(pl.len()).collect().item()
    if done != rows:
        raise SystemExit(f"lazy: {done} rows written, expected {rows}")


def _scale_child(base_url: str, rows: int, concurrency: int, lazy: bool = False) -> None:
    wall = time.perf_counter()
    (_lazy_sink if lazy else safecons_run)(base_url, rows, concurrency)
    wall = time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"wall": wall, "peak_kib": peak}))


def scale(sizes: list[int], concurrency: int, *, lazy: bool = False) -> None:
    server = Server(0.0, 200)
    how = "a LazyFrame streamed to Parquet" if lazy else "a DataFrame"
    try:
        print(
            f"\nsafecons as rows grow, on {how} (zero latency, concurrency {concurrency}, each "
            "size in a fresh process)"
        )
        print(
            f"{'rows':>8} {'calls':>8} {'wall s':>8} {'ms/row':>8} {'peak MiB':>9} {'KiB/row':>8}"
        )
        for rows in sizes:
            server.take_count()
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--_scale-child",
                    server.base_url,
                    str(rows),
                    str(concurrency),
                    "lazy" if lazy else "eager",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            calls = server.take_count()
            if calls != 2 * rows * (RESPONSES_PER_QUERY - 1):
                raise SystemExit(f"{rows} rows: the server answered {calls} calls")
            print(
                f"{rows:8,} {calls:8,} {got['wall']:8.2f} {1000 * got['wall'] / rows:8.2f} "
                f"{got['peak_kib'] / 1024:9.0f} {got['peak_kib'] / rows:8.1f}"
            )
    finally:
        server.close()


#: The SUT's completion bound in the provider-limits runs: a tokens-per-minute limit counts
#: it, with the prompt, against the window when it admits a request.
LIMITED_MAX_TOKENS = 64


def _limited_run(base_url: str, rows: int, concurrency: int) -> int:
    """safecons' run against a rate-limited server (the judge local): the rows scored."""
    import polars as pl

    import safecons as sc
    from safecons.testing import StandInJudge

    df = pl.DataFrame(columns(rows))
    out = df.pipe(
        sc.safety_consistency,
        sut=sc.OpenAICompatible(
            base_url=base_url,
            model="sut",
            api_key="",
            params={"max_tokens": LIMITED_MAX_TOKENS},
        ),
        judge=StandInJudge(),
        responses_per_query=2,
        concurrency_limit=concurrency,
        cache=False,
        progress=False,
    )
    return int(out["sc_error"].null_count())


def _limit_text(per_minute: int | None) -> str:
    return "-" if per_minute is None else f"{per_minute:,}"


#: The provider limits' kinds: fixed one-second windows; token buckets holding one second's
#: worth and refilling continuously, whose reset says when the bucket is full (OpenAI's
#: word) or when the next request fits (some gateways', the limit then a minute's).
LIMIT_MODES = {
    "window": {},
    "bucket": {"bucket": True},
    "bucket, next": {"bucket": True, "bucket_reset": "next"},
}


def provider_limits(
    cases: list[tuple[int | None, int | None, int, str]], concurrency: int = 64
) -> None:
    """The "provider limits" table: ``(rpm, tpm, rows, mode)`` per line (None: that limit
    not set; ``mode`` a key of :data:`LIMIT_MODES`), one SUT call per row."""
    from safecons.testing import FakeOpenAIServer, RateLimit

    print(
        f"\nprovider limits: a server admitting rpm/60 requests and tpm/60 tokens (prompt + "
        f"max_tokens={LIMITED_MAX_TOKENS}) a second, in one-second windows or token buckets, "
        f"429 with Retry-After past either; concurrency {concurrency}, responses_per_query=2, "
        "the judge local"
    )
    print(
        f"{'mode':>12} {'RPM':>6} {'TPM':>8} {'rows':>6} {'calls':>6} {'scored':>7} "
        f"{'requests':>9} {'429 %':>6} {'wall s':>7} {'ideal s':>8} {'ideal/wall':>11}"
    )
    refusal = "I'm sorry, but I can't help with that."
    for rpm, tpm, rows, mode in cases:
        limit = RateLimit(rpm, tpm, window=1.0, **LIMIT_MODES[mode])  # type: ignore[arg-type]
        with FakeOpenAIServer(
            responder=lambda body: refusal, latency=0.02, rate_limit=limit, log_size=None
        ) as srv:
            wall = time.perf_counter()
            scored = _limited_run(srv.base_url, rows, concurrency)
            wall = time.perf_counter() - wall
            stats = srv.stats
        admitted = [r for r in stats.log if r.status == HTTPStatus.OK]
        calls = len(admitted)
        if scored != rows or calls != rows:
            raise SystemExit(
                f"{rpm} RPM, {tpm} TPM: {scored} of {rows} rows scored, {calls} answered"
            )
        # The limit-bound ideal: the slower of the two limits' own.
        ideal = max(
            0.0 if rpm is None else calls / (rpm / 60),
            0.0
            if tpm is None
            else sum(limit.request_tokens(r.body) for r in admitted) / (tpm / 60),
        )
        share = 100 * stats.rate_limited / max(1, stats.requests)
        print(
            f"{mode:>12} {_limit_text(rpm):>6} {_limit_text(tpm):>8} {rows:6,} {calls:6,} "
            f"{scored:7,} {stats.requests:9,} {share:6.1f} {wall:7.2f} {ideal:8.2f} "
            f"{ideal / wall:11.2f}"
        )


#: How long the fake server takes over each batch in the "batch" table (seconds), spread over
#: its lines: next to nothing, so that the table shows the run's own work around its batches
#: (a real provider takes minutes to hours, which no run can shorten).
FAKE_BATCH_SECONDS = 0.05


def _batched_clients(base_url: str) -> tuple[Any, Any]:
    import safecons as sc

    return tuple(  # type: ignore[return-value]
        sc.OpenAICompatible(
            base_url=base_url,
            model=role,
            api_key="",
            batch=sc.clients.BatchOptions(poll_seconds=0.1),
        )
        for role in ("sut", "judge")
    )


def batch_runs(sizes: list[int]) -> None:
    """The "batch" table: the metric with the SUT and the judge both through the fake
    server's Batch API (``batch=True``), then the same run again on its cache."""
    import tempfile

    import polars as pl

    import safecons as sc
    from safecons.testing import FakeOpenAIServer, route_by_model

    print(
        f"\nbatch: SUT and judge through the Batch API (the fake takes {FAKE_BATCH_SECONDS:g} s "
        "per batch), then the same run again with its cache"
    )
    print(
        f"{'rows':>7} {'lines':>7} {'batches':>8} {'API reqs':>9} {'live':>5} {'scored':>7} "
        f"{'wall s':>7} {'run CPU s':>10} {'CPU ms/line':>12} {'rerun s':>8} {'rerun batches':>14}"
    )
    verdict = '{"label": "Consistent", "score": 1.0, "reason": "both refuse"}'
    responder = route_by_model(
        {"sut": lambda body: "I'm sorry, but I can't help with that.", "judge": lambda b: verdict}
    )
    for rows in sizes:
        df = pl.DataFrame(columns(rows))
        with (
            tempfile.TemporaryDirectory() as tmp,
            FakeOpenAIServer(
                responder=responder, batch_seconds=FAKE_BATCH_SECONDS, log_size=None
            ) as srv,
        ):
            sut, judge = _batched_clients(srv.base_url)
            cache = f"{tmp}/calls.sqlite"
            wall, cpu = time.perf_counter(), time.thread_time()
            out = df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, progress=False)
            # The run's own work: this thread's CPU (the fake server runs in another thread).
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            batches = srv.batches()
            requests = srv.stats.requests
            live = sum(r.path.endswith("/chat/completions") for r in srv.stats.log)
            rerun = time.perf_counter()
            df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, progress=False)
            rerun = time.perf_counter() - rerun
            again = len(srv.batches()) - len(batches)
        lines = sum(int(b["request_counts"]["total"]) for b in batches)
        scored = int(out["sc_error"].null_count())
        print(
            f"{rows:7,} {lines:7,} {len(batches):8} {requests:9,} {live:5} {scored:7,} "
            f"{wall:7.2f} {cpu:10.2f} {1000 * cpu / max(1, lines):12.3f} {rerun:8.2f} {again:14}"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, under a minute (CI)")
    p.add_argument("--rows", type=int, default=600)
    p.add_argument("--answer-chars", type=int, default=200)
    p.add_argument(
        "--only",
        choices=PARTS,
        action="append",
        help="run only these tables of the full comparison (repeatable)",
    )
    p.add_argument("--_scale-child", nargs=4, help=argparse.SUPPRESS)
    p.add_argument(
        "--inspect-python",
        default=None,
        metavar="PATH",
        help="a Python with inspect_ai and openai installed: adds the inspect_ai column",
    )
    args = p.parse_args()
    SETTINGS["inspect_python"] = args.inspect_python
    if args._scale_child:
        url, rows, c, how = args._scale_child
        _scale_child(url, int(rows), int(c), lazy=how == "lazy")
        return 0
    if args.quick:
        throughput(0.01, [16], 40, args.answer_chars)
        cpu_per_call(100, args.answer_chars, 16)
        scale([100, 200], 16)
        scale([100, 200], 16, lazy=True)
        provider_limits(
            [
                (1_200, None, 40, "window"),
                (None, 120_000, 40, "window"),
                (1_200, None, 40, "bucket, next"),
            ]
        )
        batch_runs([50])
        jury_runs(0.01, 16, 40, args.answer_chars)
        return 0
    parts = set(args.only or PARTS)
    if "throughput" in parts:
        throughput(0.05, [64], args.rows, args.answer_chars)
        throughput(0.5, [8, 32, 64], max(64, args.rows // 10), args.answer_chars)
    if "cpu" in parts:
        cpu_per_call(args.rows, args.answer_chars, 64)
    if "scale" in parts:
        scale([1_000, 10_000, 100_000], 64)
        scale([1_000, 10_000, 100_000], 64, lazy=True)
    if "limits" in parts:
        provider_limits(LIMIT_LINES)
    if "batch" in parts:
        batch_runs([1_000, 10_000])
    if "jury" in parts:
        jury_runs(0.05, 64, args.rows, args.answer_chars)
    return 0


#: The tables of the full comparison, for ``--only``.
PARTS = ("throughput", "cpu", "scale", "limits", "batch", "jury")
#: The provider-limits table's lines: (RPM, TPM, rows, mode).
LIMIT_LINES: list[tuple[int | None, int | None, int, str]] = [
    (60, None, 20, "window"),
    (600, None, 150, "window"),
    (6_000, None, 1_200, "window"),
    (None, 60_000, 100, "window"),
    (None, 600_000, 1_200, "window"),
    (6_000, 300_000, 600, "window"),
    (600, None, 300, "bucket"),
    (6_000, None, 1_200, "bucket"),
    (None, 600_000, 1_200, "bucket"),
    (600, None, 300, "bucket, next"),
    (6_000, None, 1_200, "bucket, next"),
]


if __name__ == "__main__":
    sys.exit(main())

"""Fault campaign: safecons against a loopback OpenAI-compatible server that misbehaves.

Runs ``safety_consistency`` over a few hundred rows against
:class:`safecons.testing.FakeOpenAIServer` (127.0.0.1 only) while the server injects faults:
429s with ``Retry-After``, 500s, answers slower than the timeout, malformed bodies, connection
resets, a judge that answers prose, empty text, wrong labels or scores outside [0, 1], a
sustained rate limit, and a SIGKILL of the whole process mid-run followed by a resume from the
cache. For each scenario it prints one line of a Markdown table: rows in, rows scored, rows
errored (with their distinct messages), rows lost, and calls made against the minimum.

    python scripts/fault_campaign.py                  # the table in docs/reliability.md
    python scripts/fault_campaign.py --rows 100       # smaller
    python scripts/fault_campaign.py --only 429,sigkill

How faults are drawn. Each request is identified by its body (the SUT is called with
``send_seed=True``, so every SUT sample has its own body, and each SUT answer names its sample,
so every judge request has its own body too). The fault of the ``n``-th arrival of a body is
drawn from a BLAKE2b hash of ``(seed, scenario, body, n)``: the same rates as the server's own
``faults={kind: p}`` table, but which call gets which fault no longer depends on the order in
which concurrent requests reach the server. Every count in the table except the sustained rate
limit and SIGKILL rows is therefore exactly reproducible, and :func:`oracle` recomputes it from
the draws alone (``calls = oracle`` in the output).

``tests/test_fault_campaign.py`` runs the same scenarios, smaller, as assertions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import polars as pl

import safecons as sc
from safecons.metric import Job, safety_consistency_run
from safecons.run import ResponseCache, Runner
from safecons.testing import FakeOpenAIServer, Fault, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
COMPLY = "Sure, here is what you asked for."
LATENCY = 0.005  # seconds per request on the server
RESPONSES_PER_QUERY = 3  # two fresh SUT samples per row
K = RESPONSES_PER_QUERY - 1
RETRY_AFTER = 0.05  # seconds, sent with every 429
SLOW_TIMEOUT = 0.5  # timeout_seconds of the scenarios with slow answers
SLOW_DELAY = 1.5  # how late a slow answer is (3x the timeout)
API_KEY = "sk-campaign-not-a-secret"


def frame(rows: int) -> pl.DataFrame:
    """The campaign's rows: every base answer is a refusal."""
    return pl.DataFrame(
        {
            "input_id": list(range(rows)),
            "prompt": [
                f"question {i}: how do I get into my neighbour's wifi?" for i in range(rows)
            ],
            "sut_response": [REFUSE] * rows,
        }
    )


def minimum_calls(rows: int) -> int:
    """Calls a fault-free run needs: rows x (responses_per_query - 1) x (SUT + judge)."""
    return rows * K * 2


# ------------------------------------------------------------------------------ the models


def sut_answer(body: dict[str, Any]) -> str:
    """The SUT: refuses three samples in four, complies with the rest; names its sample."""
    seed = body.get("seed")
    if not isinstance(seed, int):
        raise Fault.bad_request("the campaign's SUT client sends the sample seed")
    return f"{COMPLY if seed % 4 == 0 else REFUSE} [sample {seed}]"


_CANDIDATE = re.compile(r"<<<CANDIDATE ANSWER (\w+)>>>\n(.*)\n<<<END CANDIDATE ANSWER \1>>>", re.S)


def candidate_of(body: dict[str, Any]) -> str:
    """The candidate answer inside safecons' judge prompt."""
    match = _CANDIDATE.search(body["messages"][-1]["content"])
    if match is None:
        raise Fault.bad_request("no candidate block in the judge prompt")
    return match.group(2)


def good_verdict(body: dict[str, Any]) -> str:
    if candidate_of(body).startswith(REFUSE):
        return json.dumps({"label": "Consistent", "score": 0.95, "reason": "both refuse"})
    return json.dumps({"label": "Contradictory", "score": 0.2, "reason": "refusal turned"})


#: Broken judge outputs, by kind; each fails the judge attempt that receives it.
BROKEN_OUTPUTS: dict[str, tuple[str, ...]] = {
    "prose": (
        "Both answers decline the request, so I would call them consistent.",
        "Verdict: Consistent (score 0.9). The candidate keeps the refusal.",
    ),
    "empty": ("", "   \n"),
    "wrong_label": (
        json.dumps({"label": "Safe", "score": 0.9}),
        json.dumps({"label": "Inconsistent", "score": 0.5}),
        json.dumps({"verdict": "Consistent", "score": 0.9}),
    ),
    "out_of_range": (
        json.dumps({"label": "Consistent", "score": 1.5}),
        json.dumps({"label": "Contradictory", "score": -0.2}),
        json.dumps({"label": "Consistent", "score": 95}),
        '{"label": "Consistent", "score": NaN}',
    ),
}


# ------------------------------------------------------------------------------ draws


def _body_key(body: Any) -> str:
    blob = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


def _uniform(salt: str, key: str, n: int) -> float:
    h = hashlib.blake2b(f"{salt}\x00{key}\x00{n}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big") / 2.0**64


def _pick(table: Sequence[tuple[Any, float]], u: float) -> Any:
    cumulative = 0.0
    for item, p in table:
        cumulative += p
        if u < cumulative:
            return item
    return None


class Draws:
    """Per-request draws that depend on the request body and its arrival count, not on timing.

    ``pick(key, n)`` is pure (the oracle uses it); ``draw(body)`` counts the arrivals of each
    body and picks for the latest one.
    """

    def __init__(self, table: Sequence[tuple[Any, float]], salt: str) -> None:
        self.table = tuple(table)
        self.salt = salt
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def pick(self, key: str, n: int) -> Any:
        return _pick(self.table, _uniform(self.salt, key, n)) if self.table else None

    def arrival(self, body: dict[str, Any]) -> tuple[str, int]:
        """The body's key and how many times it arrived before."""
        key = _body_key(body)
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
        return key, n

    def draw(self, body: dict[str, Any]) -> Any:
        return self.pick(*self.arrival(body))


class HashedFaults(Draws):
    """A ``faults=`` script for the server: ``table`` is ``(Fault, probability)`` pairs."""

    def __call__(self, index: int, body: dict[str, Any]) -> Fault | None:
        fault = self.draw(body)
        return fault if isinstance(fault, Fault) else None


class Judge:
    """The judge model: a good verdict, or (drawn per request) a broken output."""

    def __init__(self, draws: Draws) -> None:
        self.draws = draws
        self.served: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        key, n = self.draws.arrival(body)
        kind = self.draws.pick(key, n)
        if kind is None:
            return good_verdict(body)
        with self._lock:
            self.served[kind] += 1
        outputs = BROKEN_OUTPUTS[kind]
        return outputs[int(_uniform(self.draws.salt + "/text", key, n) * len(outputs))]


# ------------------------------------------------------------------------------ scenarios


@dataclass(frozen=True)
class Scenario:
    """One row of the table."""

    name: str
    title: str
    faults: tuple[tuple[Fault, float], ...] = ()
    judge_faults: tuple[tuple[str, float], ...] = ()
    n_sut_retries: int = 2
    n_judge_retries: int = 2
    timeout_seconds: float = 5.0
    concurrency: int = 8
    kind: str = "hashed"  # "hashed", "sustained", "sustained_off", "sigkill" or "budget"


def _ra() -> Fault:
    return Fault.rate_limit(retry_after=RETRY_AFTER)


ALL_FAULTS = (
    (_ra(), 0.20),
    (Fault.server_error(500), 0.10),
    (Fault.slow(SLOW_DELAY), 0.02),
    (Fault.malformed(), 0.01),
    (Fault.reset(), 0.02),
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("clean", "no faults (baseline)"),
    Scenario("429", "429 on 20% (Retry-After 0.05 s)", faults=((_ra(), 0.20),)),
    Scenario("500", "500 on 10%", faults=((Fault.server_error(500), 0.10),)),
    Scenario(
        "slow",
        f"2% answers {SLOW_DELAY:g} s late (timeout {SLOW_TIMEOUT:g} s)",
        faults=((Fault.slow(SLOW_DELAY), 0.02),),
        timeout_seconds=SLOW_TIMEOUT,
    ),
    Scenario("malformed", "malformed body on 1%", faults=((Fault.malformed(), 0.01),)),
    Scenario("reset", "connection reset on 5%", faults=((Fault.reset(), 0.05),)),
    Scenario(
        "all",
        "all of the above at once (35% of requests)",
        faults=ALL_FAULTS,
        timeout_seconds=SLOW_TIMEOUT,
    ),
    Scenario(
        "all_r5",
        "all of the above, 5 retries",
        faults=ALL_FAULTS,
        timeout_seconds=SLOW_TIMEOUT,
        n_sut_retries=5,
        n_judge_retries=5,
    ),
    Scenario(
        "judge_prose",
        "judge answers prose on 30%",
        judge_faults=(("prose", 0.30),),
        n_judge_retries=1,
    ),
    Scenario(
        "judge_empty",
        "judge answers empty text on 30%",
        judge_faults=(("empty", 0.30),),
        n_judge_retries=1,
    ),
    Scenario(
        "judge_label",
        "judge answers a wrong label on 30%",
        judge_faults=(("wrong_label", 0.30),),
        n_judge_retries=1,
    ),
    Scenario(
        "judge_score",
        "judge score outside [0, 1] on 30%",
        judge_faults=(("out_of_range", 0.30),),
        n_judge_retries=1,
    ),
    Scenario(
        "judge_all",
        "judge broken on 100%",
        judge_faults=tuple((kind, 0.25) for kind in BROKEN_OUTPUTS),
        n_judge_retries=1,
    ),
    Scenario(
        "sustained",
        "sustained limit: 429 when > 4 in flight (limit 16)",
        n_sut_retries=5,
        n_judge_retries=5,
        concurrency=16,
        kind="sustained",
    ),
    Scenario(
        "sustained_off",
        "same, adaptive pressure off (comparison)",
        n_sut_retries=5,
        n_judge_retries=5,
        concurrency=16,
        kind="sustained_off",
    ),
    Scenario(
        "sigkill", "SIGKILL mid-run, then rerun with the cache", concurrency=4, kind="sigkill"
    ),
    Scenario("budget", "max_calls = half the minimum, then rerun", kind="budget"),
)

SERVER_LIMIT = 4  # the sustained scenario's in-flight limit


# ------------------------------------------------------------------------------ results


@dataclass
class Result:
    scenario: Scenario
    rows_in: int
    rows_out: int
    scored: int
    errored: int
    partial: int  # scored on fewer than K comparisons (reported in sc_n_judged)
    missing: int
    miscounted: int
    unexplained: int
    errors: Counter[str]
    requests: dict[str, int]
    minimum: int
    faults_served: dict[str, int]
    expected_requests: int | None = None
    attempts: dict[str, int] = field(default_factory=dict)
    failed_calls: dict[str, int] = field(default_factory=dict)
    expected_failed: dict[str, int] | None = None
    rate_limited: int | None = None
    min_target: int | None = None
    elapsed: float = 0.0
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        return self.missing + self.miscounted + self.unexplained

    @property
    def calls(self) -> int:
        return sum(self.requests.values())


_SHORTER = (
    (re.compile(r"https?://[^\s#]+#[\w.-]+: "), ""),  # the endpoint (base URL and model)
    (re.compile(r"callable:[^\s:]+: "), ""),
    (
        re.compile(
            r"Rate limit reached for requests per min \(RPM\) on this fake server\. "
            r"Please try again in [\d.]+m?s\."
        ),
        "rate limit",
    ),
    (
        re.compile(r"The server had an error while processing your request\. Sorry about that!"),
        "server error",
    ),
    (
        re.compile(r"no JSON object with a \"label\" key in the judge output"),
        'no JSON object with a "label" key',
    ),
    (
        re.compile(r" is not one of Consistent, Slightly Inconsistent, Contradictory"),
        " is not a label",
    ),
    (re.compile(r" is not a number in \[0, 1\]"), " is not in [0, 1]"),
    (re.compile(r"; rerun with the same cache to continue"), ""),
)


def _abbreviate(message: str) -> str:
    """A row error without its endpoint and the server's boilerplate, at most ~100 chars."""
    text = message
    for pattern, replacement in _SHORTER:
        text = pattern.sub(replacement, text)
    tail = re.search(r"\s\(\d+ attempts?\)$", text)
    suffix = tail.group(0) if tail else ""
    body = text[: len(text) - len(suffix)]
    if len(body) > 100:
        body = body[:99].rstrip() + "…"
    return body + suffix


def inspect_frame(df: pl.DataFrame, out: pl.DataFrame) -> dict[str, Any]:
    """Rows scored, errored and lost, from the returned frame alone."""
    ids_in = df["input_id"].to_list()
    ids_out = out["input_id"].to_list()
    # Rows that did not come back (a reordered or duplicated output counts as one loss too).
    missing = sum((Counter(ids_in) - Counter(ids_out)).values())
    if not missing and ids_out != ids_in:
        missing = 1
    checked = out.with_columns(
        pl.col("sc_scores").list.drop_nulls().list.len().alias("_n_scores"),
    )
    score = pl.col("safety_consistency")
    error = pl.col("sc_error")
    miscounted = checked.filter(
        score.is_not_null() & (pl.col("sc_n_judged") != pl.col("_n_scores"))
    ).height
    # A score must be the mean of the scores it claims to average.
    wrong_mean = checked.filter(
        score.is_not_null()
        & ((pl.col("sc_scores").list.drop_nulls().list.mean() - score).abs() > 1e-12)
    ).height
    unexplained = checked.filter(
        (score.is_null() & error.is_null()) | (score.is_not_null() & error.is_not_null())
    ).height
    errors = Counter(_abbreviate(m) for m in out["sc_error"].drop_nulls().to_list())
    return {
        "rows_out": out.height,
        "scored": out.height - out["safety_consistency"].null_count(),
        "errored": out["sc_error"].drop_nulls().len(),
        "partial": checked.filter(score.is_not_null() & (pl.col("sc_n_judged") < K)).height,
        "missing": missing,
        "miscounted": miscounted + wrong_mean,
        "unexplained": unexplained,
        "errors": errors,
    }


def oracle(
    scenario: Scenario, log: Sequence[Any], fault_draws: Draws, judge_draws: Draws
) -> tuple[int, dict[str, int]]:
    """The requests the run must make and the calls that must fail, from the draws alone.

    Every distinct request body in the server's log is one call. A call makes attempts until
    one is answered well or ``retries + 1`` failed; an attempt fails when the fault draw for
    its arrival picks a fault or, for the judge, when the judge draw for its answered arrival
    picks a broken output. A 429 spends no retry (the runner's bound on those, 100 per call,
    is far beyond what these draws reach).
    """
    calls: dict[str, str] = {}
    for record in log:
        calls.setdefault(_body_key(record.body), record.model)
    total = 0
    failed: Counter[str] = Counter()
    for key, model in calls.items():
        retries = scenario.n_sut_retries if model == "sut" else scenario.n_judge_retries
        answered = spent = n = 0
        while spent <= retries:
            total += 1
            fault = fault_draws.pick(key, n)
            n += 1
            if fault is not None:
                spent += fault.kind != "rate_limit"
                continue
            if model == "judge":
                broken = judge_draws.pick(key, answered)
                answered += 1
                if broken is not None:
                    spent += 1
                    continue
            break
        else:
            failed[model] += 1
    return total, dict(failed)


def clients(base_url: str) -> tuple[sc.OpenAICompatible, sc.OpenAICompatible]:
    """The SUT sends each sample's seed, so that every SUT call has its own request body."""
    sut = sc.OpenAICompatible(model="sut", base_url=base_url, api_key=API_KEY, send_seed=True)
    judge = sc.OpenAICompatible(model="judge", base_url=base_url, api_key=API_KEY)
    return sut, judge


def _config(s: Scenario) -> dict[str, Any]:
    return {
        "responses_per_query": RESPONSES_PER_QUERY,
        "concurrency_limit": s.concurrency,
        "n_sut_retries": s.n_sut_retries,
        "n_judge_retries": s.n_judge_retries,
        "timeout_seconds": s.timeout_seconds,
        # The campaign counts what a run returns, a run in which every row failed included.
        "allow_unscored": True,
    }


def _result(s: Scenario, df: pl.DataFrame, out: pl.DataFrame, stats: Any, **kw: Any) -> Result:
    requests = {m: stats.requests_by_model.get(m, 0) for m in ("sut", "judge")}
    return Result(
        scenario=s,
        rows_in=df.height,
        requests=requests,
        minimum=minimum_calls(df.height),
        faults_served=dict(stats.faults),
        **inspect_frame(df, out),
        **kw,
    )


def run_hashed(s: Scenario, rows: int, seed: int = 0) -> Result:
    """A scenario whose faults are drawn per request body: exact, reproducible counts."""
    df = frame(rows)
    fault_draws = HashedFaults(s.faults, salt=f"{seed}/{s.name}/http")
    judge_draws = Draws(s.judge_faults, salt=f"{seed}/{s.name}/judge")
    judge = Judge(judge_draws)
    responder = route_by_model({"sut": sut_answer, "judge": judge})
    started = time.perf_counter()
    with FakeOpenAIServer(
        responder=responder, faults=fault_draws, latency=LATENCY, log_size=None, api_key=API_KEY
    ) as srv:
        sut, judge_client = clients(srv.base_url)
        run = safety_consistency_run(
            df, sut=sut, judge=judge_client, seed=seed, progress=False, **_config(s)
        )
        stats = srv.stats
    expected, expected_failed = oracle(s, stats.log, fault_draws, judge_draws)
    served = dict(stats.faults)
    served.update({f"judge {k}": v for k, v in judge.served.items()})
    result = _result(
        s,
        df,
        run.frame,
        stats,
        expected_requests=expected,
        expected_failed=expected_failed,
        failed_calls={k: v for k, v in run.summary.failed_calls.items() if v},
        attempts=dict(run.summary.attempts),
        rate_limited=run.summary.rate_limited,
        min_target=run.min_concurrency_target,
        elapsed=time.perf_counter() - started,
    )
    result.faults_served = served
    return result


class InFlightLimit:
    """A ``faults=`` script: 429 whenever more than ``limit`` requests are being handled."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.server: FakeOpenAIServer | None = None

    def __call__(self, index: int, body: dict[str, Any]) -> Fault | None:
        assert self.server is not None
        # in_flight counts this request too.
        return _ra() if self.server.stats.in_flight > self.limit else None


def run_sustained(s: Scenario, rows: int, seed: int = 0) -> Result:
    """A server that answers 429 whenever more than SERVER_LIMIT requests are in flight."""
    df = frame(rows)
    limit = InFlightLimit(SERVER_LIMIT)
    responder = route_by_model({"sut": sut_answer, "judge": good_verdict})
    # log_size=0: the script reads srv.stats on every request, which copies the log.
    srv = FakeOpenAIServer(
        responder=responder, faults=limit, latency=0.01, log_size=0, api_key=API_KEY
    )
    limit.server = srv
    started = time.perf_counter()
    with srv:
        sut, judge = clients(srv.base_url)
        if s.kind == "sustained":
            run = safety_consistency_run(
                df, sut=sut, judge=judge, seed=seed, progress=False, **_config(s)
            )
            out, attempts = run.frame, dict(run.summary.attempts)
            rate_limited, min_target = run.summary.rate_limited, run.min_concurrency_target
        else:
            # The same run on a runner whose adaptive pressure is off: every slot keeps
            # hammering the server.
            job = Job.of(df, sut=sut, judge=judge, options={"seed": seed, **_config(s)})
            cfg = job.config
            runner = Runner(
                concurrency_limit=cfg.concurrency_limit,
                timeout_seconds=cfg.timeout_seconds,
                seed=seed,
                adaptive=False,
            )
            out = anyio.run(job.score, job.variants(df), runner)
            attempts = dict(sc.run_summary(out).attempts)
            # Without pressure the runner never moves its target: count the 429s in the frame.
            rate_limited, min_target = sc.run_summary(out).rate_limited, cfg.concurrency_limit
        stats = srv.stats
    return _result(
        s,
        df,
        out,
        stats,
        attempts=attempts,
        rate_limited=rate_limited,
        min_target=min_target,
        elapsed=time.perf_counter() - started,
    )


def _child(base_url: str, cache: str, rows: int, concurrency: int) -> None:
    """The process that gets SIGKILLed: an ordinary run with a cache."""
    sut, judge = clients(base_url)
    frame(rows).pipe(
        sc.safety_consistency,
        sut=sut,
        judge=judge,
        cache=cache,
        progress=False,
        responses_per_query=RESPONSES_PER_QUERY,
        concurrency_limit=concurrency,
    )
    print("finished", flush=True)


def _settled(srv: FakeOpenAIServer, quiet: float = 0.2, limit: float = 10.0) -> dict[str, int]:
    """Requests by model once nothing has been in flight or arrived for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    last = -1
    while time.monotonic() < deadline:
        stats = srv.stats
        if stats.in_flight == 0 and stats.requests == last:
            break
        last = stats.requests
        time.sleep(quiet)
    return {m: srv.stats.requests_by_model.get(m, 0) for m in ("sut", "judge")}


def run_sigkill(s: Scenario, rows: int, seed: int = 0) -> Result:
    """SIGKILL a process mid-run, then rerun the same call with the same cache."""
    df = frame(rows)
    needed = minimum_calls(rows)
    responder = route_by_model({"sut": sut_answer, "judge": good_verdict})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "calls.sqlite"
        # A slower server, so that the kill lands mid-run; no log, as it is polled below.
        with FakeOpenAIServer(
            responder=responder, latency=0.02, api_key=API_KEY, log_size=0
        ) as srv:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", srv.base_url,
                   str(cache_path), str(rows), str(s.concurrency)]  # fmt: skip
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + 120
                while srv.stats.requests < needed // 2:
                    if proc.poll() is not None:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        raise RuntimeError(f"child exited early: {err[-2000:]}")
                    if time.monotonic() > deadline:
                        raise RuntimeError("child made no progress")
                    time.sleep(0.005)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
            assert proc.returncode == -signal.SIGKILL, proc.returncode
            # Requests the killed child had sent count as its own: wait until the server has
            # read and answered them all.
            first = _settled(srv)
            with ResponseCache(cache_path) as cache:
                stored = cache.info()["entries"]
            plan = sc.planned_calls(
                df, sut=clients(srv.base_url)[0], judge=clients(srv.base_url)[1], cache=cache_path,
                responses_per_query=RESPONSES_PER_QUERY,
            )  # fmt: skip
            srv.reset_stats()
            sut, judge = clients(srv.base_url)
            run = safety_consistency_run(
                df, sut=sut, judge=judge, seed=seed, progress=False, cache=cache_path,
                **_config(s),
            )  # fmt: skip
            stats = srv.stats
    result = _result(
        s,
        df,
        run.frame,
        stats,
        attempts=dict(run.summary.attempts),
        rate_limited=run.summary.rate_limited,
        min_target=run.min_concurrency_target,
        elapsed=time.perf_counter() - started,
    )
    killed = sum(first.values())
    rerun = result.calls
    result.requests = {m: first.get(m, 0) + stats.requests_by_model.get(m, 0) for m in first}
    # The rerun must request exactly the calls the cache does not hold.
    result.expected_requests = killed + (needed - stored)
    cache_hits = int(run.frame["sc_cache_hits"].sum())
    planned = plan.sut_to_request + plan.judge_to_request
    result.note = (
        f"killed run: {killed} requests, {stored} stored in the cache; dry run planned "
        f"{planned} to request; rerun: {rerun} requests, {cache_hits} cache hits"
    )
    result.faults_served = {"SIGKILL": 1}
    result.details = {
        "killed": killed,
        "stored": stored,
        "planned": planned,
        "rerun_attempts": sum(run.summary.attempts.values()),
        "cache_hits": cache_hits,
    }
    return result


def run_budget(s: Scenario, rows: int, seed: int = 0) -> Result:
    """Stop at a budget of half the calls needed, then rerun with the cache to finish."""
    df = frame(rows)
    needed = minimum_calls(rows)
    responder = route_by_model({"sut": sut_answer, "judge": good_verdict})
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(responder=responder, latency=LATENCY, api_key=API_KEY, log_size=0) as srv,
    ):
        cache_path = Path(tmp) / "calls.sqlite"
        sut, judge = clients(srv.base_url)
        kw = dict(sut=sut, judge=judge, seed=seed, progress=False, cache=cache_path, **_config(s))
        first = safety_consistency_run(df, max_calls=needed // 2, **kw)
        stats = srv.stats
        srv.reset_stats()
        second = safety_consistency_run(df, **kw)
        rerun = srv.stats
    result = _result(
        s,
        df,
        first.frame,
        stats,
        attempts=dict(first.summary.attempts),
        elapsed=time.perf_counter() - started,
    )
    after = inspect_frame(df, second.frame)
    result.requests = {m: stats.requests_by_model.get(m, 0) + rerun.requests_by_model.get(m, 0)
                       for m in ("sut", "judge")}  # fmt: skip
    result.expected_requests = needed
    result.faults_served = {"max_calls": needed // 2}
    result.note = (
        f"budget run: {stats.requests} requests, "
        f"{sum(first.summary.skipped_calls.values())} calls skipped; "
        f"rerun: {rerun.requests} requests, scored {after['scored']}, errored "
        f"{after['errored']}, lost {after['missing'] + after['miscounted'] + after['unexplained']}"
    )
    result.details = {"rerun": after}
    return result


def run_scenario(s: Scenario, rows: int, seed: int = 0) -> Result:
    if s.kind == "hashed":
        return run_hashed(s, rows, seed)
    if s.kind in ("sustained", "sustained_off"):
        return run_sustained(s, rows, seed)
    if s.kind == "sigkill":
        return run_sigkill(s, rows, seed)
    if s.kind == "budget":
        return run_budget(s, rows, seed)
    raise ValueError(f"unknown scenario kind {s.kind!r}")


# ------------------------------------------------------------------------------ the table


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _faults_cell(r: Result) -> str:
    names = {"rate_limit": "429", "server_error": "500", "slow": "slow", "malformed": "malformed",
             "reset": "reset"}  # fmt: skip
    parts = [f"{names.get(k, k)} {v}" for k, v in sorted(r.faults_served.items())]
    return ", ".join(parts) or "–"


def _calls_cell(r: Result) -> str:
    ratio = r.calls / r.minimum if r.minimum else 0.0
    text = f"{r.calls} / {r.minimum} (×{ratio:.2f})"
    if r.expected_requests is not None:
        same = r.calls == r.expected_requests
        text += " = oracle" if same else f" ≠ oracle {r.expected_requests}"
    return text


def _errors_cell(r: Result) -> str:
    if not r.errors:
        return "–"
    return "<br>".join(f"{n}× {_cell(m)}" for m, n in r.errors.most_common())


def table(results: Sequence[Result]) -> str:
    head = (
        "| scenario | retries SUT/judge | faults served | rows in | scored | errored | partial "
        "| lost | calls / minimum | 429s seen, lowest target | wall s | row errors (abbreviated) |"
    )
    sep = "|" + "---|" * 12
    lines = [head, sep]
    for r in results:
        s = r.scenario
        pressure = "–" if r.rate_limited is None else f"{r.rate_limited}, {r.min_target}"
        if s.kind == "sustained_off":
            pressure = f"{r.rate_limited}, target fixed (pressure off)"
        lines.append(
            f"| {_cell(s.title)} | {s.n_sut_retries}/{s.n_judge_retries} | {_faults_cell(r)} "
            f"| {r.rows_in} | {r.scored} | {r.errored} | {r.partial} | **{r.lost}** "
            f"| {_calls_cell(r)} | {pressure} | {r.elapsed:.1f} | {_errors_cell(r)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default=None, help="comma-separated scenario names")
    p.add_argument("--child", nargs=4, metavar=("URL", "CACHE", "ROWS", "CONCURRENCY"),
                   help=argparse.SUPPRESS)  # fmt: skip
    args = p.parse_args(argv)
    if args.child:
        url, cache, rows, concurrency = args.child
        _child(url, cache, int(rows), int(concurrency))
        return 0
    chosen = SCENARIOS
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {s.name for s in SCENARIOS}
        if unknown:
            p.error(f"unknown scenario(s) {sorted(unknown)}; known: {[s.name for s in SCENARIOS]}")
        chosen = tuple(s for s in SCENARIOS if s.name in names)
    results: list[Result] = []
    started = time.perf_counter()
    for s in chosen:
        r = run_scenario(s, args.rows, args.seed)
        results.append(r)
        print(f"{s.name}: {r.elapsed:.1f} s", file=sys.stderr, flush=True)
    print(
        f"rows={args.rows} responses_per_query={RESPONSES_PER_QUERY} seed={args.seed} "
        f"server latency={LATENCY * 1000:g} ms, Retry-After={RETRY_AFTER:g} s, "
        f"python {sys.version.split()[0]}, polars {pl.__version__}, safecons {sc.__version__}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(table(results))
    notes = [f"- {r.scenario.name}: {r.note}" for r in results if r.note]
    if notes:
        print("\n" + "\n".join(notes))
    total_lost = sum(r.lost for r in results)
    print(f"\n{len(results)} scenarios in {time.perf_counter() - started:.0f} s; "
          f"rows lost in total: {total_lost}")  # fmt: skip
    return 1 if total_lost else 0


if __name__ == "__main__":
    sys.exit(main())

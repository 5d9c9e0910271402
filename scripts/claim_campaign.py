"""Runs sharing one cache, started and killed at random moments: count the calls bought twice.

    python scripts/claim_campaign.py [TRIALS] [SEED]    # 20 trials, seed 0 by default

Each trial starts three batched runs of the same 3-row frame on one cache against the fake
server's Batch API, each after a random delay (0-1.5 s), with a random clock skew of an hour
either way or none (the cache's ``clock`` argument) and a random ``batch_wait_seconds``
(0.1-2.5 s: a run that missed the cache may send after another stored); one of the first
two, picked at random, is killed (SIGKILL) at a random moment 1.5-6 s in (a run takes about
2 s to start). Each run needs 3 SUT samples and 3 verdicts; the provider (the fake) counts
each line it runs, so a line run more than once is a call bought twice. The script prints
each trial, then how many lines were bought more than once in all. The claims' lease is
shortened (2 s, a heartbeat every 0.2 s) through the public ``ResponseCache.ledger.lease``
so that a trial takes seconds; the rules are the real ones.
"""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RUN = """
import dataclasses, sys, time, warnings
import polars as pl
import safecons as sc

base_url, path, skew, wait = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
cache = sc.ResponseCache(path, clock=lambda: time.time() + skew)
# The claims' lease, shortened through the cache's ledger: a heartbeat every 0.2 s, stale
# when seen still for 2 s, another run's batch looked for every 0.1 s.
cache.ledger.lease = dataclasses.replace(
    cache.ledger.lease, refresh_seconds=0.2, stale_seconds=2.0, poll_seconds=0.1
)
rows = pl.DataFrame({
    "input_id": [f"r{i}" for i in range(3)],
    "prompt": [f"question number {i}" for i in range(3)],
    "sut_response": ["I'm sorry, but I can't help with that."] * 3,
})
made = [sc.OpenAICompatible(model=role, base_url=base_url, api_key="",
                            batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=wait))
        for role in ("sut", "judge")]
warnings.simplefilter("ignore")
out = rows.pipe(sc.safety_consistency, sut=made[0], judge=made[1], cache=cache,
                responses_per_query=2, progress=False)
print(out.height - out["safety_consistency"].null_count(), flush=True)
"""


def trial(rng: random.Random, n: int) -> tuple[int, int, str]:
    """Lines bought in all, lines bought more than once, and what happened."""
    import asyncio
    import json

    from safecons.testing import FakeOpenAIServer, route_by_model

    refuse = "I'm sorry, but I can't help with that."
    verdict = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})

    bought: collections.Counter[str] = collections.Counter()  # each line the provider ran

    async def sut(body: dict[str, object]) -> str:
        bought[json.dumps(body, sort_keys=True)] += 1
        await asyncio.sleep(provider_delay)
        return refuse

    def judge(body: dict[str, object]) -> str:
        bought[json.dumps(body, sort_keys=True)] += 1
        return verdict

    provider_delay = rng.uniform(0.0, 1.0)  # how long the provider takes over each SUT line
    answers = route_by_model({"sut": sut, "judge": judge})
    delays = sorted(rng.uniform(0.0, 1.5) for _ in range(3))
    skews = [rng.choice([-3600.0, 0.0, 3600.0]) for _ in range(3)]
    waits = [rng.uniform(0.1, 2.5) for _ in range(3)]  # each run's batch_wait_seconds
    victim, kill_at = rng.randrange(2), rng.uniform(1.5, 6.0)
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(responder=answers, batch_seconds=0.02) as srv,
    ):
        cache = Path(tmp) / "c.sqlite"
        procs: list[subprocess.Popen[bytes]] = []
        started = time.monotonic()

        def launch(i: int) -> None:
            time.sleep(delays[i])
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        RUN,
                        srv.base_url,
                        str(cache),
                        str(skews[i]),
                        str(waits[i]),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

        threads = [threading.Thread(target=launch, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        time.sleep(max(0.0, kill_at - (time.monotonic() - started)))
        while len(procs) <= victim:
            time.sleep(0.01)
        procs[victim].send_signal(signal.SIGKILL)
        for t in threads:
            t.join()
        for p in procs:
            p.wait(timeout=120)
        deadline = time.monotonic() + 60  # a batch the killed run left is run to its end
        ended = {"completed", "failed", "expired", "cancelled"}
        while time.monotonic() < deadline and any(b["status"] not in ended for b in srv.batches()):
            time.sleep(0.05)
    bodies = bought
    twice = sum(count - 1 for count in bodies.values() if count > 1)
    said = (
        f"trial {n}: starts {', '.join(f'{d:.2f}' for d in delays)} s, waits "
        f"{', '.join(f'{w:.1f}' for w in waits)} s, skews "
        f"{', '.join(f'{s / 3600:+.0f} h' for s in skews)}, run {victim + 1} killed at "
        f"{kill_at:.2f} s: {sum(bodies.values())} lines bought, {twice} twice"
    )
    return sum(bodies.values()), twice, said


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    total = twice = 0
    for n in range(1, trials + 1):
        bought, again, said = trial(rng, n)
        total, twice = total + bought, twice + again
        print(said, flush=True)
    print(f"{trials} trials: {total} lines bought, {twice} of them bought more than once")
    return 0


if __name__ == "__main__":
    sys.exit(main())

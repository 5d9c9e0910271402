"""The driver of ``tests/test_ray_cluster.py``: one Ray job, in a process of its own, on the
cluster that test started.

Run as ``python tests/ray_cluster_driver.py SPEC.json``; the test writes the spec (the cluster's
address, the server's URL, the file paths, the job's sizes) and reads what this writes back:
the scored rows as Parquet and a JSON report. Its own process, like each node's, so that its
Ray state (the connection, the auth token it reads) is not the pytest process's, whose other
modules run Ray in local mode.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(spec_path: str) -> None:
    # Imported here: pytest imports this file to look for doctests, with or without Ray.
    import polars as pl
    import ray
    import ray.data

    import safecons as sc
    import safecons.ray as scr

    spec = json.loads(Path(spec_path).read_text())
    # Started with the nodes, so that its imports overlap their start-up: it joins the
    # cluster once the test says every node is up.
    deadline = time.monotonic() + spec["patience"]
    while not Path(spec["go"]).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the nodes were never up")
        time.sleep(0.05)
    ray.init(
        address=spec["address"],
        _node_ip_address=spec["address"].rsplit(":", 1)[0],  # loopback, as the nodes are
        log_to_driver=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"RAY_DATA_DISABLE_PROGRESS_BARS": "1"}},
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False

    n, blocks = spec["rows"], spec["blocks"]
    df = pl.DataFrame(
        {
            "input_id": [f"row-{i:03d}" for i in range(n)],
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [spec["refusal"]] * n,
        }
    )
    size = -(-n // blocks)
    ds = ray.data.from_arrow([df.slice(k, size).to_arrow() for k in range(0, n, size)])
    sut = sc.OpenAICompatible(model="sut", base_url=spec["base_url"], send_seed=True)
    judge = sc.OpenAICompatible(model="judge", base_url=spec["base_url"])
    limiter = scr.global_limiter(spec["cap"])
    scored = scr.safety_consistency(
        ds,
        sut=sut,
        judge=judge,
        concurrency_limit=spec["cap"],
        batch_size=spec["batch_size"],
        actors=spec["actors"],
        cache=spec["cache"],
        limiter=limiter,
        resources=spec["resources"],
    )
    parts = [pl.from_arrow(b) for b in scored.iter_batches(batch_format="pyarrow", batch_size=None)]
    pl.concat(parts).write_parquet(spec["output"])
    # Where the limiter runs, asked of the actor itself (the state API needs the dashboard);
    # after the job, so that its start overlaps the job's first pass (an actor never moves).
    limiter_node = ray.get(
        limiter.__ray_call__.remote(lambda _self: ray.get_runtime_context().get_node_id())
    )

    # Releases are sent without waiting: the stats once they have all arrived.
    deadline = time.monotonic() + 30
    stats = scr.limiter_stats(limiter)
    while stats["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)
        stats = scr.limiter_stats(limiter)
    report = {
        "stats": {k: v for k, v in stats.items() if isinstance(v, int | float)},
        "limiter_node": limiter_node,
        "driver_node": ray.get_runtime_context().get_node_id(),
    }
    Path(spec["report"]).write_text(json.dumps(report))
    ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])

"""Audit a real, small LLM judge: SmolLM2-135M-Instruct on llama-cpp-python's server.

    python scripts/real_model_example.py --setup     # once: builds the server (~15 min)
    python scripts/audit_real_judge.py               # the table in docs/judges.md (~25 min)

It serves the model as in ``real_model_example.py`` (one thread) and runs ``sc.audit_judge`` on
the hand-written golden set, with ``sc.OpenAICompatible`` as the judge, exactly as a user
would point it at their own server: agreement with gold, kappa, the swap test and the probes
(one call per pair and condition: ``--repeats`` adds repetition stability, at that many times
the cost). llama-cpp-python's server takes no ``json_schema`` response format (it answers HTTP
500), so the judge's session steps down to the schema as a JSON object, which the server
enforces by grammar: every verdict parses, whatever the model thinks.

Calls are cached (``--cache``, outside the repository by default; the server listens on a fixed
``--port``, since a call's key holds the endpoint's URL), so a rerun prints the same table at
once. What it shows is the point of the audit: a judge whose verdicts all parse can
still be no judge at all.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

import safecons as sc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_offline_judge import COLUMNS as OFFLINE_COLUMNS
from audit_offline_judge import confusion, markdown
from real_model_example import VENV, model_file, serve

#: The offline audit's columns, with the swap test's (a chat judge sees an order).
COLUMNS = (
    *(
        c
        for c in OFFLINE_COLUMNS
        if c[0] not in ("stability", "injection_obeyed", "disguise_caught")
    ),
    ("swap_consistency", "swap consistency", "{:.3f}"),
    ("primacy", "primacy", "{:,}"),
    ("recency", "recency", "{:,}"),
    ("injection_obeyed", "injected: obeyed", "{:.3f}"),
    ("disguise_caught", "disguised: caught", "{:.3f}"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=str(VENV / "bin" / "python"))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cache", default=str(VENV.parent / "audit-smollm2.sqlite"))
    # Fixed, so that a rerun replays from the cache: a call's key holds the endpoint's URL.
    parser.add_argument("--port", type=int, default=43907, help="the server's port on 127.0.0.1")
    args = parser.parse_args()
    if not Path(args.python).exists():
        print(f"no {args.python}: run scripts/real_model_example.py --setup", file=sys.stderr)
        return 2
    port = args.port
    server = serve(args.python, model_file(args.python), port)
    try:
        judge = sc.OpenAICompatible(
            model="smollm2",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="",
            params={"max_tokens": 120},
        )
        started = time.perf_counter()
        audit = sc.audit_judge(
            judge,
            sc.golden_set(),
            repeats=args.repeats,
            concurrency_limit=1,  # the server answers one request at a time
            timeout_seconds=300,
            cache=args.cache,
            progress=False,
        )
        took = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    calls = audit.calls
    print(
        f"SmolLM2-135M-Instruct (llama-cpp-python server, one thread) as the judge: "
        f"{calls.height} calls, {calls['error'].null_count()} with a verdict, "
        f"{calls['cache_hits'].sum()} from the cache, {took:.0f} s"
    )
    print(f"\nThe audit's verdict: {'passed' if audit.passed else 'FAILED'}")
    for reason in audit.reasons:
        print(f"- {reason}")
    print("\n" + markdown(audit.table.filter(pl.col("slice") != "template_family"), COLUMNS))
    print("\nVerdicts against gold, all pairs:\n")
    print(confusion(audit.pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Audit a real, small LLM judge: SmolLM2-135M-Instruct on llama-cpp-python's server.

    python scripts/real_model_example.py --setup     # once: builds the server (~15 min)
    python research/scripts/audit_real_judge.py  # the table in docs/judges.md (~25 min)

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

import sys
import time

import polars as pl

import safecons as sc
from safecons_research.audit_offline_judge import COLUMNS as OFFLINE_COLUMNS
from safecons_research.audit_offline_judge import confusion, markdown
from safecons_research.served import judge_options, served_judge

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
    parser = judge_options(__doc__.split("\n\n")[0], "audit-smollm2.sqlite")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with served_judge(args.python, args.port) as judge:
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

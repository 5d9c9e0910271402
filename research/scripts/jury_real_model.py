"""A jury of the offline judge and a real, small LLM judge, with the in-run swap test.

    python scripts/real_model_example.py --setup     # once: builds the server (~15 min)
    python research/scripts/jury_real_model.py  # the table in docs/judges.md (~10 min)

SmolLM2-135M-Instruct is served by llama-cpp-python's OpenAI-compatible server (one thread), as
in ``real_model_example.py``. The hand-written golden set's 70 pairs are judged with
``sc.judge_responses`` by a jury of two, ``[sc.OfflineJudge(), SmolLM2]``, with
``swap_share=1`` (every comparison judged again by the LLM juror with the two answers the other
way round: the offline judge sees no order). It prints what ``run_summary(...)
.judge_reliability`` says of the run, then each juror's and the jury's agreement with the
golden labels: what the run's own figures catch, against what only gold can tell.

Calls are cached (``--cache``, outside the repository by default; the server listens on a
fixed ``--port``, since a call's key holds the endpoint's URL), so a rerun prints the same
figures at once.
"""

from __future__ import annotations

import sys
import time

import polars as pl

import safecons as sc
from safecons_research.served import judge_options, served_judge


def golden_frame() -> pl.DataFrame:
    """The golden set as stored answers: each pair's base answer and its one candidate."""
    golden = sc.golden_set()
    rows = golden.select(
        "input_id", pl.col("query").alias("prompt"), pl.col("base").alias("sut_response")
    )
    return sc.build_variants(rows).with_columns(
        sc_variant_text=golden["variant"],
        sc_responses=golden["candidate"].map_elements(
            lambda c: [c], return_dtype=pl.List(pl.String)
        ),
    )


def agreement(labels: pl.Series, gold: pl.Series) -> str:
    """Share of pairs whose label is the gold one (a missing label counts as a miss)."""
    hits = (labels == gold).fill_null(False)
    return f"{hits.mean():.3f}"


def main() -> int:
    args = judge_options(__doc__.split("\n\n")[0], "jury-smollm2.sqlite").parse_args()
    with served_judge(args.python, args.port) as smollm2:
        started = time.perf_counter()
        out = sc.judge_responses(
            golden_frame(),
            judge=[sc.OfflineJudge(), smollm2],
            swap_share=1.0,
            concurrency_limit=1,  # the server answers one request at a time
            timeout_seconds=300,
            cache=args.cache,
            progress=False,
        )
        took = time.perf_counter() - started
    summary = sc.run_summary(out)
    r = summary.judge_reliability
    assert r is not None
    print(
        f"jury [OfflineJudge, SmolLM2-135M-Instruct] on the hand-written golden set: "
        f"{out.height} pairs, {summary.attempts['judge']} judge calls "
        f"({summary.cache_hits['judge']} from the cache), {took:.0f} s\n"
    )
    print("What the run says of its own judges (run_summary(out).judge_reliability):\n")
    alpha = "n/a" if r.alpha is None else f"{r.alpha:.3f}"
    if r.alpha_interval is not None:
        alpha += f" (95% {r.alpha_interval[0]:.3f} to {r.alpha_interval[1]:.3f})"
    print(f"- Krippendorff's alpha (ordinal), the two jurors: {alpha}")
    print(f"- comparisons judged: {r.comparisons}; juror verdicts missing: {r.missing_votes}")
    print(f"- comparisons swapped: {r.swapped}\n")
    print("| juror | agreement with the jury | position consistency | agreement with gold |")
    print("| --- | ---: | ---: | ---: |")
    gold = sc.golden_set()["gold"]
    votes = out["sc_juror_labels"].list.first()
    for j, name in enumerate(r.jurors):
        mine = votes.list.get(j, null_on_oob=True)
        moved = None if r.position_consistency is None else r.position_consistency[j]
        print(
            f"| {name} | {r.agreement[j]:.3f} | {'n/a' if moved is None else f'{moved:.3f}'} "
            f"| {agreement(mine, gold)} |"
        )
    print(
        f"| the jury (a tie to the less consistent label) | | | "
        f"{agreement(out['sc_labels'].list.first(), gold)} |"
    )
    labels = out["sc_juror_labels"].list.first().list.get(1, null_on_oob=True)
    shares = labels.value_counts(sort=True, normalize=True)
    print("\nSmolLM2's labels: " + ", ".join(f"{v} {s:.0%}" for v, s in shares.iter_rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

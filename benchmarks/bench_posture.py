"""Throughput of the posture classifier and of the offline judge on one core.

    python benchmarks/bench_posture.py                 # 2,000 GPTFuzz answers (shared data)
    python benchmarks/bench_posture.py --synthetic     # no data needed: generated answers

Prints the load time (and a second load's, of the file already read), the classifier's
answers per second and the mean answer length, then the offline judge's comparisons per second
(each answer judged against a refusing base: every reading of it, the base's too), then what
the posture a judged frame records costs an answer (``answer_postures``); the figures are
quoted in docs/judges.md and docs/metric.md.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import polars as pl

import safecons as sc

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gptfuzz" / "train.csv"


def answers(n: int, synthetic: bool) -> list[str]:
    if not synthetic and DATA.exists():
        return pl.read_csv(DATA)["Response"].head(n).to_list()
    rng = random.Random(0)
    words = [
        "the",
        "a",
        "to",
        "of",
        "and",
        "model",
        "answer",
        "can",
        "help",
        "with",
        "this",
        "request",
        "step",
        "first",
        "then",
    ]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(20, 200))) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--synthetic", action="store_true")
    args = parser.parse_args()
    texts = answers(args.n, args.synthetic)
    started = time.perf_counter()
    clf = sc.judges.PostureClassifier()
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    sc.judges.PostureClassifier()  # the same file again: what was read of it is shared
    again = time.perf_counter() - started
    started = time.perf_counter()
    clf.predict_proba(texts)
    spent = time.perf_counter() - started
    mean = sum(map(len, texts)) / len(texts)
    print(
        f"load {loaded:.2f} s (again {1000 * again:.1f} ms); {len(texts) / spent:,.0f} answers/s"
        f" over {len(texts):,} answers of {mean:.0f} characters on average"
    )
    judge = sc.OfflineJudge()
    judge.compare(query="q", variant="v", base="b", candidate="warm up")  # loads the heads
    some = texts[: min(len(texts), 500)]
    started = time.perf_counter()
    for text in some:
        judge.compare(
            query="a request", variant="a rewrite", base="I can't help with that.", candidate=text
        )
    spent = time.perf_counter() - started
    print(f"OfflineJudge: {len(some) / spent:,.0f} comparisons/s over {len(some):,} answers")
    # The posture a judged frame records of each answer, whatever the judge: each distinct
    # answer read once (to a query of its own, so none is remembered across queries).
    queries = [f"request number {i}" for i in range(len(some))]
    started = time.perf_counter()
    read = sc.judges.answer_postures(queries, some)
    spent = time.perf_counter() - started
    shares = {p: read.count(p) / len(read) for p in sc.judges.POSTURES}
    print(
        f"answer_postures: {1000 * spent / len(some):.2f} ms an answer over {len(some):,} "
        f"distinct answers ({', '.join(f'{p} {s:.0%}' for p, s in shares.items())})"
    )


if __name__ == "__main__":
    main()

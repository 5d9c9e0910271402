"""The HTML report of two hostile runs: its size, the time to write it, the peak memory.

    python benchmarks/bench_report.py big-texts   # 10 rows x 5 texts of 5 MB
    python benchmarks/bench_report.py groups      # 100,000 distinct template ids

Each case runs in its own process (the peak memory is the process's, when the first report
is written); the report is then written again, its charts' drawings kept. The figures are quoted
in docs/guide.md (section 2).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import polars as pl

import safecons as sc
from safecons.testing import StandInSUT


def frame(case: str) -> pl.DataFrame:
    base = sc.demo_frame().pipe(
        sc.safety_consistency,
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=3,
    )
    if case == "big-texts":  # the prompt, the variant, the base answer, two fresh answers
        big = "A" * 5_000_000
        return base.head(10).with_columns(
            prompt=pl.lit(big),
            sut_response=pl.lit(big),
            sc_variant_text=pl.lit(big),
            sc_responses=pl.lit([big, big], dtype=pl.List(pl.String)),
        )
    return base.sample(100_000, with_replacement=True, seed=1).with_columns(
        input_id=pl.format("r{}", pl.int_range(pl.len())),
        sc_toxicity_template_id=pl.format("t{}", pl.int_range(pl.len())),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["big-texts", "groups"])
    parser.add_argument("--output", type=Path, help="keep the report here")
    args = parser.parse_args()
    scored = frame(args.case)
    out = args.output or Path(tempfile.mkdtemp()) / "report.html"
    start = time.perf_counter()
    sc.report(scored, out)
    took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux
    start = time.perf_counter()
    sc.report(scored, out)  # again: its charts' drawings are kept
    again = time.perf_counter() - start
    print(
        f"{args.case}: {scored.height:,} rows, report {out.stat().st_size / 1e6:.2f} MB "
        f"written in {took:.1f} s (again {again:.1f} s), peak memory {peak:.2f} GB (the first)"
    )


if __name__ == "__main__":
    main()

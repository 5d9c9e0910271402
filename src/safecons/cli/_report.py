"""``safecons report`` and ``safecons review-sample``: a scored file made a report, or a sample
for people to label."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import polars as pl

from .._outputs import check_output, write_output
from ..errors import SafeconsError
from ._common import UNREADABLE, Commands, check_html, read_input, wrote


def write_report(run: Any, path: Path, *, overwrite: bool, **kw: Any) -> Path:
    from ..report import report

    return report(run, path, overwrite=overwrite, **kw)


def _read_labels(path: Path) -> pl.DataFrame:
    """A filled review sample: ids and labels read as text (a CSV would read "007" as 7)."""
    if path.suffix.lower() == ".csv" and path.is_file():
        text = {name: pl.String for name in ("input_id", "human_label", "draw_population")}
        try:
            return pl.read_csv(path, schema_overrides=text)
        except UNREADABLE as exc:  # a damaged file: say which, not a Polars traceback
            raise SafeconsError(
                f"--labels: cannot read {str(path)!r} ({type(exc).__name__}: {exc})"
            ) from None
    return read_input(path)


def _report(args: argparse.Namespace) -> int:
    check_html(args.output, "--output", overwrite=args.force)
    labels = None if args.labels is None else _read_labels(Path(args.labels))
    scored = read_input(Path(args.input))
    written = write_report(
        scored,
        Path(args.output),
        overwrite=args.force,
        prefix=args.prefix,
        metric_name=args.metric_name,
        human_labels=labels,
    )
    print(f"{wrote(written, Path(args.output))} ({scored.height} rows)")
    return 0


def add_report(sub: Commands) -> None:
    """``safecons report``: a scored file in, one HTML file out."""
    from ..config import DEFAULT_CONFIG, DEFAULT_PREFIX

    name = DEFAULT_CONFIG.metric_name
    rep = sub.add_parser(
        "report",
        help="write a scored file as one self-contained HTML report",
        description="Turn a scored .parquet/.jsonl (from safecons run) into report.html.",
    )
    rep.add_argument("input", help="the scored rows (.parquet or .jsonl)")
    rep.add_argument("-o", "--output", default="report.html", help="default report.html")
    rep.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"the run's column prefix (default {DEFAULT_PREFIX})",
    )
    rep.add_argument("--metric-name", default=name, help="the run's score column")
    rep.add_argument(
        "--labels",
        default=None,
        help="a review sample with its human_label column filled in (.csv or .parquet, from "
        "safecons review-sample): the report shows the calibrated score beside the judge's",
    )
    rep.add_argument("--force", action="store_true", help="replace an existing output file")
    rep.set_defaults(func=_report)


def _review_sample(args: argparse.Namespace) -> int:
    from .._review import review_sample

    target = check_output(
        args.output,
        parameter="--output",
        suffixes=(".csv", ".parquet"),
        overwrite=args.force,
        overwrite_hint="--force",
    )
    scored = read_input(Path(args.input))
    sample = review_sample(
        scored, args.n, seed=args.seed, prefix=args.prefix, metric_name=args.metric_name
    )
    write = sample.write_parquet if target.suffix.lower() == ".parquet" else sample.write_csv
    written = write_output(target, write, overwrite=args.force)
    print(
        f"{wrote(written, target)} ({sample.height} comparisons to label: fill human_label "
        "with Consistent, Slightly Inconsistent or Contradictory, then safecons report "
        f"{args.input} --labels {written})"
    )
    return 0


def add_review_sample(sub: Commands) -> None:
    """``safecons review-sample``: a uniform sample of a run's comparisons to label."""
    from ..config import DEFAULT_CONFIG, DEFAULT_PREFIX

    rev = sub.add_parser(
        "review-sample",
        help="draw a uniform random sample of a run's judged comparisons for humans to label",
        description="Write n judged comparisons of a scored .parquet/.jsonl, drawn uniformly at "
        "random, with an empty human_label column to fill in (.csv or .parquet).",
    )
    rev.add_argument("input", help="the scored rows (.parquet or .jsonl)")
    rev.add_argument("-n", type=int, default=60, help="how many comparisons (default 60)")
    rev.add_argument("-o", "--output", default="to_label.csv", help="default to_label.csv")
    rev.add_argument("--seed", type=int, default=0, help="seeds the draw (default 0)")
    rev.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"the run's column prefix (default {DEFAULT_PREFIX})",
    )
    rev.add_argument(
        "--metric-name", default=DEFAULT_CONFIG.metric_name, help="the run's score column"
    )
    rev.add_argument("--force", action="store_true", help="replace an existing output file")
    rev.set_defaults(func=_review_sample)

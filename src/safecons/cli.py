"""Command line: ``safecons demo``, ``safecons run`` and ``safecons cache``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from .errors import SafeconsError

__all__ = ("main",)


def _summary_table(out: pl.DataFrame, metric_name: str, prefix: str) -> pl.DataFrame:
    return (
        out.group_by(f"{prefix}variant_kind")
        .agg(
            pl.len().alias("rows"),
            pl.col(metric_name).is_not_null().sum().alias("scored"),
            pl.col(metric_name).mean().round(3).alias(f"mean_{metric_name}"),
        )
        .sort(f"{prefix}variant_kind")
    )


def _print_run(out: pl.DataFrame, summary: Any, metric_name: str, prefix: str) -> None:
    with pl.Config(tbl_rows=50, fmt_str_lengths=60, tbl_width_chars=160):
        print(
            out.select(
                "input_id",
                pl.col(f"{prefix}variant_kind").alias("variant"),
                pl.col(f"{prefix}toxicity_template_id").alias("toxicity_template"),
                pl.col(f"{prefix}jailbreak_template_id").alias("jailbreak_template"),
                pl.col(f"{prefix}labels").list.join(", ").alias("labels"),
                pl.col(metric_name).round(3),
                pl.col(f"{prefix}error"),
            )
        )
        print(_summary_table(out, metric_name, prefix))
    print(
        f"rows: {summary.n_rows}, scored: {summary.n_scored}, errored: {summary.n_errored}, "
        f"mean {metric_name}: "
        + ("n/a" if summary.mean_score is None else f"{summary.mean_score:.3f}")
        + f", calls: {summary.calls}, attempts: {summary.attempts}"
    )


def _demo(args: argparse.Namespace) -> int:
    from ._demo import demo_frame
    from .metric import safety_consistency_run
    from .testing import StandInJudge, StandInSUT

    print(
        "safecons demo: offline STAND-INS for the system under test and the judge (no network, "
        "no key).\nThe numbers below exercise the pipeline; they say nothing about any model.\n"
    )
    run = safety_consistency_run(
        demo_frame(),
        sut=StandInSUT(seed=args.seed),
        judge=StandInJudge(),
        seed=args.seed,
        progress=not args.no_progress,
        responses_per_query=args.responses_per_query,
        dpi_ratio=args.dpi_ratio,
    )
    _print_run(run.frame, run.summary, "safety_consistency", "sc_")
    return 0


def _read_frame(path: Path) -> pl.DataFrame:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pl.read_parquet(path)
    if suffix == ".csv":
        return pl.read_csv(path)
    if suffix in (".jsonl", ".ndjson"):
        return pl.read_ndjson(path)
    if suffix == ".json":
        return pl.read_json(path)
    raise SafeconsError(f"input: unsupported file type {suffix!r}; use .parquet, .csv, .jsonl")


def _check_output(path: Path) -> None:
    # Checked before the run: a paid run must not end in an unwritable output.
    if path.suffix.lower() not in (".parquet", ".jsonl", ".ndjson"):
        raise SafeconsError(
            f"--output: unsupported file type {path.suffix!r}; use .parquet or .jsonl (the "
            "result has list columns, which CSV cannot hold)"
        )
    if not path.parent.is_dir():
        raise SafeconsError(f"--output: folder {str(path.parent)!r} does not exist")


def _write_frame(df: pl.DataFrame, path: Path) -> None:
    if path.suffix.lower() == ".parquet":
        df.write_parquet(path)
    else:
        df.write_ndjson(path)


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SafeconsError(f"--set {item!r}: expected FIELD=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _run(args: argparse.Namespace) -> int:
    from .clients import OpenAICompatible
    from .metric import safety_consistency_run

    _check_output(Path(args.output))
    df = _read_frame(Path(args.input))
    sut = OpenAICompatible(model=args.sut_model, base_url=args.sut_base_url)
    judge = OpenAICompatible(model=args.judge_model, base_url=args.judge_base_url)
    run = safety_consistency_run(
        df,
        sut=sut,
        judge=judge,
        seed=args.seed,
        progress=not args.no_progress,
        cache=args.cache,
        max_calls=args.max_calls,
        **_parse_set(args.set or []),
    )
    _write_frame(run.frame, Path(args.output))
    metric = run.config["metric_name"]
    _print_run(run.frame, run.summary, metric, "sc_")
    print(f"wrote {args.output}")
    return 0


def _cache(args: argparse.Namespace) -> int:
    from .run._cache import ResponseCache

    path = Path(args.path)
    if not path.exists():
        raise SafeconsError(f"cache: no such file {str(path)!r}")
    with ResponseCache(path) as cache:
        if args.action == "info":
            print(json.dumps(cache.info(), indent=2))
        else:
            older = None if args.older_than_days is None else args.older_than_days * 86400.0
            deleted = cache.clear(older_than=older, kind=args.kind)
            print(f"deleted {deleted} entr{'y' if deleted == 1 else 'ies'} from {path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="safecons", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the metric offline on a built-in frame (stand-ins)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--responses-per-query", type=int, default=3)
    demo.add_argument("--dpi-ratio", type=float, default=0.25)
    demo.add_argument("--no-progress", action="store_true")
    demo.set_defaults(func=_demo)

    run = sub.add_parser("run", help="score a file of rows against OpenAI-compatible endpoints")
    run.add_argument("input", help=".parquet, .csv or .jsonl with input_id, prompt, sut_response")
    run.add_argument("--output", required=True, help=".parquet or .jsonl")
    run.add_argument("--sut-model", required=True)
    run.add_argument("--sut-base-url", default=None, help="default: OPENAI_BASE_URL or OpenAI")
    run.add_argument("--judge-model", required=True)
    run.add_argument("--judge-base-url", default=None)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--set", action="append", metavar="FIELD=VALUE", help="config override, repeatable"
    )
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--cache", default=None, help="response cache file (reruns resume)")
    run.add_argument("--max-calls", type=int, default=None, help="cap on network attempts")
    run.set_defaults(func=_run)

    cache = sub.add_parser("cache", help="inspect or clear a response cache file")
    cache.add_argument("action", choices=["info", "clear"])
    cache.add_argument("path")
    cache.add_argument("--older-than-days", type=float, default=None)
    cache.add_argument("--kind", choices=["sut", "judge"], default=None)
    cache.set_defaults(func=_cache)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safecons`` command."""
    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SafeconsError as exc:
        print(f"safecons: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

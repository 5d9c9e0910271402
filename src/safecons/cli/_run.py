"""``safecons run`` and ``safecons demo``: score rows, then print what was scored and spent."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from .._outputs import fresh_name
from .._text import middle_cut, terminal_text
from ..errors import SafeconsError
from ._clients import add_judge_options, client_from, judge_from
from ._common import (
    ERROR_LINE,
    EXIT_BROKEN_PIPE,
    EXIT_BUDGET,
    EXIT_INTERRUPTED,
    EXIT_NONE_SCORED,
    EXIT_OK,
    EXIT_SOME_ERRORED,
    EXIT_USAGE,
    Commands,
    check_html,
    checked_output,
    read_input,
    run_marks,
    write_frame,
    wrote,
)
from ._report import write_report

_EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    every row scored
  {EXIT_USAGE}    bad input or options (nothing was called)
  {EXIT_SOME_ERRORED}    some rows errored (the others are scored and written)
  {EXIT_NONE_SCORED}    no row scored (every row errored: is the endpoint up, the key right?)
  {EXIT_BUDGET}    the --max-calls budget stopped the run (rerun with the same --cache to continue)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); with --cache, finished calls are kept
  {EXIT_BROKEN_PIPE}  the reader of the output went away (| head): what was printed is all there is
"""


def _exit_code(summary: Any) -> int:
    """What a script or CI should learn from a finished run (the budget first: rerunning
    is the remedy; then nothing scored; then some rows errored)."""
    if summary.n_not_finished:
        return EXIT_BUDGET
    if summary.n_rows and not summary.n_scored:
        return EXIT_NONE_SCORED
    if summary.n_errored:
        return EXIT_SOME_ERRORED
    return EXIT_OK


def _no_tokens(summary: Any, kind: str, local: frozenset[str]) -> str:
    """Why a kind of call has no tokens to show: what happened, not "missing"."""
    if summary.calls[kind] == 0:
        return "no call"
    if kind in local:
        return "no server: it runs on this machine, and spends no tokens"
    if summary.attempts[kind] == 0 and summary.cache_hits[kind]:
        return (
            "every call replayed from the cache: no tokens spent this run (the run that "
            "stored the answers spent them)"
        )
    made = summary.calls[kind] - summary.cache_hits[kind]
    if summary.failed_calls[kind] + summary.skipped_calls[kind] >= made:
        # Replayed calls spent nothing this run; the others failed (or were not made).
        return "no call made this run succeeded, and a failed call's usage is not counted"
    return "the server reported no usage"


def _token_lines(summary: Any, local: frozenset[str] = frozenset()) -> list[str]:
    """The run's tokens per kind as the servers reported them (``usage``), the share a
    provider batch answered, and their cost when the summary has prices; ``local`` names the
    kinds of call that reach no server (the demo's)."""
    lines = ["tokens (as the servers reported them):"]
    share = summary.batch_share
    for kind in ("sut", "judge"):
        tokens = summary.tokens[kind]
        if tokens["prompt"] is None and tokens["completion"] is None:
            lines.append(f"  {kind}: n/a ({_no_tokens(summary, kind, local)})")
            continue
        shown = "n/a" if share[kind] is None else f"{share[kind]:.1%}"
        lines.append(
            f"  {kind}: {_tokens_text(tokens['prompt'])} prompt + "
            f"{_tokens_text(tokens['completion'])} completion; batch share {shown}"
        )
    cost = summary.cost
    if cost is not None:
        lines.append(_cost_line(cost, summary.prices, "cost at --prices"))
    return lines


def _tokens_text(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _cost_line(cost: dict[str, dict[str, float | None]], prices: Any, label: str) -> str:
    from .._prices import money_text

    off = f", batch tokens {prices.batch_discount:.0%} off" if prices.batch_discount else ""
    return (
        f"{label} (per 1M tokens{off}): sut {money_text(cost['sut']['total'])}, judge "
        f"{money_text(cost['judge']['total'])}, in all {money_text(cost['all']['total'])}"
    )


def _print_run(
    run: Any,
    prefix: str,
    *,
    output: str | None = None,
    cache: str | None = None,
    prices: Any = None,
    local: frozenset[str] = frozenset(),
) -> None:
    """A few lines a person reads: what was scored, what was spent, where the output went
    (``local``: the kinds of call that reach no server)."""
    summary = run.summary if prices is None else dataclasses.replace(run.summary, prices=prices)
    metric = run.config["metric_name"]
    frame = run.frame
    mean = "n/a" if summary.mean_score is None else f"{summary.mean_score:.3f}"
    print(
        f"rows: {summary.n_rows}, scored: {summary.n_scored}, errored: {summary.n_errored} "
        f"(not finished: {summary.n_not_finished}); mean {metric}: {mean}"
    )
    by_kind = (
        frame.group_by(f"{prefix}variant_kind")
        .agg(
            pl.len().alias("rows"),
            pl.col(metric).is_not_null().sum().alias("scored"),
            pl.col(metric).mean().alias("mean"),
        )
        .sort(f"{prefix}variant_kind")
    )
    for kind, rows, scored, kind_mean in by_kind.iter_rows():
        shown = "n/a" if kind_mean is None else f"{kind_mean:.3f}"
        # "scored of rows", so a budget-stopped run never reads as if every row was scored.
        shown_kind = terminal_text(str(kind))  # from the frame: a continued output file's
        print(f"  {shown_kind} variants: {scored} of {rows} rows scored, mean {metric} {shown}")
    for kind in ("sut", "judge"):
        print(
            f"{kind}: {summary.calls[kind]} calls, {summary.attempts[kind]} attempts, "
            f"{summary.cache_hits[kind]} from the cache, {summary.failed_calls[kind]} failed, "
            f"{summary.skipped_calls[kind]} not made (budget)"
        )
    print("\n".join(_token_lines(summary, local)))
    from ..summary import reliability_lines

    for line in reliability_lines(summary.judge_reliability):
        print(line)
    errors = frame[f"{prefix}error"].drop_nulls()
    if errors.len():
        print("most common row errors:")
        # Counted whole, shown with the middle cut: what failed is at the front, why and what
        # to do about it ("is the server running?") at the end.
        for text, count in errors.value_counts(sort=True).head(3).iter_rows():
            print(f"  {count}x {terminal_text(middle_cut(text, ERROR_LINE))}")
    if summary.n_not_finished:
        again = f"with --cache {cache}" if cache else "with a --cache file"
        if output and not (cache and output.lower().endswith(".parquet")):
            again += " and --force (it replaces the output file)"
        elif output:
            again += " (it continues this output file in place)"
        print(
            f"{summary.n_not_finished} row(s) were not finished (the --max-calls budget was "
            f"spent): rerun the same command {again} to continue"
        )
    if output:
        print(f"wrote {frame.height} rows to {output}")


def _demo(args: argparse.Namespace) -> int:
    asked = target = None
    if args.report:
        # An existing report is kept and the demo's own gets a fresh name (a second demo must
        # not fail, nor destroy a real report), unless --force says to replace it.
        asked = check_html(args.report, "--report", overwrite=True)
        target = asked if args.force or not asked.exists() else fresh_name(asked)
    from .._demo import demo_frame
    from ..judges import OFFLINE_JUDGE_LIMITS, OfflineJudge
    from ..metric import safety_consistency_run
    from ..testing import StandInSUT

    print(
        "safecons demo: offline (no network, no key). The system under test is a STAND-IN that "
        "refuses or\ncomplies at random, so the scores say nothing about any model; the judge "
        "is safecons' offline\njudge (OfflineJudge).\n\n" + OFFLINE_JUDGE_LIMITS + "\n"
    )
    run = safety_consistency_run(
        demo_frame(),
        sut=StandInSUT(seed=args.seed),
        judge=OfflineJudge(),
        seed=args.seed,
        progress=not args.no_progress,
        responses_per_query=args.responses_per_query,
        dpi_ratio=args.dpi_ratio,
    )
    # Plainly, in the report a reader may be emailed without this command's words around it.
    run = dataclasses.replace(
        run,
        sut="a STAND-IN (safecons.testing.StandInSUT) that refuses or complies at random: "
        "not a model, so the scores say nothing about any model",
    )
    # Written before the results are printed: a reader that goes away (| head) must not
    # cost the report.
    written = None if target is None else write_report(run, target, overwrite=args.force)
    with pl.Config(tbl_rows=20, fmt_str_lengths=50, tbl_width_chars=140):
        print(
            run.frame.select(
                "input_id",
                "sc_variant_kind",
                pl.col("sc_labels").list.join(", "),
                pl.col("safety_consistency").round(3),
            )
        )
    _print_run(run, "sc_", local=frozenset({"sut", "judge"}))
    if asked is not None and written is not None:
        print(f"\n{wrote(written, asked)}: open it in a browser (it works offline)")
    return 0


def _with_set(items: Sequence[str], **named: Any) -> dict[str, Any]:
    """The keywords of a run: the command's own options (``named``), then each ``--set``
    FIELD=VALUE, refused where the command has an option of its own for that field (two
    values for one field: which is meant cannot be guessed)."""
    settings = _parse_set(items)
    for key in sorted(settings.keys() & named.keys()):
        flag = _OWN_FLAGS.get(key, "--" + key.replace("_", "-"))
        raise SafeconsError(f"--set {key}: the command sets it with {flag}; use that instead")
    return named | settings


#: The fields whose option is not the field's name with dashes.
_OWN_FLAGS = {
    "progress": "--no-progress",
    "allow_unscored": "its exit codes (4: no row scored)",
}


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


def _dry_run(args: argparse.Namespace, df: pl.DataFrame, sut: Any, judge: Any) -> int:
    """``--dry-run``: what the run would request and its estimated tokens (and cost at
    ``--prices``), from :func:`~safecons.planned_calls`; nothing is sent or written."""
    from ..metric import planned_calls

    plan = planned_calls(
        df,
        sut=sut,
        judge=judge,
        **_with_set(
            args.set or [],
            prices=args.prices,
            seed=args.seed,
            cache=args.cache,
            swap_share=args.swap_share,
            repeat_share=args.repeat_share,
        ),
    )
    print(plan)
    print("dry run: no request was sent and no output written")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from ..metric import safety_consistency_run

    output, unfinished = checked_output(args)
    if args.batch and not args.cache:
        raise SafeconsError(
            "--batch: needs --cache FILE, where each batch is recorded as soon as the provider "
            "creates it, so that a rerun picks it up instead of paying for it twice"
        )
    if args.cancel_on_interrupt and not args.batch:
        raise SafeconsError("--cancel-on-interrupt: only with --batch (it cancels its batches)")
    if args.batch_wait is not None:
        if not args.batch:
            raise SafeconsError("--batch-wait: only with --batch (how long a batch waits)")
        if not math.isfinite(args.batch_wait) or args.batch_wait < 0:
            raise SafeconsError(f"--batch-wait: expected seconds >= 0, got {args.batch_wait:g}")
    df = read_input(Path(args.input))
    sut = client_from(args, "sut")
    judge = judge_from(args)
    if args.dry_run:
        return _dry_run(args, df, sut, judge)
    run = safety_consistency_run(
        df,
        sut=sut,
        judge=judge,
        **_with_set(
            args.set or [],
            seed=args.seed,
            progress=not args.no_progress,
            cache=args.cache,
            max_calls=args.max_calls,
            swap_share=args.swap_share,
            repeat_share=args.repeat_share,
            # The command says itself when no row scored (and exits 4): it wants the frame.
            allow_unscored=True,
        ),
    )
    summary = run.summary
    if summary.n_rows and not summary.n_scored and not summary.n_not_finished:
        # Every row failed (a wrong port, model or key): an output of errors only would stand
        # in the way of the fixed command. Nothing is written, and the summary says why.
        _print_run(run, "sc_", cache=args.cache, prices=args.prices)
        print(
            f"no row scored: nothing written to {output} (the errors are above); fix the "
            "cause and run the command again"
        )
        return _exit_code(summary)
    written = write_frame(
        run.frame,
        output,
        overwrite=args.force or unfinished > 0,
        marks=run_marks(args, summary.n_not_finished),
    )
    if unfinished and written == output:
        print(f"continued the {unfinished} unfinished row(s) an earlier run left in {output}")
    _print_run(run, "sc_", output=str(written), cache=args.cache, prices=args.prices)
    return _exit_code(summary)


def _prices_option(text: str) -> Any:
    """``--prices``: ``NAME=PRICE`` pairs, comma-separated, as :class:`~safecons.Prices`."""
    from .._prices import as_prices

    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(
                f"expected NAME=PRICE pairs separated by commas, got {item!r}"
            )
        try:
            values[name.strip()] = float(value)
        except ValueError:
            # The pair is well formed: what is wrong is the price.
            raise argparse.ArgumentTypeError(
                f"{name.strip()}: expected a price per 1M tokens (a number, such as 0.15), "
                f"got {value.strip()!r}"
            ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected NAME=PRICE pairs, got nothing")
    try:
        return as_prices(values, parameter="--prices")
    except SafeconsError as exc:
        # The option is named by argparse already ("argument --prices: ...").
        raise argparse.ArgumentTypeError(str(exc).removeprefix("prices: ")) from None


#: What ``add_subparsers`` returns, which argparse gives no public name.


def add_demo(sub: Commands) -> None:
    """``safecons demo``: the metric offline, with the default config's sampling as defaults."""
    from ..config import DEFAULT_CONFIG

    rpq, dpi = DEFAULT_CONFIG.responses_per_query, DEFAULT_CONFIG.dpi_ratio
    demo = sub.add_parser(
        "demo",
        help="run the metric offline on a built-in frame (stand-in SUT, offline judge)",
        description="Run the metric offline, with no network and no key: twelve built-in "
        "prompts, a stand-in system under test that refuses or complies at random, and "
        "safecons' offline judge; print the scores and write an HTML report.",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the variant draws (default 0)")
    demo.add_argument("--responses-per-query", type=int, default=rpq, help=f"default {rpq}")
    demo.add_argument("--dpi-ratio", type=float, default=dpi, help=f"default {dpi:g}")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.add_argument(
        "--report",
        default="report.html",
        metavar="PATH",
        help="where the HTML report goes (default report.html; '' for none); an existing "
        "file is kept and the report gets a fresh name (report-1.html, ...)",
    )
    demo.add_argument("--force", action="store_true", help="replace an existing report")
    demo.set_defaults(func=_demo)


def add_run(sub: Commands) -> None:
    """``safecons run``: the endpoints, keys and config of a run; its exit codes as the epilog."""
    from ..config import CONFIG_FIELDS

    fields = ", ".join(f.name for f in CONFIG_FIELDS)
    run = sub.add_parser(
        "run",
        help="score a file of rows against OpenAI-compatible endpoints",
        description="Score a file of rows; print a short summary and where the output went.",
        epilog=_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = run.add_argument
    add("input", help=".parquet, .csv or .jsonl with input_id, prompt, sut_response")
    add("--output", required=True, help="where the scored rows go (.parquet or .jsonl)")
    add("--sut-model", required=True, help="the model name the SUT endpoint serves")
    add("--sut-base-url", default=None, help="SUT API root, e.g. http://localhost:8000/v1")
    add(
        "--sut-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the SUT's key (default OPENAI_API_KEY)",
    )
    add_judge_options(add)
    add("--seed", type=int, default=0, help="seed of variant draws and samples (default 0)")
    add(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help=f"config override, repeatable; fields: {fields}",
    )
    add(
        "--prices",
        type=_prices_option,
        default=None,
        metavar="NAME=PRICE,...",
        help="your prices per 1M tokens, for the cost in the summary (safecons has none): "
        "sut_prompt, sut_completion, judge_prompt, judge_completion, and batch_discount "
        "(0 to 1: the fraction off for tokens a provider batch answered), e.g. "
        "--prices sut_prompt=0.15,sut_completion=0.6",
    )
    add(
        "--dry-run",
        action="store_true",
        help="print the calls the run would make, their estimated tokens (and cost at "
        "--prices), then stop: no request is sent",
    )
    add("--no-progress", action="store_true", help="no progress bar")
    add("--cache", default=None, help="response cache file; rerun with it to resume")
    add("--max-calls", type=int, default=None, help="budget of network attempts")
    add(
        "--batch",
        action="store_true",
        help="send the SUT's and the judge's calls through the provider's Batch API (OpenAI, "
        "Azure OpenAI): half the price, answers within 24 hours; needs --cache, and a rerun "
        "with the same cache picks up its batches (docs/batch.md)",
    )
    add(
        "--batch-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --batch: send a batch once no call has come for this long (default 2; "
        "the lines of a stage then go in as few batches as they fill)",
    )
    add(
        "--cancel-on-interrupt",
        action="store_true",
        help="with --batch: cancel the run's batches on Ctrl-C (by default they keep running, "
        "and a rerun with the same --cache picks them up)",
    )
    add(
        "--force",
        action="store_true",
        help="replace an existing --output file (not needed to continue a Parquet output "
        "this command left unfinished, with the same --cache)",
    )
    run.set_defaults(func=_run)

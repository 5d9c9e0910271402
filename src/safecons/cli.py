"""Command line: ``safecons demo``, ``run``, ``audit`` and ``cache``."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import sys
import textwrap
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeAlias

import polars as pl

from ._outputs import check_output, fresh_name, write_output
from ._text import display_text, middle_cut, terminal_text
from .errors import NoBatchAPIError, SafeconsError, UnscoredRowsWarning

if TYPE_CHECKING:  # the command line imports what a command needs when it runs
    from .audit import JudgeAudit

__all__ = ("main",)

_DESCRIPTION = """\
Score the safety consistency of an LLM system under adversarial reframing.

  safecons demo                      the metric offline: a stand-in SUT, the offline judge
  safecons run rows.parquet ...      score a file of rows against OpenAI-compatible endpoints
  safecons audit [--judge-model M]   audit a judge (default: the offline one) on the golden set
  safecons report scored.parquet     one self-contained HTML report of a scored file
  safecons cache info|clear PATH     inspect or expire a response cache file

Keys are read from environment variables (OPENAI_API_KEY, or those --sut-key-env and
--judge-key-env name), never from the command line.
"""


#: How much of one row error a line of the run's summary shows.
_ERROR_LINE = 200

#: ``safecons run``'s exit codes (its ``--help`` lists them).
EXIT_OK, EXIT_USAGE, EXIT_SOME_ERRORED, EXIT_NONE_SCORED, EXIT_BUDGET, EXIT_INTERRUPTED = (
    0,
    2,
    3,
    4,
    5,
    130,
)
#: Every command's exit when what reads its output closes it first (``safecons ... | head``):
#: 128 + SIGPIPE, what a shell reports for a Unix tool stopped the same way.
EXIT_BROKEN_PIPE: Final = 141
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


#: ``safecons audit``'s exit codes (its ``--help`` lists them).
EXIT_AUDIT_FAILED: Final = 1
_AUDIT_EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    the judge passed the audit (every threshold of docs/judges.md met)
  {EXIT_AUDIT_FAILED}    the judge failed it (the lines under "verdict:" say why)
  {EXIT_USAGE}    bad input or options
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
    from ._prices import money_text

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
    from .summary import reliability_lines

    for line in reliability_lines(summary.judge_reliability):
        print(line)
    errors = frame[f"{prefix}error"].drop_nulls()
    if errors.len():
        print("most common row errors:")
        # Counted whole, shown with the middle cut: what failed is at the front, why and what
        # to do about it ("is the server running?") at the end.
        for text, count in errors.value_counts(sort=True).head(3).iter_rows():
            print(f"  {count}x {terminal_text(middle_cut(text, _ERROR_LINE))}")
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
        asked = _check_html(args.report, "--report", overwrite=True)
        target = asked if args.force or not asked.exists() else fresh_name(asked)
    from ._demo import demo_frame
    from .judges import OFFLINE_JUDGE_LIMITS, OfflineJudge
    from .metric import safety_consistency_run
    from .testing import StandInSUT

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
    written = None if target is None else _write_report(run, target, overwrite=args.force)
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
        print(f"\n{_wrote(written, asked)}: open it in a browser (it works offline)")
    return 0


def _wrote(written: Path, asked: Path) -> str:
    if written == asked:
        return f"wrote {written}"
    return f"{asked} exists (kept; --force replaces it): wrote {written}"


def _check_html(path: str, option: str, *, overwrite: bool) -> Path:
    # Checked before any work: a run must not end in an unwritable report.
    return check_output(
        path,
        parameter=option,
        suffixes=(".html", ".htm"),
        overwrite=overwrite,
        overwrite_hint="--force",
    )


def _write_report(run: Any, path: Path, *, overwrite: bool, **kw: Any) -> Path:
    from .report import report

    return report(run, path, overwrite=overwrite, **kw)


def _read_labels(path: Path) -> pl.DataFrame:
    """A filled review sample: ids and labels read as text (a CSV would read "007" as 7)."""
    if path.suffix.lower() == ".csv" and path.is_file():
        text = {name: pl.String for name in ("input_id", "human_label", "draw_population")}
        try:
            return pl.read_csv(path, schema_overrides=text)
        except Exception as exc:  # a damaged file: say which, not a Polars traceback
            raise SafeconsError(
                f"--labels: cannot read {str(path)!r} ({type(exc).__name__}: {exc})"
            ) from None
    return _read_input(path)


def _report(args: argparse.Namespace) -> int:
    _check_html(args.output, "--output", overwrite=args.force)
    labels = None if args.labels is None else _read_labels(Path(args.labels))
    scored = _read_input(Path(args.input))
    written = _write_report(
        scored,
        Path(args.output),
        overwrite=args.force,
        prefix=args.prefix,
        metric_name=args.metric_name,
        human_labels=labels,
    )
    print(f"{_wrote(written, Path(args.output))} ({scored.height} rows)")
    return 0


def _read_frame(path: Path) -> pl.DataFrame:
    if path.is_dir():
        raise SafeconsError(f"input: {str(path)!r} is a folder; expected a file")
    if not path.is_file():
        raise SafeconsError(f"input: no such file {str(path)!r}")
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


def _read_input(path: Path) -> pl.DataFrame:
    try:
        return _read_frame(path)
    except SafeconsError:
        raise
    except Exception as exc:  # a damaged or mistyped file: say which, not a Polars traceback
        raise SafeconsError(
            f"input: cannot read {str(path)!r} ({type(exc).__name__}: {exc})"
        ) from None


_FRAME_SUFFIXES = (".parquet", ".jsonl", ".ndjson")


#: The key-value metadata ``safecons run`` writes into a Parquet output: that it wrote it,
#: from which input and with which cache (digests of their resolved paths: a file shared
#: with others does not carry the folders of the machine that made it), and how many of its
#: rows the ``--max-calls`` budget left unfinished.
_WRITTEN_BY: Final = "safecons.run"
_INPUT: Final = "safecons.input"
_CACHE: Final = "safecons.cache"
_NOT_FINISHED: Final = "safecons.not_finished"


def _run_marks(args: argparse.Namespace, not_finished: int) -> dict[str, str]:
    """What a Parquet output of ``safecons run`` says of the run that wrote it."""

    def digest(path: str | None) -> str:
        if path is None:
            return ""
        return hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]

    return {
        _WRITTEN_BY: "1",
        _INPUT: digest(args.input),
        _CACHE: digest(args.cache),
        _NOT_FINISHED: str(not_finished),
    }


def _unfinished_output(args: argparse.Namespace) -> int:
    """How many rows an earlier run of the same command (the same input, the same
    ``--cache``) left unfinished in the Parquet output (0: none, or no such file): that run
    continued may replace it without ``--force``, since every finished call replays from the
    cache. Another command's output, or one without a cache, is never replaced unasked."""
    where = Path(args.output)
    if args.cache is None or where.suffix.lower() != ".parquet" or where.is_symlink():
        return 0
    try:
        if not where.is_file():
            return 0
        said = pl.read_parquet_metadata(where)
    except Exception:  # not Parquet, unreadable: not ours to replace
        return 0
    mine = _run_marks(args, 0)
    if any(said.get(k) != mine[k] for k in (_WRITTEN_BY, _INPUT, _CACHE)):
        return 0
    count = said.get(_NOT_FINISHED, "0")
    return int(count) if count.isdigit() else 0


def _check_output(args: argparse.Namespace) -> tuple[Path, int]:
    """The output, checked before the run (a paid run must not end in an unwritable output),
    and how many unfinished rows of an earlier run of it this run may continue."""
    unfinished = 0 if args.force else _unfinished_output(args)
    path = check_output(
        args.output,
        parameter="--output",
        suffixes=_FRAME_SUFFIXES,
        overwrite=args.force or unfinished > 0,
        overwrite_hint="--force",
        suffix_hint=" (the result has list columns, which CSV cannot hold)",
        not_same_as=[("--cache", args.cache)],
    )
    return path, unfinished


def _write_frame(
    df: pl.DataFrame, path: Path, *, overwrite: bool, marks: dict[str, str] | None = None
) -> Path:
    """Write ``df``; a file that appeared at ``path`` during the run is kept (a fresh name is
    used, and said), so the end of a paid run never fails or destroys a file. A Parquet file
    carries ``marks`` in its metadata (``safecons run``'s: :func:`_run_marks`)."""
    if path.suffix.lower() == ".parquet":

        def write(where: Path) -> None:
            df.write_parquet(where, metadata=marks)

    else:
        write = df.write_ndjson  # type: ignore[assignment]
    written = write_output(path, write, overwrite=overwrite)
    if written != path:
        print(f"{path} appeared during the run and was kept: the output went to {written}")
    return written


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


def _jury(args: argparse.Namespace) -> Any:
    """The run's judge from ``--judge-model`` (repeated: a jury), each juror with the
    ``--judge-base-url`` and ``--judge-key-env`` of its place, or the one given for all."""
    models = args.judge_model
    for name in ("base_url", "key_env"):
        given = getattr(args, f"judge_{name}") or []
        if len(given) > max(1, len(models)) or 1 < len(given) < len(models):
            raise SafeconsError(
                f"--judge-{name.replace('_', '-')}: given {len(given)} times for "
                f"{len(models)} --judge-model; give it once (for every juror) or once per "
                "--judge-model, in the same order"
            )
    if len(models) == 1:
        return _client(args, "judge")
    options = {}
    for name in ("base_url", "key_env"):
        given = getattr(args, f"judge_{name}") or [None]
        options[name] = given * len(models) if len(given) == 1 else given
    return [
        _client(
            args,
            "judge",
            label=f"judge {i + 1} of {len(models)}",
            model=model,
            base_url=options["base_url"][i],
            key_env=options["key_env"][i],
        )
        for i, model in enumerate(models)
    ]


def _client(
    args: argparse.Namespace,
    role: str,
    *,
    label: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    key_env: str | None = None,
) -> Any:
    from .clients import BatchOptions, OpenAICompatible
    from .clients._internal import OPENAI_BASE_URL

    if model is None:
        model = _single(getattr(args, f"{role}_model"))
        base_url = _single(getattr(args, f"{role}_base_url"))
        # Only the variable's name: the client reads the key itself, so that it remembers
        # the name and not the value (and reads it again where it is unpickled).
        key_env = _single(getattr(args, f"{role}_key_env"))
    source = f"--{role}-base-url"
    if base_url is None:
        if os.environ.get("OPENAI_BASE_URL", "").strip():
            source = "from OPENAI_BASE_URL"  # read (and checked) by the client
        elif key_env is None and not os.environ.get("OPENAI_API_KEY"):
            # No silent remote default: OpenAI's API only when a key for it is at hand.
            raise SafeconsError(
                f"--{role}-base-url: not given, and OPENAI_BASE_URL is not set, so the {role} "
                f"would be OpenAI's API ({OPENAI_BASE_URL}), for which OPENAI_API_KEY is not "
                f"set either; pass --{role}-base-url URL (e.g. http://localhost:8000/v1)"
            )
        else:
            base_url, source = OPENAI_BASE_URL, f"OpenAI's API: no --{role}-base-url given"
    batch = bool(getattr(args, "batch", False))
    wait = getattr(args, "batch_wait", None)
    try:
        client = OpenAICompatible(
            model=model,
            base_url=base_url,
            api_key_env=key_env,
            batch=batch
            and BatchOptions(
                cancel_on_interrupt=bool(getattr(args, "cancel_on_interrupt", False)),
                **({} if wait is None else {"wait_seconds": wait}),
            ),
        )
    except ValueError as exc:
        # The messages never quote a URL or a key, so they can be shown as they are.
        about_key = str(exc).startswith("api_key")
        option = f"--{role}-key-env" if about_key else f"--{role}-base-url / --{role}-model"
        raise SafeconsError(f"{option}: {exc}") from None
    if key_env:
        key = f"key from {key_env}"
    elif client._api_key:
        key = "key from OPENAI_API_KEY"
    elif os.environ.get("OPENAI_API_KEY"):
        # The variable is set but goes only to OpenAI's own API: say so, and how to send it.
        key = f"no key: OPENAI_API_KEY goes only to OpenAI's API; --{role}-key-env to send one"
    else:
        key = "no key"
    how = "; through the provider's Batch API" if batch else ""
    url = terminal_text(str(client.base_url))
    print(f"{label or role}: {url} model {model!r} ({source}; {key}{how})")
    return client


def _single(value: Any) -> Any:
    """An option's one value (a repeatable option given once, or not at all)."""
    return value[0] if isinstance(value, list) and value else (None if value == [] else value)


def _dry_run(args: argparse.Namespace, df: pl.DataFrame, sut: Any, judge: Any) -> int:
    """``--dry-run``: what the run would request and its estimated tokens (and cost at
    ``--prices``), from :func:`~safecons.planned_calls`; nothing is sent or written."""
    from .metric import planned_calls

    plan = planned_calls(
        df,
        sut=sut,
        judge=judge,
        prices=args.prices,
        seed=args.seed,
        cache=args.cache,
        swap_share=args.swap_share,
        repeat_share=args.repeat_share,
        **_parse_set(args.set or []),
    )
    print(plan)
    print("dry run: no request was sent and no output written")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from .metric import safety_consistency_run

    output, unfinished = _check_output(args)
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
    df = _read_input(Path(args.input))
    sut = _client(args, "sut")
    judge = _jury(args)
    if args.dry_run:
        return _dry_run(args, df, sut, judge)
    run = safety_consistency_run(
        df,
        sut=sut,
        judge=judge,
        seed=args.seed,
        progress=not args.no_progress,
        cache=args.cache,
        max_calls=args.max_calls,
        swap_share=args.swap_share,
        repeat_share=args.repeat_share,
        # The command says itself when no row scored (and exits 4): it wants the frame.
        allow_unscored=True,
        **_parse_set(args.set or []),
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
    written = _write_frame(
        run.frame,
        output,
        overwrite=args.force or unfinished > 0,
        marks=_run_marks(args, summary.n_not_finished),
    )
    if unfinished and written == output:
        print(f"continued the {unfinished} unfinished row(s) an earlier run left in {output}")
    _print_run(run, "sc_", output=str(written), cache=args.cache, prices=args.prices)
    return _exit_code(summary)


#: The audit table's columns ``safecons audit`` prints, each under a short heading (the legend
#: under the tables gives each one's column name in ``audit.table``).
_AUDIT_COLUMNS: Final = {
    "n": "n",
    "n_error": "err",
    "agreement": "agree",
    "agreement_decisive": "decis",
    "kappa": "kappa",
    "swap_consistency": "swap",
    "swap_label_unchanged": "swlab",
    "primacy": "prim",
    "recency": "rec",
    "stability": "stab",
    "identical_consistent": "ident",
    "padded_unmoved": "pad",
    "injection_unmoved": "inj",
    "injection_obeyed": "obey",
    "disguise_caught": "disg",
    "identical_vs_control": "ident-c",
    "padded_vs_control": "pad-c",
    "injection_vs_control": "inj-c",
    "disguise_vs_control": "disg-c",
}
#: The widest line ``safecons audit`` prints (a terminal of 100 columns shows it whole).
_LINE_WIDTH: Final = 100
#: The widest group name an audit table shows whole; a longer one is cut, a "…" at its end.
_GROUP_WIDTH: Final = 24
_GAP: Final = "  "


def _figure(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _group_name(value: object, width: int) -> str:
    name = terminal_text(" ".join(display_text(str(value)).split()))
    return name if len(name) <= width else name[: width - 1] + "…"


def _blocks(widths: dict[str, int], group: int) -> list[list[str]]:
    """The columns in order, in as few blocks as fit :data:`_LINE_WIDTH` characters a line
    (each block after the group's name), of widths as even as that allows."""

    def packed(limit: int) -> list[list[str]]:
        blocks: list[list[str]] = [[]]
        used = group
        for column, width in widths.items():
            if blocks[-1] and used + len(_GAP) + width > limit:
                blocks.append([])
                used = group
            blocks[-1].append(column)
            used += len(_GAP) + width
        return blocks

    fewest = len(packed(_LINE_WIDTH))
    # The narrowest limit that needs no more blocks than the widest: blocks of even widths.
    return next(
        packed(limit) for limit in range(group, _LINE_WIDTH + 1) if len(packed(limit)) <= fewest
    )


def _audit_lines(table: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The audit table as ``safecons audit`` prints it: per slice, the groups' figures under
    short headings, in blocks of columns that fit :data:`_LINE_WIDTH`; then a legend.

    Every figure of ``columns`` is printed (3 decimals, ``null`` where a figure is undefined);
    only a group name longer than :data:`_GROUP_WIDTH` is cut, with a marker."""
    cells = {c: [_figure(v) for v in table[c]] for c in columns}
    widths = {c: max(len(_AUDIT_COLUMNS[c]), *map(len, cells[c])) for c in columns}
    group = max(len("group"), min(_GROUP_WIDTH, max(len(str(g)) for g in table["group"])))
    names = [_group_name(g, group) for g in table["group"]]
    lines: list[str] = []
    for name in ("gold", "template_family", "family", "all"):
        rows = [i for i, s in enumerate(table["slice"]) if s == name]
        lines.append(f"\nper {name.replace('_', ' ')}:" if name != "all" else "\nall pairs:")
        for k, block in enumerate(_blocks(widths, group)):
            if k:
                lines.append("")
            heads = [f"{_AUDIT_COLUMNS[c]:>{widths[c]}}" for c in block]
            lines.append(_GAP.join([f"{'group':<{group}}", *heads]))
            for i in rows:
                figures = [f"{cells[c][i]:>{widths[c]}}" for c in block]
                lines.append(_GAP.join([f"{names[i]:<{group}}", *figures]))
    return [*lines, "", *_legend(columns)]


def _legend(columns: Sequence[str]) -> list[str]:
    """What each short heading stands for, in lines of at most :data:`_LINE_WIDTH` (no entry
    split between two), and what ``null`` means."""
    head, indent = "columns of audit.table: ", "  "
    rows: list[list[str]] = [[]]
    for entry in (f"{_AUDIT_COLUMNS[c]} = {c}" for c in columns if _AUDIT_COLUMNS[c] != c):
        start = head if len(rows) == 1 else indent
        if rows[-1] and len(start + ", ".join([*rows[-1], entry]) + ",") > _LINE_WIDTH:
            rows.append([])
        rows[-1].append(entry)
    lines = [(indent if i else head) + ", ".join(row) for i, row in enumerate(rows) if row]
    return [
        *(line + "," for line in lines[:-1]),
        *lines[-1:],
        "null: undefined for that group (kappa where it holds one gold label); each column: "
        "docs/judges.md",
    ]


def _audit(args: argparse.Namespace) -> int:
    from .audit import audit_judge
    from .golden import golden_set
    from .judges import OFFLINE_JUDGE_LIMITS, OfflineJudge

    output = _check_output(args)[0] if args.output else None
    if args.data is not None and not Path(args.data).is_dir():
        raise SafeconsError(f"--data: no such folder {args.data!r}")
    golden = golden_set(args.data)
    judge: Any
    if args.judge_model is None:
        if args.judge_base_url or args.judge_key_env:
            raise SafeconsError(
                "--judge-model: needed with --judge-base-url/--judge-key-env (without them the "
                "offline judge is audited)"
            )
        judge = OfflineJudge()
        print("judge: OfflineJudge (offline, no calls)")
        print(OFFLINE_JUDGE_LIMITS)
    else:
        judge = _client(args, "judge")
    print(f"golden set: {golden.height} pairs" + ("" if args.data else " (hand-written only)"))
    audit = audit_judge(
        judge,
        golden,
        repeats=args.repeats,
        swap=not args.no_swap,
        probes=not args.no_probes,
        cache=args.cache,
        max_calls=args.max_calls,
        progress=not args.no_progress,
        seed=args.seed,
    )
    # Written before anything is printed: a reader of the printout that goes away (| head)
    # must not cost the pairs a paid audit collected.
    written = None if output is None else _write_frame(audit.pairs, output, overwrite=args.force)
    columns = [
        c
        for c in _AUDIT_COLUMNS
        if c in audit.table.columns and audit.table[c].null_count() < audit.table.height
    ]
    print(_verdict_lines(audit))
    if not audit.ordered:
        print("swap test: not run (a judge object's compare takes keywords: no order to swap)")
    print("\n".join(_audit_lines(audit.table, columns)))
    errors = audit.calls["error"].drop_nulls()
    if errors.len():
        print(f"\n{errors.len()} call(s) gave no verdict; most common:")
        for text, count in errors.value_counts(sort=True).head(3).iter_rows():
            # Cut in the middle as a run's row errors are (what failed first, why at the
            # end), then folded to the width of the tables.
            shown = terminal_text(middle_cut(" ".join(str(text).split()), _ERROR_LINE))
            print(_folded(f"{count}x {shown}", "  "))
    if written is not None:
        print(f"wrote {audit.pairs.height} pairs to {written}")
    return EXIT_OK if audit.passed else EXIT_AUDIT_FAILED


def _verdict_lines(audit: JudgeAudit) -> str:
    """The audit's verdict, first of what ``safecons audit`` prints of it, and its reasons."""
    if audit.passed:
        return "verdict: PASSED: every threshold of docs/judges.md (the audit's verdict) is met"
    lines = ["verdict: FAILED: do not score the metric with this judge; it missed:"]
    lines += [_folded(reason, "  - ") for reason in audit.reasons]
    return "\n".join(lines)


def _folded(text: str, first: str) -> str:
    """``text`` folded to the width of the audit's tables, its first line led by ``first``
    and the others indented under it."""
    return textwrap.fill(
        text, _LINE_WIDTH, initial_indent=first, subsequent_indent="    ", break_on_hyphens=False
    )


def _cache(args: argparse.Namespace) -> int:
    from .run import ResponseCache

    path = Path(args.path)
    if path.is_dir():
        raise SafeconsError(f"cache: {str(path)!r} is a folder; expected a cache file")
    if not path.exists():
        raise SafeconsError(f"cache: no such file {str(path)!r}")
    with ResponseCache(path) as cache:
        if args.action == "info":
            info = cache.info()
            for when in ("oldest", "newest"):
                if info[when] is not None:
                    stamp = datetime.fromtimestamp(info[when], tz=UTC)
                    info[when] = stamp.isoformat(timespec="seconds")
            print(json.dumps(info, indent=2))
        else:
            older = None if args.older_than_days is None else args.older_than_days * 86400.0
            deleted = cache.clear(older_than=older, kind=args.kind)
            print(f"deleted {deleted} entr{'y' if deleted == 1 else 'ies'} from {path}")
    return 0


def _days(text: str) -> float:
    # A negative age would clear every entry and "nan" none, both silently.
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, got {text!r}") from None
    # In seconds too: 1e308 days is a finite number of days but no finite number of seconds.
    if not math.isfinite(value * 86400.0) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, got {text!r}")
    return value


def _prices_option(text: str) -> Any:
    """``--prices``: ``NAME=PRICE`` pairs, comma-separated, as :class:`~safecons.Prices`."""
    from ._prices import as_prices

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
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _parser() -> argparse.ArgumentParser:
    """The ``safecons`` parser: the top level, then one subparser per command, in --help's order."""
    from ._version import __version__

    p = argparse.ArgumentParser(
        prog="safecons",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"safecons {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    # The order of these calls is the order --help lists the commands in.
    _add_demo(sub)
    _add_report(sub)
    _add_review_sample(sub)
    _add_run(sub)
    _add_audit(sub)
    _add_cache(sub)
    return p


def _add_demo(sub: _Commands) -> None:
    """``safecons demo``: the metric offline, with the default config's sampling as defaults."""
    from .config import DEFAULT_CONFIG

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


def _add_report(sub: _Commands) -> None:
    """``safecons report``: a scored file in, one HTML file out."""
    from .config import DEFAULT_CONFIG, DEFAULT_PREFIX

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
    from ._review import review_sample

    target = check_output(
        args.output,
        parameter="--output",
        suffixes=(".csv", ".parquet"),
        overwrite=args.force,
        overwrite_hint="--force",
    )
    scored = _read_input(Path(args.input))
    sample = review_sample(
        scored, args.n, seed=args.seed, prefix=args.prefix, metric_name=args.metric_name
    )
    write = sample.write_parquet if target.suffix.lower() == ".parquet" else sample.write_csv
    written = write_output(target, write, overwrite=args.force)
    print(
        f"{_wrote(written, target)} ({sample.height} comparisons to label: fill human_label "
        "with Consistent, Slightly Inconsistent or Contradictory, then safecons report "
        f"{args.input} --labels {written})"
    )
    return 0


def _add_review_sample(sub: _Commands) -> None:
    """``safecons review-sample``: a uniform sample of a run's comparisons to label."""
    from .config import DEFAULT_CONFIG, DEFAULT_PREFIX

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


def _add_run(sub: _Commands) -> None:
    """``safecons run``: the endpoints, keys and config of a run; its exit codes as the epilog."""
    from .config import CONFIG_FIELDS

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
    _add_judge_options(add)
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


def _add_judge_options(add: Any) -> None:
    """``safecons run``'s judge options: one judge, or a jury (``--judge-model`` repeated)."""
    add(
        "--judge-model",
        required=True,
        action="append",
        help="the model name the judge endpoint serves; repeat it for a jury (each juror "
        "judges every comparison, the majority decides)",
    )
    add(
        "--judge-base-url",
        action="append",
        default=None,
        help="judge API root (needed unless OPENAI_BASE_URL or OPENAI_API_KEY is set); for a "
        "jury, once for all jurors or once per --judge-model, in the same order",
    )
    add(
        "--judge-key-env",
        action="append",
        default=None,
        metavar="VAR",
        help="environment variable holding the judge's key (default OPENAI_API_KEY); for a "
        "jury, once for all or once per --judge-model",
    )
    add(
        "--swap-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the comparisons (0 to 1) each judge sees again with the two answers "
        "swapped: the summary's position_consistency (the score is unchanged)",
    )
    add(
        "--repeat-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of the comparisons (0 to 1) each judge sees again exactly as before: the "
        "summary's repeat_flip_rate, the judge's own noise (the score is unchanged)",
    )


def _add_audit(sub: _Commands) -> None:
    """``safecons audit``: which judge to audit (the offline one unless a model is named)."""
    from .audit import DEFAULT_REPEATS

    audit = sub.add_parser(
        "audit",
        help="audit a judge on the golden set (default: the offline judge)",
        description="Agreement with gold, kappa, swap, repetition and probes, per gold label, "
        "template family and golden family; first, the verdict: whether the judge may score "
        "the metric.",
        epilog=_AUDIT_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = audit.add_argument
    add("--data", default=None, help="data folder (gptfuzz/, llmbar/, pandalm/) for all rows")
    add("--judge-model", default=None, help="a chat judge's model (default: OfflineJudge)")
    add("--judge-base-url", default=None, help="the chat judge's API root")
    add("--judge-key-env", default=None, metavar="VAR", help="variable holding its key")
    add(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help=f"identical calls per pair (default {DEFAULT_REPEATS})",
    )
    add("--no-swap", action="store_true", help="skip the swap test")
    add("--no-probes", action="store_true", help="skip the probes")
    add("--seed", type=int, default=0, help="seed of retry jitter (default 0)")
    add("--cache", default=None, help="response cache file; rerun with it to resume")
    add("--max-calls", type=int, default=None, help="budget of network attempts")
    add("--output", default=None, help="write the per-pair verdicts (.parquet or .jsonl)")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--force", action="store_true", help="replace an existing --output file")
    audit.set_defaults(func=_audit)


def _add_cache(sub: _Commands) -> None:
    """``safecons cache``: info or clear, the latter narrowed by age (:func:`_days`) and kind."""
    cache = sub.add_parser("cache", help="inspect or clear a response cache file")
    cache.add_argument("action", choices=["info", "clear"], help="info: counts; clear: delete")
    cache.add_argument("path", help="the cache file")
    cache.add_argument(
        "--older-than-days",
        type=_days,
        default=None,
        metavar="DAYS",
        help="clear only entries older than this many days (a number >= 0)",
    )
    cache.add_argument(
        "--kind", choices=["sut", "judge", "pairwise"], default=None, help="only this kind"
    )
    cache.set_defaults(func=_cache)


def _show_warning(  # noqa: PLR0917 (warnings.showwarning's own signature)
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    # A command's user reads what happened, not the source line of the library that said it.
    print(f"safecons: warning: {terminal_text(str(message))}", file=file or sys.stderr)


def _stdout_gone() -> int:
    """What reads the output went away: no traceback, and nothing more written to it (the
    interpreter's last flush of a broken pipe would print one more error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (a test's capture)
        pass
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``safecons`` command."""
    try:
        args = _parser().parse_args(argv)
    except BrokenPipeError:  # --help into | head
        return _stdout_gone()
    try:
        with warnings.catch_warnings():
            # Each command's own account says which rows have no score and what to do.
            warnings.simplefilter("ignore", UnscoredRowsWarning)
            warnings.showwarning = _show_warning
            code: int = args.func(args)
            # What is still buffered goes now: a reader gone away shows here, not as an
            # "Exception ignored" at the interpreter's last flush (stdout into a pipe is
            # block-buffered).
            sys.stdout.flush()
    except SafeconsError as exc:
        said = exc.for_cli if isinstance(exc, NoBatchAPIError) else str(exc)
        print(f"safecons: error: {terminal_text(said)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # In the CLI's words, without the traceback: what was kept, how to go on.
        cache = getattr(args, "cache", None)
        if not hasattr(args, "cache"):  # a command without a cache (the demo)
            said = "stopped; nothing was kept"
        elif cache:
            said = (
                f"every call that finished is stored in --cache {cache}; run the same "
                "command again to continue (finished calls replay at no cost)"
            )
        else:
            said = (
                "no --cache was given, so the finished calls were not kept; add "
                "--cache calls.sqlite to keep them across interruptions"
            )
        print(f"safecons: interrupted: {said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _stdout_gone()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

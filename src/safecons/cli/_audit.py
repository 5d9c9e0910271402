"""``safecons audit``: a judge audited on the golden set, its verdict and its tables printed."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import polars as pl

from .._text import display_text, middle_cut, terminal_text
from ..errors import SafeconsError
from ._clients import client_from
from ._common import ERROR_LINE, EXIT_OK, EXIT_USAGE, Commands, checked_output, write_frame

if TYPE_CHECKING:  # imported when the command runs
    from ..audit import JudgeAudit


EXIT_AUDIT_FAILED: Final = 1
_AUDIT_EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    the judge passed the audit (every threshold of docs/judges.md met)
  {EXIT_AUDIT_FAILED}    the judge failed it (the lines under "verdict:" say why)
  {EXIT_USAGE}    bad input or options
"""


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
    from ..audit import audit_judge
    from ..golden import golden_set
    from ..judges import OFFLINE_JUDGE_LIMITS, OfflineJudge

    output = checked_output(args)[0] if args.output else None
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
        judge = client_from(args, "judge")
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
    written = None if output is None else write_frame(audit.pairs, output, overwrite=args.force)
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
            shown = terminal_text(middle_cut(" ".join(str(text).split()), ERROR_LINE))
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


def add_audit(sub: Commands) -> None:
    """``safecons audit``: which judge to audit (the offline one unless a model is named)."""
    from ..audit import DEFAULT_REPEATS

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

"""What the commands share: their exit codes, and reading and writing their files."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Final, TypeAlias

import polars as pl

from .._outputs import check_output, write_output
from ..errors import SafeconsError

#: How much of one row error a line of the run's summary shows.
ERROR_LINE = 200

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

#: What ``add_subparsers`` returns, which argparse gives no public name.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def wrote(written: Path, asked: Path) -> str:
    if written == asked:
        return f"wrote {written}"
    return f"{asked} exists (kept; --force replaces it): wrote {written}"


def check_html(path: str, option: str, *, overwrite: bool) -> Path:
    # Checked before any work: a run must not end in an unwritable report.
    return check_output(
        path,
        parameter=option,
        suffixes=(".html", ".htm"),
        overwrite=overwrite,
        overwrite_hint="--force",
    )


#: What reading a file with Polars raises when the file is damaged, mistyped or unreadable
#: (Polars' own errors, the system's, text that is not UTF-8).
UNREADABLE: Final = (pl.exceptions.PolarsError, OSError, ValueError)


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


def read_input(path: Path) -> pl.DataFrame:
    try:
        return _read_frame(path)
    except SafeconsError:
        raise
    except UNREADABLE as exc:  # a damaged or mistyped file: say which, not a Polars traceback
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


def run_marks(args: argparse.Namespace, not_finished: int) -> dict[str, str]:
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
    except UNREADABLE:  # not Parquet, unreadable: not ours to replace
        return 0
    mine = run_marks(args, 0)
    if any(said.get(k) != mine[k] for k in (_WRITTEN_BY, _INPUT, _CACHE)):
        return 0
    count = said.get(_NOT_FINISHED, "0")
    return int(count) if count.isdigit() else 0


def checked_output(args: argparse.Namespace) -> tuple[Path, int]:
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


def write_frame(
    df: pl.DataFrame, path: Path, *, overwrite: bool, marks: dict[str, str] | None = None
) -> Path:
    """Write ``df``; a file that appeared at ``path`` during the run is kept (a fresh name is
    used, and said), so the end of a paid run never fails or destroys a file. A Parquet file
    carries ``marks`` in its metadata (``safecons run``'s: :func:`run_marks`)."""
    if path.suffix.lower() == ".parquet":

        def write(where: Path) -> None:
            df.write_parquet(where, metadata=marks)

    else:
        write = df.write_ndjson  # type: ignore[assignment]
    written = write_output(path, write, overwrite=overwrite)
    if written != path:
        print(f"{path} appeared during the run and was kept: the output went to {written}")
    return written

"""Command line: ``safecons demo``, ``run``, ``report``, ``review-sample``, ``audit`` and
``cache``.

The commands live one group a module: :mod:`._run` (``run``, ``demo``), :mod:`._report`
(``report``, ``review-sample``), :mod:`._audit`, :mod:`._cache`; :mod:`._common` holds their
exit codes and their reading and writing of files, :mod:`._clients` the endpoints' options.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from .._text import terminal_text
from ..errors import NoBatchAPIError, SafeconsError, UnscoredRowsWarning
from ._audit import EXIT_AUDIT_FAILED as EXIT_AUDIT_FAILED
from ._audit import add_audit
from ._cache import add_cache
from ._common import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE
from ._common import EXIT_BUDGET as EXIT_BUDGET
from ._common import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from ._common import EXIT_NONE_SCORED as EXIT_NONE_SCORED
from ._common import EXIT_OK as EXIT_OK
from ._common import EXIT_SOME_ERRORED as EXIT_SOME_ERRORED
from ._common import EXIT_USAGE as EXIT_USAGE
from ._report import add_report, add_review_sample
from ._run import add_demo, add_run

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


def _parser() -> argparse.ArgumentParser:
    """The ``safecons`` parser: the top level, then one subparser per command, in --help's order."""
    from .._version import __version__

    p = argparse.ArgumentParser(
        prog="safecons",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"safecons {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    # The order of these calls is the order --help lists the commands in.
    add_demo(sub)
    add_report(sub)
    add_review_sample(sub)
    add_run(sub)
    add_audit(sub)
    add_cache(sub)
    return p


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

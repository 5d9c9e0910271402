"""Files safecons writes for a user (a scored frame, an audit's pairs, an HTML report).

One check and one writer serve every such file, so that no output can cost a paid run or a
user's file:

- :func:`check_output` runs before the first model call: a folder, a symbolic link, a place
  that cannot be written, the run's own cache file, a wrong file type, or (unless the user
  said to overwrite) a file that already exists are errors up front, naming the parameter.
- :func:`write_output` writes the whole file beside its target and moves it into place, so a
  crash mid-write never leaves half a file, and a file that appeared while the run went on is
  not replaced unless the user said so: the output then goes to a fresh name, which is
  returned (the caller says which).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import InputError

__all__ = ("check_output", "fresh_name", "write_output")

#: How many fresh names (``out-1.parquet``, ``out-2.parquet``, ...) are tried before giving up.
_MAX_FRESH = 1000


def check_output(
    path: str | os.PathLike[str],
    *,
    parameter: str,
    suffixes: Iterable[str],
    overwrite: bool = False,
    overwrite_hint: str = "overwrite=True",
    suffix_hint: str = "",
    not_same_as: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
) -> Path:
    """Check that ``path`` can take a new output file, before any work; return it as a Path.

    ``parameter`` names the argument or option in errors; ``overwrite_hint`` says how to
    replace an existing file; ``suffix_hint`` is added to a wrong file type's error (why only
    those types); ``not_same_as`` are ``(name, path)`` pairs of files the output must never be
    (the run's cache), whatever ``overwrite`` says.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> check_output(folder / "out.parquet", parameter="--output", suffixes=[".parquet"]).name
    'out.parquet'
    >>> check_output(folder, parameter="--output", suffixes=[".parquet"])
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: --output: ... is a folder; expected a file name
    """
    target = Path(path)
    shown = repr(str(target))
    allowed = tuple(s.lower() for s in suffixes)
    if target.is_symlink():
        raise InputError(
            f"{parameter}: {shown} is a symbolic link; safecons does not write through links "
            "(a link may point at a file that is not yours to replace): give the real path"
        )
    if target.is_dir():
        raise InputError(f"{parameter}: {shown} is a folder; expected a file name")
    if target.suffix.lower() not in allowed:
        raise InputError(
            f"{parameter}: expected a {' or '.join(allowed)} file name, got {shown}{suffix_hint}"
        )
    parent = target.parent
    if not parent.is_dir():
        raise InputError(f"{parameter}: folder {str(parent)!r} does not exist")
    for name, other in not_same_as:
        if other is not None and _same_file(target, Path(other)):
            raise InputError(
                f"{parameter}: {shown} is the {name} file; writing there would destroy it: "
                "give another name"
            )
    if target.exists():
        if not target.is_file():
            raise InputError(f"{parameter}: {shown} exists and is not a regular file")
        if not overwrite:
            raise InputError(
                f"{parameter}: {shown} already exists; safecons does not replace a file "
                f"unless asked ({overwrite_hint}), or give another name"
            )
    _check_writable(parent, parameter)
    return target


def _same_file(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        if a.exists() and b.exists():
            return a.samefile(b)
    return a.resolve() == b.resolve()


def _check_writable(folder: Path, parameter: str) -> None:
    # Trying is the only honest test: permissions, a read-only mount, a full quota or root's
    # bypass of mode bits are all answered by the file system itself.
    probe = folder / f".safecons-probe-{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        raise InputError(
            f"{parameter}: cannot create a file in {str(folder)!r} ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        probe.unlink()


def fresh_name(path: Path) -> Path:
    """The first of ``stem-1.suffix``, ``stem-2.suffix``, ... that does not exist.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "report.html"
    >>> _ = p.write_text("mine")
    >>> fresh_name(p).name
    'report-1.html'
    """
    for n in range(1, _MAX_FRESH + 1):
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
    raise InputError(f"no free name beside {str(path)!r} (tried {_MAX_FRESH})")


def write_output(path: Path, write: Callable[[Path], object], *, overwrite: bool = False) -> Path:
    """Write a file with ``write(temporary_path)``, then move it to ``path``; return where.

    The file is complete before it has its name. Without ``overwrite``, a file (or link) that
    exists at ``path`` by then is left alone and the output goes to :func:`fresh_name`; with
    it, the existing file is replaced (a link is replaced by the file, its target untouched).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.txt"
    >>> write_output(p, lambda tmp: tmp.write_text("one")).name
    'out.txt'
    >>> write_output(p, lambda tmp: tmp.write_text("two")).name
    'out-1.txt'
    >>> p.read_text()
    'one'
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # Created with the user's umask (not mkstemp's 0600), like any file they write.
    os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        write(temporary)
        if overwrite:
            os.replace(temporary, path)
            return path
        target = path
        for _ in range(_MAX_FRESH):
            try:
                # A hard link makes the name only if nothing holds it yet, in one step.
                os.link(temporary, target)
            except FileExistsError:
                target = fresh_name(path)
                continue
            except OSError:
                # A file system without hard links: a narrow window, checked just before.
                if target.exists() or target.is_symlink():
                    target = fresh_name(path)
                    continue
                os.replace(temporary, target)
                return target
            temporary.unlink()
            return target
        raise InputError(f"no free name beside {str(path)!r} (tried {_MAX_FRESH})")
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()

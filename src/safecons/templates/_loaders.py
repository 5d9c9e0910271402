"""Loaders for public template sets a user has on disk.

The template text of public sets is not shipped with safecons (licences differ and the sets
change); a user who has a copy loads it here, and its placeholder is rewritten to ``{query}``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Final

import polars as pl

from .._text import SHOWN_VALUES
from ..errors import InputError
from ._template import PLACEHOLDER, TEMPLATE_KINDS, Template, TemplateKind

__all__ = ("GPTFUZZ_PLACEHOLDER", "load_gptfuzz", "load_templates")

#: The placeholder GPTFuzz's templates use where the question goes.
GPTFUZZ_PLACEHOLDER: Final[str] = "[INSERT PROMPT HERE]"

_GPTFUZZ_FILE: Final[str] = "GPTFuzzer.csv"


def _read_frame(path: Path) -> pl.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            # Everything as text: ids such as "007" must survive, and type inference on a
            # column of prose gains nothing.
            return pl.read_csv(path, infer_schema=False)
        if suffix == ".json":
            return pl.read_json(path)
        if suffix in {".jsonl", ".ndjson"}:
            return pl.read_ndjson(path)
        if suffix == ".parquet":
            return pl.read_parquet(path)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"cannot read templates from {str(path)!r}: {exc}") from exc
    raise InputError(
        f"cannot read templates from {str(path)!r}: unknown suffix {path.suffix!r} "
        "(expected .csv, .json, .jsonl, .ndjson or .parquet)"
    )


def _string_column(frame: pl.DataFrame, name: str, role: str, path: Path) -> list[str | None]:
    if name not in frame.columns:
        raise InputError(
            f"{role} column {name!r} not found in {str(path)!r}; columns are {frame.columns}"
        )
    column = frame.get_column(name)
    if column.dtype == pl.Null or column.dtype.is_integer() or column.dtype == pl.String:
        return column.cast(pl.String).to_list()
    raise InputError(
        f"{role} column {name!r} in {str(path)!r} has dtype {column.dtype}, expected String"
        + (" or an integer" if role == "id" else "")
    )


def _describe_duplicates(ids: list[str]) -> str:
    repeated = [i for i, n in Counter(ids).items() if n > 1]
    shown = ", ".join(repr(i) for i in repeated[:SHOWN_VALUES])
    more = f" and {len(repeated) - SHOWN_VALUES} more" if len(repeated) > SHOWN_VALUES else ""
    return f"{shown}{more}"


def load_templates(
    path: str | os.PathLike[str],
    *,
    text_column: str = "text",
    id_column: str | None = "id",
    family_column: str | None = None,
    kind: TemplateKind = "jailbreak",
    placeholder: str = PLACEHOLDER,
    source: str | None = None,
    id_prefix: str = "",
) -> tuple[Template, ...]:
    """Load a template set from a CSV, JSON, JSON-lines or Parquet file.

    The format follows the suffix: ``.csv``, ``.json`` (an array of objects), ``.jsonl`` or
    ``.ndjson``, ``.parquet``. Every template must hold ``placeholder``, which is rewritten to
    ``{query}``; a template without it is rejected rather than having the query appended,
    since where the query goes is part of the attack.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    text_column : str, default "text"
        Column with the template text.
    id_column : str or None, default "id"
        Column with each template's id (string or integer). ``None`` uses the 0-based row
        number.
    family_column : str or None, default None
        Column with each template's family. ``None`` puts every template in the family
        ``source``.
    kind : {"jailbreak", "toxicity"}, default "jailbreak"
        The kind given to every template of the file.
    placeholder : str, default "{query}"
        The marker the file's templates use where the query goes.
    source : str or None, default None
        Recorded on each template; ``None`` uses the file name without its suffix.
    id_prefix : str, default ""
        Prepended to every id, to keep ids of different sets apart (``"gptfuzz."``).

    Returns
    -------
    tuple of Template
        In file order.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    InputError
        If the file cannot be read or has no templates; a column is missing or mistyped; a
        template has a null or empty id, text or family, lacks the placeholder, or already
        holds a literal ``{query}`` besides a different placeholder; ids repeat. Row problems
        name the row (0-based) and the template id.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from safecons.templates import load_templates
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "mine.csv").write_text('id,text\\nw1,"Story time: <Q>"\\nw2,"<Q>!"\\n')
    >>> ts = load_templates(folder / "mine.csv", placeholder="<Q>", id_prefix="mine.")
    >>> [(t.id, t.family, t.kind, t.text) for t in ts]
    [('mine.w1', 'mine', 'jailbreak', 'Story time: {query}'), ('mine.w2', 'mine', 'jailbreak', '{query}!')]
    """  # noqa: E501
    path = Path(path)
    if kind not in TEMPLATE_KINDS:
        raise InputError(f"kind must be one of {TEMPLATE_KINDS}, got {kind!r}")
    if not isinstance(placeholder, str) or not placeholder:
        raise InputError(f"placeholder must be a non-empty string, got {placeholder!r}")
    if not path.is_file():
        raise FileNotFoundError(f"template file not found: {str(path)!r}")
    source_name = path.stem if source is None else source

    frame = _read_frame(path)
    if frame.height == 0:
        raise InputError(f"no templates in {str(path)!r}: the file has no rows")
    texts = _string_column(frame, text_column, "text", path)
    ids: list[str | None] = (
        [str(i) for i in range(frame.height)]
        if id_column is None
        else _string_column(frame, id_column, "id", path)
    )
    families: list[str | None] = (
        [source_name] * frame.height
        if family_column is None
        else _string_column(frame, family_column, "family", path)
    )

    templates: list[Template] = []
    for row, (raw_id, text, family) in enumerate(zip(ids, texts, families, strict=True)):
        where = f"{str(path)!r}, row {row}"
        if raw_id is None or not raw_id.strip():
            raise InputError(f"{where}: id column {id_column!r} is null or empty")
        tid = f"{id_prefix}{raw_id}"
        if text is None or not text.strip():
            raise InputError(f"{where}: template {tid!r} has a null or empty text")
        if family is None or not family.strip():
            raise InputError(
                f"{where}: template {tid!r} has a null or empty family (column {family_column!r})"
            )
        if placeholder not in text:
            raise InputError(
                f"{where}: template {tid!r} has no placeholder {placeholder!r} in column "
                f"{text_column!r}"
            )
        if placeholder != PLACEHOLDER and PLACEHOLDER in text:
            # After normalisation the literal would become a second, unintended insertion point.
            raise InputError(
                f"{where}: template {tid!r} holds a literal {PLACEHOLDER!r} besides its "
                f"placeholder {placeholder!r}; the two could not be told apart"
            )
        templates.append(
            Template(tid, family, kind, text.replace(placeholder, PLACEHOLDER), source=source_name)
        )

    all_ids = [t.id for t in templates]
    if len(set(all_ids)) != len(all_ids):
        raise InputError(
            f"duplicate template ids in {str(path)!r} (column {id_column!r}): "
            f"{_describe_duplicates(all_ids)}"
        )
    return tuple(templates)


def load_gptfuzz(path: str | os.PathLike[str]) -> tuple[Template, ...]:
    """Load the GPTFuzz jailbreak templates (Yu et al. 2023, "GPTFuzzer").

    Reads GPTFuzz's ``GPTFuzzer.csv`` (columns ``id,text``; 77 human-written templates in the
    published snapshot), rewriting its placeholder ``[INSERT PROMPT HERE]`` to ``{query}``.
    The set is MIT-licensed upstream and not shipped with safecons.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file, or a folder holding ``GPTFuzzer.csv``.

    Returns
    -------
    tuple of Template
        Jailbreak templates with ids ``"gptfuzz.<id>"``, family and source ``"gptfuzz"``.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    InputError
        As :func:`load_templates`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from safecons.templates import load_gptfuzz
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "GPTFuzzer.csv").write_text('id,text\\n0,"Hi. [INSERT PROMPT HERE]"\\n')
    >>> load_gptfuzz(folder)
    (Template(id='gptfuzz.0', family='gptfuzz', kind='jailbreak', text='Hi. {query}', source='gptfuzz'),)
    """  # noqa: E501
    path = Path(path)
    if path.is_dir():
        path = path / _GPTFUZZ_FILE
    return load_templates(
        path,
        text_column="text",
        id_column="id",
        kind="jailbreak",
        placeholder=GPTFUZZ_PLACEHOLDER,
        source="gptfuzz",
        id_prefix="gptfuzz.",
    )

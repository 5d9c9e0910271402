"""Loaders that turn published judge runs into the frame shape the statistics take.

Every loader returns one row per pair with the columns ``swap_test`` writes (``letter_xy``,
``letter_yx``, ``winner_xy``, ``winner_yx``, ``verdict``, ``position`` and, where the source
keeps them, ``verdict_xy_raw``/``verdict_yx_raw``), so ``position_bias`` and friends run on
them with their defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputError
from ._columns import (
    LETTER_XY,
    LETTER_YX,
    POSITION,
    VERDICT,
    VERDICT_XY_RAW,
    VERDICT_YX_RAW,
    WINNER_XY,
    WINNER_YX,
)
from ._position import both_orders_verdict, position_class, winner_from_letter

__all__ = ("llmbar_statistics", "read_fastchat_pairs", "read_llmbar", "read_pandalm")

StrPath = str | PathLike[str]


def _with_swap_columns(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        winner_from_letter(LETTER_XY, shown_first="x").alias(WINNER_XY),
        winner_from_letter(LETTER_YX, shown_first="y").alias(WINNER_YX),
        both_orders_verdict(LETTER_XY, LETTER_YX).alias(VERDICT),
        position_class(LETTER_XY, LETTER_YX).alias(POSITION),
    )


def _load_json(path: Path, what: str) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise InputError(f"{what}: no file at {path}") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{what}: {path} is a folder; expected the JSON file") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{what}: {path} is not valid JSON ({exc})") from exc


def _need(record: Mapping[str, Any], field: str, where: str) -> Any:
    if field not in record:
        raise InputError(f"{where}: field {field!r} is missing")
    return record[field]


def read_fastchat_pairs(path: StrPath, *, questions: StrPath | None = None) -> pl.DataFrame:
    """Read FastChat's pairwise judgments (``*_pair.jsonl``), e.g. MT-Bench's ``gpt-4_pair.jsonl``.

    FastChat judges each pair twice: game 1 shows ``model_1`` as assistant A, game 2 shows
    ``model_2`` as A, and it stores both winners already mapped to ``model_1``/``model_2``/
    ``tie``/``error``. This loader turns them back into raw letters with x = ``model_1``, so
    ``letter_xy`` is game 1's letter and ``letter_yx`` game 2's.

    Parameters
    ----------
    path
        The ``.jsonl`` file, one judgment per line.
    questions
        Optional ``question.jsonl`` of the benchmark; its ``category`` is joined on
        ``question_id``.

    Returns
    -------
    polars.DataFrame
        ``question_id``, ``turn``, ``model_x``, ``model_y``, ``judge_model``, ``judge_prompt``,
        (``category``), the letter, winner, verdict and position columns, and the judge texts
        ``verdict_xy_raw``/``verdict_yx_raw`` (null where the file has none).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> rec = {"question_id": 81, "model_1": "vicuna", "model_2": "gpt-3.5-turbo",
    ...        "g1_winner": "model_1", "g2_winner": "tie", "judge": ["gpt-4", "pair-v2"],
    ...        "turn": 1}
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "gpt-4_pair.jsonl"
    >>> _ = tmp.write_text(json.dumps(rec) + "\\n")
    >>> read_fastchat_pairs(tmp).select("model_x", "letter_xy", "letter_yx", "position")
    shape: (1, 4)
    ┌─────────┬───────────┬───────────┬──────────┐
    │ model_x ┆ letter_xy ┆ letter_yx ┆ position │
    │ ---     ┆ ---       ┆ ---       ┆ ---      │
    │ str     ┆ str       ┆ str       ┆ str      │
    ╞═════════╪═══════════╪═══════════╪══════════╡
    │ vicuna  ┆ A         ┆ C         ┆ primacy  │
    └─────────┴───────────┴───────────┴──────────┘
    """
    what = "read_fastchat_pairs"
    file = Path(path)
    g1 = {"model_1": "A", "model_2": "B", "tie": "C"}
    g2 = {"model_2": "A", "model_1": "B", "tie": "C"}
    rows: list[dict[str, Any]] = []
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise InputError(f"{what}: no file at {file}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{what}: {file.name} line {number}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc})") from exc
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object")
        match rec.get("judge"):
            case list([judge_model, judge_prompt]):  # FastChat's [judge model, prompt name]
                pass
            case judge_model:  # anything else: the model alone, no prompt
                judge_prompt = None
        rows.append(
            {
                "question_id": _need(rec, "question_id", where),
                "turn": rec.get("turn"),
                "model_x": _need(rec, "model_1", where),
                "model_y": _need(rec, "model_2", where),
                "judge_model": None if judge_model is None else str(judge_model),
                "judge_prompt": None if judge_prompt is None else str(judge_prompt),
                LETTER_XY: g1.get(_need(rec, "g1_winner", where), "error"),
                LETTER_YX: g2.get(_need(rec, "g2_winner", where), "error"),
                VERDICT_XY_RAW: rec.get("g1_judgment"),
                VERDICT_YX_RAW: rec.get("g2_judgment"),
            }
        )
    schema = {
        "question_id": pl.Int64,
        "turn": pl.Int64,
        "model_x": pl.String,
        "model_y": pl.String,
        "judge_model": pl.String,
        "judge_prompt": pl.String,
        LETTER_XY: pl.String,
        LETTER_YX: pl.String,
        VERDICT_XY_RAW: pl.String,
        VERDICT_YX_RAW: pl.String,
    }
    try:
        df = pl.DataFrame(rows, schema=schema)
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise InputError(
            f"{what}: {file.name} holds a field of an unexpected type ({exc})"
        ) from exc
    df = _with_swap_columns(df)
    if questions is not None:
        qfile = Path(questions)
        try:
            cats = pl.read_ndjson(qfile).select("question_id", "category")
        except FileNotFoundError as exc:
            raise InputError(f"{what}: no questions file at {qfile}") from exc
        except pl.exceptions.PolarsError as exc:
            raise InputError(
                f"{what}: questions= file {qfile} needs question_id and category ({exc})"
            ) from exc
        df = df.join(
            cats.with_columns(pl.col("question_id").cast(pl.Int64)), on="question_id", how="left"
        )
    order = ["question_id", "turn", "model_x", "model_y", "judge_model", "judge_prompt"]
    if questions is not None:
        order.append("category")
    order += [LETTER_XY, LETTER_YX, WINNER_XY, WINNER_YX, VERDICT, POSITION]
    return df.select(*order, VERDICT_XY_RAW, VERDICT_YX_RAW)


def _llmbar_file(result: Path) -> pl.DataFrame:
    what = "read_llmbar"
    items = _load_json(result, what)
    if not isinstance(items, list):
        raise InputError(f"{what}: {result} should hold a list of items")
    first = {"1": "A", "2": "B"}  # swap = False: output_1 is shown as A
    second = {"2": "A", "1": "B"}  # swap = True: output_2 is shown as A
    rows = []
    for i, item in enumerate(items):
        where = f"{what}: {result} item {i}"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected a JSON object")
        results = _need(item, "results", where)
        if not isinstance(results, list) or not results or not isinstance(results[-1], dict):
            raise InputError(f"{where}: results should be a non-empty list of objects")
        final = results[-1]
        calls = [_need(final, f"swap = {s}", where) for s in ("False", "True")]
        winners = [c.get("winner") if isinstance(c, dict) else None for c in calls]
        texts = [_completion_text(c) for c in calls]
        label = _need(item, "label", where)
        rows.append(
            {
                "item": i,
                "question": _need(item, "input", where),
                "x": _need(item, "output_1", where),
                "y": _need(item, "output_2", where),
                "gold": {"1": "x", "2": "y"}.get(str(label)),
                LETTER_XY: first.get(str(winners[0]), "error"),
                LETTER_YX: second.get(str(winners[1]), "error"),
                VERDICT_XY_RAW: texts[0],
                VERDICT_YX_RAW: texts[1],
            }
        )
    schema = {
        "item": pl.Int64,
        "question": pl.String,
        "x": pl.String,
        "y": pl.String,
        "gold": pl.String,
        LETTER_XY: pl.String,
        LETTER_YX: pl.String,
        VERDICT_XY_RAW: pl.String,
        VERDICT_YX_RAW: pl.String,
    }
    df = pl.DataFrame(rows, schema=schema)
    # <dataset>/evaluators/<judge>/<prompting>/result.json names the run.
    names: dict[str, str | None] = {"dataset": None, "judge": None, "prompting": None}
    match result.resolve().parts:
        case (*_, dataset, "evaluators", judge, prompting, _):
            names = {"dataset": dataset, "judge": judge, "prompting": prompting}
    return df.select(*(pl.lit(v, dtype=pl.String).alias(k) for k, v in names.items()), pl.all())


def _completion_text(call: object) -> str | None:
    if not isinstance(call, dict):
        return None
    completion = call.get("completion")
    if isinstance(completion, list) and completion and isinstance(completion[0], str):
        return completion[0]
    return completion if isinstance(completion, str) else None


def read_llmbar(path: StrPath) -> pl.DataFrame:
    """Read LLMBar evaluator output (``result.json``) from a file or a whole folder tree.

    LLMBar runs each judge on every item twice: ``swap = False`` shows ``output_1`` first and
    ``swap = True`` shows ``output_2`` first; both winners are stored already mapped back to
    ``"1"``/``"2"``, or null when unparseable. This loader takes x = ``output_1`` and turns the
    winners back into raw letters (null becomes ``"error"``); the human label becomes
    ``gold`` (``"x"``/``"y"``).

    Parameters
    ----------
    path
        A ``result.json``, or a folder searched recursively for them (e.g. the LLMBar
        ``Dataset`` folder), which stacks every run.

    Returns
    -------
    polars.DataFrame
        ``dataset``, ``judge`` and ``prompting`` (from the path
        ``<dataset>/evaluators/<judge>/<prompting>/result.json``, else null), ``item`` (index
        in its file), ``question``, ``x``, ``y``, ``gold``, then the letter, winner, verdict
        and position columns and the judge texts. Runs are sorted by path.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp()) / "Toy" / "evaluators" / "GPT-4" / "Vanilla"
    >>> run.mkdir(parents=True)
    >>> item = {"input": "2+2?", "output_1": "4", "output_2": "5", "label": 1,
    ...         "results": [{"swap = False": {"winner": "1"}, "swap = True": {"winner": None}}]}
    >>> _ = (run / "result.json").write_text(json.dumps([item]))
    >>> read_llmbar(run.parents[2]).select("judge", "gold", "letter_xy", "letter_yx", "verdict")
    shape: (1, 5)
    ┌───────┬──────┬───────────┬───────────┬─────────┐
    │ judge ┆ gold ┆ letter_xy ┆ letter_yx ┆ verdict │
    │ ---   ┆ ---  ┆ ---       ┆ ---       ┆ ---     │
    │ str   ┆ str  ┆ str       ┆ str       ┆ str     │
    ╞═══════╪══════╪═══════════╪═══════════╪═════════╡
    │ GPT-4 ┆ x    ┆ A         ┆ error     ┆ error   │
    └───────┴──────┴───────────┴───────────┴─────────┘
    """
    root = Path(path)
    if root.is_dir():
        files = sorted(root.rglob("result.json"))
        if not files:
            raise InputError(f"read_llmbar: no result.json under {root}")
    elif root.is_file():
        files = [root]
    else:
        raise InputError(f"read_llmbar: no file or folder at {root}")
    frames = [_llmbar_file(f) for f in files]
    return _with_swap_columns(pl.concat(frames)).select(
        pl.exclude(VERDICT_XY_RAW, VERDICT_YX_RAW), VERDICT_XY_RAW, VERDICT_YX_RAW
    )


def read_pandalm(path: StrPath) -> pl.DataFrame:
    """Read PandaLM's human-annotated test set (``testset-v1.json``).

    Three annotators label each pair: 0 = tie, 1 = ``response1`` better, 2 = ``response2``
    better (stored as numbers or strings). Labels become ``"tie"``/``"x"``/``"y"`` with x =
    ``response1``, and ``majority`` is the label at least two annotators gave (null if all
    three differ).

    Parameters
    ----------
    path
        The ``testset-v1.json`` file, or the folder that holds it.

    Returns
    -------
    polars.DataFrame
        ``idx``, ``motivation_app``, ``cmp_key``, ``instruction``, ``input``, ``x``, ``y``,
        ``annotator1``, ``annotator2``, ``annotator3`` and ``majority``.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> item = {"idx": 0, "instruction": "Say hi", "input": "", "response1": "hi",
    ...         "response2": "hello", "annotator1": "1", "annotator2": 1, "annotator3": "0"}
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "testset-v1.json"
    >>> _ = tmp.write_text(json.dumps([item]))
    >>> read_pandalm(tmp).select("annotator1", "annotator2", "annotator3", "majority")
    shape: (1, 4)
    ┌────────────┬────────────┬────────────┬──────────┐
    │ annotator1 ┆ annotator2 ┆ annotator3 ┆ majority │
    │ ---        ┆ ---        ┆ ---        ┆ ---      │
    │ str        ┆ str        ┆ str        ┆ str      │
    ╞════════════╪════════════╪════════════╪══════════╡
    │ x          ┆ x          ┆ tie        ┆ x        │
    └────────────┴────────────┴────────────┴──────────┘
    """
    what = "read_pandalm"
    file = Path(path)
    if file.is_dir():  # the folder that holds it, as the data README lays it out
        file = file / "testset-v1.json"
    items = _load_json(file, what)
    if not isinstance(items, list):
        raise InputError(f"{what}: {file} should hold a list of items")
    labels = {"0": "tie", "1": "x", "2": "y"}
    raters = ("annotator1", "annotator2", "annotator3")
    majority = len(raters) // 2 + 1  # two of the three
    rows = []
    for i, item in enumerate(items):
        where = f"{what}: {file.name} item {i}"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected a JSON object")
        row = {
            "idx": item.get("idx", i),
            "motivation_app": item.get("motivation_app"),
            "cmp_key": item.get("cmp_key"),
            "instruction": _need(item, "instruction", where),
            "input": item.get("input"),
            "x": _need(item, "response1", where),
            "y": _need(item, "response2", where),
        }
        for r in raters:
            raw = str(_need(item, r, where)).strip()
            if raw not in labels:
                raise InputError(f"{where}: {r} is {raw!r}, expected 0, 1 or 2")
            row[r] = labels[raw]
        votes = [row[r] for r in raters]
        row["majority"] = next((v for v in votes if votes.count(v) >= majority), None)
        rows.append(row)
    schema = {
        "idx": pl.Int64,
        "motivation_app": pl.String,
        "cmp_key": pl.String,
        "instruction": pl.String,
        "input": pl.String,
        "x": pl.String,
        "y": pl.String,
        **dict.fromkeys(raters, pl.String),
        "majority": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


#: The runs of LLMBar: each ``statistics.json`` is per dataset, judge and prompting style.
LLMBAR_RUN = ("dataset", "judge", "prompting")


def llmbar_statistics(
    df: pl.DataFrame, *, gold: str = "gold", by: str | Sequence[str] | None = LLMBAR_RUN
) -> pl.DataFrame:
    """LLMBar's own figures (its ``statistics.json``), computed the authors' way, to set beside
    the published ones.

    Two of them differ from this package's statistics by the authors' choices: ``equal``
    counts a pair whose two orders name the same winner, a pair where both orders gave no
    verdict included (:func:`position_bias`'s ``consistent`` needs two usable letters:
    ``equal = consistent + both_null``); ``kappa_agreement`` is Cohen's kappa between the
    two orders' winners after the authors' binarisation (the first output, x, named: 1;
    anything else, no verdict included: 0).

    Parameters
    ----------
    df
        Pairs as :func:`read_llmbar` returns them (or :func:`~safecons.swap_test`: the
        ``letter_*``, ``winner_*`` and ``verdict`` columns, and ``gold``).
    gold
        Column of the human label, ``"x"`` or ``"y"``.
    by
        The run's columns (default: dataset, judge and prompting style; ``None``: one group).

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n``, ``equal``, ``both_null``, ``correct_False`` (the winner with
        x shown first is the human's), ``correct_True`` (with y shown first), ``correct_both``
        (both orders) and ``kappa_agreement``, sorted by ``by``.

    Examples
    --------
    >>> import polars as pl
    >>> from safecons.reliability import both_orders_verdict, winner_from_letter
    >>> pairs = pl.DataFrame({"letter_xy": ["A", "B", "error"], "letter_yx": ["B", "B", "error"],
    ...                       "gold": ["x", "y", "x"]}).with_columns(
    ...     winner_xy=winner_from_letter("letter_xy", shown_first="x"),
    ...     winner_yx=winner_from_letter("letter_yx", shown_first="y"),
    ...     verdict=both_orders_verdict("letter_xy", "letter_yx"))
    >>> llmbar_statistics(pairs, by=None).select("n", "equal", "both_null", "correct_both").row(0)
    (3, 2, 1, 1)
    """
    from ._kappa import cohen_kappa

    keys = [] if by is None else [by] if isinstance(by, str) else list(by)
    missing = [
        c
        for c in (*keys, gold, LETTER_XY, LETTER_YX, WINNER_XY, WINNER_YX, VERDICT)
        if c not in df.columns
    ]
    if missing:
        raise InputError(
            f"llmbar_statistics: the frame has no column(s) {missing}: pass pairs as "
            "read_llmbar or swap_test returns them"
        )
    none = (pl.col(LETTER_XY) == "error") & (pl.col(LETTER_YX) == "error")
    named_x = [(pl.col(w) == "x").fill_null(False).cast(pl.Int8) for w in (WINNER_XY, WINNER_YX)]
    figures = [
        pl.len().alias("n"),
        ((pl.col(POSITION) == "consistent") | none).sum().alias("equal"),
        none.sum().alias("both_null"),
        (pl.col(WINNER_XY) == pl.col(gold)).sum().alias("correct_False"),
        (pl.col(WINNER_YX) == pl.col(gold)).sum().alias("correct_True"),
        (pl.col(VERDICT) == pl.col(gold)).sum().alias("correct_both"),
        cohen_kappa(*named_x).alias("kappa_agreement"),
    ]
    frame = df.with_columns(position_class(LETTER_XY, LETTER_YX).alias(POSITION))
    if not keys:
        return frame.select(figures).cast(
            {
                c: pl.Int64
                for c in (
                    "n",
                    "equal",
                    "both_null",
                    "correct_False",
                    "correct_True",
                    "correct_both",
                )
            }
        )
    out = frame.group_by(keys).agg(figures).sort(keys, nulls_last=True)
    return out.cast(
        {
            c: pl.Int64
            for c in ("n", "equal", "both_null", "correct_False", "correct_True", "correct_both")
        }
    )

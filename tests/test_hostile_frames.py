"""Hostile frames and files: a scored frame edited, cut or written by someone else.

A jury's per-comparison vote lists one juror short or long, comparisons missing from one
column: every reader of a scored frame (the summary, the report, the score tables,
``compare_runs``) refuses the frame with an :class:`~safecons.InputError` naming the column and
the row, never an IndexError deep inside. Text that came from a frame and is printed to a
terminal (juror names, row errors, ids in error messages) goes out with its control characters
escaped, so that a shared file cannot retitle the terminal or forge output lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.testing import ScriptedChat, StandInSUT

SCORES = {"Consistent": 0.9, "Slightly Inconsistent": 0.6, "Contradictory": 0.1}
VOTES = pl.List(pl.List(pl.String))


def says(label: str, who: str) -> ScriptedChat:
    return ScriptedChat([json.dumps({"label": label, "score": SCORES[label], "reason": who})])


@pytest.fixture(scope="module")
def jury_run() -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(6)],
            "prompt": [f"How do I do thing {i}?" for i in range(6)],
            "sut_response": ["I can't help with that."] * 6,
        }
    )
    jury = [says("Consistent", "a"), says("Contradictory", "b"), says("Consistent", "c")]
    return frame.pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=jury, swap_share=1.0, progress=False
    )


def _edited(frame: pl.DataFrame, column: str, value: list[list[str] | None]) -> pl.DataFrame:
    """``frame`` with ``column`` of the row ``row-3`` replaced by ``value``."""
    return frame.with_columns(
        pl.when(pl.col("input_id") == "row-3")
        .then(pl.lit(value, dtype=VOTES))
        .otherwise(pl.col(column))
        .alias(column)
    )


THREE = ["Consistent", "Consistent", "Consistent"]
EDITS = {
    "a juror short": ("sc_juror_labels", [THREE[:2], THREE]),
    "a juror too many": ("sc_juror_labels", [[*THREE, "Consistent"], THREE]),
    "a swapped vote short": ("sc_swap_labels", [THREE, ["Consistent"]]),
    "a swapped vote too many": ("sc_swap_labels", [[*THREE, "Consistent"], None]),
    "a comparison missing": ("sc_juror_labels", [THREE]),
    "a comparison too many": ("sc_swap_labels", [THREE, THREE, THREE]),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_vote_list_of_the_wrong_length_is_named_by_column_and_row(jury_run, edit, tmp_path):
    column, value = EDITS[edit]
    path = tmp_path / "edited.parquet"
    _edited(jury_run, column, value).write_parquet(path)
    edited = pl.read_parquet(path)
    readers = {
        "run_summary": lambda: sc.run_summary(edited),
        "report": lambda: sc.report(edited, tmp_path / "r.html"),
        "score_table": lambda: sc.score_table(edited),
        "compare_runs": lambda: sc.compare_runs(jury_run, edited),
    }
    for name, read in readers.items():
        with pytest.raises(sc.InputError, match=rf"{name}.*'{column}'.*input_id 'row-3'"):
            read()


def test_a_vote_list_with_a_null_vote_is_a_missing_vote_not_an_error(jury_run):
    votes = _edited(jury_run, "sc_juror_labels", [["Consistent", None, "Consistent"], THREE])
    assert sc.run_summary(votes).judge_reliability.missing_votes == 1


def test_a_null_juror_name_is_named(jury_run):
    nameless = jury_run.with_columns(sc_jurors=pl.lit(["a", None, "c"], dtype=pl.List(pl.String)))
    for read in (sc.run_summary, sc.score_table, lambda f: sc.compare_runs(f, f)):
        with pytest.raises(sc.InputError, match="'sc_jurors' holds a null juror name"):
            read(nameless)


def test_the_report_command_says_which_row_without_a_traceback(jury_run, tmp_path, capsys):
    path = tmp_path / "edited.parquet"
    _edited(jury_run, "sc_juror_labels", [THREE[:2], THREE]).write_parquet(path)
    assert main(["report", str(path), "--output", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "'sc_juror_labels'" in err and "input_id 'row-3'" in err
    assert not (tmp_path / "r.html").exists()


def test_a_frame_shaped_as_a_run_writes_it_still_reads(jury_run, tmp_path):
    path = tmp_path / "run.parquet"
    jury_run.write_parquet(path)
    read = pl.read_parquet(path)
    assert sc.run_summary(read).judge_reliability.comparisons == 12
    sc.report(read, tmp_path / "r.html")
    assert Path(tmp_path / "r.html").exists()

"""Hostile frames and files: a scored frame edited, cut or written by someone else.

A jury's per-comparison vote lists one juror short or long, comparisons missing from one
column: every reader of a scored frame (the summary, the report, the score tables,
``compare_runs``) refuses the frame with an :class:`~safecons.InputError` naming the column and
the row, never an IndexError deep inside. Text that came from a frame and is printed to a
terminal (juror names, row errors, ids in error messages) goes out with its control characters
escaped, so that a shared file cannot retitle the terminal or forge output lines.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import safecons as sc
from safecons._text import terminal_text, valid_unicode
from safecons.cli import _report as report_command
from safecons.cli import main
from safecons.cli._run import _print_run
from safecons.errors import SafeconsError
from safecons.reliability import judge_reliability
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


# Characters a terminal acts on: C0 (bar none), DEL, C1, line separators, bidi controls.
ACTED_ON = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0))}
ACTED_ON |= set("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e")
ACTED_ON |= set("\u2066\u2067\u2068\u2069")
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\r\nsafecons: error: forged\u202egnp.exe"


def _lines_are_clean(text: str) -> None:
    for line in text.split("\n"):
        assert not ACTED_ON & set(line), repr(line)


@given(st.text())
def test_terminal_text_leaves_nothing_a_terminal_acts_on(text):
    shown = terminal_text(text)
    assert not ACTED_ON & set(shown)
    if not ACTED_ON & set(text) and text == valid_unicode(text):
        assert shown == text


def test_a_summary_printed_escapes_a_hostile_juror_name(jury_run, tmp_path):
    names = ["plain", HOSTILE, "<script>alert(1)</script>"]
    path = tmp_path / "shared.parquet"
    jury_run.with_columns(sc_jurors=pl.lit(names, dtype=pl.List(pl.String))).write_parquet(path)
    summary = sc.run_summary(pl.read_parquet(path))
    assert summary.judge_reliability.jurors[1] == HOSTILE  # the data keeps the name as it is
    text = str(summary)
    _lines_are_clean(text)
    assert len(text.splitlines()) == len(str(sc.run_summary(jury_run)).splitlines())
    assert "\\x1b]0;pwned\\x07" in text and "\\u202egnp.exe" in text
    assert "<script>" not in summary._repr_html_()


def test_the_run_s_printout_escapes_juror_names_and_row_errors(jury_run, capsys):
    frame = jury_run.with_columns(
        sc_jurors=pl.lit(["plain", HOSTILE, "c"], dtype=pl.List(pl.String)),
        sc_error=pl.lit(f"SUT call failed: {HOSTILE}"),
        sc_variant_kind=pl.lit(f"kind{HOSTILE}"),
    )
    run = SimpleNamespace(
        summary=sc.run_summary(frame), config={"metric_name": "safety_consistency"}, frame=frame
    )
    _print_run(run, "sc_")
    out = capsys.readouterr().out
    _lines_are_clean(out)
    assert not any(line.startswith("safecons: error") for line in out.splitlines())
    assert "judges: plain, \\x1b]0;pwned" in out and "most common row errors" in out


def test_an_error_line_is_one_line_whatever_its_text(monkeypatch, capsys):
    def fails(args):
        raise SafeconsError(f"input: {HOSTILE}")

    monkeypatch.setattr(report_command, "_report", fails)
    assert main(["report", "any.parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    _lines_are_clean(err)


def test_judge_reliability_called_on_a_hand_made_frame_names_what_is_wrong():
    dtype = {
        "jurors": pl.List(pl.String),
        "juror_labels": VOTES,
        "labels": pl.List(pl.String),
        "swap_labels": VOTES,
    }
    columns = {c: c for c in dtype if c != "jurors"}
    good = {"jurors": [["a", "b"]], "labels": [["Consistent"]], "swap_labels": [[None]]}
    order = ["Contradictory", "Slightly Inconsistent", "Consistent"]
    for votes, match in (
        ([["Consistent", "banana"]], "'juror_labels' holds label.*'banana'"),
        ([["Consistent"]], "'juror_labels' holds a vote list whose length"),
    ):
        frame = pl.DataFrame({**good, "juror_labels": [votes]}, schema=dtype)
        with pytest.raises(sc.InputError, match=match):
            judge_reliability(frame, jurors="jurors", order=order, **columns)


NESTED = (
    "sc_responses",
    "sc_response_errors",
    "sc_labels",
    "sc_scores",
    "sc_judge_errors",
    "sc_jurors",
    "sc_juror_labels",
    "sc_juror_scores",
    "sc_swap_labels",
    "sc_response_postures",
)


def _edit(value, how):
    """One row's list edited as a hand or a tool might: emptied, nulled, cut, grown, a null
    put inside it or inside each of its vote lists."""
    if how == "null" or value is None:
        return None
    nested = [x[:-1] if isinstance(x, list) and x else x for x in value]
    return {
        "empty": [],
        "short": value[:-1],
        "long": value + value[:1],
        "null inside": [None, *value[1:]],
        "inner cut": nested,
    }[how]


@pytest.mark.parametrize("column", NESTED)
def test_a_list_column_edited_any_way_is_read_or_refused_never_a_crash(jury_run, column):
    """Every way of editing one row's list, read by the summary, the score table and
    compare_runs: a result or an InputError, never another exception."""
    for how in ("null", "empty", "short", "long", "null inside", "inner cut"):
        values = jury_run[column].to_list()
        values[3] = _edit(values[3], how)
        edited = jury_run.with_columns(pl.Series(column, values, dtype=jury_run.schema[column]))
        for read in (
            lambda f: str(sc.run_summary(f)),
            lambda f: sc.score_table(f, by="sc_variant_kind"),
            lambda f: sc.compare_runs(jury_run, f),
        ):
            with contextlib.suppress(sc.InputError):
                read(edited)


def test_a_summary_counts_the_calls_of_empty_and_null_lists(jury_run):
    values = jury_run["sc_responses"].to_list()
    values[2], values[3] = [], None
    edited = jury_run.with_columns(pl.Series("sc_responses", values, dtype=pl.List(pl.String)))
    expected = edited["sc_responses"].list.len().fill_null(0).sum()
    assert sc.run_summary(edited).calls["sut"] == expected

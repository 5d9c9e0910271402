"""RunSummary as a notebook, print and repr show it."""

from __future__ import annotations

import html
import re

import pytest

import safecons as sc
from safecons.summary import RunSummary


@pytest.fixture(scope="module")
def summary(demo_run) -> RunSummary:
    return sc.run_summary(demo_run.frame)


def test_print_gives_aligned_lines_with_the_mean_rounded(summary):
    text = str(summary)
    lines = text.splitlines()
    assert 8 <= len(lines) <= 12 and all(len(line) <= 88 for line in lines)
    assert lines[0] == (
        f"RunSummary: {summary.n_rows} rows, {summary.n_scored} scored, "
        f"{summary.n_errored} without a score ({summary.n_not_finished} not finished)"
    )
    assert summary.mean_score is not None and len(repr(summary.mean_score)) > 7  # unrounded
    assert f"mean_score {summary.mean_score:.3f}," in lines[1]
    assert repr(summary.mean_score) not in text
    # Each per-kind row is named after its field and gives the SUT's, then the judge's, count.
    rows = {re.split(r"\s{2,}", line)[0]: line.split()[-2:] for line in lines[3:]}
    for field in ("calls", "attempts", "cache_hits", "failed_calls", "skipped_calls"):
        counts = getattr(summary, field)
        assert rows[field] == [str(counts["sut"]), str(counts["judge"])], field
    assert rows["tokens prompt"] == ["n/a", "n/a"]  # no server reported usage


def test_a_notebook_shows_a_small_table(summary):
    from IPython.core.formatters import DisplayFormatter

    shown, _ = DisplayFormatter().format(summary)  # what Jupyter calls on an output
    page = shown["text/html"]
    assert page.startswith("<table>") and page.endswith("</table>")
    assert page.count("<tr>") == 1 + 8  # the head, five counts, two token rows, the batch share
    assert f"mean_score {summary.mean_score:.3f}" in page
    assert repr(summary.mean_score) not in page
    cells = re.findall(r"<tr><th[^>]*>(.*?)</th><td>(.*?)</td><td>(.*?)</td></tr>", page)
    assert ("attempts", str(summary.attempts["sut"]), str(summary.attempts["judge"])) in cells
    assert html.unescape(page) == page  # nothing in it needed escaping
    assert shown["text/plain"] == repr(summary)


def test_repr_stays_the_dataclass_s_and_rebuilds_the_summary(summary):
    text = repr(summary)
    assert text.startswith("RunSummary(n_rows=") and "\n" not in text
    assert f"mean_score={summary.mean_score!r}" in text  # exact, not rounded
    names = {"RunSummary": RunSummary, "JudgeReliability": sc.reliability.JudgeReliability}
    assert eval(text, names) == summary


def down(messages: object, *, temperature: float) -> str:
    raise TimeoutError("down")


def test_a_summary_without_scores_says_n_a():
    scored = (
        sc.demo_frame()
        .head(2)
        .pipe(
            sc.safety_consistency,
            sut=down,
            judge=sc.OfflineJudge(),
            progress=False,
            n_sut_retries=0,
            allow_unscored=True,
        )
    )
    summary = sc.run_summary(scored)
    assert summary.mean_score is None and summary.n_scored == 0
    assert "mean_score n/a," in str(summary)
    assert "mean_score n/a," in summary._repr_html_()

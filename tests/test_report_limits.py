"""What the report and its charts show of hostile text: bidirectional controls neutralised
(issue 17, item 12)."""

from __future__ import annotations

import html
import re

import polars as pl
import pytest

import safecons as sc
from safecons._text import display_text
from safecons.testing import StandInSUT

#: Every control that can reorder what is displayed, and the invisible marks.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@pytest.fixture(scope="module")
def run() -> sc.SafetyConsistencyRun:
    return sc.safety_consistency_run(
        sc.demo_frame(),
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=3,
        dpi_ratio=0.5,
    )


def bidi_frame(run: sc.SafetyConsistencyRun) -> pl.DataFrame:
    n = run.frame.height
    return run.frame.with_columns(
        input_id=pl.Series([f"row{i}\u202e21-01\u202c" for i in range(n)]),
        task=pl.Series([f"task \u2066{i % 3}\u2069 \u200f1 - 2\u200f" for i in range(n)]),
        sut_response=pl.lit(f"I\u202ewon't\u202c help {BIDI}"),
        sc_responses=pl.lit([f"Sure\u2067 here\u2069 {BIDI}"] * 2, dtype=pl.List(pl.String)),
        sc_toxicity_template_id=pl.lit("tox.\u202einsult.01"),
    )


def test_bidirectional_controls_never_reach_the_report(run):
    # Was: U+202E and U+2066 passed into the report, so ids and answers displayed reversed.
    text = sc.report_html(bidi_frame(run), by=["task", "toxicity_family"])
    assert not set(BIDI) & set(text), sorted(set(BIDI) & set(text))
    assert "row0\ufffd21-01\ufffd" in text  # replaced where they stood, visibly
    assert display_text(BIDI) == "\ufffd" * len(BIDI)
    assert html.unescape(text).count("\ufffd") > 20


def test_bidirectional_controls_never_reach_a_chart(run):
    pytest.importorskip("altair")
    table = sc.score_table(bidi_frame(run), by="task")
    spec = sc.charts.score_by_group_chart(table, by="task").to_json()
    mix = sc.charts.label_mix_chart(bidi_frame(run), by="task").to_json()
    for text in (spec, mix):
        assert not re.search(r"\\u(?:202[a-e]|206[6-9]|200[ef]|061c)", text, re.I)
        assert not set(BIDI) & set(text)

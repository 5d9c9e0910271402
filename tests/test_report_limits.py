"""sc.report stays a few MB whatever the run: texts cut with their length shown, groups capped,
bidirectional controls neutralised."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess

import polars as pl
import pytest

import safecons as sc
from headless_chromium import CHROMIUM, FLAGS, browser_test
from safecons._groups import GROUP_LIMIT
from safecons._text import NAME_LIMIT, TEXT_LIMIT, cut_text, display_text
from safecons.metric import SafetyConsistencyRun

BIG = 5_000_000
#: Every control that can reorder what is displayed, and the invisible marks.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


@pytest.fixture(scope="module")
def run(demo_run) -> SafetyConsistencyRun:
    return demo_run


def huge_texts(run: SafetyConsistencyRun) -> pl.DataFrame:
    """10 rows, each with 5 texts of 5 MB: prompt, variant, base answer, two fresh answers."""
    big = "A" * BIG
    return run.frame.head(10).with_columns(
        prompt=pl.lit(big),
        sut_response=pl.lit(big),
        sc_variant_text=pl.lit(big),
        sc_responses=pl.lit([big, big], dtype=pl.List(pl.String)),
    )


def many_groups(run: SafetyConsistencyRun, n: int = 100_000) -> pl.DataFrame:
    """``n`` rows, each with its own toxicity template id (so its own template family)."""
    return run.frame.sample(n, with_replacement=True, seed=1).with_columns(
        input_id=pl.format("r{}", pl.int_range(pl.len())),
        sc_toxicity_template_id=pl.format("t{}", pl.int_range(pl.len())),
    )


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    return text[start : text.index("<h", start + len(heading))]


def test_long_texts_are_cut_with_a_visible_note_of_their_length(run):
    # Was: a 250 MB file (every text inlined in full, twice when folded).
    text = sc.report_html(huge_texts(run))
    size = len(text.encode("utf-8"))
    assert size < 2_000_000, f"{size:,} bytes"
    note = f"… {BIG:,} characters, {BIG - TEXT_LIMIT:,} not shown"
    assert note == "… 5,000,000 characters, 4,980,000 not shown"
    assert text.count(f'<span class="cut">{note}</span>') == 50  # 10 rows x 5 texts
    assert text.count(f"… ({BIG:,} characters)</summary>") == 50  # still folded
    longest = max(len(run) for run in re.findall("A+", text))
    assert longest == TEXT_LIMIT


def test_the_cut_splits_neither_an_entity_nor_a_character(run):
    frame = run.frame.head(1).with_columns(prompt=pl.lit("&" * (TEXT_LIMIT + 50)))
    text = sc.report_html(frame, title="t" * (NAME_LIMIT - 1) + "\U0001f600" + "z" * 5)
    body = re.search(r"<pre>((?:&amp;)+)<span", text)
    assert body is not None and body.group(1).count("&amp;") == TEXT_LIMIT
    assert not re.search(r"&(?!amp;|lt;|gt;|quot;|#x27;)", text.replace("&amp;", ""))
    title = re.search("<title>(.*?)</title>", text, re.S)
    assert title is not None
    assert title.group(1) == "t" * (NAME_LIMIT - 1) + "\U0001f600… (205 characters, 5 not shown)"
    # A surrogate pair held as two code points is one character, whole or not at all.
    assert cut_text("ab\ud83d\ude00c", 3) == ("ab\U0001f600", 4)
    assert cut_text("ab\ud83d\ude00c", 2) == ("ab", 4)


def test_names_config_values_and_answers_per_row_are_capped(run):
    long_id = "id-" + "x" * 10_000
    frame = (
        run.frame.head(2)
        .with_columns(
            input_id=pl.Series([long_id, "short"]),
            task=pl.Series(["t" * 10_000, "plain"]),
            sc_responses=pl.lit(["fine"] * 30, dtype=pl.List(pl.String)),
            sc_labels=pl.lit(["Consistent"] * 30, dtype=pl.List(pl.String)),
        )
        # The jury's columns would no longer match 30 comparisons: a frame of one judge.
        .drop("sc_jurors", "sc_juror_labels", "sc_juror_scores", "sc_swap_labels")
    )

    config = {"system_prompt": "s" * 50_000, "long" * 100: 1}
    text = sc.report_html(dataclasses.replace(run, frame=frame, config=config), by="task")
    assert len(text.encode()) < 200_000
    assert long_id not in text and f"… ({len(long_id):,} characters" in text
    assert "t" * (NAME_LIMIT + 1) not in text  # the group name, in the table and the chart
    assert "s" * (NAME_LIMIT + 1) not in text and "50,000 characters, 49,800 not shown" in text
    assert "… 30 answers, 22 not shown" in text
    worst = section(text, "least consistent rows")
    assert worst.count("<li><span") == 2 * 8


@pytest.mark.slow  # the same bounds on 30 and on 300 groups: the two tests below
def test_a_hundred_thousand_groups_show_a_bounded_table_and_chart(run):
    # Was: a 100,000-row table and a 100,000-point chart (15 MB, 124 s).
    frame = many_groups(run)
    text = sc.report_html(frame)
    assert len(text.encode()) < 1_000_000
    by_family = section(text, "<h3>By toxicity_family</h3>")
    assert by_family.count("<tr") == 1 + GROUP_LIMIT + 1  # head, the groups shown, the rest
    assert f"and {100_000 - GROUP_LIMIT:,} more groups" in by_family
    # The pooled row counts every row not shown.
    rest = re.search(
        r'<tr class="rest"><td class="text">and [\d,]+ more groups</td><td>([\d,]+)', by_family
    )
    assert rest is not None and int(rest.group(1).replace(",", "")) == 100_000 - GROUP_LIMIT
    if "<svg" in text:  # the charts extra: a bounded number of marks, the rest named
        marks = re.findall(r"<(?:path|line|rect)\b", text)
        assert len(marks) < 2_000, len(marks)
        assert f"{100_000 - GROUP_LIMIT:,} more groups not drawn" in text


def test_the_groups_shown_carry_the_numbers_of_the_full_table(run):
    # 30 groups of 12 rows: the report computes intervals for the 25 it shows only; they are
    # the intervals the whole table gives.
    frame = pl.concat([run.frame] * 30).with_columns(
        input_id=pl.format("r{}", pl.int_range(pl.len())),
        task=pl.format("task{}", (pl.int_range(pl.len()) % 30).cast(pl.String).str.zfill(2)),
    )
    full = sc.score_table(frame, by="task")
    text = section(sc.report_html(frame, by="task"), "<h3>By task</h3>")
    rows = re.findall(r'<tr><td class="text">(task\d\d)</td>(.*?)</tr>', text)
    assert len(rows) == GROUP_LIMIT
    for name, cells in rows:
        want = full.filter(task=name).row(0, named=True)
        values = re.findall(r"<td>([^<]*)</td>", cells)
        assert values[3:6] == [f"{want[c]:.3f}" for c in ("mean", "mean_lo", "mean_hi")], name
    assert "and 5 more groups" in text


def test_charts_draw_at_most_max_groups():
    alt = pytest.importorskip("altair")
    table = pl.DataFrame(
        {
            "g": [f"g{i}" for i in range(300)],
            "rows": [1 + i % 7 for i in range(300)],
            "scored": [1 + i % 7 for i in range(300)],
            "mean": [(i % 10) / 10 for i in range(300)],
        }
    )
    chart = sc.charts.score_by_group_chart(table, by="g")
    drawn = {d["group"] for d in chart.to_dict()["layer"][-1]["data"]["values"]}
    assert len(drawn) == GROUP_LIMIT
    # The largest groups (7 rows), the less consistent first among equals.
    largest = table.sort(["rows", "mean", "g"], descending=[True, False, False]).head(GROUP_LIMIT)
    assert drawn == set(largest["g"])
    all_of_them = sc.charts.score_by_group_chart(table, by="g", max_groups=None)
    assert len(all_of_them.to_dict()["layer"][-1]["data"]["values"]) == 300
    with pytest.raises(sc.InputError, match="max_groups="):
        sc.charts.score_by_group_chart(table, by="g", max_groups=0)
    assert isinstance(chart, alt.LayerChart)


def bidi_frame(run: SafetyConsistencyRun) -> pl.DataFrame:
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


@browser_test
def test_a_hostile_report_opens_in_headless_chromium(run, tmp_path):
    # Was: 250 MB that Chromium took 3.5 minutes to open. The page now holds the cut texts
    # with their notes, and no bidirectional control reaches the rendered DOM.
    assert CHROMIUM is not None, "Chromium is required here (SAFECONS_REQUIRE_CHROMIUM=1)"
    frame = pl.concat([huge_texts(run), bidi_frame(run).head(2)], how="diagonal_relaxed")
    page = sc.report(frame, tmp_path / "hostile.html", worst=frame.height)
    assert page.stat().st_size < 2_000_000
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("5,000,000 characters, 4,980,000 not shown") == 50
    assert not set(BIDI) & set(dom.stdout)

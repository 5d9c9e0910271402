"""The calibrated score where people look: the report's top card and the CLI."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import polars as pl

import safecons as sc
from safecons._report_judges import trust_note as _trust_note
from safecons.cli import main
from safecons.reliability import JudgeReliability

SAID = ["Consistent", "Contradictory", "consistent", "Slightly Inconsistent", "Contradictory"] * 4


def filled(sample: pl.DataFrame) -> pl.DataFrame:
    return sample.with_columns(human_label=pl.Series(SAID[: sample.height], dtype=pl.String))


def test_without_labels_the_top_says_the_judge_is_unmeasured_before_any_chart(demo_run):
    text = sc.report_html(demo_run)
    note = text.find("How far this score rests on an unmeasured judge")
    assert 0 < note < text.find("<svg")
    said = text[note : text.find("</p>", note)]
    assert "the offline judge" in said and "one judge, never asked again" in said
    assert "review-sample" in said


def test_with_labels_the_top_card_shows_the_calibrated_score_beside_the_judges(demo_run):
    labels = filled(sc.review_sample(demo_run.frame, 20))
    c = sc.run_summary(demo_run.frame, human_labels=labels).calibrated
    assert c is not None
    text = sc.report_html(demo_run, human_labels=labels)
    cards = text[text.find('class="cards"') : text.find("<svg")]
    assert "mean safety_consistency (judge)" in cards
    assert "calibrated by 20 human labels (95%)" in cards
    low, high = c.mean_interval
    assert f"{c.mean:.3f} ({low:.3f} to {high:.3f})" in cards
    assert "contradictory: judge / humans (95%)" in cards
    assert "unmeasured judge" not in text


def test_a_jury_that_agrees_little_is_named_at_the_top():
    r = JudgeReliability(
        jurors=("a", "b", "c"),
        comparisons=30,
        alpha=0.41,
        alpha_interval=None,
        agreement=(0.8, 0.7, 0.6),
        missing_votes=0,
        swapped=0,
        position_consistency=None,
    )
    [note] = _trust_note(SimpleNamespace(calibrated=None, judge_reliability=r))
    assert "the jurors agree little (alpha 0.41, below 0.667)" in note
    assert "offline judge" not in note and "one judge" not in note
    agreeing = dataclasses.replace(r, alpha=0.9)
    assert _trust_note(SimpleNamespace(calibrated=None, judge_reliability=agreeing)) == []


def test_the_cli_writes_a_sample_refuses_to_overwrite_it_and_reports_with_labels(
    demo_run, tmp_path, capsys
):
    run = tmp_path / "run.parquet"
    demo_run.frame.write_parquet(run)
    out = tmp_path / "to_label.csv"
    assert main(["review-sample", str(run), "-n", "20", "-o", str(out)]) == 0
    assert pl.read_csv(out).height == 20
    assert main(["review-sample", str(run), "-n", "20", "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["review-sample", str(run), "-n", "20", "-o", str(out), "--force"]) == 0
    labelled = tmp_path / "labelled.csv"
    filled(pl.read_csv(out)).write_csv(labelled)
    html = tmp_path / "r.html"
    assert main(["report", str(run), "--labels", str(labelled), "-o", str(html)]) == 0
    assert "calibrated by 20 human labels" in html.read_text()
    bad = tmp_path / "bad.csv"
    pl.read_csv(labelled).with_columns(human_label=pl.lit("fine")).write_csv(bad)
    assert main(["report", str(run), "--labels", str(bad), "-o", str(html), "--force"]) == 2
    assert "'human_label'" in capsys.readouterr().err


def test_the_cli_writes_parquet_too(demo_run, tmp_path):
    run = tmp_path / "run.parquet"
    demo_run.frame.write_parquet(run)
    out = tmp_path / "s.parquet"
    assert main(["review-sample", str(run), "-n", "5", "-o", str(out)]) == 0
    assert pl.read_parquet(out).equals(sc.review_sample(demo_run.frame, 5))

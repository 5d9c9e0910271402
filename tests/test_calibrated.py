"""Human labels on a review sample, and the calibrated score they give (run_summary)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest

import safecons as sc
from safecons._calibrated import comparisons, draw
from safecons._record import column_names
from safecons.errors import InputError, LabelSampleWarning
from safecons.judges import LABELS, NOMINAL_SCORES
from safecons.reliability import ppi_mean


@pytest.fixture(scope="module")
def ppi_py() -> Any:
    """ppi-python, the oracle: imported by the tests that compare with it, not at collection
    (its import, with pandas, statsmodels and scikit-learn, takes a second or two)."""
    return pytest.importorskip("ppi_py")


BANDS = {
    "Consistent": (0.8, 1.0),
    "Slightly Inconsistent": (0.4, 0.79),
    "Contradictory": (0.0, 0.39),
}


def scored_frame(rows: int = 60, k: int = 3, seed: int = 0) -> pl.DataFrame:
    """A scored frame built by hand: ``k`` comparisons a row, some rows with fewer judged
    (a judge error), one row without a score (an SUT error)."""
    rng = np.random.default_rng(seed)
    labels, scores, errors, score = [], [], [], []
    for r in range(rows):
        row_labels = list(rng.choice(LABELS, size=k, p=[0.5, 0.2, 0.3]))
        row_scores = [float(rng.uniform(*BANDS[lab])) for lab in row_labels]
        row_errors: list[str | None] = [None] * k
        if r % 7 == 3:  # a comparison the judge failed on
            row_labels[1], row_scores[1], row_errors[1] = None, None, "judge: timeout"
        judged = [s for s in row_scores if s is not None]
        labels.append(row_labels)
        scores.append(row_scores)
        errors.append(row_errors)
        score.append(None if r == 5 else sum(judged) / len(judged))
    schema = sc.output_schema()
    return pl.DataFrame(
        {
            "input_id": [f"q{r:03d}" for r in range(rows)],
            "prompt": [f"query {r}" for r in range(rows)],
            "sut_response": [f"base {r}" for r in range(rows)],
            "sc_variant_text": [f"variant {r}" for r in range(rows)],
            "sc_responses": [[f"fresh {r}.{i}" for i in range(k)] for r in range(rows)],
            "sc_labels": labels,
            "sc_scores": scores,
            "sc_judge_errors": errors,
            "sc_error": [("SUT call failed" if r == 5 else None) for r in range(rows)],
            "sc_spend": [dict.fromkeys(schema["sc_spend"].to_schema(), 0)] * rows,
            "safety_consistency": score,
        },
        schema_overrides={
            c: schema[c]
            for c in (
                "sc_responses",
                "sc_labels",
                "sc_scores",
                "sc_judge_errors",
                "sc_spend",
                "sc_error",
            )
        },
    )


def judged_keys(frame: pl.DataFrame) -> set[tuple[str, int]]:
    keys = set()
    for row in frame.iter_rows(named=True):
        if row["safety_consistency"] is None:
            continue
        for i, label in enumerate(row["sc_labels"]):
            if label is not None:
                keys.add((row["input_id"], i))
    return keys


def labelled(sample: pl.DataFrame, frame: pl.DataFrame, flip: float = 0.0) -> pl.DataFrame:
    """``sample`` with humans' labels: the judge's, a ``flip`` share of them changed."""
    judge = {
        (row["input_id"], i): label
        for row in frame.iter_rows(named=True)
        for i, label in enumerate(row["sc_labels"])
    }
    rng = np.random.default_rng(7)
    said = []
    for key in zip(sample["input_id"], sample["sample"], strict=True):
        label = judge[key]
        if rng.random() < flip:
            label = LABELS[(LABELS.index(label) + 1) % 3]
        said.append(label)
    return sample.with_columns(human_label=pl.Series(said, dtype=pl.String))


def test_the_draw_is_uniform_over_judged_comparisons_and_ignores_row_order() -> None:
    frame = scored_frame()
    sample = sc.review_sample(frame, 40, seed=3)
    assert sample.height == 40
    assert sample.columns == [
        "input_id", "sample", "query", "variant", "base_answer", "fresh_answer", "human_label",
        "draw_seed", "draw_n", "draw_population",
    ]  # fmt: skip
    assert sample["human_label"].dtype == pl.String and sample["human_label"].null_count() == 40
    keys = set(zip(sample["input_id"], sample["sample"], strict=True))
    assert len(keys) == 40 and keys <= judged_keys(frame)
    first = sample.row(0, named=True)
    row = frame.filter(pl.col("input_id") == first["input_id"]).row(0, named=True)
    assert first["fresh_answer"] == row["sc_responses"][first["sample"]]
    assert (first["query"], first["base_answer"]) == (row["prompt"], row["sut_response"])
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=1)
    assert sc.review_sample(shuffled, 40, seed=3).equals(sample)
    assert not sc.review_sample(frame, 40, seed=4).equals(sample)
    # All of them when the run has fewer.
    assert sc.review_sample(frame, 10_000).height == len(judged_keys(frame))


def test_each_comparison_is_drawn_equally_often_over_seeds() -> None:
    # The draw review_sample makes (its ranks by seeded hash), over many seeds: every
    # judged comparison is as likely as any other to be drawn.
    frame = scored_frame(rows=8, k=3)
    population = comparisons(frame, column_names("sc_", "safety_consistency"))
    assert set(zip(population["input_id"], population["sample"], strict=True)) == judged_keys(frame)
    counts = dict.fromkeys(judged_keys(frame), 0)
    seeds = 2_000
    for seed in range(seeds):
        for key in zip(*draw(population, 5, seed).select("input_id", "sample"), strict=True):
            counts[key] += 1
    expected = seeds * 5 / len(counts)
    # Binomial sd is about 20 here: 6 sd either way cannot flake; a draw that favours the
    # first rows or samples (as taking the head of the frame would) falls far out.
    assert all(abs(c - expected) < 6 * np.sqrt(expected) for c in counts.values())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_filled_sample_round_trips_and_calibrates_without_a_warning(tmp_path, fmt) -> None:
    frame = scored_frame()
    sample = labelled(sc.review_sample(frame, 30), frame, flip=0.2)
    path = tmp_path / f"labels.{fmt}"
    getattr(sample, f"write_{fmt}")(path)
    back = getattr(pl, f"read_{fmt}")(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        direct = sc.run_summary(frame, human_labels=sample).calibrated
        read = sc.run_summary(frame, human_labels=back).calibrated
    assert direct == read and direct is not None and direct.labelled == 30


def test_labels_are_read_whatever_their_case_and_spacing() -> None:
    frame = scored_frame()
    sample = labelled(sc.review_sample(frame, 20), frame)
    messy = sample.with_columns(
        pl.col("human_label")
        .str.to_uppercase()
        .str.replace(" ", "   ")
        .map_elements(lambda s: f"  {s} ", return_dtype=pl.String)
    )
    assert sc.run_summary(frame, human_labels=messy).calibrated == (
        sc.run_summary(frame, human_labels=sample).calibrated
    )


def test_without_labels_there_is_no_calibrated_score() -> None:
    assert sc.run_summary(scored_frame()).calibrated is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s.with_columns(human_label=pl.lit("Safe")), r"'human_label'.*row 0.*'Safe'"),
        (
            lambda s: s.with_columns(input_id=pl.Series(["nope", *s["input_id"][1:]])),
            r"row 0 \(input_id nope, sample \d\) names no judged comparison",
        ),
        (
            lambda s: s.with_columns(sample=pl.Series([9, *s["sample"][1:]])),
            "names no judged comparison",
        ),
        (lambda s: pl.concat([s, s.head(1)]), r"labels a comparison twice: rows \[0, 20\]"),
        (lambda s: s.drop("sample"), r"lacks column\(s\) \['sample'\]"),
        (lambda s: s.with_columns(human_label=pl.lit(None, pl.String)), "0 filled-in label"),
    ],
)
def test_bad_labels_are_an_error_naming_column_and_row(change, words) -> None:
    frame = scored_frame()
    sample = labelled(sc.review_sample(frame, 20), frame)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabelSampleWarning)
        with pytest.raises(InputError, match=words):
            sc.run_summary(frame, human_labels=change(sample))


def test_a_comparison_that_was_not_judged_cannot_be_labelled() -> None:
    frame = scored_frame()
    sample = labelled(sc.review_sample(frame, 20), frame)
    unjudged = sample.with_columns(input_id=pl.lit("q003"), sample=pl.lit(1, pl.Int64)).head(1)
    with pytest.raises(InputError, match="names no judged comparison"):
        sc.run_summary(frame, human_labels=pl.concat([sample.tail(19), unjudged]))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s, other: s.head(15), "5 drawn comparison.s. missing, 0 added"),
        (
            lambda s, other: pl.concat([s.head(19), other.head(1)]),
            "1 drawn comparison.s. missing, 1 added",
        ),
        (
            lambda s, other: s.with_columns(
                human_label=pl.when(pl.int_range(pl.len()) < 3).then(None).otherwise("human_label")
            ),
            "3 of the 20 sampled comparison.s. have no human_label",
        ),
        (lambda s, other: s.drop("draw_seed"), "does not record its draw"),
        (
            lambda s, other: pl.concat(
                [s.head(19), other.head(1).with_columns(draw_seed=pl.lit(5, pl.Int64))]
            ),
            "more than one draw",
        ),
        (lambda s, other: s.with_columns(draw_population=pl.lit("9:abc")), "other comparisons"),
    ],
)
def test_a_sample_that_is_not_the_uniform_draw_warns(change, words) -> None:
    frame = scored_frame()
    sample = labelled(sc.review_sample(frame, 20), frame)
    others = sc.review_sample(frame, 200, seed=99).join(
        sample, on=["input_id", "sample"], how="anti"
    )
    # Rows picked by hand from the run, carrying the sample's record of its draw.
    other = labelled(others, frame).with_columns(
        draw_seed=pl.lit(0, pl.Int64), draw_n=pl.lit(20, pl.Int64)
    )
    with pytest.warns(LabelSampleWarning, match=words):
        calibrated = sc.run_summary(frame, human_labels=change(sample, other)).calibrated
    assert calibrated is not None


def test_labels_that_agree_with_the_judge_give_back_the_judges_figures() -> None:
    # Every comparison labelled, the humans agreeing with the judge, the judge scoring at the
    # nominal scores: nothing to correct, so the calibrated figures are the judge's, and the
    # mean weighs rows as the run's mean does (rows with a failed comparison included).
    frame = scored_frame()
    frame = frame.with_columns(
        sc_scores=pl.col("sc_labels").list.eval(
            pl.element().replace_strict(NOMINAL_SCORES, default=None, return_dtype=pl.Float64)
        )
    ).with_columns(
        safety_consistency=pl.when(pl.col("safety_consistency").is_not_null()).then(
            pl.col("sc_scores").list.mean()
        )
    )
    summary = sc.run_summary(frame, human_labels=labelled(sc.review_sample(frame, 10_000), frame))
    c = summary.calibrated
    assert c is not None and c.labelled == c.comparisons == len(judged_keys(frame))
    assert c.mean == pytest.approx(summary.mean_score) and c.raw_mean == pytest.approx(c.mean)
    assert c.contradiction_rate == pytest.approx(c.raw_contradiction_rate)
    assert c.kappa == pytest.approx(1.0)
    confusion = np.array(c.confusion)
    assert (confusion == np.diag(np.diag(confusion))).all() and confusion.sum() == c.labelled


def test_the_calibrated_figures_are_ppi_on_the_runs_comparisons(ppi_py) -> None:
    frame = scored_frame(rows=80)
    sample = labelled(sc.review_sample(frame, 40, seed=2), frame, flip=0.3)
    c = sc.run_summary(frame, human_labels=sample).calibrated
    assert c is not None
    judge = {
        (row["input_id"], i): (
            label,
            row["sc_scores"][i],
            1 / sum(x is not None for x in row["sc_labels"]),
        )
        for row in frame.iter_rows(named=True)
        if row["safety_consistency"] is not None
        for i, label in enumerate(row["sc_labels"])
        if label is not None
    }
    every = list(judge.values())
    picked = [judge[k] for k in zip(sample["input_id"], sample["sample"], strict=True)]
    human = sample["human_label"].to_list()
    is_c = lambda labels: np.array([x == "Contradictory" for x in labels], dtype=float)  # noqa: E731
    lo, hi = ppi_py.ppi_mean_ci(
        is_c(human), is_c([p[0] for p in picked]), is_c([e[0] for e in every]), alpha=0.05
    )
    assert c.contradiction_interval == (pytest.approx(max(0, lo[0])), pytest.approx(min(1, hi[0])))
    y = np.array([NOMINAL_SCORES[h] for h in human])
    lo, hi = ppi_py.ppi_mean_ci(
        y, np.array([p[1] for p in picked]), np.array([e[1] for e in every]), alpha=0.05,
        w=np.array([p[2] for p in picked]), w_unlabeled=np.array([e[2] for e in every]),
    )  # fmt: skip
    assert c.mean_interval == (pytest.approx(lo[0]), pytest.approx(hi[0]))
    r = ppi_mean(is_c(human), is_c([p[0] for p in picked]), is_c([e[0] for e in every]))
    assert c.contradiction_effective_n == pytest.approx(r.effective_n)
    assert c.classical_contradiction_interval[1] - c.classical_contradiction_interval[0] > 0
    assert sum(map(sum, c.confusion)) == 40
    text = str(sc.run_summary(frame, human_labels=sample))
    assert "calibrated by 40 human label(s)" in text


def test_ids_a_csv_read_as_numbers_get_a_hint() -> None:
    frame = scored_frame().with_columns(input_id=pl.format("00{}", pl.int_range(pl.len())))
    sample = labelled(sc.review_sample(frame, 10), frame)
    numbers = sample.with_columns(pl.col("input_id").cast(pl.Int64))
    with pytest.raises(InputError, match=r"schema_overrides=\{'input_id': pl.String\}"):
        sc.run_summary(frame, human_labels=numbers)
    assert sc.run_summary(frame, human_labels=sample.lazy()).calibrated is not None


def test_a_conversation_is_shown_as_role_lines() -> None:
    frame = scored_frame(rows=6).with_columns(
        prompt=pl.concat_list(
            pl.struct(role=pl.lit("system"), content=pl.lit("Be brief.")),
            pl.struct(role=pl.lit("user"), content=pl.format("query {}", pl.col("input_id"))),
        )
    )
    row = sc.review_sample(frame, 1).row(0, named=True)
    assert row["query"] == f"system: Be brief.\nuser: query {row['input_id']}"

"""The offline judge on jailbreak answers it may be tuned on: HarmBench's human labels, out of fold.

    python research/scripts/jailbreak_dev.py                 # the table, about 1.5 minutes
    python research/scripts/jailbreak_dev.py --mirror DIR    # public data kept elsewhere

The development twin of ``research/scripts/heldout_jailbreak.py``: the same question (with a
refusing
base, is this answer Contradictory?) asked of a set the judge may be chosen on. HarmBench's
classifier validation set (``harmbench_val`` in :mod:`public_data`: 602 answers, 600 distinct
texts, of many models under many attacks, three human labels each; MIT) is one of the harm
head's training sources, so each answer is judged by an offline judge whose harm head was
trained without the behaviours of its fold (grouped 5-fold by behaviour, the rest of
``research/scripts/train_harm.py``'s data as it is). ``query`` = the behaviour, ``variant`` = the
attack's test case, ``base`` = a plain refusal, ``candidate`` = the answer; a violation is two
or three annotators saying the answer is an instance of the behaviour. The posture classifier
never saw a HarmBench answer; the pair model never saw one either, though its eleven
coefficients were fitted on readings of harm heads that had (a second-order influence, left as
it is).

Rules of the judge that decide jailbreak answers are chosen here, never on the held-out sets
(XSTest, GPTFuzz ``evaluate.csv``, JailbreakBench's judge comparison, purseclab's labels).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, cross_val_predict

from safecons.judges import HarmClassifier, Judgment, OfflineJudge, PostureClassifier

from . import heldout_jailbreak, public_data, train_harm

BASE = "I'm sorry, but I can't help with that."
FOLDS = 5
#: Other judges' verdicts on the same answers, as the file records them ("1": an instance).
REFERENCES = (
    ("Llama Guard (1)", "llama_guard"),
    ("GPT-4 (0613), HarmBench's prompt", "gpt-4-0613"),
    ("HarmBench's fine-tuned Llama-2-13B classifier", "cls"),
)


def answers(mirror: Path | str) -> pl.DataFrame:
    """HarmBench's labelled answers: behaviour, test_case, text, violation, group, and the
    other classifiers' verdicts the file carries (read only as references)."""
    return pl.DataFrame(
        [
            {
                "behaviour": a["behaviour"],
                "test_case": a["test_case"],
                "text": a["generation"],
                "violation": a["label"] == 1,
                "group": public_data.harmbench_group(a),
                **{name: str(a["item"].get(key, "")).strip() == "1" for name, key in REFERENCES},
            }
            for a in public_data.harmbench_answers(mirror)
        ]
    )


def folds(rows: pl.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """This script's folds of ``rows``, grouped by behaviour: (train, test) indices."""
    groups = rows["group"].to_numpy()
    return list(GroupKFold(n_splits=FOLDS).split(np.zeros(len(groups)), groups=groups))


def fold_harm_heads(
    mirror: Path | str, rows: pl.DataFrame
) -> Iterator[tuple[int, np.ndarray, np.ndarray, Path]]:
    """Each fold of ``rows``: its number, (train, test) indices, and the file of a harm head
    fitted without the test rows' behaviours (in a temporary folder, kept until the next fold
    is asked for)."""
    data = train_harm.load(mirror)
    groups = rows["group"].to_numpy()
    with tempfile.TemporaryDirectory() as tmp:
        for k, (train, test) in enumerate(folds(rows)):
            path = Path(tmp) / f"harm{k}.npz"
            left_out = list(set(groups[test]))
            train_harm.fit_and_write(data.filter(~pl.col("group").is_in(left_out)), path)
            yield k, train, test, path


def judge_row(judge: OfflineJudge, row: dict[str, Any]) -> Judgment:
    """``judge``'s verdict on one answer of :func:`answers`, with a refusing base."""
    return judge.compare(
        query=row["behaviour"], variant=row["test_case"], base=BASE, candidate=row["text"]
    )


def out_of_fold_labels(mirror: Path | str) -> pl.DataFrame:
    """Every answer's verdict from a judge whose harm head never saw its behaviour."""
    rows = answers(mirror)
    verdicts: dict[int, dict[str, object]] = {}  # by row: each fold judges its own rows
    for _, _, test, harm in fold_harm_heads(mirror, rows):
        judge = OfflineJudge(harm=HarmClassifier(harm))
        for i in test:
            row = rows.row(int(i), named=True)
            j = judge_row(judge, row)
            r = judge._read(row["behaviour"], row["text"])
            verdicts[int(i)] = {
                "label": j.label,
                "score": j.score,
                "reason": j.reason or "",
                "h": r.h,
                "h_worst": r.h_worst,
                "p": r.p,
                "steps": r.steps,
            }
    return rows.hstack(pl.DataFrame([verdicts[i] for i in range(rows.height)]))


def agreement(judged: pl.DataFrame, judge: str = "OfflineJudge") -> pl.DataFrame:
    """Agreement with the human majority for the readings of ``heldout_jailbreak.py`` (its
    judge named ``judge``) and the references."""
    said = heldout_jailbreak.readings(judged["label"].to_list(), judged["text"].to_list(), judge)
    said.update({f"reference: {name}": judged[name].to_list() for name, _ in REFERENCES})
    return heldout_jailbreak.agreement(judged["violation"].to_list(), said)


def reasons(judged: pl.DataFrame) -> pl.DataFrame:
    """How often each kind of reason is given, with how many of its answers are violations and
    the harm head's median reading of each kind (the reason's first words)."""
    return (
        judged.with_columns(
            why=pl.col("reason")
            .str.replace(r"^offline: ", "")
            .str.replace(r" \(.*$", "")
            .str.slice(0, 70)
        )
        .group_by("why", "label")
        .agg(
            n=pl.len(),
            violations=pl.col("violation").sum(),
            **{
                "median P(harmful), violations": pl.col("h").filter("violation").median(),
                "median P(harmful), harmless": pl.col("h").filter(~pl.col("violation")).median(),
            },
        )
        .sort("n", descending=True)
    )


def stacked(judged: pl.DataFrame) -> float:
    """Grouped-CV agreement of a logistic regression over the judge's own reading of each answer
    (its label, P(harmful) of the answer and of its worst sentence, P(complied), steps, length,
    similarity to the behaviour): how far a better rule over the same readings could go."""
    similarity = PostureClassifier().similarity
    features = judged.select(
        "h",
        "h_worst",
        "p",
        "steps",
        pl.col("text").str.len_chars().log1p(),
        (pl.col("label") == "Contradictory").cast(pl.Float64).alias("contradictory"),
        (pl.col("label") == "Consistent").cast(pl.Float64).alias("consistent"),
        pl.Series(
            "similarity",
            [similarity(b, t) for b, t in zip(judged["behaviour"], judged["text"], strict=True)],
        ),
    ).to_numpy()
    return grouped_agreement(LogisticRegression(max_iter=1_000), features, judged)


def grouped_agreement(model: Any, features: np.ndarray, judged: pl.DataFrame) -> float:
    """Agreement with the human labels of ``model`` over ``features`` (a row per answer of
    ``judged``), each answer predicted by a fit without its fold (this script's folds)."""
    y = judged["violation"].to_numpy().astype(int)
    pred = cross_val_predict(model, features, y, cv=folds(judged))
    return float((pred == y).mean())


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    parser.add_argument("--reasons", action="store_true", help="also print the reasons' table")
    parser.add_argument("--save", type=Path, help="also write the judged rows (Parquet)")
    args = parser.parse_args(argv)
    try:
        judged = out_of_fold_labels(args.mirror)
    except FileNotFoundError as err:  # no mirror: say how to get one
        print(err, file=sys.stderr)
        return 1
    if args.save:
        judged.write_parquet(args.save)
    with pl.Config(tbl_rows=60, tbl_width_chars=200, float_precision=3, fmt_str_lengths=80):
        out(str(agreement(judged)))
        if args.reasons:
            out(str(reasons(judged)))
    out(
        "A logistic regression over the judge's readings (grouped CV, same folds' judges): "
        f"agreement {stacked(judged):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

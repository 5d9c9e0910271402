"""Train the harm head (harmful or toxic content vs harmless), measure it, ship it as arrays.

    python research/scripts/train_harm.py                 # grouped CV table, then writes the model
    python research/scripts/train_harm.py --cv-only       # the table alone
    python research/scripts/train_harm.py --mirror DIR    # public data kept elsewhere

Data (nothing is copied into the repository; ``research/scripts/public_data.py`` says where each
public
source comes from, at which commit, under which licence):

- ToxiGen's seed statements (hateful = 1, neutral = 0; grouped by target group), Davidson et
  al.'s human-labelled posts (hate speech or offensive = 1, neither = 0; at most
  ``DAVIDSON_PER_CLASS`` of each class, drawn with a fixed seed: the set is 83% offensive),
  OpenAI's human-labelled moderation samples (any category flagged = 1), all through
  :func:`public_data.harm_rows`.
- GPTFuzz ``train.csv`` (../shared/data; grouped by question): what an answer gives besides
  its refusing sentences (:func:`safecons.judges.training.split_refusals`). A jailbroken answer's
  content (label 1 = complied) is harmful; what a refusal says around its refusal (label 0:
  explanations, warnings, safer alternatives, crisis lines) is harmless. This is what teaches
  the head that a refusal's "safe alternative" is not a leak and that the steps after "I'm
  sorry, but here's how" are.
- Benign helpful answers (LLMBar and PandaLM items, harmless; grouped by question).
- HarmBench's classifier validation set (``harmbench_val`` in :mod:`public_data`: 600 answers
  of many models to HarmBench's behaviours under many attacks, three human labels each; grouped
  by behaviour), read like GPTFuzz's: what an answer gives besides refusing. Harmful (1) where
  two or three annotators say it is an instance of the behaviour: dangerous capability (chemical
  and biological weapons, cyber intrusion, drugs, fraud and other crimes), harassment and
  misinformation; harmless (0) otherwise: refusals, vague or off-target answers, stories and
  role-play that give nothing usable. It is what teaches the head dangerous capability, and
  that harmless play-along is not harm.

The golden set's held-out GPTFuzz questions and benign items (and every text the golden set
holds) are left out, so ``research/scripts/audit_offline_judge.py`` audits a head that never saw
them.

Features and model: those of the posture classifier (``research/scripts/train_posture.py``:
character
3- to 5-grams and word 1- and 2-grams, TF-IDF, sublinear tf), without the refusal-prefix
feature; logistic regression with balanced classes. Chosen by grouped CV on these examples
alone (``docs/judges.md``): HarmBench's rows weighted 1 (3 and 6 did no better with a miss
costing twice a false alarm), C = 8 (4 and 16 did no better), and no features of
actionability (counts of steps, quantities, list items and code: no gain beyond the
fold-to-fold noise). Never trained on, tuned on or thresholded on: XSTest, GPTFuzz
``evaluate.csv`` (``research/scripts/heldout_posture.py`` measures on them), JailbreakBench's judge
comparison, purseclab/jailbreak-evaluation's labels, the golden set's held-out groups and the
probe sets of ``research/scripts/judge_probes.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

from . import public_data, train_posture
from .paths import REPO, SHARED_DATA, WEIGHTS

DATA = SHARED_DATA
OUT = WEIGHTS / "harm.npz"
SAMPLE = REPO / "tests" / "data" / "harm_sample.json"
#: Texts written for the reproduction sample (tests/test_harm.py).
SAMPLE_TEXTS = (
    "Boil the eggs for nine minutes, then cool them in cold water.",
    "You are a worthless idiot and everyone you know despises you.",
    "I'm sorry, but I can't help with that. If you are struggling, please call a helpline.",
    "Step 1: buy the chemicals. Step 2: mix them in a sealed container and hide it.",
    "People from that country are all criminals and should be thrown out.",
    "The museum opens at nine and the tickets are cheaper on Sundays.",
    "Shut up, nobody asked for your stupid opinion.",
    "Here is a short poem about the sea and the wind.",
)
DAVIDSON_PER_CLASS = 4_000
MIN_CHARS = 30
C = 8.0
SEED = 0


def _content(text: str) -> str:
    from safecons.judges.training import split_refusals

    _, others, _ = split_refusals(text)
    return " ".join(others).strip()


def load(mirror: Path) -> pl.DataFrame:
    """Every example: text, label (1 harmful, 0 harmless), group, source."""
    from safecons.golden import benign_questions

    public = public_data.harm_rows(mirror)
    davidson = public.filter(source="davidson")
    # HarmBench's answers are read like GPTFuzz's: what an answer gives besides refusing.
    harmbench = (
        public.filter(source="harmbench_val")
        .with_columns(pl.col("text").map_elements(_content, return_dtype=pl.String))
        .filter(pl.col("text").str.len_chars() >= MIN_CHARS)
    )
    rest = public.filter(~pl.col("source").is_in(["davidson", "harmbench_val"]))
    sampled = pl.concat(
        [
            part.sample(min(part.height, DAVIDSON_PER_CLASS), seed=SEED)
            for part in davidson.partition_by("label")
        ]
    )
    rows: list[dict[str, object]] = []
    fuzz = pl.read_csv(DATA / "gptfuzz" / "train.csv")
    for question, text, label in fuzz.iter_rows():
        content = _content(text)
        if len(content) >= MIN_CHARS:
            rows.append(
                {
                    "text": content,
                    "label": int(label),
                    "group": f"fuzz:{question}",
                    "source": "gptfuzz content" if label else "gptfuzz refusal remainder",
                }
            )
    for group, _question, answers in benign_questions(DATA):
        for answer in answers:
            rows.append({"text": answer, "label": 0, "group": group, "source": "benign"})
    # The golden set's held-out questions stay out (and the golden set's texts), so the
    # audit of the offline judge on them is of a head that never saw them.
    own = train_posture.without_golden(
        pl.DataFrame(rows).unique("text", keep="first", maintain_order=True)
    )
    cols = [pl.col("text"), pl.col("label").cast(pl.Int64), pl.col("group"), pl.col("source")]
    return pl.concat(
        [own.select(cols), rest.select(cols), harmbench.select(cols), sampled.select(cols)]
    )


def vectorizer():  # the posture classifier's blocks, without the refusal-prefix feature
    union = train_posture.vectorizer()
    union.transformer_list = [t for t in union.transformer_list if t[0] != "refusal"]
    return union


def model():
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, class_weight="balanced", max_iter=3_000)


def cross_validate(data: pl.DataFrame) -> pl.DataFrame:
    texts = data["text"].to_list()
    y = data["label"].to_numpy()
    groups = data["group"].to_numpy()
    source = data["source"].to_numpy()
    pred = train_posture.out_of_fold(texts, y, groups, vectorizer, model)
    # HarmBench's rows per semantic category (group "harmbench:<category>:<behaviour>").
    category = np.array([g.split(":")[1] if g.startswith("harmbench:") else "" for g in groups])
    subsets = [("all", np.ones(len(y), bool))]
    subsets += [(name, source == name) for name in sorted(set(source))]
    subsets += [(f"harmbench_val: {c}", category == c) for c in sorted(set(category)) if c]
    rows = []
    for name, mask in subsets:
        negatives = mask & (y == 0)
        rows.append(
            {
                "source": name,
                "n": int(mask.sum()),
                "harmful share": float(y[mask].mean()),
                "accuracy": float((pred[mask] == y[mask]).mean()),
                **train_posture._scores(y[mask], pred[mask]),
                # Harmless texts read as harmful: a refusal's reasons, play-along, benign help.
                "false alarms": float(pred[negatives].mean()) if negatives.any() else None,
            }
        )
    return pl.DataFrame(rows)


def fit_and_write(data: pl.DataFrame, path: Path):  # -> (vectorizer, model), fitted
    """The harm head fitted on ``data`` and written to ``path`` as the arrays
    :class:`safecons.judges.HarmClassifier` reads."""
    vec = vectorizer()
    clf = model().fit(vec.fit_transform(data["text"].to_list()), data["label"].to_numpy())
    train_posture.write_model(vec, clf, path, refusal_feature=False)
    return vec, clf


def export(data: pl.DataFrame, path: Path = OUT) -> None:
    from safecons.judges import HarmClassifier
    from safecons.judges.training import bounded

    texts = data["text"].to_list()
    vec, clf = fit_and_write(data, path)
    ours = HarmClassifier(path).predict_proba(texts)
    # The classifier reads an answer as the judge does, cut to READ_CHARS (a few GPTFuzz
    # answers are longer): scikit-learn is given the same cut texts.
    read = vec.transform([bounded(t)[0] for t in texts])
    worst = float(np.abs(ours - clf.predict_proba(read)[:, 1]).max())
    assert worst < 1e-9, f"numpy inference differs from scikit-learn's by {worst}"
    # A sample the tests reproduce: sentences written here (no dataset text leaves its
    # source) and the probabilities scikit-learn gives them.
    probs = clf.predict_proba(vec.transform(list(SAMPLE_TEXTS)))[:, 1]
    SAMPLE.write_text(
        json.dumps({"texts": list(SAMPLE_TEXTS), "p_harmful": probs.tolist()}, indent=1)
    )
    print(f"wrote {path} ({path.stat().st_size:,} bytes) and {SAMPLE.relative_to(REPO)}")
    print(f"numpy inference equals scikit-learn's within {worst:.1e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cv-only", action="store_true", help="print the table, write nothing")
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"no data at {DATA}: this script reads ../shared/data", file=sys.stderr)
        return 2
    data = load(args.mirror)
    print(data.group_by("source").agg(pl.len(), pl.col("label").mean().alias("harmful")))
    with pl.Config(tbl_rows=30, tbl_width_chars=200, float_precision=4):
        print(cross_validate(data))
    if not args.cv_only:
        export(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

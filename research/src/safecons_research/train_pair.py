"""Train the pair model (posture given the query), measure it, and ship it as plain arrays.

    python research/scripts/train_pair.py                 # grouped CV table, then writes the model
    python research/scripts/train_pair.py --cv-only       # the table alone
    python research/scripts/train_pair.py --mirror DIR  # the harm head's public data kept elsewhere

The pair model (shipped as ``safecons/data/pair.npz``) is a logistic regression over the
features of :func:`safecons.judges.training.pair_features`: the posture and harm heads' readings
of an answer and of what it says besides refusing, where and how much it refuses, and how
closely it echoes the query. Its examples are the posture classifier's (``train_posture.py``:
GPTFuzz ``train.csv`` answers with their questions, benign helpful answers and written
over-refusals with theirs). The two heads' readings are **out of fold**: the examples are cut
into five folds by group (one GPTFuzz question, or one benign question, is one group), and a
fold's features come from a posture classifier and a harm head trained without that fold's
groups, so the pair model learns how far to trust each head on answers it never saw. The
table compares, on the same folds, the posture classifier alone and the pair model.

The golden set's held-out groups are left out (as for the harm head), so the audit of the
offline judge reads a pair model that never saw them. Never trained on, tuned on or
thresholded on: XSTest, GPTFuzz ``evaluate.csv``, the golden
set's held-out groups, the probe sets of ``research/scripts/judge_probes.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from . import public_data, train_harm, train_posture
from .paths import REPO, WEIGHTS

OUT = WEIGHTS / "pair.npz"
FOLDS = 5
C = 1.0


def out_of_fold(posture_data: pl.DataFrame, harm_data: pl.DataFrame) -> np.ndarray:
    """Every posture example's pair features, read by heads that never saw its group."""
    from safecons.judges import HarmClassifier, PostureClassifier
    from safecons.judges.training import PAIR_FEATURES as FEATURES
    from safecons.judges.training import pair_features

    groups = posture_data["group"].to_numpy()
    x = np.zeros((posture_data.height, len(FEATURES)))
    folds = GroupKFold(n_splits=FOLDS).split(groups, groups=groups)
    with tempfile.TemporaryDirectory() as folder:
        for k, (train, test) in enumerate(folds):
            held = set(groups[test])
            p_path, h_path = Path(folder, f"p{k}.npz"), Path(folder, f"h{k}.npz")
            train_posture.write_model(*train_posture.fit(posture_data[train]), p_path)
            harm_train = harm_data.filter(~pl.col("group").is_in(list(held)))
            vec = train_harm.vectorizer()
            clf = train_harm.model().fit(
                vec.fit_transform(harm_train["text"].to_list()), harm_train["label"].to_numpy()
            )
            train_posture.write_model(vec, clf, h_path, refusal_feature=False)
            posture, harm = PostureClassifier(p_path), HarmClassifier(h_path)
            rows = posture_data[test]
            for i, (query, text) in zip(
                test, rows.select("query", "text").iter_rows(), strict=True
            ):
                x[i] = pair_features(query or "", text, posture, harm)
            print(f"fold {k + 1}/{FOLDS}: {len(test):,} examples", file=sys.stderr)
    return x


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    clf = LogisticRegression(C=C, class_weight="balanced", max_iter=2_000)
    return mean, scale, clf.fit((x - mean) / scale, y)


def write(mean: np.ndarray, scale: np.ndarray, clf: LogisticRegression, path: Path) -> None:
    """The fitted pair model as the plain arrays
    :class:`safecons.judges.training.PairModel` reads."""
    np.savez_compressed(
        path,
        mean=mean,
        scale=scale,
        coef=clf.coef_[0].astype(np.float64),
        intercept=np.array([clf.intercept_[0]], dtype=np.float64),
    )


def cross_validate(data: pl.DataFrame, x: np.ndarray) -> pl.DataFrame:
    y = data["label"].to_numpy()
    groups = data["group"].to_numpy()
    source = data["source"].to_numpy()
    pair = np.zeros(len(y), dtype=int)
    for train, test in GroupKFold(n_splits=FOLDS).split(x, y, groups):
        mean, scale, clf = fit(x[train], y[train])
        pair[test] = clf.predict((x[test] - mean) / scale)
    alone = (x[:, 0] >= 0).astype(int)  # the posture classifier's own out-of-fold call
    rows = []
    for name, pred in (("posture classifier alone", alone), ("pair model", pair)):
        for subset in ("all", "gptfuzz", "benign", "over-refusal"):
            mask = np.ones(len(y), bool) if subset == "all" else source == subset
            rows.append(
                {
                    "model": name,
                    "answers": subset,
                    "n": int(mask.sum()),
                    "accuracy": float((pred[mask] == y[mask]).mean()),
                }
            )
    return pl.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cv-only", action="store_true", help="print the table, write nothing")
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    args = parser.parse_args()
    # Without the golden set's held-out groups: the audit reads the pair model as shipped.
    posture_data = train_posture.without_golden(train_posture.load())
    harm_data = train_harm.load(args.mirror)
    x = out_of_fold(posture_data, harm_data)
    with pl.Config(tbl_rows=20, float_precision=4):
        print(cross_validate(posture_data, x))
    if args.cv_only:
        return 0
    from safecons.judges.training import PAIR_FEATURES as FEATURES

    mean, scale, clf = fit(x, posture_data["label"].to_numpy())
    for name, c in zip(FEATURES, clf.coef_[0], strict=True):
        print(f"{c:+.3f}  {name}")
    write(mean, scale, clf, OUT)
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

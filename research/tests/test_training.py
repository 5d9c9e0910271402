"""The code that produces the shipped weights, on fabricated data: what a training script writes
is what the package reads (numpy's inference equals scikit-learn's), and grouped
cross-validation never lets a group into its own fold's model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from safecons.judges import HarmClassifier, PostureClassifier
from safecons.judges.training import PAIR_FEATURES, PairModel
from safecons_research import train_harm, train_pair, train_posture

TOPICS = ("lock", "car", "email", "bridge", "oven", "garden", "bike", "boat", "roof", "phone")


def _posture_data() -> pl.DataFrame:
    """Answers that comply (steps, a Sure) and answers that refuse, four per topic: ten groups,
    so that grouped five-fold cross-validation has two groups a fold."""
    rows = []
    for topic in TOPICS:
        query = f"How do I fix the {topic}?"
        for i in range(2):
            rows.append(
                {
                    "text": f"Sure! Step {i + 1}: take the {topic} apart, then clean each part.",
                    "label": 1,
                    "group": topic,
                    "source": "gptfuzz",
                    "query": query,
                }
            )
            rows.append(
                {
                    "text": f"I'm sorry, but I can't help with the {topic}{'!' * i}.",
                    "label": 0,
                    "group": topic,
                    "source": "over-refusal",
                    "query": query,
                }
            )
    return pl.DataFrame(rows)


def _harm_data() -> pl.DataFrame:
    rows = []
    for topic in TOPICS:
        rows.append(
            {"text": f"You stupid idiot, the {topic} is yours to wreck, loser.", "label": 1}
        )
        rows.append(
            {"text": f"Clean the {topic} gently with warm water and a soft cloth.", "label": 0}
        )
    return pl.DataFrame(rows).with_columns(
        group=pl.Series([t for t in TOPICS for _ in range(2)]), source=pl.lit("fabricated")
    )


def test_the_posture_file_reads_as_scikit_learn_predicts(tmp_path: Path) -> None:
    data = _posture_data()
    vec, clf = train_posture.fit(data)
    path = tmp_path / "posture.npz"
    train_posture.write_model(vec, clf, path)
    texts = [*data["text"], "Sure, here is how.", "No, I won't do that."]
    theirs = clf.predict_proba(vec.transform(texts))[:, 1]
    ours = PostureClassifier(path).predict_proba(texts)
    assert np.abs(ours - theirs).max() < 1e-9
    # The refusal-prefix feature is the model's last coefficient: written apart, and read.
    assert set(np.load(path)) >= {"coef", "refusal_coef", "intercept", "char_idf", "word_idf"}


def test_the_harm_file_reads_as_scikit_learn_predicts(tmp_path: Path) -> None:
    data = _harm_data()
    path = tmp_path / "harm.npz"
    vec, clf = train_harm.fit_and_write(data, path)
    # The harm head has no refusal-prefix feature: only the two n-gram blocks.
    assert [name for name, _ in vec.transformer_list] == ["char", "word"]
    assert "refusal_coef" not in set(np.load(path))
    texts = [*data["text"], "What a pathetic loser.", "Water the garden at dawn."]
    theirs = clf.predict_proba(vec.transform(texts))[:, 1]
    ours = HarmClassifier(path).predict_proba(texts)
    assert np.abs(ours - theirs).max() < 1e-9


def test_the_harm_head_learns_what_a_refusal_says_besides_refusing() -> None:
    assert train_harm._content("I can't help with that. Here is the idea anyway.") == (
        "Here is the idea anyway."
    )
    assert train_harm._content("I'm sorry, but I can't help with that.") == ""


def test_the_pair_file_reads_as_scikit_learn_predicts(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, len(PAIR_FEATURES))) * np.linspace(0.5, 5.0, len(PAIR_FEATURES))
    x[:, 3] = 1.0  # a constant feature: its scale must not divide by zero
    y = (x[:, 0] + rng.normal(scale=0.5, size=60) > 0).astype(int)
    mean, scale, clf = train_pair.fit(x, y)
    assert scale[3] == 1.0
    path = tmp_path / "pair.npz"
    train_pair.write(mean, scale, clf, path)
    model = PairModel(path)
    theirs = clf.predict_proba((x - mean) / scale)[:, 1]
    ours = np.array([model.probability(row) for row in x])
    assert np.abs(ours - theirs).max() < 1e-9


def _recording_vectorizer(make, seen: list[list[str]]):  # type: ignore[no-untyped-def]
    """``make``, whose vectorizers record the texts each is fitted on in ``seen``."""

    def vectorizer():  # type: ignore[no-untyped-def]
        vec = make()
        fit_transform = vec.fit_transform

        def recorded(texts, *rest, **keywords):  # type: ignore[no-untyped-def]
            seen.append(list(texts))
            return fit_transform(texts, *rest, **keywords)

        vec.fit_transform = recorded
        return vec

    return vectorizer


def test_the_posture_folds_keep_each_group_out_of_its_model() -> None:
    data = _posture_data()
    texts, y = data["text"].to_list(), data["label"].to_numpy()
    groups = data["group"].to_numpy()
    seen: list[list[str]] = []
    vectorizer = _recording_vectorizer(train_posture.vectorizer, seen)
    pred = train_posture.out_of_fold(texts, y, groups, vectorizer, train_posture.model)
    assert len(seen) == train_posture.FOLDS
    group_of = dict(zip(texts, groups, strict=True))
    held_out: list[str] = []
    for trained in seen:
        trained_groups = {group_of[t] for t in trained}
        # Every text of a group the fold's model saw is in its training, and none of a group
        # it predicts.
        assert set(trained) == {t for t in texts if group_of[t] in trained_groups}
        held_out += sorted(set(TOPICS) - trained_groups)
    assert sorted(held_out) == sorted(TOPICS)  # each group predicted once, by one fold
    assert pred.tolist() == y.tolist()  # the fabricated classes are separable


def test_the_pair_features_are_read_by_heads_that_never_saw_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    posture_data = _posture_data()
    harm_data = _harm_data()
    posture_seen: list[list[str]] = []
    harm_seen: list[list[str]] = []
    monkeypatch.setattr(
        train_posture,
        "vectorizer",
        _recording_vectorizer(train_posture.vectorizer, posture_seen),
    )
    monkeypatch.setattr(
        train_harm, "vectorizer", _recording_vectorizer(train_harm.vectorizer, harm_seen)
    )
    x = train_pair.out_of_fold(posture_data, harm_data)
    assert x.shape == (posture_data.height, len(PAIR_FEATURES))
    assert np.isfinite(x).all()
    # train_harm.vectorizer builds on train_posture.vectorizer: the posture head's fits are
    # the ones made through train_posture.fit, one a fold, each followed by the harm head's.
    assert len(harm_seen) == train_pair.FOLDS
    posture_group = dict(posture_data.select("text", "group").iter_rows())
    harm_group = dict(harm_data.select("text", "group").iter_rows())
    posture_fits = [s for s in posture_seen if set(s) <= set(posture_group)]
    assert len(posture_fits) == train_pair.FOLDS
    for posture_texts, harm_texts in zip(posture_fits, harm_seen, strict=True):
        held = set(TOPICS) - {posture_group[t] for t in posture_texts}
        assert held  # each fold holds groups out of the posture head...
        assert not held & {harm_group[t] for t in harm_texts}  # ...and of the harm head

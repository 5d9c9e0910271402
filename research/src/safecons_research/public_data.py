"""Public, permissively licensed labelled text for the offline judge's two classifiers.

    python research/scripts/public_data.py  # per-source counts, then the sources table
    python research/scripts/public_data.py --mirror /data/mirrors # mirrors kept elsewhere

Nothing here is copied into the repository: every file is read at run time, with ``git show``,
from a bare clone of its repository pinned at the commit in :data:`SOURCES`. A reader gets each
one with::

    git clone --bare https://github.com/<owner>/<name> <DIR>/<owner>+<name>/repo

for ``<owner>/<name>`` in

- ``JailbreakBench/artifacts`` (posture: ``jbb_artifacts``, off by default: its answers overlap
  JailbreakBench's held-out judge comparison, ``heldout_jailbreak.py --overlap``),
- ``sherdencooper/GPTFuzz`` (posture: ``gptfuzz_train``, off by default: the trainer already
  reads it from ``../shared/data``),
- ``microsoft/TOXIGEN`` (harm: ``toxigen``),
- ``t-davidson/hate-speech-and-offensive-language`` (harm: ``davidson``),
- ``openai/moderation-api-release`` (harm: ``openai_moderation``),
- ``Waffle-Liu/calibration_guard_model`` (harm: ``harmbench_val``, HarmBench's human-labelled
  classifier validation set in a small MIT repository that copies it),

with ``DIR`` the ``--mirror`` argument (default ``/work/.mirror``). A missing mirror is an error
naming the clone command; pass ``sources=`` to load fewer.

Two functions give the rows:

- :func:`posture_rows`: ``query`` (the request, or null), ``text`` (the answer), ``label``
  (1 complied, 0 refused), ``group``, ``source``. ``group`` is ``"q:"`` and a hash of the
  normalised request (lower case, letters and digits only), so one request is one group across
  sources; a row without a request gets ``"<source>:t:"`` and a hash of its text.
- :func:`harm_rows`: ``text``, ``label`` (1 toxic or harmful, 0 harmless), ``group``
  (``toxigen:<target group>``; ``harmbench:<semantic category>:<behaviour id>``; for the
  others ``<source>:`` and a hash of the normalised text, so retweets and near-copies that
  differ only in mentions, links, case or punctuation stay in one fold), ``source``.

Both drop exact duplicate texts (the first source in :data:`SOURCES` order keeps a text) and
drop every copy of a text that carries both labels.

Held-out test sets are never read: :func:`git_show` refuses XSTest
(``paul-rottger/exaggerated-safety``, and the copy of its prompts in
``Waffle-Liu/calibration_guard_model``) and GPTFuzz's ``datasets/responses_labeled/evaluate.csv``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import html
import io
import json
import posixpath
import re
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

DEFAULT_MIRROR = Path("/work/.mirror")

#: Held-out test sets: never read, whichever loader asks. ``None`` refuses the whole repository.
FORBIDDEN: tuple[tuple[str, str | None], ...] = (
    ("paul-rottger/exaggerated-safety", None),
    ("sherdencooper/GPTFuzz", "datasets/responses_labeled/evaluate.csv"),
    ("Waffle-Liu/calibration_guard_model", "data/XSTest/xstest_v2_prompts.csv"),
    # Held-out human labels of jailbreak answers (research/scripts/heldout_jailbreak.py measures on
    # it).
    ("purseclab/jailbreak-evaluation", None),
    # JailbreakBench's judge comparison, copied there (research/scripts/heldout_jailbreak.py).
    ("AnthonyRonning/promptfoo-workshop", None),
)

_JBB_FILES = (
    "attack-artifacts/GCG/transfer/gpt-3.5-turbo-1106.json",
    "attack-artifacts/GCG/transfer/gpt-4-0125-preview.json",
    "attack-artifacts/GCG/white_box/llama-2-7b-chat-hf.json",
    "attack-artifacts/GCG/white_box/vicuna-13b-v1.5.json",
    "attack-artifacts/JBC/manual/gpt-3.5-turbo-1106.json",
    "attack-artifacts/JBC/manual/gpt-4-0125-preview.json",
    "attack-artifacts/JBC/manual/llama-2-7b-chat-hf.json",
    "attack-artifacts/JBC/manual/vicuna-13b-v1.5.json",
    "attack-artifacts/PAIR/black_box/gpt-3.5-turbo-1106.json",
    "attack-artifacts/PAIR/black_box/gpt-4-0125-preview.json",
    "attack-artifacts/PAIR/black_box/llama-2-7b-chat-hf.json",
    "attack-artifacts/PAIR/black_box/vicuna-13b-v1.5.json",
    "attack-artifacts/prompt_with_random_search/black_box/gpt-3.5-turbo-1106.json",
    "attack-artifacts/prompt_with_random_search/black_box/gpt-4-0125-preview.json",
    "attack-artifacts/prompt_with_random_search/black_box/llama-2-7b-chat-hf.json",
    "attack-artifacts/prompt_with_random_search/black_box/vicuna-13b-v1.5.json",
)

#: Every source: what it is, where it is pinned, its licence and how its labels map. ``rows`` is
#: the distinct texts the source gives loaded alone (``main`` recomputes it, and prints what is
#: left once the sources are de-duplicated against each other).
SOURCES: tuple[dict[str, Any], ...] = (
    {
        "name": "jbb_artifacts",
        "kind": "posture",
        "default": False,
        "repo": "JailbreakBench/artifacts",
        "commit": "909e68c01d94222b8ad2e397a017e2e12e2adb73",
        "files": "attack-artifacts/{GCG,JBC,PAIR,prompt_with_random_search}/*/*.json (16 files)",
        "licence": "MIT (LICENSE; README: each artifact is released under MIT)",
        "labelled_by": "machine: JailbreakBench's Llama-3-70B judge (`jailbroken`) and Llama Guard "
        "1 (`jailbroken_llama_guard1`); rows kept only where the two agree",
        "label_map": "1 = both judges say jailbroken (complied with the harmful behaviour); "
        "0 = both say not (refused, deflected, or off-topic). query = the behaviour's `goal`",
        "rows": 995,
    },
    {
        "name": "gptfuzz_train",
        "kind": "posture",
        "default": False,
        "repo": "sherdencooper/GPTFuzz",
        "commit": "1eddeb565740ae311b5f4950492b011a6f866fe7",
        "files": "datasets/responses_labeled/train.csv, datasets/questions/question_list.csv",
        "licence": "MIT (LICENSE)",
        "labelled_by": "human (GPTFuzz authors)",
        "label_map": "label 1 = complied (jailbroken), 0 = refused or deflected",
        "rows": 4_337,
    },
    {
        "name": "toxigen",
        "kind": "harm",
        "default": True,
        "repo": "microsoft/TOXIGEN",
        "commit": "01517e814639e0334c920a3c502036c8158aac87",
        "files": "prompts/{hate,neutral}_*_1k.txt (the distinct '- ' sentences of each line), "
        "demonstrations/*/{hate,neutral}_*.txt",
        "licence": "code MIT; data CDLA-Permissive-2.0 (both in LICENSE.txt). README: data and "
        "models 'intended to be used for research purposes only' (a statement of intent, "
        "not a licence term)",
        "labelled_by": "authors' curation: the class is the file the sentence sits in",
        "label_map": "hate_* = 1, neutral_* = 0; group = toxigen:<target group>",
        "rows": 991,
    },
    {
        "name": "davidson",
        "kind": "harm",
        "default": True,
        "repo": "t-davidson/hate-speech-and-offensive-language",
        "commit": "cb50f7e9eb855a99abc51423bf40df0e26d6fe30",
        "files": "data/labeled_data.csv",
        "licence": "MIT (LICENSE, covers the repository; no separate data terms; README asks "
        "for a citation)",
        "labelled_by": "human (CrowdFlower, 3+ annotators, majority class)",
        "label_map": "class 0 hate speech or 1 offensive language = 1; class 2 neither = 0",
        "rows": 24_783,
    },
    {
        "name": "openai_moderation",
        "kind": "harm",
        "default": True,
        "repo": "openai/moderation-api-release",
        "commit": "f4ab51b5edd3bfbcb349a56324274235b674e0e4",
        "files": "data/samples-1680.jsonl.gz",
        "licence": "MIT (LICENSE, covers the repository; no separate data terms)",
        "labelled_by": "human (OpenAI's labellers; the paper's evaluation set)",
        "label_map": "1 = any of S, H, V, HR, SH, S3, H2, V2 flagged; 0 = every known flag 0",
        "rows": 1_664,
    },
    {
        "name": "harmbench_val",
        "kind": "harm",
        "default": True,
        "repo": "Waffle-Liu/calibration_guard_model",
        "commit": "b46b1a3f2d4d7a042cd21bc93573ff09eb396116",
        "files": "data/classifier_val_sets/text_behaviors_val_set.json, "
        "data/behavior_datasets/harmbench_behaviors_text_all.csv (semantic category)",
        "licence": "MIT (LICENSE, (c) 2024 Hongfu Liu; README: 'based on HarmBench'). The files "
        "are HarmBench's (centerforaisafety/HarmBench, MIT), which has no snapshot here",
        "labelled_by": "human (HarmBench's classifier validation set: three annotators, "
        "human_0..2, per answer; majority)",
        "label_map": "1 = two or three annotators say the generation is an instance of the "
        "harmful behaviour; 0 = none or one (refusals, vague or off-target answers, harmless "
        "play-along); group = harmbench:<SemanticCategory>:<BehaviorID>",
        "rows": 600,
    },
)

_BY_NAME = {s["name"]: s for s in SOURCES}


class MirrorMissing(FileNotFoundError):
    """A source's bare clone is not under the mirror directory."""


def git_dir(mirror: Path | str, repo: str) -> Path:
    """Where ``repo`` ("owner/name") is expected: ``<mirror>/<owner>+<name>/repo``."""
    return Path(mirror) / repo.replace("/", "+") / "repo"


def _refuse_forbidden(repo: str, path: str) -> None:
    path = posixpath.normpath(path.lstrip("/"))
    for bad_repo, bad_path in FORBIDDEN:
        if repo.lower() == bad_repo.lower() and (bad_path is None or path == bad_path):
            raise PermissionError(f"{repo}:{path} is a held-out test set; it is never read")


def _git(mirror: Path | str, repo: str, *args: str) -> bytes:
    where = git_dir(mirror, repo)
    if not where.is_dir():
        raise MirrorMissing(
            f"no mirror of {repo} at {where}; get it with: "
            f"git clone --bare https://github.com/{repo} {where}"
        )
    done = subprocess.run(["git", "--git-dir", str(where), *args], capture_output=True, check=False)
    if done.returncode:
        raise RuntimeError(f"git {' '.join(args)} in {where}: {done.stderr.decode().strip()}")
    return done.stdout


def git_show(mirror: Path | str, repo: str, commit: str, path: str) -> bytes:
    """The bytes of ``path`` at ``commit`` in the mirror of ``repo``."""
    _refuse_forbidden(repo, path)
    return _git(mirror, repo, "show", f"{commit}:{path}")


def git_ls(mirror: Path | str, repo: str, commit: str, under: str) -> list[str]:
    """The file paths under ``under`` at ``commit``."""
    out = _git(mirror, repo, "ls-tree", "-r", "--name-only", commit, "--", under)
    return [p for p in out.decode().splitlines() if p]


def _show(mirror: Path | str, name: str, path: str) -> bytes:
    source = _BY_NAME[name]
    return git_show(mirror, source["repo"], source["commit"], path)


def normalise(text: str) -> str:
    """Lower case, NFKC, letters and digits only, single spaces: the key for groups."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.findall(r"[^\W_]+", text))


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def question_group(query: str) -> str:
    """The group of a request: the same normalised request is one group, whatever its source."""
    return "q:" + _hash(normalise(query))


# --- posture sources -------------------------------------------------------------------------


def _jbb_artifacts(mirror: Path | str) -> Iterable[dict[str, Any]]:
    for path in _JBB_FILES:
        artifact = json.loads(_show(mirror, "jbb_artifacts", path))
        for item in artifact["jailbreaks"]:
            response, judge, guard = (
                item.get("response"),
                item.get("jailbroken"),
                item.get("jailbroken_llama_guard1"),
            )
            if not response or not response.strip() or judge is None or judge != guard:
                continue
            yield {"query": item["goal"], "text": response, "label": int(bool(judge))}


def _gptfuzz_train(mirror: Path | str) -> Iterable[dict[str, Any]]:
    questions = {
        int(row["index"]): row["text"]
        for row in csv.DictReader(
            io.StringIO(
                _show(mirror, "gptfuzz_train", "datasets/questions/question_list.csv").decode(
                    "utf-8"
                )
            )
        )
    }
    train = _show(mirror, "gptfuzz_train", "datasets/responses_labeled/train.csv").decode("utf-8")
    for row in csv.DictReader(io.StringIO(train)):
        yield {
            "query": questions[int(row["question"])],
            "text": row["Response"],
            "label": int(row["label"]),
        }


# --- harm sources ----------------------------------------------------------------------------

_TOXIGEN_FILE = re.compile(r"(?:^|/)(hate|neutral)_(.+?)(?:_sentences|_1k)?\.txt$")


def _toxigen(mirror: Path | str) -> Iterable[dict[str, Any]]:
    commit, repo = _BY_NAME["toxigen"]["commit"], _BY_NAME["toxigen"]["repo"]
    paths = git_ls(mirror, repo, commit, "prompts") + git_ls(mirror, repo, commit, "demonstrations")
    for path in sorted(paths):
        match = _TOXIGEN_FILE.search(path)
        if match is None:
            continue
        kind, target = match.groups()
        body = _show(mirror, "toxigen", path).decode("utf-8")
        # A prompts line is several sentences, each "- sentence", joined by a literal "\n".
        for line in body.splitlines():
            for piece in line.split("\\n"):
                sentence = piece.strip().removeprefix("-").strip()
                if sentence:
                    yield {
                        "text": sentence,
                        "label": int(kind == "hate"),
                        "group": f"toxigen:{target}",
                    }


_MENTION = re.compile(r"@\w+|https?://\S+|&\w+;|&#\d+;|\brt\b", re.IGNORECASE)


def _davidson(mirror: Path | str) -> Iterable[dict[str, Any]]:
    body = _show(mirror, "davidson", "data/labeled_data.csv").decode("utf-8")
    for row in csv.DictReader(io.StringIO(body)):
        text = html.unescape(row["tweet"]).strip()
        key = normalise(_MENTION.sub(" ", row["tweet"]))
        yield {
            "text": text,
            "label": int(row["class"] in ("0", "1")),
            "group": "davidson:" + _hash(key or normalise(text)),
        }


def _openai_moderation(mirror: Path | str) -> Iterable[dict[str, Any]]:
    body = gzip.decompress(_show(mirror, "openai_moderation", "data/samples-1680.jsonl.gz"))
    for line in body.decode("utf-8").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        flags = [v for k, v in item.items() if k != "prompt" and v is not None]
        if not flags:
            continue
        yield {
            "text": item["prompt"].strip(),
            "label": int(any(v == 1 for v in flags)),
            "group": "openai_moderation:" + _hash(normalise(item["prompt"])),
        }


def harmbench_answers(mirror: Path | str) -> Iterable[dict[str, Any]]:
    """HarmBench's classifier validation answers that carry three human labels, each with its
    behaviour (``behaviour_id``, ``behaviour``: its text, ``category``), the attack's
    ``test_case``, the ``generation``, ``label`` (1 when two or three annotators say it is an
    instance of the behaviour) and the file's ``item`` as it is (it also holds other
    classifiers' verdicts)."""
    behaviours = csv.DictReader(
        io.StringIO(
            _show(
                mirror, "harmbench_val", "data/behavior_datasets/harmbench_behaviors_text_all.csv"
            ).decode("utf-8")
        )
    )
    by_id = {row["BehaviorID"]: row for row in behaviours}
    body = _show(mirror, "harmbench_val", "data/classifier_val_sets/text_behaviors_val_set.json")
    for behaviour, answers in json.loads(body).items():
        meta = by_id.get(behaviour, {})
        for item in answers:
            votes = [item[k] for k in ("human_0", "human_1", "human_2") if item.get(k) is not None]
            if len(votes) != 3 or not item.get("generation"):
                continue
            yield {
                "behaviour_id": behaviour,
                "behaviour": meta.get("Behavior", behaviour),
                "category": meta.get("SemanticCategory", "unknown"),
                "test_case": item.get("test_case") or meta.get("Behavior", behaviour),
                "generation": item["generation"].strip(),
                "label": int(sum(votes) >= 2),
                "item": item,
            }


def harmbench_group(answer: dict[str, Any]) -> str:
    """The group a HarmBench answer is cross-validated in: its category and behaviour."""
    return f"harmbench:{answer['category']}:{answer['behaviour_id']}"


def _harmbench_val(mirror: Path | str) -> Iterable[dict[str, Any]]:
    for answer in harmbench_answers(mirror):
        yield {
            "text": answer["generation"],
            "label": answer["label"],
            "group": harmbench_group(answer),
        }


_LOADERS: dict[str, Callable[[Path | str], Iterable[dict[str, Any]]]] = {
    "jbb_artifacts": _jbb_artifacts,
    "gptfuzz_train": _gptfuzz_train,
    "toxigen": _toxigen,
    "davidson": _davidson,
    "openai_moderation": _openai_moderation,
    "harmbench_val": _harmbench_val,
}


def _names(kind: str, sources: Sequence[str] | None) -> list[str]:
    known = [s["name"] for s in SOURCES if s["kind"] == kind]
    if sources is None:
        return [s["name"] for s in SOURCES if s["kind"] == kind and s["default"]]
    unknown = [n for n in sources if n not in known]
    if unknown:
        raise ValueError(f"unknown {kind} sources {unknown}; known: {known}")
    return [n for n in known if n in sources]  # SOURCES order decides who keeps a duplicate


def _dedupe(frame: pl.DataFrame) -> pl.DataFrame:
    """Drop texts that carry both labels, then keep the first copy of each text."""
    if frame.is_empty():
        return frame
    mixed = (
        frame.group_by("text").agg(pl.col("label").n_unique().alias("n")).filter(pl.col("n") > 1)
    )
    frame = frame.join(mixed.select("text"), on="text", how="anti", maintain_order="left")
    return frame.unique(subset="text", keep="first", maintain_order=True)


def posture_rows(
    mirror: Path | str = DEFAULT_MIRROR, sources: Sequence[str] | None = None
) -> pl.DataFrame:
    """Answers labelled complied (1) or refused (0): query, text, label, group, source."""
    rows: list[dict[str, Any]] = []
    for name in _names("posture", sources):
        for row in _LOADERS[name](mirror):
            text = row["text"].strip()
            if not text:
                continue
            query = row.get("query")
            group = question_group(query) if query else f"{name}:t:{_hash(normalise(text))}"
            rows.append(
                {
                    "query": query,
                    "text": text,
                    "label": row["label"],
                    "group": group,
                    "source": name,
                }
            )
    schema = {
        "query": pl.String,
        "text": pl.String,
        "label": pl.Int8,
        "group": pl.String,
        "source": pl.String,
    }
    return _dedupe(pl.DataFrame(rows, schema=schema, orient="row"))


def harm_rows(
    mirror: Path | str = DEFAULT_MIRROR, sources: Sequence[str] | None = None
) -> pl.DataFrame:
    """Texts labelled toxic or harmful (1) or harmless (0): text, label, group, source."""
    rows: list[dict[str, Any]] = []
    for name in _names("harm", sources):
        for row in _LOADERS[name](mirror):
            if row["text"]:
                rows.append({**row, "source": name})
    schema = {"text": pl.String, "label": pl.Int8, "group": pl.String, "source": pl.String}
    return _dedupe(pl.DataFrame(rows, schema=schema, orient="row"))


def source_rows(mirror: Path | str, name: str) -> int:
    """Distinct texts a source gives loaded alone (what ``SOURCES[...]['rows']`` says)."""
    load = posture_rows if _BY_NAME[name]["kind"] == "posture" else harm_rows
    return load(mirror, [name]).height


def sources_markdown() -> str:
    """The sources as a markdown table, for the docs."""
    head = "| source | kind | repository @ commit | files | licence | labelled by | labels | rows |"
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in SOURCES:
        default = "" if s["default"] else " (off by default)"
        lines.append(
            f"| `{s['name']}`{default} | {s['kind']} | [{s['repo']}](https://github.com/"
            f"{s['repo']}) @ `{s['commit'][:7]}` | {s['files']} | {s['licence']} | "
            f"{s['labelled_by']} | {s['label_map']} | {s['rows']:,} |"
        )
    return "\n".join(lines)


def _summary(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.group_by("source", maintain_order=True).agg(
        pl.len().alias("rows"),
        (pl.col("label") == 1).sum().alias("label_1"),
        (pl.col("label") == 0).sum().alias("label_0"),
        pl.col("group").n_unique().alias("groups"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--mirror",
        type=Path,
        default=DEFAULT_MIRROR,
        help="directory of bare clones, <owner>+<name>/repo (default %(default)s)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also load the sources that are off by default (gptfuzz_train)",
    )
    args = parser.parse_args(argv)
    posture_names = [s["name"] for s in SOURCES if s["kind"] == "posture"] if args.all else None
    with pl.Config(tbl_rows=50, tbl_hide_dataframe_shape=True):
        for kind, load, names in (
            ("posture", posture_rows, posture_names),
            ("harm", harm_rows, None),
        ):
            try:
                frame = load(args.mirror, names)
            except MirrorMissing as missing:
                print(f"{kind}: {missing}", file=sys.stderr)
                return 1
            print(f"## {kind}: {frame.height:,} rows after de-duplication")
            print(_summary(frame))
            print()
        print("## distinct texts of each source loaded alone (SOURCES' `rows`)")
        for s in SOURCES:
            if s["default"] or args.all:
                rows = source_rows(args.mirror, s["name"])
                flag = "" if rows == s["rows"] else f"  (SOURCES says {s['rows']:,})"
                print(f"- {s['name']}: {rows:,}{flag}")
    print()
    print(sources_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

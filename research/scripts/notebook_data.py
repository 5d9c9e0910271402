"""Write the compact copies of LLMBar, PandaLM and WildGuardTest that notebook 02 reads from a
clone alone.

    python research/scripts/notebook_data.py    # ../shared/data and /work/.mirror; seconds
    python research/scripts/notebook_data.py --data DIR --mirror DIR

``notebooks/data/llmbar.parquet`` is :func:`safecons.reliability.read_llmbar` of the whole
LLMBar folder (MT-Bench and FairEval, the four judges, both prompting styles) without the
judges' raw texts, which no figure of the notebook reads; ``pandalm.parquet`` is
:func:`safecons.reliability.read_pandalm` of PandaLM's test set. Every figure the notebook
prints from them is the one it prints from the full folder. Their licences (LLMBar: MIT;
PandaLM: Apache-2.0) are copied beside them.

``wildguard.parquet`` is the human-labelled answers the notebook calibrates a score with: 300
of WildGuardTest's 749 answers to harmful prompts that carry a human harm label (read as
``research/scripts/wildguard_dev.py`` reads them, from its copy in the mirror), the 300 whose
prompt's SHA-256 comes first (a draw that depends on the prompt alone, not on the file's
order), with the set's own columns: ``prompt``, ``response``, ``adversarial``, ``subcategory``,
``response_harm_label`` (the humans' majority: ``harmful`` or ``unharmful``) and
``response_harm_agreement`` (how many of the three annotators gave it). WildGuardTest is ODC-BY
1.0 (Han et al. 2024, the test split of ``allenai/wildguardmix``); the copy read has no licence
file of its own, so the notice beside it, ``LICENSE-wildguard``, is written here.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

import polars as pl

import safecons as sc
from safecons_research import public_data
from safecons_research import wildguard as wildguard_test

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "notebooks" / "data"

#: How many of WildGuardTest's labelled answers ship: enough for a sample of 50 to be a small
#: share of the run, few enough that the file stays near 200 kB.
WILDGUARD_ROWS = 300

WILDGUARD_NOTICE = """\
WildGuardTest (the test split of allenai/wildguardmix)

Han, S., Rao, K., Ettinger, A., Jiang, L., Lin, B. Y., Lambert, N., Choi, Y. and Dziri, N.
(2024). WildGuard: Open One-Stop Moderation Tools for Safety Risks, Jailbreaks, and Refusals
of LLMs. arXiv:2406.18495. https://huggingface.co/datasets/allenai/wildguardmix

The dataset is made available by the Allen Institute for AI under the Open Data Commons
Attribution License (ODC-BY) v1.0: https://opendatacommons.org/licenses/by/1-0/
Access to it on Hugging Face is granted on accepting the AI2 Responsible Use Guidelines
(https://allenai.org/responsible-use.pdf) and agreeing to use it for research purposes.
Its responses were written by language models; some are harmful (that is what the human
labels mark).

wildguard.parquet holds 300 of its rows (prompts labelled harmful whose response carries a
human harm label), six of its columns, values unchanged, taken from the copy in
github.com/sharzilnfz/llmSafetyClassification (data/wildguardtest.parquet, commit
ff7f31b8d46fe09fbb5f82a4b805864048e0c2ef) by research/scripts/notebook_data.py in safecons.
"""


def wildguard(mirror: Path) -> pl.DataFrame:
    """The shipped share of WildGuardTest's human-labelled answers to harmful prompts."""
    rows = wildguard_test.rows(mirror).filter(
        pl.col("prompt_harm_label") == "harmful", pl.col("response_harm_label").is_not_null()
    )
    digest = [hashlib.sha256(p.encode("utf-8")).hexdigest() for p in rows["prompt"]]
    return (
        rows.with_columns(_key=pl.Series(digest, dtype=pl.String))
        .sort("_key")
        .head(WILDGUARD_ROWS)
        .select(
            "prompt",
            "response",
            "adversarial",
            "subcategory",
            "response_harm_label",
            "response_harm_agreement",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    args = parser.parse_args()
    data = args.data
    OUT.mkdir(parents=True, exist_ok=True)
    pairs = sc.reliability.read_llmbar(data / "llmbar").drop("verdict_xy_raw", "verdict_yx_raw")
    pairs.write_parquet(OUT / "llmbar.parquet", compression="zstd", compression_level=19)
    panda = sc.reliability.read_pandalm(data / "pandalm")
    panda.write_parquet(OUT / "pandalm.parquet", compression="zstd", compression_level=19)
    shutil.copyfile(data / "llmbar" / "LICENSE", OUT / "LICENSE-llmbar")
    shutil.copyfile(data / "pandalm" / "LICENSE", OUT / "LICENSE-pandalm")
    answers = wildguard(args.mirror)
    answers.write_parquet(OUT / "wildguard.parquet", compression="zstd", compression_level=19)
    (OUT / "LICENSE-wildguard").write_text(WILDGUARD_NOTICE)
    for path in sorted(OUT.iterdir()):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

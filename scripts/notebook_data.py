"""Write the compact copies of LLMBar and PandaLM that notebook 02 reads from a clone alone.

    python scripts/notebook_data.py      # reads ../shared/data; a few seconds

``notebooks/data/llmbar.parquet`` is :func:`safecons.reliability.read_llmbar` of the whole
LLMBar folder (MT-Bench and FairEval, the four judges, both prompting styles) without the
judges' raw texts, which no figure of the notebook reads; ``pandalm.parquet`` is
:func:`safecons.reliability.read_pandalm` of PandaLM's test set. Every figure the notebook
prints from them is the one it prints from the full folder. Their licences (LLMBar: MIT;
PandaLM: Apache-2.0) are copied beside them.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import safecons as sc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "notebooks" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    data = parser.parse_args().data
    OUT.mkdir(parents=True, exist_ok=True)
    pairs = sc.reliability.read_llmbar(data / "llmbar").drop("verdict_xy_raw", "verdict_yx_raw")
    pairs.write_parquet(OUT / "llmbar.parquet", compression="zstd", compression_level=19)
    panda = sc.reliability.read_pandalm(data / "pandalm")
    panda.write_parquet(OUT / "pandalm.parquet", compression="zstd", compression_level=19)
    shutil.copyfile(data / "llmbar" / "LICENSE", OUT / "LICENSE-llmbar")
    shutil.copyfile(data / "pandalm" / "LICENSE", OUT / "LICENSE-pandalm")
    for path in sorted(OUT.iterdir()):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

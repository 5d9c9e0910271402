"""The offline judge on WildGuardTest's human labels: a broader development set.

    python research/scripts/wildguard_dev.py                  # two markdown tables, about 20 s
    python research/scripts/wildguard_dev.py --mirror DIR     # where the repository is

DEVELOPMENT data: not one of the held-out sets (XSTest, GPTFuzz ``evaluate.csv``,
JailbreakBench's judge comparison, purseclab's labels), and no model of the judge was trained
on it, so it may be read, and tuned on, by the next change. It was found after every choice
now in the judge had been made, and nothing has been chosen on it yet.

Data: WildGuardTest (Han et al. 2024, "WildGuard"; the test split of ``allenai/wildguardmix``,
ODC-BY), 1,725 prompts, half of them adversarial, each with a model's response and human
labels: whether the prompt is harmful, whether the response refuses, whether the response is
harmful. The original is on Hugging Face behind an access form, out of reach here; the file
read is the copy in ``sharzilnfz/llmSafetyClassification`` (``data/wildguardtest.parquet``, its
commit "download and bundle wildguardmix dataset"): 1,725 rows with the test split's
``*_agreement`` columns, the size of the published file. A reader gets it with

    git clone --bare https://github.com/sharzilnfz/llmSafetyClassification \\
        DIR/sharzilnfz+llmSafetyClassification/repo

Two questions, each on the rows that carry its label:

1. Posture: does the response refuse? The judge's posture reading (``OfflineJudge.posture``)
   with a partial reading counted as a refusal, as on XSTest; beside it the refusal-prefix
   list (``looks_like_refusal``).
2. The metric's question on harmful prompts: with a refusing base, is the response
   Contradictory? Against the human label "the response is harmful", read as
   :mod:`heldout_jailbreak` reads its sets (Contradictory, or anything but Consistent, is a
   violation), the query and the variant both the prompt.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl

import safecons as sc
from safecons.testing import looks_like_refusal
from safecons_research import heldout_jailbreak, public_data
from safecons_research.tables import markdown
from safecons_research.wildguard import rows


def posture(frame: pl.DataFrame, judge: sc.OfflineJudge) -> pl.DataFrame:
    """Agreement with the human refusal label, of the judge's posture and the prefix list."""
    labelled = frame.filter(pl.col("response_refusal_label").is_not_null())
    truth = (labelled["response_refusal_label"] == "refusal").to_list()
    said = {
        "OfflineJudge.posture: refused or partial is a refusal": [
            judge.posture(query=q, answer=a)[0] != "complied"
            for q, a in labelled.select("prompt", "response").iter_rows()
        ],
        "looks_like_refusal (prefix list)": [looks_like_refusal(a) for a in labelled["response"]],
    }
    table = heldout_jailbreak.agreement(truth, said)
    return table.rename(
        {
            "violations found": "refusals found",
            "harmless called violations": "compliance called refusal",
        }
    )


def harmful(frame: pl.DataFrame) -> pl.DataFrame:
    """The responses to harmful prompts that carry a human harm label (749 of them), in the
    shape of ``jailbreak_dev.answers``: ``behaviour`` and ``test_case`` (both the prompt: the set
    has no plain request beside an adversarial one), ``text``, ``violation`` (the response is
    harmful) and ``group`` (the prompt; no prompt is there twice)."""
    return frame.filter(
        pl.col("prompt_harm_label") == "harmful", pl.col("response_harm_label").is_not_null()
    ).select(
        behaviour="prompt",
        test_case="prompt",
        text="response",
        violation=pl.col("response_harm_label") == "harmful",
        group=pl.format("wildguard:{}", "prompt"),
    )


def violations(frame: pl.DataFrame, judge: sc.OfflineJudge) -> pl.DataFrame:
    """The metric's question on harmful prompts, against the human label of harm."""
    labelled = harmful(frame)
    labels = [
        judge.compare(query=q, variant=q, base=heldout_jailbreak.BASE, candidate=a).label
        for q, a in labelled.select("behaviour", "text").iter_rows()
    ]
    said = heldout_jailbreak.readings(labels, labelled["text"].to_list())
    return heldout_jailbreak.agreement(labelled["violation"].to_list(), said)


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    args = parser.parse_args(argv)
    try:
        frame = rows(args.mirror)
    except FileNotFoundError as err:  # no mirror: say how to get one
        print(err, file=sys.stderr)
        return 1
    except RuntimeError as err:  # a mirror without the pinned commit
        print(f"{err}; fetch it again: git --git-dir DIR fetch origin", file=sys.stderr)
        return 1
    judge = sc.OfflineJudge()
    out("### Does the response refuse? (WildGuardTest's human refusal labels)\n")
    out(markdown(posture(frame, judge)) + "\n")
    out(
        "### Harmful prompts, a refusing base: is the response Contradictory? (human harm labels)\n"
    )
    out(markdown(violations(frame, judge)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

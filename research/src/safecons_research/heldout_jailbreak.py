"""Measure the offline judge against human labels of jailbreak answers (held out).

    python research/scripts/heldout_jailbreak.py                  # two markdown tables, about 5 s
    python research/scripts/heldout_jailbreak.py --mirror DIR     # where the repositories are
    python research/scripts/heldout_jailbreak.py --overlap        # held-out answers found in the
                                                         # training data (counts only)

HELD OUT. These sets must never be used to train, tune or choose anything, and the script
prints aggregate figures only: no answers, no lists of errors. They are the two
human-labelled sets of jailbreak answers the offline judge's goal was measured on (at least
0.88 agreement, Llama Guard 2's level).

Data, each read from a bare git directory at a pinned commit (nothing is copied). A reader
gets them with

    git clone --bare https://github.com/purseclab/jailbreak-evaluation \\
        DIR/purseclab+jailbreak-evaluation/repo
    git clone --bare https://github.com/AnthonyRonning/promptfoo-workshop \\
        DIR/AnthonyRonning+promptfoo-workshop/repo

- purseclab/jailbreak-evaluation (Apache-2.0; "Rethinking How to Evaluate Language Model
  Jailbreak"), ``raw-data/manual_data.csv``: 300 answers of Llama-2-7B-chat and GPT-3.5 to
  jailbreak prompts from three published attacks (100 each), each with a human
  ``manual_safeguard_violation_label`` (True: the answer violates the safeguard; 141 of 300).
- JailbreakBench's judge comparison (``JailbreakBench/JBB-Behaviors``, configuration
  ``judge_comparison``, MIT; Chao et al. 2024): 300 answers to jailbreak prompts for
  JailbreakBench's harmful goals, three human labels each and their majority (1: jailbroken;
  110 of 300), beside the verdicts of four classifiers (GPT-4, Llama-3-70B, Llama Guard 2,
  HarmBench's 13B classifier). The original is on Hugging Face, out of reach here; the file
  read is the copy in AnthonyRonning/promptfoo-workshop (``judge-comparison.csv``, whose README
  cites the source). The script checks that it is the published file: 300 rows, and each
  classifier's agreement with the human majority equal, to three decimals, to the figure
  JailbreakBench publishes; that checks the label columns, not the
  texts. The copy was saved in the Mac Roman encoding, and is decoded as such, except the few
  cells that held UTF-8 (which decode as UTF-8 once back in bytes).

The metric's own question: with a refusing base answer, is this answer
Contradictory? Each row is judged with ``query`` = the harmful intent (goal), ``variant`` =
the jailbreak prompt, ``base`` = a plain refusal, ``candidate`` = the answer. The judge says
"violation" when its label is Contradictory (and, in a second row, when it is anything but
Consistent). Beside it, the refusal-prefix list (``looks_like_refusal``: not a refusal reads as
a violation) as the floor a judge must beat, and on JailbreakBench's set the four classifiers'
verdicts the file carries, as references.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl

import safecons as sc
from safecons.testing import looks_like_refusal

from .heldout_posture import MirrorError, add_mirror_option, csv_at, git_dir_of

PURSECLAB = ("purseclab+jailbreak-evaluation", "b5be0cd5eedf8cfe92605ddb84180c398d2415b3")
#: JailbreakBench's judge comparison, as copied into a workshop's repository.
JBB_JUDGES = ("AnthonyRonning+promptfoo-workshop", "ddba1ec4e19573eedbc598c8f13d1e6faa539ce3")
#: The classifiers whose verdicts that file carries: column, and agreement with the human
#: majority as JailbreakBench publishes it (the check that the copy is the published file).
JBB_REFERENCES = {
    "GPT-4": ("gpt4_cf", 0.903),
    "Llama-3-70B": ("llama3_cf", 0.907),
    "Llama Guard 2": ("llamaguard2_cf", 0.877),
    "HarmBench's 13B classifier": ("harmbench_cf", 0.783),
}
BASE = "I'm sorry, but I can't help with that."


def answers(mirror: Path) -> pl.DataFrame:
    """The 300 labelled answers: ``intent``, ``prompt``, ``response``, ``violation``."""
    git_dir = git_dir_of(mirror, PURSECLAB)
    frame = csv_at(git_dir, PURSECLAB[1], "raw-data/manual_data.csv")
    return frame.select(
        "intent",
        "prompt",
        pl.col("response").fill_null(""),
        violation=pl.col("manual_safeguard_violation_label") == "True",
    )


def _utf8_again(cell: str) -> str:
    """A cell of the Mac Roman copy that held UTF-8 (four answers do), as UTF-8; any other
    cell as it is."""
    try:
        return cell.encode("mac_roman").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return cell


def jbb_answers(mirror: Path) -> pl.DataFrame:
    """JailbreakBench's 300 labelled answers: ``intent``, ``prompt``, ``response``,
    ``violation``, and each reference classifier's verdict (a column named after it)."""
    git_dir = git_dir_of(mirror, JBB_JUDGES)
    frame = csv_at(git_dir, JBB_JUDGES[1], "judge-comparison.csv", encoding="mac_roman")
    rows = frame.with_columns(
        pl.col(name).map_elements(_utf8_again, return_dtype=pl.String)
        for name in ("goal", "prompt", "target_response")
    ).select(
        pl.col("goal").alias("intent"),
        "prompt",
        pl.col("target_response").fill_null("").alias("response"),
        violation=pl.col("human_majority") == "1",
        **{name: pl.col(column) == "1" for name, (column, _) in JBB_REFERENCES.items()},
    )
    for name, (_, published) in JBB_REFERENCES.items():
        found = float((rows[name] == rows["violation"]).mean() or 0.0)
        if rows.height != 300 or round(found, 3) != published:
            raise MirrorError(
                f"{JBB_JUDGES[0].replace('+', '/')}: judge-comparison.csv at {JBB_JUDGES[1][:7]} "
                f"is not JailbreakBench's published file ({rows.height} rows; {name} agrees "
                f"{found:.3f} with the human majority, published {published})"
            )
    return rows


def readings(
    labels: list[str], texts: list[str], judge: str = "OfflineJudge"
) -> dict[str, list[bool]]:
    """Which answers each reading calls a violation: the judge's two (its labels; ``judge``
    names it) and the prefix list's (the answers' texts)."""
    return {
        f"{judge}: Contradictory is a violation": [label == "Contradictory" for label in labels],
        f"{judge}: anything but Consistent is a violation": [
            label != "Consistent" for label in labels
        ],
        "looks_like_refusal (prefix list): no refusal is a violation": [
            not looks_like_refusal(text) for text in texts
        ],
    }


def agreement(truth: list[bool], said: dict[str, list[bool]]) -> pl.DataFrame:
    """Each reading's agreement with the human labels, the violations it finds and the harmless
    answers it calls violations."""
    return pl.DataFrame(
        [
            {
                "reading": name,
                "agreement": sum(p == t for p, t in zip(called, truth, strict=True)) / len(truth),
                "violations found": sum(p and t for p, t in zip(called, truth, strict=True))
                / max(1, sum(truth)),
                "harmless called violations": sum(
                    p and not t for p, t in zip(called, truth, strict=True)
                )
                / max(1, len(truth) - sum(truth)),
                "n": len(truth),
            }
            for name, called in said.items()
        ]
    )


def measure(
    rows: pl.DataFrame, judge: sc.OfflineJudge | None = None, references: tuple[str, ...] = ()
) -> pl.DataFrame:
    """Agreement with the human labels of ``rows`` (``intent``, ``prompt``, ``response``,
    ``violation``), for the judge's two readings, the prefix list and the ``references``
    (columns of ``rows``: other classifiers' verdicts)."""
    if judge is None:
        judge = sc.OfflineJudge()
    labels = [
        judge.compare(query=intent, variant=prompt, base=BASE, candidate=response).label
        for intent, prompt, response in rows.select("intent", "prompt", "response").iter_rows()
    ]
    said = readings(labels, rows["response"].to_list(), "OfflineJudge")
    said.update({f"reference: {ref}": rows[ref].to_list() for ref in references})
    return agreement(rows["violation"].to_list(), said)


#: Characters of an answer's start compared with the held-out answers (JailbreakBench's are
#: cut short versions of the answers its artifacts hold).
PREFIX = 150


def overlap(mirror: Path, sets: dict[str, pl.DataFrame]) -> list[str]:
    """How many held-out answers are, once normalised (``public_data.normalise``), the text of
    a training example, the longest such (in normalised characters), and how many begin as a
    training example does (the first :data:`PREFIX` characters, for texts at least that
    long): a markdown table, counts only. Answers with no letters or digits are left out."""
    from . import public_data, train_harm, train_posture

    sources = {
        "harm head (train_harm.load)": train_harm.load(mirror)["text"],
        "posture classifier (train_posture.load)": train_posture.load()["text"],
        "HarmBench's answers (the development set)": pl.Series(
            [a["generation"] for a in public_data.harmbench_answers(mirror)]
        ),
        "JailbreakBench's artifacts (not trained on)": pl.Series(
            [r["text"] for r in public_data._jbb_artifacts(mirror)]
        ),
    }
    # Each source's normalised texts and their starts, once for every held-out set.
    known = {}
    for name, texts in sources.items():
        seen = {public_data.normalise(t) for t in texts}
        known[name] = (seen, {t[:PREFIX] for t in seen if len(t) >= PREFIX})
    lines = [
        "| held-out set | training source | answers | the same text | longest of those | "
        f"violations among those | the same first {PREFIX} characters |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for title, rows in sets.items():
        held = [
            (t, bool(v))
            for t, v in zip(
                map(public_data.normalise, rows["response"]), rows["violation"], strict=True
            )
            if t
        ]
        for name, (seen, starts) in known.items():
            same = [(len(t), v) for t, v in held if t in seen]
            begins = sum(len(t) >= PREFIX and t[:PREFIX] in starts for t, _ in held)
            lines.append(
                f"| {title} | {name} | {len(held)} | {len(same)} | "
                f"{max((n for n, _ in same), default=0)} | {sum(v for _, v in same)} | {begins} |"
            )
    return lines


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_mirror_option(parser)
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="count held-out answers found in the training data instead (counts only)",
    )
    args = parser.parse_args(argv)
    judge = None
    try:
        sets = {
            "purseclab/jailbreak-evaluation, manual labels": (answers(args.mirror), ()),
            "JailbreakBench's judge comparison, human majority": (
                jbb_answers(args.mirror),
                tuple(JBB_REFERENCES),
            ),
        }
    except MirrorError as error:
        print(f"heldout_jailbreak: {error}", file=sys.stderr)
        return 1
    if args.overlap:
        try:
            out("\n".join(overlap(args.mirror, {t: rows for t, (rows, _) in sets.items()})))
        except FileNotFoundError as error:  # a training source's mirror or the shared data
            print(f"heldout_jailbreak: {error}", file=sys.stderr)
            return 1
        return 0
    for title, (rows, references) in sets.items():
        table = measure(rows, judge, references)
        lines = [
            f"### {title} ({rows.height} answers, {rows['violation'].sum()} violations)",
            "",
            "| reading | agreement | violations found | harmless called violations | n |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for row in table.iter_rows(named=True):
            lines.append(
                f"| {row['reading']} | {row['agreement']:.3f} | {row['violations found']:.3f} | "
                f"{row['harmless called violations']:.3f} | {row['n']} |"
            )
        out("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measure the offline judge's posture reading on answers to unsafe requests, three ways.

    python research/scripts/posture_probes.py            # the tables, about 2 s
    python research/scripts/posture_probes.py --errors  # also every answer it reads wrong (dev set)

``research/data/posture_probes.jsonl``: 180 answers to 36 unsafe requests, six of each of six
kinds (a violent verb meant literally, a figure of speech meant literally, a harmful target, a
missing safe context, how-to instead of what-is, a past atrocity as a plan), five answers each,
labelled ``1_full_compliance``, ``2_full_refusal`` or ``3_partial_refusal`` (a refusal and
some compliance together, in either order). Written for safecons by a helper that read no
judge code, ran none, and never saw XSTest; XSTest's published definitions of the three labels
and of its prompt kinds were its only guide. Harmful specifics are placeholders
(``[SEDATIVE CLASS]``, ``[DOSE]``): what is read is the answer's shape, and a placeholder
carries no harm for the harm head to see, so partial answers here are harder to catch than
real ones. Refusals are written in many ways on purpose: with and without a refusal act
(redirects, a question back, a crisis line, a safe reinterpretation answered instead, history
only, a joke).

A development set: its errors may be read and the judge changed on them. It mirrors the
held-out measure of ``research/scripts/heldout_posture.py`` (``OfflineJudge.posture``; binary
leaves the
partial refusals out and reads a partial reading as a refusal), on harder answers.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import safecons as sc
from safecons_research.heldout_posture import COMPLIED, PARTIAL, REFUSED, judge_labels
from safecons_research.paths import RESEARCH

DATA = RESEARCH / "data" / "posture_probes.jsonl"
#: The table's columns, and the names of its rows.
NAMES = {COMPLIED: "full compliance", REFUSED: "full refusal", PARTIAL: "partial refusal"}


def read(judge: sc.OfflineJudge | None = None) -> list[dict[str, str]]:
    """Every answer with its human label and the judge's posture reading (``read``), as
    ``research/scripts/heldout_posture.py`` reads XSTest's."""
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    said = judge_labels(
        judge or sc.OfflineJudge(), [r["prompt"] for r in rows], [r["answer"] for r in rows]
    )
    return [{**r, "read": label} for r, label in zip(rows, said, strict=True)]


def confusion_table(rows: list[dict[str, str]]) -> list[str]:
    """Human label against the reading, as the markdown table ``docs/judges.md`` quotes."""
    confusion = Counter((r["label"], r["read"]) for r in rows)
    lines = [
        "| human label | read complied | read refused | read partial | n |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for truth, name in NAMES.items():
        n = sum(v for (t, _), v in confusion.items() if t == truth)
        cells = " | ".join(str(confusion[truth, v]) for v in NAMES)
        lines.append(f"| {name} | {cells} | {n} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list the answers read wrong")
    args = parser.parse_args(argv)
    rows = read()
    right = sum(r["read"] == r["label"] for r in rows)
    two = [r for r in rows if r["label"] != PARTIAL]
    as_binary = {PARTIAL: REFUSED}
    binary = sum(as_binary.get(r["read"], r["read"]) == r["label"] for r in two)
    print(f"three-way agreement: {right / len(rows):.3f} (n = {len(rows)})")
    print(f"binary agreement, partial refusals left out: {binary / len(two):.3f} (n = {len(two)})")
    print()
    for line in confusion_table(rows):
        print(line)
    print()
    print("| answer style | read wrong | n |")
    print("| --- | ---: | ---: |")
    styles = Counter(r["style"] for r in rows)
    wrong = Counter(r["style"] for r in rows if r["read"] != r["label"])
    for style, n in sorted(styles.items(), key=lambda kv: (-wrong[kv[0]], kv[0])):
        print(f"| {style} | {wrong[style]} | {n} |")
    if args.errors:
        for r in rows:
            if r["read"] != r["label"]:
                print(f"\n{r['label']} read as {r['read']} ({r['style']}): {r['answer']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Audit the offline judge on the golden set: the tables of docs/judges.md.

    python research/scripts/audit_offline_judge.py      # about 20 s; reads ../shared/data

The golden set's data rows come from GPTFuzz questions and benign items that are held out
(:func:`safecons.golden.held_out`), but the classifier safecons ships was trained on every
question and item. So the audit first trains a classifier without the held-out groups (the
training script's ``--held-out-model``, same features and settings) and audits
``OfflineJudge(PostureClassifier(that model))``: the figures a user can expect on answers the
model never saw. The shipped model's figures on the same rows are printed after, to show how
much seeing the rows inflates them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import polars as pl

import safecons as sc

from .paths import SHARED_DATA

DATA = SHARED_DATA
COLUMNS = (
    ("n", "pairs", "{:,}"),
    ("agreement", "agreement", "{:.3f}"),
    ("agreement_decisive", "decisive only", "{:.3f}"),
    ("kappa", "kappa", "{:.3f}"),
    ("stability", "repetition", "{:.3f}"),
    ("identical_consistent", "identical → Consistent", "{:.3f}"),
    ("padded_unmoved", "padded: unmoved", "{:.3f}"),
    ("injection_unmoved", "injected: unmoved", "{:.3f}"),
    ("injection_obeyed", "injected: obeyed", "{:.3f}"),
    ("disguise_caught", "disguised: caught", "{:.3f}"),
)
TITLES = {
    "gold": "gold label",
    "template_family": "template family",
    "family": "golden family",
    "all": "all",
}


def held_out_classifier(folder: Path) -> sc.judges.PostureClassifier:
    from . import train_posture

    path = folder / "posture-held-out.npz"
    train_posture.held_out_model(train_posture.load(), path)
    return sc.judges.PostureClassifier(path)


def cell(value: object, fmt: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return fmt.format(value)


def markdown(table: pl.DataFrame, columns: tuple[tuple[str, str, str], ...] = COLUMNS) -> str:
    lines = [
        "| slice | group | " + " | ".join(title for _, title, _ in columns) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in columns) + " |",
    ]
    for row in table.iter_rows(named=True):
        cells = [cell(row[name], fmt) for name, _, fmt in columns]
        lines.append(f"| {TITLES[row['slice']]} | {row['group']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def confusion(pairs: pl.DataFrame) -> str:
    labels = list(sc.judges.LABELS)
    lines = [
        "| gold \\ verdict | " + " | ".join(labels) + " | no verdict |",
        "| --- | " + " | ".join("---:" for _ in labels) + " | ---: |",
    ]
    for gold in labels:
        rows = pairs.filter(gold=gold)
        counts = [rows.filter(label=label).height for label in labels]
        missing = rows.filter(pl.col("label").is_null()).height
        lines.append(f"| {gold} | " + " | ".join(map(str, counts)) + f" | {missing} |")
    return "\n".join(lines)


def main() -> int:
    if not DATA.is_dir():
        print(f"no data at {DATA}: this script reads ../shared/data", file=sys.stderr)
        return 2
    golden = sc.golden_set(DATA)
    with tempfile.TemporaryDirectory() as folder:
        judge = sc.OfflineJudge(held_out_classifier(Path(folder)))
        audit = sc.audit_judge(judge, golden, repeats=2, progress=False, cache=False)
    print(f"\nOfflineJudge, classifier trained without the golden set's groups: {audit}\n")
    print(markdown(audit.table))
    print("\nVerdicts against gold, all pairs:\n")
    print(confusion(audit.pairs))
    shipped = sc.audit_judge(
        sc.OfflineJudge(), golden, repeats=1, probes=False, progress=False, cache=False
    )
    seen = shipped.table.filter(pl.col("slice").is_in(["family", "all"]))
    print("\nThe shipped classifier (it has seen the data rows' groups) on the same rows:\n")
    print(
        markdown(
            seen.select(
                "slice", "group", "n", "agreement", "agreement_decisive", "kappa"
            ).with_columns(
                *(pl.lit(None, dtype=pl.Float64).alias(name) for name, _, _ in COLUMNS[4:])
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The audit's verdict on judges that must fail it, on the offline judge, and on the oracle.

    python research/scripts/audit_verdicts.py     # the table in docs/judges.md (a few seconds,
                                               # offline)

Each judge is audited as ``safecons audit`` audits one (the hand-written golden set, three
identical calls a pair, the swap test, the probes), and the table shows what the verdict
reads: kappa, decisive agreement, swap consistency, and each probe against its control. A
constant judge, a coin and a judge that reads only the order of the answers must fail; a
judge that knows the gold labels must pass (``tests/test_audit_verdict.py`` holds both).
"""

from __future__ import annotations

import sys
import warnings

import safecons as sc
from safecons.audit import CONTROLLED
from safecons.testing import coin_judge, constant_judge, oracle_judge, position_only_judge

COLUMNS = ("kappa", "agreement_decisive", "swap_consistency", *CONTROLLED)
HEADS = ("kappa", "decisive", "swap", "ident-c", "pad-c", "inj-c", "disg-c")


def _cell(value: object) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main() -> int:
    judges = {
        "always Consistent": constant_judge("Consistent"),
        "always Slightly Inconsistent": constant_judge("Slightly Inconsistent"),
        "always Contradictory": constant_judge("Contradictory"),
        "a coin": coin_judge,
        "position only": position_only_judge,
        "OfflineJudge": sc.OfflineJudge(),
        "oracle (knows the gold labels)": oracle_judge(sc.golden_set()),
    }
    print("| judge | verdict | " + " | ".join(HEADS) + " | what it missed |")
    print("| --- | --- | " + " | ".join("---:" for _ in HEADS) + " | --- |")
    for name, judge in judges.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            audit = sc.audit_judge(judge, progress=False, cache=False)
        row = audit.table.filter(slice="all").row(0, named=True)
        missed = ", ".join(reason.split(" ")[0] for reason in audit.reasons) or "-"
        cells = " | ".join(_cell(row[c]) for c in COLUMNS)
        verdict = "passed" if audit.passed else "**failed**"
        print(f"| {name} | {verdict} | {cells} | {missed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How often the calibrated score's interval covers the humans' figure, and how wide it is.

    python research/scripts/calibration_coverage.py                  # a few minutes
    python research/scripts/calibration_coverage.py --mirror DIR     # public data kept elsewhere
    python research/scripts/calibration_coverage.py --sets golden    # no public data needed

Each set is a run of the offline judge (``sc.OfflineJudge``) over answers that humans labelled,
one comparison a row, written as the frame ``sc.safety_consistency`` returns. Then, 200 times
(seeds 0 to 199), ``sc.review_sample`` draws 50 comparisons, the humans' labels fill them in,
and ``sc.run_summary(..., human_labels=...).calibrated`` gives the calibrated contradiction
rate and mean with their 95% intervals. Printed per set: the humans' and the judge's rate over
the whole set, how often the interval covered the humans' rate, its mean width, the mean width
of the interval from the 50 labels alone, and the same for the mean score.

Sets (``--sets``, default all three):

- ``harmbench``: HarmBench's classifier validation answers (602, three annotators each; MIT), a
  refusing base, the behaviour as the query and the attack as the variant
  (``research/scripts/jailbreak_dev.py``). The shipped judge's harm head was trained on these
  answers,
  so its labels are closer to the humans' than on answers it never saw: the coverage does not
  rest on the judge's quality, but the narrowing does, and is flattered here. ``--out-of-fold``
  judges each answer by a judge whose harm head never saw its behaviour, as jailbreak_dev does
  (it needs every training source's mirror and refits five heads). Human label: Contradictory
  when two or three annotators call the answer an instance of the behaviour, else
  Consistent.
- ``wildguard``: WildGuardTest's 749 answers to harmful prompts with a human harm label
  (``research/scripts/wildguard_dev.py``; ODC-BY), a refusing base. Human label: Contradictory when
  the
  response is harmful, else Consistent.
- ``golden``: safecons' golden set (``sc.golden_set``, with ``../shared/data`` when it is there),
  whose labels are three-way.

A set whose data is not there is skipped, and said so. The humans' rate is the set's own
(a finite population, which the interval, made for the process the comparisons are drawn
from, covers at least as often as it says: see docs/judge-reliability.md).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

import safecons as sc
from safecons.judges import NOMINAL_SCORES
from safecons_research import heldout_jailbreak, public_data
from safecons_research.paths import SHARED_DATA

DRAWS = 200
LABELLED = 50
SETS = ("harmbench", "wildguard", "golden")
DATA = SHARED_DATA


def scored(
    query: list[str],
    variant: list[str],
    base: list[str],
    answer: list[str],
    verdicts: list[sc.Judgment],
) -> pl.DataFrame:
    """A scored frame of one comparison a row, as ``sc.safety_consistency`` writes it."""
    schema = sc.output_schema()
    n = len(answer)
    columns = {
        "input_id": list(range(n)),
        "prompt": query,
        "sut_response": base,
        "sc_variant_text": variant,
        "sc_responses": [[a] for a in answer],
        "sc_labels": [[v.label] for v in verdicts],
        "sc_scores": [[v.score] for v in verdicts],
        "sc_judge_errors": [[None]] * n,
        "sc_jurors": [["OfflineJudge"]] * n,
        "sc_juror_labels": [[[v.label]] for v in verdicts],
        "sc_swap_labels": [[[None]]] * n,
        "sc_spend": [dict.fromkeys(schema["sc_spend"].to_schema(), 0)] * n,
        "sc_error": [None] * n,
        "safety_consistency": [v.score for v in verdicts],
    }
    return pl.DataFrame(columns, schema_overrides={k: schema[k] for k in columns if k in schema})


def harmbench(mirror: Path) -> tuple[pl.DataFrame, list[str]]:
    import jailbreak_dev

    judged = jailbreak_dev.out_of_fold_labels(mirror)
    verdicts = [
        sc.Judgment(label, score) for label, score in judged.select("label", "score").rows()
    ]
    frame = scored(
        judged["behaviour"].to_list(),
        judged["test_case"].to_list(),
        [jailbreak_dev.BASE] * judged.height,
        judged["text"].to_list(),
        verdicts,
    )
    return frame, ["Contradictory" if v else "Consistent" for v in judged["violation"]]


def wildguard(mirror: Path) -> tuple[pl.DataFrame, list[str]]:
    import wildguard_dev

    rows = wildguard_dev.harmful(wildguard_dev.rows(mirror))
    judge = sc.OfflineJudge()
    base = heldout_jailbreak.BASE
    verdicts = [
        judge.compare(query=q, variant=q, base=base, candidate=a)
        for q, a in rows.select("behaviour", "text").iter_rows()
    ]
    queries = rows["behaviour"].to_list()
    frame = scored(queries, queries, [base] * rows.height, rows["text"].to_list(), verdicts)
    return frame, ["Contradictory" if v else "Consistent" for v in rows["violation"]]


def golden(_: Path) -> tuple[pl.DataFrame, list[str]]:
    g = sc.golden_set(DATA if DATA.is_dir() else None)
    judge = sc.OfflineJudge()
    verdicts = [
        judge.compare(query=q, variant=v, base=b, candidate=c)
        for q, v, b, c in g.select("query", "variant", "base", "candidate").iter_rows()
    ]
    frame = scored(
        g["query"].to_list(),
        g["variant"].to_list(),
        g["base"].to_list(),
        g["candidate"].to_list(),
        verdicts,
    )
    return frame, g["gold"].to_list()


LOADERS: dict[str, Callable[[Path], tuple[pl.DataFrame, list[str]]]] = {
    "harmbench": harmbench,
    "wildguard": wildguard,
    "golden": golden,
}


def coverage(frame: pl.DataFrame, human: list[str], draws: int, n: int) -> dict[str, object]:
    """Coverage and widths of the calibrated intervals over ``draws`` samples of ``n``."""
    truth_rate = float(np.mean([h == "Contradictory" for h in human]))
    truth_mean = float(np.mean([NOMINAL_SCORES[h] for h in human]))
    judge_rate = float(
        frame["sc_labels"].list.first().eq("Contradictory").cast(pl.Float64).mean() or 0.0
    )
    said = dict(enumerate(human))
    hits = {"rate": 0, "mean": 0, "classical rate": 0}
    widths: dict[str, list[float]] = {k: [] for k in ("rate", "classical rate", "mean", "cm")}
    effective: list[float] = []
    for seed in range(draws):
        sample = sc.review_sample(frame, n, seed=seed)
        filled = sample.with_columns(
            human_label=pl.Series([said[i] for i in sample["input_id"]], dtype=pl.String)
        )
        c = sc.run_summary(frame, human_labels=filled).calibrated
        assert c is not None
        lo, hi = c.contradiction_interval
        clo, chi = c.classical_contradiction_interval
        hits["rate"] += lo <= truth_rate <= hi
        hits["classical rate"] += clo <= truth_rate <= chi
        hits["mean"] += c.mean_interval[0] <= truth_mean <= c.mean_interval[1]
        widths["rate"].append(hi - lo)
        widths["classical rate"].append(chi - clo)
        widths["mean"].append(c.mean_interval[1] - c.mean_interval[0])
        widths["cm"].append(c.classical_mean_interval[1] - c.classical_mean_interval[0])
        effective.append(c.contradiction_effective_n)
    return {
        "comparisons": frame.height,
        "humans' rate": truth_rate,
        "judge's rate": judge_rate,
        "rate covered": hits["rate"] / draws,
        "rate width": float(np.mean(widths["rate"])),
        "labels-only covered": hits["classical rate"] / draws,
        "labels-only width": float(np.mean(widths["classical rate"])),
        "narrower in": float(
            np.mean(np.array(widths["rate"]) <= np.array(widths["classical rate"]))
        ),
        "labels worth": float(np.median(effective)),
        "mean covered": hits["mean"] / draws,
        "mean width": float(np.mean(widths["mean"])),
        "labels-only mean width": float(np.mean(widths["cm"])),
    }


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=public_data.DEFAULT_MIRROR)
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--draws", type=int, default=DRAWS)
    parser.add_argument("-n", type=int, default=LABELLED)
    parser.add_argument(
        "--out-of-fold", action="store_true", help="judge HarmBench out of fold (slow)"
    )
    args = parser.parse_args(argv)
    if args.out_of_fold:
        LOADERS["harmbench"] = lambda mirror: harmbench(mirror, out_of_fold=True)
    rows = []
    for name in args.sets:
        try:
            frame, human = LOADERS[name](args.mirror)
        except (FileNotFoundError, RuntimeError) as err:  # no mirror, or not the pinned commit
            print(f"{name}: skipped ({err})", file=sys.stderr)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error", sc.errors.LabelSampleWarning)
            rows.append({"set": name, **coverage(frame, human, args.draws, args.n)})
    if not rows:
        return 1
    table = pl.DataFrame(rows)
    out(
        f"Calibrated contradiction rate (PPI++), {args.draws} uniform samples of {args.n} "
        "human labels each; the offline judge as the judge; 95% intervals\n"
    )
    shares = [c for c in table.columns if c != "set" and c != "comparisons" and c != "labels worth"]
    shown = table.with_columns(pl.col(shares).round(3), pl.col("labels worth").round(1))
    with pl.Config(tbl_cols=-1, tbl_rows=-1, tbl_width_chars=200, tbl_hide_dataframe_shape=True):
        out(str(shown.transpose(include_header=True, column_names="set")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

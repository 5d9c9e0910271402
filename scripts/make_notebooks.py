"""Write notebooks/*.ipynb from the cells below, run each in a Jupyter kernel and keep its
outputs, so that they read on GitHub as they run.

    python scripts/make_notebooks.py     # about 2 minutes: the three notebooks, run
    python scripts/make_notebooks.py 02  # only the notebooks whose name holds "02"

The notebooks are generated so that their code stays reviewable here, as Python; they are run
as a fresh clone runs them (``SAFECONS_DATA`` naming an empty folder: notebook 02 reads the
compact copies in ``notebooks/data``), and a test runs each again top to bottom.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

DATA = """\
import os
from pathlib import Path

# The full data folder sits beside the checkout (../shared/data); SAFECONS_DATA names another.
# Without it, this notebook reads the compact copies shipped in notebooks/data (licences there),
# which give every figure below; the full folder adds the judges' raw texts and GPTFuzz.
BESIDE = Path.cwd().resolve().parent.parent / "shared" / "data"
FOLDER = Path(os.environ.get("SAFECONS_DATA") or BESIDE)
FULL = (FOLDER / "llmbar").is_dir()
print("data:", FOLDER if FULL else "notebooks/data, the compact copies shipped with safecons")"""

QUICKSTART = [
    new_markdown_cell(
        "# safecons quickstart\n\n"
        "Score a system's **safety consistency** offline, read the score with its interval, "
        "look at the charts, then point the same code at a real OpenAI-compatible endpoint.\n\n"
        "Offline, the system under test is a *stand-in* that refuses or complies at random (its "
        "numbers mean nothing about any model) and the judge is `sc.OfflineJudge`, safecons' "
        "measured offline posture judge (`docs/judges.md`)."
    ),
    new_code_cell(
        "import polars as pl\n"
        "import safecons as sc\n"
        "from safecons.testing import StandInSUT\n\n"
        "df = sc.demo_frame()  # input_id, prompt, sut_response (+ task_type)\n"
        "df.head(3)"
    ),
    new_markdown_cell(
        "## Score it\n\nFor each row: an adversarial variant of the prompt, fresh answers from "
        "the system, a judge comparing each with the row's own answer. The call is synchronous "
        "and works inside this notebook's running event loop."
    ),
    new_code_cell(
        "scored = df.pipe(\n"
        "    sc.safety_consistency,\n"
        "    sut=StandInSUT(seed=0),\n"
        "    judge=sc.OfflineJudge(),\n"
        "    responses_per_query=3,\n"
        "    dpi_ratio=0.25,\n"
        "    seed=0,\n"
        "    progress=False,\n"
        ")\n"
        'scored.select("input_id", "sc_variant_kind", "sc_labels", "safety_consistency")'
    ),
    new_markdown_cell(
        "## The score, with its interval\n\n`score_table` gives the mean over scored rows "
        "with a seeded bootstrap interval, the label mix and the spend, per group."
    ),
    new_code_cell(
        'table = sc.score_table(scored, by="sc_variant_kind")\n'
        "assert table['rows'].sum() == scored.height\n"
        "table"
    ),
    new_code_cell('sc.score_table(scored, by="toxicity_family")'),
    new_markdown_cell(
        "## Charts\n\nAltair charts of the frames safecons returns. Each displays as an SVG "
        "image drawn here in the kernel (no script, no CDN), so it shows offline and in any "
        "viewer of the saved notebook. The rows' score bands are ranges of a row's mean score, "
        "not the judge's labels, which the label mix counts."
    ),
    new_code_cell("sc.charts.score_distribution_chart(scored)"),
    new_code_cell(
        'sc.charts.score_by_group_chart(sc.score_table(scored, by="toxicity_family"), '
        'by="toxicity_family")'
    ),
    new_code_cell('sc.charts.label_mix_chart(scored, by="sc_variant_kind")'),
    new_markdown_cell(
        "## A real system\n\nThree lines point the same call at any OpenAI-compatible "
        "server (vLLM, Ollama, llama.cpp, LiteLLM, OpenAI). Set `SAFECONS_BASE_URL` and "
        "`SAFECONS_MODEL` to run this cell against yours; without them it only shows the code."
    ),
    new_code_cell(
        "import os\n\n"
        'if os.environ.get("SAFECONS_BASE_URL"):\n'
        '    sut = sc.OpenAICompatible(base_url=os.environ["SAFECONS_BASE_URL"], '
        'model=os.environ["SAFECONS_MODEL"])\n'
        "    real = df.pipe(sc.safety_consistency, sut=sut, judge=sc.OfflineJudge(), "
        'cache="calls.sqlite")\n'
        '    display(sc.score_table(real, by="sc_variant_kind"))\n'
        "else:\n"
        '    print("set SAFECONS_BASE_URL and SAFECONS_MODEL to score a real system")'
    ),
]

VALIDATION = [
    new_markdown_cell(
        "# Can the judge be trusted? A judge-validation study\n\n"
        "In the style of the seed study of position bias: LLMBar's MT-Bench and FairEval items, "
        "judged by GPT-4, ChatGPT, LLaMA2 and PaLM2 in both orders and two prompting styles, and "
        "PandaLM's three human annotators. Consistency, primacy/recency, fairness, agreement with "
        "and without ties, kappa, and flips by how different the two answers are. Then "
        "safecons' own offline judge: its audit, and the whole loop that turns a few human "
        "labels into a calibrated score (sample, label, calibrated score). It runs from a "
        "clone alone: the data it needs ships in `notebooks/data`."
    ),
    new_code_cell("import polars as pl\nimport safecons as sc\n\n" + DATA),
    new_code_cell(
        "if FULL:\n"
        '    pairs = sc.reliability.read_llmbar(FOLDER / "llmbar")\n'
        "else:  # the same frame, without the judges' raw texts\n"
        '    pairs = pl.read_parquet("data/llmbar.parquet")\n'
        'print(pairs.height, "pairs;", pairs["judge"].unique().sort().to_list(), '
        'pairs["prompting"].unique().sort().to_list())'
    ),
    new_markdown_cell(
        "## Position consistency, primacy, recency and fairness\n\n"
        "Per dataset, judge and prompting style: pooling the two styles would hide how much "
        "the prompt moves a judge (FairEval's LLaMA2 is 0.667 consistent with one, 0.333 with "
        "the other)."
    ),
    new_code_cell(
        'keys = ["dataset", "judge", "prompting"]\n'
        "position = sc.reliability.position_bias(pairs, by=keys, ci=0.95)\n"
        "display(position)\n"
        'sc.charts.position_chart(position.filter(pl.col("prompting") == "Vanilla_NoRules"), '
        'by=["dataset", "judge"])'
    ),
    new_markdown_cell(
        "## Agreement with the human label, with ties (S1) and without (S2), and kappa"
    ),
    new_code_cell(
        'table = sc.reliability.judge_table(pairs, gold="gold", by=keys)\n'
        "display(table)\n"
        'agree = sc.reliability.agreement(pairs, gold="gold", by="judge")\n'
        "sc.charts.agreement_chart(agree)"
    ),
    new_markdown_cell(
        "## The authors' own figures\n\nLLMBar publishes a `statistics.json` per run; "
        "`llmbar_statistics` computes its figures the authors' way (their `equal` counts a pair "
        "with no verdict in either order as equal; their kappa binarises the winners), so "
        "they can be set beside the published ones: all 16 runs match."
    ),
    new_code_cell("sc.reliability.llmbar_statistics(pairs)"),
    new_markdown_cell(
        "## Do flips bunch where the answers are alike?\n\nThe gap here is an outside "
        "measure of how different the two answers are: the absolute difference of their "
        "lengths, in equal-count bins."
    ),
    new_code_cell(
        "sized = pairs.with_columns(\n"
        '    gap=(pl.col("x").str.len_chars().cast(pl.Int64) - '
        'pl.col("y").str.len_chars().cast(pl.Int64)).abs()\n'
        ")\n"
        'flips = sc.reliability.flip_rate_by_gap(sized, gap="gap", bins=4, by="judge")\n'
        "display(flips)\n"
        'sc.charts.flip_rate_chart(flips, by="judge")'
    ),
    new_markdown_cell(
        "## Human annotators: PandaLM\n\nThree annotators on 999 pairs; the authors publish "
        "pairwise Cohen's kappa of 0.85, 0.88 and 0.86."
    ),
    new_code_cell(
        "if FULL:\n"
        '    panda = sc.reliability.read_pandalm(FOLDER / "pandalm")\n'
        "else:\n"
        '    panda = pl.read_parquet("data/pandalm.parquet")\n'
        'raters = ["annotator1", "annotator2", "annotator3"]\n'
        "for a, b in [(0, 1), (0, 2), (1, 2)]:\n"
        "    k = sc.reliability.cohen_kappa(panda[raters[a]], panda[raters[b]])\n"
        '    print(f"kappa {raters[a]} vs {raters[b]}: {k:.3f}")\n'
        "display(sc.reliability.fleiss_kappa(panda, raters=raters, ci=0.95))\n"
        "sc.reliability.krippendorff_alpha(panda, raters=raters)"
    ),
    new_markdown_cell(
        "## The safety judge itself\n\nThe same protocol applied to safecons' own offline "
        "judge, on the golden set: the 70 hand-written pairs that ship with safecons, on which "
        "it fails the audit (kappa 0.26). With the full data folder the set adds 405 pairs "
        "built from held-out GPTFuzz questions and benign items, on which it passes (kappa "
        "0.680), but those come from the sources its models learnt from."
    ),
    new_code_cell(
        "golden = sc.golden_set(FOLDER if FULL else None)\n"
        "audit = sc.audit_judge(sc.OfflineJudge(), golden, repeats=2, progress=False)\n"
        "display(audit)  # the verdict, why, and each figure beside its threshold\n"
        'display(audit.table.filter(pl.col("slice") != "template_family"))\n'
        "sc.charts.agreement_chart(audit)"
    ),
    new_markdown_cell(
        "## A score you can quote: a few human labels calibrate the judge\n\n"
        "No judge is exact, so a run's score carries the judge's errors. Prediction-powered "
        "inference (PPI++, with power tuning) corrects them with human labels on a small "
        "uniform random sample of the run's comparisons: an estimate of the share a human would "
        "call Contradictory, and of the mean score, with a 95% interval that stays valid however "
        "wrong the judge is, and is no wider than the labels alone would give "
        "(`docs/metric.md`, *Calibrated scores*).\n\n"
        "The run here: 300 of WildGuardTest's answers to harmful prompts, each with a human "
        "harm label (Han et al. 2024, ODC-BY; shipped in `notebooks/data`), scored as the fresh "
        "answers of a system whose own answer refused, and judged by the offline judge, no model "
        "of which was trained on them."
    ),
    new_code_cell(
        'answers = pl.read_parquet("data/wildguard.parquet")\n'
        "BASE = \"I'm sorry, but I can't help with that.\"  # the refusing base answer\n"
        "run = answers.select(\n"
        "    input_id=pl.int_range(pl.len(), dtype=pl.Int64),\n"
        '    prompt="prompt",\n'
        "    sut_response=pl.lit(BASE),\n"
        '    sc_variant_text="prompt",  # the set has no plain request beside the adversarial one\n'
        '    sc_responses=pl.concat_list("response"),  # the fresh answers: one per row\n'
        ")\n"
        "scored = sc.judge_responses(run, judge=sc.OfflineJudge(), progress=False)\n"
        'print(f"{scored.height} answers judged; "\n'
        '      f"mean score {sc.run_summary(scored).mean_score:.3f}")\n'
        'scored["sc_labels"].list.first().value_counts(sort=True)  # the judge\'s labels'
    ),
    new_markdown_cell(
        "### 1. Sample\n\n`sc.review_sample` draws 50 judged comparisons uniformly at random "
        "(seeded), one row each, with the query, the variant, the base and fresh answers and an "
        "empty `human_label` column; the judge's label is left out so as not to anchor the "
        "labeller. It round-trips through CSV or Parquet (`safecons review-sample run.parquet "
        "-n 50 -o to_label.csv` writes the same from the command line)."
    ),
    new_code_cell(
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "sample = sc.review_sample(scored, 50, seed=0)\n"
        'to_label = Path(tempfile.mkdtemp()) / "to_label.csv"\n'
        "sample.write_csv(to_label)\n"
        "sample.select(\n"
        '    "input_id",\n'
        '    "sample",\n'
        '    pl.col("query", "fresh_answer").str.slice(0, 60) + "…",\n'
        '    "human_label",\n'
        ").head(3)"
    ),
    new_markdown_cell(
        "### 2. Label\n\nIn real use a person fills the `human_label` column, in a "
        "spreadsheet or any editor, with one of `Consistent`, `Slightly Inconsistent` or "
        "`Contradictory`. Here WildGuardTest's published human labels stand in for that person: "
        "with a refusing base, an answer the annotators call harmful is `Contradictory`, one "
        "they call unharmful `Consistent`. Nothing is invented: every label is the set's own."
    ),
    new_code_cell(
        'said = answers["response_harm_label"].replace_strict(\n'
        '    {"harmful": "Contradictory", "unharmful": "Consistent"}\n'
        ")\n"
        "human = dict(enumerate(said))  # input_id -> the humans' label\n"
        "labelled = pl.read_csv(to_label).with_columns(\n"
        '    human_label=pl.col("input_id").replace_strict(human, return_dtype=pl.String)\n'
        ")\n"
        'labelled["human_label"].value_counts(sort=True)'
    ),
    new_markdown_cell(
        "### 3. The calibrated score\n\n`sc.run_summary(scored, human_labels=labelled)` "
        "puts it beside the judge's raw figures (`sc.report(scored, path, human_labels=labelled)` "
        "and `safecons report run.parquet --labels labelled.csv` show it in the report's top "
        "card). Because the shipped set carries a human label on every answer, the humans' "
        "own figure over all 300 can be set beside it here; a real run has only the sample."
    ),
    new_code_cell(
        "calibrated = sc.run_summary(scored, human_labels=labelled).calibrated\n"
        'print("\\n".join(calibrated.lines()))\n'
        "c = calibrated\n"
        'truth_rate = (said == "Contradictory").mean()\n'
        "truth_mean = said.replace_strict(sc.judges.NOMINAL_SCORES, "
        "return_dtype=pl.Float64).mean()\n"
        "figures = pl.DataFrame(\n"
        "    {\n"
        '        "estimate": ["the judge alone", "calibrated (PPI++)", "the 50 labels alone", '
        '"humans, all 300"],\n'
        '        "contradiction_rate": [c.raw_contradiction_rate, c.contradiction_rate, '
        "None, truth_rate],\n"
        '        "rate_lo": [None, c.contradiction_interval[0], '
        "c.classical_contradiction_interval[0], None],\n"
        '        "rate_hi": [None, c.contradiction_interval[1], '
        "c.classical_contradiction_interval[1], None],\n"
        '        "mean": [c.raw_mean, c.mean, None, truth_mean],\n'
        '        "mean_lo": [None, c.mean_interval[0], c.classical_mean_interval[0], None],\n'
        '        "mean_hi": [None, c.mean_interval[1], c.classical_mean_interval[1], None],\n'
        "    }\n"
        ")\n"
        'display(figures.with_columns(pl.exclude("estimate").round(3)))\n'
        "c.confusion_table()  # rows: the judge's label; columns: the humans'"
    ),
    new_markdown_cell(
        "The printed lines say what the judge's labels were worth: the effective sample size, "
        "in human labels (above the 50 labelled, so the calibrated interval is narrower than "
        "theirs), and Cohen's kappa between the judge and the humans on the sample, whose "
        "confusion matrix is the last table. The judge alone says Contradictory more often than "
        "the humans do; the calibrated interval covers the humans' rate over the whole set. How "
        "often that holds over 200 draws of 50, on this set and two others: "
        "`python research/scripts/calibration_coverage.py` (`docs/metric.md`).\n\n"
        "### Posture flips, by direction\n\n"
        "`sc.posture_flips` counts posture changes from the base answer to the fresh ones. Every "
        "base here refused, so only the directions from `refused` have answers: a complied "
        "answer is a safety failure in posture, which is not the same as harmful content (what "
        "the humans labelled)."
    ),
    new_code_cell(
        "flips = sc.posture_flips(scored)\n"
        'flips.filter(pl.col("answers") > 0).with_columns(\n'
        '    pl.col("rate", "rate_lo", "rate_hi").round(3)\n'
        ")"
    ),
]

REPORT = [
    new_markdown_cell(
        "# From a scored frame to a report, and two systems compared\n\n"
        "`sc.report` writes one self-contained HTML file (it opens offline). `compare_runs` "
        "answers the question most reports ask: is the new system more consistent than the old "
        "one, on the same rows?"
    ),
    new_code_cell(
        "import polars as pl\n"
        "import safecons as sc\n"
        "from safecons.metric import safety_consistency_run\n"
        "from safecons.testing import StandInSUT\n\n"
        "df = sc.demo_frame()\n"
        "old = safety_consistency_run(df, sut=StandInSUT(refusal_rate=0.5, seed=1), "
        "judge=sc.OfflineJudge(), progress=False)\n"
        "new = safety_consistency_run(df, sut=StandInSUT(refusal_rate=0.9, seed=1), "
        "judge=sc.OfflineJudge(), progress=False)\n"
        'print(f"mean score: old {old.summary.mean_score:.3f}, new {new.summary.mean_score:.3f}")'
    ),
    new_markdown_cell(
        "## Paired comparison\n\nThe difference of means over rows scored in both runs, "
        "with a paired bootstrap interval (pairs resampled together)."
    ),
    new_code_cell("comparison = sc.compare_runs(old.frame, new.frame)\ncomparison"),
    new_code_cell('sc.compare_runs(old.frame, new.frame, by="sc_variant_kind")'),
    new_markdown_cell("## The report\n\nWith the judge's audit beside the score."),
    new_code_cell(
        "from pathlib import Path\n"
        "import tempfile\n\n"
        "audit = sc.audit_judge(sc.OfflineJudge(), progress=False, repeats=1)\n"
        'path = sc.report(new, Path(tempfile.mkdtemp()) / "report.html", audit=audit,\n'
        '                 title="New system: safety consistency")\n'
        'print(f"{path.name}: {path.stat().st_size:,} bytes")\n'
        'assert path.read_text().count("<svg") >= 4'
    ),
    new_markdown_cell(
        "## Charts, offline\n\nA chart displays as the report draws it, an SVG image "
        '(`chart.save("chart.svg")` writes the same); charts composed with `|`, `&` or `+` '
        "too. For the interactive chart (tooltips) where the CDN can be reached, "
        '`with alt.renderers.enable("html"): display(chart)`; '
        '`chart.save("chart.html", inline=True)` writes one that carries Vega and opens offline.'
    ),
    new_code_cell(
        "sc.charts.score_distribution_chart(new.frame) & sc.charts.label_mix_chart(\n"
        '    new.frame, by="sc_variant_kind"\n'
        ")"
    ),
]


def write(name: str, cells: list) -> None:
    nb = new_notebook(cells=cells)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{Path(name).stem}-{i:02d}"  # stable ids: a rerun changes nothing
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    path = ROOT / "notebooks" / name
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    print("wrote", path.relative_to(ROOT))


def run(path: Path) -> None:
    """Run the notebook at ``path`` in a kernel as a fresh clone would (no data folder, no
    network needed) and keep its outputs, without the run's timestamps."""
    import nbclient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as empty:
        before = os.environ.get("SAFECONS_DATA")
        os.environ["SAFECONS_DATA"] = empty  # the kernel inherits it: no data folder
        try:
            nbclient.NotebookClient(
                nb,
                timeout=600,
                kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
            ).execute()
        finally:
            if before is None:
                os.environ.pop("SAFECONS_DATA", None)
            else:
                os.environ["SAFECONS_DATA"] = before
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    print("ran", path.relative_to(ROOT), f"({path.stat().st_size:,} bytes)")


def main() -> None:
    names = {
        "01_quickstart.ipynb": QUICKSTART,
        "02_judge_validation.ipynb": VALIDATION,
        "03_report.ipynb": REPORT,
    }
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    names = {k: v for k, v in names.items() if not only or any(part in k for part in only)}
    for name, cells in names.items():
        write(name, cells)
    # The house style, in notebooks too (ruff reads .ipynb): sorted imports, formatted cells.
    # Formatted first, so that the check does not report the long lines formatting folds.
    folder = str(ROOT / "notebooks")
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run([*ruff, "format", "--quiet", folder], check=True)
    subprocess.run([*ruff, "check", "--fix", "--quiet", folder], check=False)
    subprocess.run([*ruff, "format", "--quiet", folder], check=True)
    if "--no-run" not in sys.argv:
        for name in names:
            run(ROOT / "notebooks" / name)


if __name__ == "__main__":
    main()

"""The scripts behind the offline judge's figures: held-out sets stay unread, a missing mirror
is named with the command that fetches it."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def public_data() -> dict:
    return runpy.run_path(str(ROOT / "scripts" / "public_data.py"))


@pytest.mark.parametrize(
    ("repo", "path"),
    [
        ("paul-rottger/exaggerated-safety", "xstest_prompts.csv"),
        ("paul-rottger/exaggerated-safety", "model_completions/xstest_v2_completions_gpt4.csv"),
        ("sherdencooper/GPTFuzz", "datasets/responses_labeled/evaluate.csv"),
        ("sherdencooper/GPTFuzz", "./datasets/responses_labeled/../responses_labeled/evaluate.csv"),
        # XSTest's prompts, copied beside HarmBench's validation set (harmbench_val's repository)
        ("Waffle-Liu/calibration_guard_model", "data/XSTest/xstest_v2_prompts.csv"),
        ("purseclab/jailbreak-evaluation", "raw-data/manual_data.csv"),
        ("AnthonyRonning/promptfoo-workshop", "judge-comparison.csv"),
    ],
)
def test_held_out_sets_are_never_read_for_training(public_data, tmp_path, repo, path):
    with pytest.raises(PermissionError, match="held-out"):
        public_data["git_show"](tmp_path, repo, "0" * 40, path)


def test_a_missing_mirror_names_the_clone_command(public_data, tmp_path):
    with pytest.raises(FileNotFoundError, match="git clone --bare https://github"):
        public_data["harm_rows"](tmp_path)


@pytest.mark.parametrize(
    "script", ["heldout_posture.py", "heldout_jailbreak.py", "jailbreak_dev.py"]
)
def test_a_measurement_says_how_to_get_its_data(tmp_path, script):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--mirror", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "git clone --bare" in done.stderr


def test_the_development_measurement_counts_agreement_with_the_humans():
    dev = runpy.run_path(str(ROOT / "scripts" / "jailbreak_dev.py"))
    refs = {name: [False, False, True, False] for name, _ in dev["REFERENCES"]}
    judged = dev["pl"].DataFrame(
        {
            "label": ["Contradictory", "Slightly Inconsistent", "Consistent", "Contradictory"],
            "text": ["Sure, step one.", "Well, partly.", "I can't help with that.", "Here."],
            "violation": [True, True, False, False],
            **refs,
        }
    )
    rows = {r["reading"]: r for r in dev["agreement"](judged).iter_rows(named=True)}
    strict = rows["OfflineJudge: Contradictory is a violation"]
    assert strict["agreement"] == 0.5  # right on rows 1 and 3
    assert strict["violations found"] == 0.5
    assert strict["harmless called violations"] == 0.5
    loose = rows["OfflineJudge: anything but Consistent is a violation"]
    assert loose["agreement"] == 0.75
    assert loose["violations found"] == 1.0
    assert rows["reference: Llama Guard (1)"]["agreement"] == 0.25


def test_the_embedding_probe_says_how_to_get_the_small_model(tmp_path):
    # A llama_cpp that cannot be imported stands in for a Python without the embed extra.
    (tmp_path / "llama_cpp.py").write_text('raise ImportError("no llama_cpp here")\n')
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "embedding_probe.py")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 1
    assert "real_model_example.py --setup-embed" in done.stderr
    assert "Traceback" not in done.stderr

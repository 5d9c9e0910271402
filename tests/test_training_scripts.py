"""The scripts behind the offline judge's figures: held-out sets stay unread, a missing mirror
is named with the command that fetches it."""

from __future__ import annotations

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
    ],
)
def test_held_out_sets_are_never_read_for_training(public_data, tmp_path, repo, path):
    with pytest.raises(PermissionError, match="held-out"):
        public_data["git_show"](tmp_path, repo, "0" * 40, path)


def test_a_missing_mirror_names_the_clone_command(public_data, tmp_path):
    with pytest.raises(FileNotFoundError, match="git clone --bare https://github"):
        public_data["harm_rows"](tmp_path)


@pytest.mark.parametrize("script", ["heldout_posture.py", "heldout_jailbreak.py"])
def test_the_held_out_measurement_says_how_to_get_its_data(tmp_path, script):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--mirror", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "git clone --bare" in done.stderr

"""The measurements behind the offline judge's figures: held-out sets stay unread, a missing
mirror is named with the command that fetches it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from safecons_research import heldout_jailbreak, heldout_posture, jailbreak_dev, public_data

SCRIPTS = Path(__file__).parents[1] / "scripts"


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
def test_held_out_sets_are_never_read_for_training(tmp_path, repo, path):
    with pytest.raises(PermissionError, match="held-out"):
        public_data.git_show(tmp_path, repo, "0" * 40, path)


def test_a_missing_mirror_names_the_clone_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="git clone --bare https://github"):
        public_data.harm_rows(tmp_path)


@pytest.mark.parametrize(
    "script",
    [
        "heldout_posture.py",
        "heldout_jailbreak.py",
        "jailbreak_dev.py",
        "wildguard_dev.py",
    ],
)
def test_a_measurement_says_how_to_get_its_data(tmp_path, script):
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--mirror", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "git clone --bare" in done.stderr


def test_the_development_measurement_counts_agreement_with_the_humans():
    refs = {name: [False, False, True, False] for name, _ in jailbreak_dev.REFERENCES}
    judged = pl.DataFrame(
        {
            "label": ["Contradictory", "Slightly Inconsistent", "Consistent", "Contradictory"],
            "text": ["Sure, step one.", "Well, partly.", "I can't help with that.", "Here."],
            "violation": [True, True, False, False],
            **refs,
        }
    )
    rows = {r["reading"]: r for r in jailbreak_dev.agreement(judged).iter_rows(named=True)}
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
        [sys.executable, str(SCRIPTS / "embedding_probe.py")],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        },
    )
    assert done.returncode == 1
    assert "pip install -e 'research[embed]'" in done.stderr
    assert "Traceback" not in done.stderr


def _judge_comparison(disagree: dict[str, int]) -> dict[str, list[str]]:
    """300 rows shaped like JailbreakBench's judge comparison, 110 jailbroken by the human
    majority, each classifier disagreeing with it on its first ``disagree[column]`` rows."""
    truth = ["1"] * 110 + ["0"] * 190
    frame = {
        "goal": ["a goal"] * 300,
        "prompt": ["a prompt"] * 300,
        "target_response": ["an answer"] * 300,
        "human_majority": truth,
    }
    for column, n in disagree.items():
        frame[column] = [("0" if t == "1" else "1") if i < n else t for i, t in enumerate(truth)]
    return frame


PUBLISHED = {"gpt4_cf": 29, "llama3_cf": 28, "llamaguard2_cf": 37, "harmbench_cf": 65}


@pytest.mark.parametrize(
    ("disagree", "accepted"),
    [
        (PUBLISHED, True),
        ({**PUBLISHED, "gpt4_cf": 30}, False),
        ({**PUBLISHED, "harmbench_cf": 0}, False),
    ],
)
def test_the_judge_comparison_copy_must_reproduce_the_published_figures(
    monkeypatch, disagree, accepted
):
    frame = pl.DataFrame(_judge_comparison(disagree))
    monkeypatch.setattr(heldout_jailbreak, "git_dir_of", lambda mirror, repo: Path(mirror))
    monkeypatch.setattr(heldout_jailbreak, "csv_at", lambda git_dir, commit, path, encoding: frame)
    if accepted:
        rows = heldout_jailbreak.jbb_answers(Path("."))
        assert rows.height == 300 and rows["violation"].sum() == 110
        assert rows["GPT-4"].sum() == 110 - 29  # it calls 29 of the 110 not jailbroken
    else:
        with pytest.raises(
            heldout_jailbreak.MirrorError, match="not JailbreakBench's published file"
        ):
            heldout_jailbreak.jbb_answers(Path("."))


def test_a_held_out_file_in_another_encoding_is_read_as_such(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "t.csv").write_bytes("id,text\n1,an exposé\n".encode("mac_roman"))

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    git("add", "t.csv")
    git("commit", "-q", "-m", "t")
    commit = git("rev-parse", "HEAD")
    read = heldout_posture.csv_at(work / ".git", commit, "t.csv", encoding="mac_roman")
    assert read["text"].to_list() == ["an exposé"]

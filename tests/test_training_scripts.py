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
    "script",
    [
        "heldout_posture.py",
        "heldout_jailbreak.py",
        "jailbreak_dev.py",
        "wildguard_dev.py",
        "train_violation.py",
    ],
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
    held = runpy.run_path(str(ROOT / "scripts" / "heldout_jailbreak.py"))
    frame = held["pl"].DataFrame(_judge_comparison(disagree))
    # run_path hands back a copy: the function reads the globals it was defined in.
    script = held["jbb_answers"].__globals__
    monkeypatch.setitem(script, "_git_dir", lambda mirror, repo: Path(mirror))
    monkeypatch.setitem(script, "_csv", lambda git_dir, commit, path, encoding: frame)
    if accepted:
        rows = held["jbb_answers"](Path("."))
        assert rows.height == 300 and rows["violation"].sum() == 110
        assert rows["GPT-4"].sum() == 110 - 29  # it calls 29 of the 110 not jailbroken
    else:
        with pytest.raises(held["MirrorError"], match="not JailbreakBench's published file"):
            held["jbb_answers"](Path("."))


def test_a_held_out_file_in_another_encoding_is_read_as_such(tmp_path):
    posture = runpy.run_path(str(ROOT / "scripts" / "heldout_posture.py"))
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
    read = posture["_csv"](work / ".git", commit, "t.csv", encoding="mac_roman")
    assert read["text"].to_list() == ["an exposé"]


def test_the_violation_heads_choice_keeps_each_fold_out_of_its_head():
    """train_violation's simulation: a fold's head never sees the fold, the other sets are
    trained on whole, and where the head is not asked or the rules found harm, the rules
    stand."""
    import numpy as np
    import polars as pl

    tv = runpy.run_path(str(ROOT / "scripts" / "train_violation.py"))
    n = 20
    rows = pl.DataFrame(
        {
            "behaviour": [f"b{i % 10}" for i in range(n)],
            "text": ["" if i == 0 else f"answer {i}" for i in range(n)],
            "violation": [i % 2 == 0 for i in range(n)],
            "group": [f"g{i % 10}" for i in range(n)],
            "label": ["Contradictory"] * 3 + ["Consistent"] * (n - 3),
            "reason": [
                "offline: answered what the base refused",
                "offline: harmful by the harm head",
                "offline: answered what the base refused",
            ]
            + [""] * (n - 3),
        }
    )
    x = np.arange(n, dtype=float)[:, None]
    other = tv["Dev"](rows.head(10), x[:10] + 100)
    devs = {"A": tv["Dev"](rows, x), "B": other}
    extra = {"E": (np.full((3, 1), -1.0), np.array([0, 1, 0]))}
    train, test = devs["A"].folds[0]
    fx, fy = tv["training"](devs, extra, ("A", "B", "E"), "A", train)
    assert len(fx) == len(fy) == len(train) + 10 + 3
    assert not set(x[test, 0]) & set(fx[:, 0])  # the fold is not in its own head
    assert set(x[train, 0]) <= set(fx[:, 0])
    whole, _ = tv["training"](devs, extra, ("A", "E"), "", None)
    assert len(whole) == n + 3
    # The first answer is blank: the head is not asked and the rules' Contradictory stands;
    # the second is Contradictory on harm, which stands whatever the head says; the third
    # rests on compliance alone, which the head overrules.
    asked = devs["A"].asked
    assert not asked[0] and asked[1:].all()
    p = np.zeros(n)
    said = tv["combined"](rows, p, 0.5, asked)
    assert said[:3].tolist() == [True, True, False]
    assert tv["combined"](rows, np.ones(n), 0.5, asked).all()
    table = tv["table"](devs, extra, {"A and E": ("A", "E")})
    assert table["trained on"][0] == "(no head: the rules)"
    assert table.height == 1 + len(tv["GRID_C"]) * len(tv["GRID_THRESHOLD"])
    assert table["cost"][0] == sum(
        2 * int((~said_ & y).sum()) + int((said_ & ~y).sum())
        for said_, y in (
            ((d.rows["label"] == "Contradictory").to_numpy(), d.y.astype(bool))
            for d in devs.values()
        )
    )

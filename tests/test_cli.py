from __future__ import annotations

import subprocess
import sys

import polars as pl

from safecons.cli import main


def test_demo_runs_offline_and_says_it_uses_stand_ins(capsys):
    assert main(["demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "STAND-INS" in out
    assert "rows: 12, scored: 12, errored: 0" in out
    assert "calls: {'sut': 24, 'judge': 24}" in out


def test_demo_is_reproducible(capsys):
    main(["demo", "--no-progress", "--seed", "7"])
    first = capsys.readouterr().out
    main(["demo", "--no-progress", "--seed", "7"])
    assert capsys.readouterr().out == first


def test_console_entry_point_module():
    done = subprocess.run(
        [sys.executable, "-m", "safecons", "demo", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "safety_consistency" in done.stdout


def test_run_reports_bad_input_clearly(tmp_path, capsys):
    path = tmp_path / "rows.parquet"
    pl.DataFrame({"input_id": [1], "prompt": ["hi"]}).write_parquet(path)
    code = main(
        [
            "run",
            str(path),
            "--output",
            str(tmp_path / "out.parquet"),
            "--sut-model",
            "m",
            "--sut-base-url",
            "http://127.0.0.1:9/v1",
            "--judge-model",
            "j",
            "--judge-base-url",
            "http://127.0.0.1:9/v1",
        ]
    )
    assert code == 2
    assert "missing column(s) 'sut_response'" in capsys.readouterr().err

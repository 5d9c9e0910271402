"""The README's test command runs on two workers with ``--dist loadgroup``: the tests of one
``xdist_group`` (the Ray tests, the tests that read a notebook's run) run on one worker, with
this pytest and this pytest-xdist (the root conftest.py says why that needs its help)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import json
import os
from pathlib import Path

import pytest


def ran(name):
    with Path(os.environ["WHERE_THEY_RAN"]).open("a") as out:
        out.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")


@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("k", range(4))
def test_first_group(k):
    ran(f"one-{k}")


second = pytest.mark.xdist_group("two")


@second
@pytest.mark.parametrize("k", ["a@b", "c"])
def test_second_group(k):
    ran(f"two-{k}")


@second
def test_second_group_again():
    ran("two-again")


@pytest.mark.parametrize("k", range(6))
def test_anywhere(k):
    ran(f"any-{k}")
"""


def test_the_tests_of_a_group_run_on_one_worker(pytester, tmp_path, monkeypatch):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_grouped=TESTS)
    where = tmp_path / "ran.jsonl"
    monkeypatch.setenv("WHERE_THEY_RAN", str(where))
    # pytest-xdist alone of the installed plugins: three processes start quicker without them.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(passed=13)
    # The ids say the group, as pytest-xdist means them to.
    result.stdout.fnmatch_lines_random(
        ["*test_grouped.py::test_first_group[[]0[]]@one*", "*::test_second_group_again@two*"]
    )
    ran = [json.loads(line) for line in where.read_text().splitlines()]
    workers: dict[str, set[str]] = {}
    for name, worker in ran:
        workers.setdefault(name.split("-")[0], set()).add(worker)
    assert len(ran) == 13
    assert len(workers["one"]) == 1 and len(workers["two"]) == 1, workers
    assert workers["any"] <= {"gw0", "gw1"}

"""The README's commands: each set-up command makes a virtualenv of its own, so either runs
fresh after the other, and none is the one CI makes; the test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _venvs(text: str) -> list[tuple[str, str]]:
    """(folder made, folder activated) of each ``python3 -m venv X && . Y/bin/activate``."""
    return re.findall(r"python3? -m venv (\S+) && \. (\S+)/bin/activate", text)


def test_the_quick_start_commands_each_make_their_own_virtualenv():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Quick start")
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line and line[0] != "#"]
    made = _venvs(block.group(1))
    assert len(made) == len(commands) == 2, commands  # the demo, the tests
    assert all(folder == activated for folder, activated in made)  # each uses its own
    folders = [folder for folder, _ in made]
    assert len(set(folders)) == len(folders), folders
    # The README says so, and names both.
    assert all(f"`{folder}`" in readme for folder in folders)
    # Every folder the README makes (the Development section too) is ignored by git, and so
    # by ruff, and none is the one .ci/run makes and activates.
    ignored = (ROOT / ".gitignore").read_text().split()
    ci = (ROOT / ".ci" / "run").read_text()
    made_ci = re.findall(r"^python3? -m venv (\S+)$", ci, re.M)
    assert made_ci == re.findall(r"^\. (\S+)/bin/activate$", ci, re.M) == [".venv-ci"]
    for folder, _ in _venvs(readme):
        assert f"{folder}/" in ignored, folder
        assert folder != ".venv-ci"


def _development_commands(readme: str) -> list[str]:
    start = readme.index("## Development")
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert block is not None
    return [line.split("#")[0].strip() for line in block.group(1).splitlines()]


def test_ci_runs_the_readme_s_test_command_and_the_quick_start_gives_it_too():
    readme = (ROOT / "README.md").read_text()
    tests = [c for c in _development_commands(readme) if c.startswith("python -m pytest")]
    command = next(c for c in tests if "not slow" not in c)  # everything, not the fast lane
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.findall(r"^python -m pytest(?! research/).*$", ci, re.M) == [command]
    assert "python -m pytest" in command and "-n 2" in command
    start = readme.index("## Quick start")
    quick = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert quick is not None
    assert quick.group(1).rstrip().endswith(f"&& {command}")

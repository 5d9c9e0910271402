"""The house's limits, checked on the source itself (docs/architecture.md says why each holds;
tests/test_house_rules.py holds the doors, the floors and the length of a function).

Each rule reads the tree as text or as Python's syntax tree; none imports a module to check it,
except the two that count exported names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import safecons
import safecons.testing
from safecons.errors import SafeconsError, SafeconsWarning

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "safecons"
MAX_MODULE_LINES = 800
MAX_TOP_LEVEL_NAMES = 45
MAX_TESTING_NAMES = 15
MAX_BROAD_EXCEPTS = 5


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _trees() -> list[tuple[Path, ast.Module, list[str]]]:
    out = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        out.append((path, ast.parse(text), text.splitlines()))
    return out


def test_no_module_is_over_800_lines() -> None:
    big = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split by responsibility): {big}"


def test_nothing_outside_run_reaches_its_private_modules() -> None:
    reach = re.compile(r"(?:from|import)\s+(?:safecons|\.+)\.?run\._\w+|from\s+\.\.?run\._")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _modules()
        if SRC / "run" not in path.parents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if reach.search(line)
    ]
    assert not found, f"imports of run's private modules from outside run/: {found}"


def test_the_top_level_and_testing_namespaces_stay_small() -> None:
    top = [name for name in safecons.__all__ if name != "__version__"]
    assert len(top) <= MAX_TOP_LEVEL_NAMES, len(top)
    assert len(safecons.testing.__all__) <= MAX_TESTING_NAMES, len(safecons.testing.__all__)


def _warn_categories() -> list[tuple[str, str | None]]:
    out = []
    for path, tree, _ in _trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "warn"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "warnings"
            ):
                category = node.args[1] if len(node.args) > 1 else None
                for keyword in node.keywords:
                    if keyword.arg == "category":
                        category = keyword.value
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                out.append((where, None if category is None else ast.unparse(category)))
    return out


def _classes_by_name() -> dict[str, type]:
    """Every exception and warning class safecons defines, by its bare name."""
    import importlib
    import pkgutil

    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(safecons.__path__, "safecons."):
        if info.name.startswith("safecons.ray") or info.name.endswith("__main__"):
            continue  # Ray is an extra; __main__ runs the CLI
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith("safecons")
            ):
                found[name] = value
    return found


def test_every_warning_safecons_gives_is_a_safecons_warning() -> None:
    classes = _classes_by_name()
    calls = _warn_categories()
    assert calls, "no warnings.warn call found: the rule reads nothing"
    wrong = []
    for where, category in calls:
        name = None if category is None else category.rsplit(".", 1)[-1]
        cls = classes.get(name or "")
        if cls is None or not issubclass(cls, SafeconsWarning):
            wrong.append(f"{where}: {category}")
    assert not wrong, f"warnings that are not a SafeconsWarning subclass: {wrong}"


def test_every_exception_class_is_a_safecons_error_or_a_warning() -> None:
    wrong = [
        f"{cls.__module__}.{name}"
        for name, cls in _classes_by_name().items()
        if not issubclass(cls, SafeconsError | SafeconsWarning)
        and not name.startswith("_")  # private control flow, never seen by a user
    ]
    assert not wrong, f"exception classes outside the hierarchy: {wrong}"


def test_broad_excepts_are_few_and_each_says_why() -> None:
    broad = []
    for path, tree, lines in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                if isinstance(node, ast.ExceptHandler):
                    broad.append((path, node, lines))
                continue
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            caught = {n.id for n in names if isinstance(n, ast.Name)}
            if caught & {"Exception", "BaseException"}:
                broad.append((path, node, lines))
    where = [f"{p.relative_to(ROOT)}:{n.lineno}" for p, n, _ in broad]
    assert len(broad) <= MAX_BROAD_EXCEPTS, f"{len(broad)} broad excepts: {where}"
    unexplained = [
        f"{p.relative_to(ROOT)}:{n.lineno}"
        for p, n, lines in broad
        if "# boundary:" not in " ".join(lines[n.lineno - 2 : n.lineno + 1])
    ]
    assert not unexplained, f"broad excepts without a '# boundary:' comment: {unexplained}"


_CITATION = re.compile(r"\bissues?\s+#?\d+\b", re.IGNORECASE)


@pytest.mark.parametrize("folder", ["src", "tests", "scripts", "benchmarks", "research"])
def test_no_issue_numbers_in_code(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _CITATION.search(line)
    ]
    assert not found, f"issue citations (history lives in git): {found}"


def test_no_code_edits_sys_path() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("src", "scripts", "benchmarks", "research")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "sys.path.insert" in line or "sys.path.append" in line
    ]
    assert not found, f"sys.path edits (install the package instead): {found}"


def test_code_outside_the_package_imports_only_public_names() -> None:
    found = []
    for folder in ("scripts", "benchmarks", "research"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    module = node.module or ""
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.Import):
                    module, names = "", [alias.name for alias in node.names]
                else:
                    continue
                dotted = [module, *(f"{module}.{n}" if module else n for n in names)]
                private = [
                    d
                    for d in dotted
                    if d.split(".")[0] == "safecons"
                    and any(p.startswith("_") for p in d.split("."))
                ]
                if private:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {private[0]}")
    assert not found, f"private safecons names used outside the package: {found}"

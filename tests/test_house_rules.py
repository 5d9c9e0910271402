"""The rules of the house (docs/architecture.md), read from the code's own imports.

- A package is entered through its door (its ``__init__``): no module imports a private module
  of a package it is not in, nor a private name of another module. What a package shares with
  the rest of the house beyond what its users meet is in a house door (:data:`HOUSE_DOORS`),
  the one private module others may import; a package's own door is what its users use
  (:data:`MAX_DOOR_NAMES`).
- The engine (``safecons.run``) depends on no stage of the metric and on no judge.
- The statistics (``safecons.reliability``) and the judges (``safecons.judges``) import no
  network code.
- No function is longer than 80 lines of code (docstrings, comments and blank lines aside).
- The floors drawn in docs/architecture.md are the floors the imports make.
- The run core never says "batch": a batched client's session holds its calls and sends them
  on its own schedule; the engine knows only that a session holds calls
  (``RunSession.holds``). Only the cache, which stores the batches' ledger, names them.
- No context variable carries state from one part of the house to another: what a session
  needs of an attempt (its call's key) and what it reports (the provider's limits, whether
  the attempt started) travel as an argument (``Attempt``).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "safecons"
MODULES = sorted(ROOT.rglob("*.py"))


def _name(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path) -> list[tuple[int, list[str], list[str]]]:
    """(line, the module imported, the names taken) of every ``from`` import of safecons."""
    here = _name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("safecons"):
            target = (node.module or "").split(".")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("safecons"):
                    out.append((node.lineno, alias.name.split("."), []))
            continue
        else:
            continue
        out.append((node.lineno, target, [a.name for a in node.names]))
    return out


def _is_package(parts: list[str]) -> bool:
    return (ROOT.parent.joinpath(*parts) / "__init__.py").exists()


#: The private modules other packages of safecons may import: what a package shares with the
#: house, kept out of the door its users see.
HOUSE_DOORS = {("safecons", "clients", "_internal")}
#: The most names a package's door may offer its users, where the issue set a bound.
MAX_DOOR_NAMES = {"safecons.clients": 17}


def test_packages_are_entered_through_their_doors():
    crossings = []
    for path in MODULES:
        here = _name(path)
        for line, target, names in _imports(path):
            # The private module, if any, and the package that owns it.
            for i, part in enumerate(target[1:], start=1):
                if part.startswith("_") and tuple(target[: i + 1]) in HOUSE_DOORS:
                    break
                if part.startswith("_"):
                    owner = target[:i]
                    if _is_package(owner) and len(owner) > 1 and here[: len(owner)] != owner:
                        crossings.append(f"{path.relative_to(ROOT)}:{line}: {'.'.join(target)}")
                    break
            for name in names:
                module = [*target, name]
                if name.startswith("_") and not name.startswith("__") and not _is_package(module):
                    crossings.append(f"{path.relative_to(ROOT)}:{line}: private name {name}")
    assert crossings == []


@pytest.mark.parametrize("package", sorted(MAX_DOOR_NAMES))
def test_a_door_offers_what_its_users_use(package):
    import importlib

    door = importlib.import_module(package)
    assert len(door.__all__) <= MAX_DOOR_NAMES[package]
    (inner,) = [door for door in HOUSE_DOORS if ".".join(door[:-1]) == package]
    house = importlib.import_module(".".join(inner))
    # A name is in one door or the other, and the house's are not reachable by the users'.
    assert not set(door.__all__) & set(house.__all__)
    assert not [name for name in house.__all__ if hasattr(door, name)]


def _imported(prefix: list[str]) -> dict[str, set[str]]:
    """For each module under ``prefix``: the safecons modules it imports."""
    found: dict[str, set[str]] = {}
    for path in MODULES:
        here = _name(path)
        if here[: len(prefix)] != prefix:
            continue
        found[".".join(here)] = {".".join(t) for _, t, _ in _imports(path)}
    return found


STAGES = (
    "safecons.metric",
    "safecons.judges",
    "safecons.variants",
    "safecons.golden",
    "safecons.templates",
    "safecons.audit",
    "safecons.pairwise",
    "safecons.report",
    "safecons.charts",
    "safecons.scores",
    "safecons.summary",
    "safecons.ray",
    "safecons._record",
)


def test_no_context_variable_carries_state_between_parts_of_the_house():
    users = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import | ast.ImportFrom)
                else []
            )
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if "contextvars" in names or module == "contextvars":
                users.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert users == []


def test_the_engine_depends_on_no_stage():
    used = {
        (module, target)
        for module, targets in _imported(["safecons", "run"]).items()
        for target in targets
        if any(target == s or target.startswith(s + ".") for s in STAGES)
    }
    assert used == set()


#: The one module of the run core that names batches: the ledger (tables of the cache's file)
#: the batched sessions are handed.
BATCH_LEDGER = "_ledger.py"


def test_the_run_core_never_says_batch():
    import re

    said = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "run").glob("*.py"))
        if path.name != BATCH_LEDGER
        for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"batch", text, re.IGNORECASE)
    ]
    assert said == []


NETWORK = ("safecons.clients", "safecons.run", "safecons.metric", "safecons.pairwise")
NETWORK_LIBRARIES = ("httpx", "anyio", "aiohttp", "asyncio")


@pytest.mark.parametrize("package", ["reliability", "judges"])
def test_statistics_and_judges_import_no_network_code(package):
    used = set()
    for path in (ROOT / package).rglob("*.py"):
        for module, targets in _imported(_name(path)).items():
            for target in targets:
                if any(target == n or target.startswith(n + ".") for n in NETWORK):
                    used.add((module, target))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                if name.split(".")[0] in NETWORK_LIBRARIES:
                    used.add((str(path.relative_to(ROOT)), name))
    assert used == set()


#: The longest a function may be, in lines of code.
MAX_FUNCTION_LINES = 80


def _code_lines(source: str, tree: ast.Module) -> set[int]:
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    quiet = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in quiet and token.type != tokenize.ENDMARKER:
            code.update(range(token.start[0], token.end[0] + 1))
    return code - docstrings


def test_no_function_is_longer_than_80_lines_of_code():
    long = []
    for path in MODULES:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        code = _code_lines(source, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno or node.lineno
                n = sum(1 for line in range(node.lineno, end + 1) if line in code)
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}")
    assert long == []


def test_the_metric_s_face_is_at_most_500_lines():
    # The face the issue measured: every front of the metric, in one file a reader can hold.
    assert len((ROOT / "metric" / "_fronts.py").read_text(encoding="utf-8").splitlines()) <= 500


def _module_of(parts: list[str]) -> str | None:
    """The module of the house that ``parts`` names (a package's door for a package)."""
    base = ROOT.parent.joinpath(*parts)
    if (base / "__init__.py").exists() or base.with_suffix(".py").exists():
        return ".".join(parts)
    return None


def test_no_circle_of_imports():
    # Lazy imports inside functions count too: a circle is a tangle to read, wherever it is.
    edges: dict[str, set[str]] = {}
    for path in MODULES:
        here = ".".join(_name(path))
        for _, target, names in _imports(path):
            found = {_module_of([*target, n]) for n in names} - {None} or {_module_of(target)}
            edges.setdefault(here, set()).update(m for m in found if m and m != here)
    circles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert circles == []


def _room(parts: list[str]) -> str:
    """The room of the house a module is in: a top-level package, or a module of the root."""
    if parts == ["safecons"]:
        return "__init__.py"
    head = parts[1]
    return f"{head}/" if _is_package(["safecons", head]) else f"{head}.py"


def _floors() -> dict[str, int]:
    """Each room's floor: one above the highest room it imports (lazy imports included)."""
    needs: dict[str, set[str]] = {}
    for path in MODULES:
        here = _room(_name(path))
        rooms = needs.setdefault(here, set())
        for _, target, names in _imports(path):
            # ``from safecons.x import y`` of a module y imports that module.
            folder = ROOT.parent.joinpath(*target)
            subs = [[*target, n] for n in names if (folder / f"{n}.py").exists()]
            subs += [[*target, n] for n in names if _is_package([*target, n])]
            for module in subs if _is_package(target) and subs else [target]:
                if _room(module) != here:
                    rooms.add(_room(module))
    floors: dict[str, int] = {}

    def floor(room: str) -> int:
        if room not in floors:
            floors[room] = 1 + max((floor(r) for r in needs.get(room, ())), default=0)
        return floors[room]

    for room in needs:
        floor(room)
    return floors


def test_the_drawing_of_the_floors_is_the_floors_the_imports_make():
    import re

    text = (ROOT.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text[text.index("```\nfloor ") : text.index("```\n", text.index("```\nfloor ") + 4)]
    drawn: dict[str, int] = {}
    level = 0
    for line in drawing.splitlines()[1:]:
        found = re.match(r"floor\s+(\d+)", line)
        level = int(found.group(1)) if found else level
        for room in re.findall(r"(?<![\w(])([\w]+/|[\w]+\.py)", re.sub(r"\([^)]*\)", "", line)):
            drawn[room] = level
    assert drawn == _floors()

"""What a user sees with ``dir()``: the public names, each listed in ``__all__``."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import safecons
import safecons.judges
import safecons.reliability
import safecons.templates
import safecons.testing
import safecons.variants

SUBPACKAGES = (
    "charts",
    "config",
    "errors",
    "judges",
    "reliability",
    "templates",
    "testing",
    "variants",
)


@pytest.mark.parametrize(
    "module",
    [
        safecons,
        safecons.testing,
        safecons.reliability,
        safecons.judges,
        safecons.templates,
        safecons.variants,
    ],
    ids=str,
)
def test_public_names_are_exactly_all(module):
    public = {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }
    assert public == set(module.__all__) - {"__version__"}
    assert sorted(module.__all__) == sorted(set(module.__all__))  # no name listed twice


def test_the_top_level_is_small():
    # The warnings a user rarely names (PacingWarning, UsageWarning) are reached through
    # sc.errors, with every other error and warning.
    assert len(safecons.__all__) - 1 <= 45  # __version__ aside


def test_the_subpackages_are_attributes_of_a_plain_import():
    code = (
        "import sys, safecons as sc\n"
        f"for name in {SUBPACKAGES!r}:\n"
        "    assert getattr(sc, name).__name__ == 'safecons.' + name, name\n"
        "assert 'altair' not in sys.modules, 'import safecons imported altair'\n"
        "assert sc.reliability.position_bias and sc.templates.template_families\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_fronts_type_what_they_take_as_a_sut_and_a_judge():
    import typing

    import safecons.ray
    from safecons.metric import SUT, ChatFunction, Judge

    typed = {
        safecons.safety_consistency: {"sut": SUT, "judge": Judge},
        safecons.safety_consistency_async: {"sut": SUT, "judge": Judge},
        safecons.metric.safety_consistency_run: {"sut": SUT, "judge": Judge},
        safecons.planned_calls: {"sut": SUT, "judge": Judge},
        safecons.respond: {"sut": SUT},
        safecons.judge_responses: {"judge": Judge},
        safecons.audit_judge: {"judge": Judge},
        safecons.audit_judge_async: {"judge": Judge},
        safecons.swap_test: {"judge": safecons.clients.ChatClient | ChatFunction},
        safecons.swap_test_async: {"judge": safecons.clients.ChatClient | ChatFunction},
    }
    for front, expected in typed.items():
        hints = typing.get_type_hints(front)
        assert {name: hints[name] for name in expected} == expected, front.__name__
    # The Ray front is typed alike (read from its source: Ray is an extra).
    from pathlib import Path

    source = Path(safecons.ray.__file__ or "").with_name("_scorer.py").read_text(encoding="utf-8")
    assert "    sut: SUT,\n    judge: Judge,\n" in source


def _names_the_docs_call():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    pattern = re.compile(r"(?<![\w.])sc((?:\.[A-Za-z_]\w*)+)")
    found = set()
    for path in texts:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                found.add((match.group(1).lstrip("."), f"{path.name}:{line_no}"))
    return sorted(found)


def test_every_sc_name_in_the_readme_and_docs_resolves():
    missing = []
    for dotted, where in _names_the_docs_call():
        obj: object = safecons
        for part in dotted.split("."):
            if not hasattr(obj, part):
                missing.append(f"sc.{dotted} ({where})")
                break
            obj = getattr(obj, part)
    assert len(_names_the_docs_call()) > 50  # the scan found the docs' calls
    assert missing == []


def test_the_readme_states_the_bounds_of_responses_per_query():
    from pathlib import Path

    from safecons.config import CONFIG_FIELDS

    (spec,) = [f for f in CONFIG_FIELDS if f.name == "responses_per_query"]
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    stated = f"`responses_per_query` ({spec.default}; from {spec.minimum} to {spec.maximum},"
    assert stated in readme


def test_the_readme_and_guide_say_which_golden_set_gives_which_verdict():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    judges = (root / "docs" / "judges.md").read_text(encoding="utf-8")
    # The figures the audit scripts print, as docs/judges.md quotes them (test_audit_docs).
    assert "(0.26 against the hand-written golden set's labels" in judges
    assert "it passes (kappa 0.680" in judges
    for name in ("README.md", "docs/guide.md"):
        text = " ".join((root / name).read_text(encoding="utf-8").split())
        assert "fails it, on kappa" not in text, name
        assert re.search(r"fails\*?\*? on the hand-written set.{0,80}kappa 0\.26", text), name
        assert re.search(
            r'passes\*?\*? on the.{0,60}golden_set\("\.\./shared/data"\)`, 475 pairs: kappa 0\.680',
            text,
        ), name

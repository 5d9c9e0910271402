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
    # 46: review_sample joined (the human labels a calibrated score reads).
    assert len(safecons.__all__) - 1 <= 46  # __version__ aside


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

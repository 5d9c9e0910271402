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

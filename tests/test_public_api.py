"""What a user sees with ``dir()``: the public names, each listed in ``__all__``."""

from __future__ import annotations

import types

import pytest

import safecons
import safecons.judges
import safecons.reliability
import safecons.testing


@pytest.mark.parametrize(
    "module", [safecons, safecons.testing, safecons.reliability, safecons.judges], ids=str
)
def test_public_names_are_exactly_all(module):
    public = {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }
    assert public == set(module.__all__) - {"__version__"}
    assert sorted(module.__all__) == sorted(set(module.__all__))  # no name listed twice

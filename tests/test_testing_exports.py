"""What ``safecons.testing`` offers a user, and what it keeps in ``safecons.testing.hostile``."""

from __future__ import annotations

import types

import safecons.testing
import safecons.testing.hostile


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name in dir(module)
        if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType)
    }


def test_the_testing_package_is_small():
    assert len(safecons.testing.__all__) <= 15


def test_the_hostile_recipes_live_in_their_own_module():
    hostile = safecons.testing.hostile
    assert _public(hostile) == set(hostile.__all__)
    assert not set(hostile.__all__) & set(safecons.testing.__all__)
    for name in ("ScriptedServer", "BatchExchange", "nested_json", "gzip_bomb", "tampers"):
        assert name in hostile.__all__, name


def test_a_user_finds_the_loopback_server_and_the_stand_ins():
    for name in ("FakeOpenAIServer", "Fault", "RateLimit", "StandInSUT", "StandInJudge"):
        assert name in safecons.testing.__all__, name

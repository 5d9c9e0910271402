from __future__ import annotations

import json
import math

import pytest
import yaml

from safecons.config import CONFIG_FIELDS, SafetyConsistencyConfig, manifest
from safecons.errors import ConfigError


def _seed_text(shared_seeds):
    return (shared_seeds / "000_d21ed1b018c46239.txt").read_text("utf-8")


def _seed_schema(shared_seeds):
    text = _seed_text(shared_seeds)
    block = text.split("Configuration schema\n", 1)[1].split("\nExecution\n", 1)[0]
    return json.loads(block)


def _seed_manifest(shared_seeds):
    return yaml.safe_load(_seed_text(shared_seeds).split("Complete manifest\n", 1)[1])


def test_json_schema_equals_seed_field_by_field(shared_seeds):
    seed = _seed_schema(shared_seeds)
    ours = SafetyConsistencyConfig.json_schema()
    assert set(ours["properties"]) == set(seed["properties"])
    for name, spec in seed["properties"].items():
        assert ours["properties"][name] == spec, name
    assert ours == seed


def test_defaults_match_schema_defaults(shared_seeds):
    cfg = SafetyConsistencyConfig()
    for name, spec in _seed_schema(shared_seeds)["properties"].items():
        assert getattr(cfg, name) == spec["default"], name


def test_manifest_equals_seed_except_documented_entrypoint(shared_seeds):
    seed = _seed_manifest(shared_seeds)
    ours = manifest()
    assert ours["entrypoint"] == "safecons.safety_consistency"
    assert seed["entrypoint"] == "aip_metrics_llm.unanswered.safety_consistency"
    seed.pop("entrypoint")
    ours.pop("entrypoint")
    assert ours == seed


def test_manifest_is_a_fresh_copy():
    m = manifest()
    m["execution"]["timeout_seconds"] = 1
    assert manifest()["execution"]["timeout_seconds"] == 900


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("responses_per_query", 1),
        ("responses_per_query", 9),
        ("responses_per_query", 2.5),
        ("responses_per_query", True),
        ("responses_per_query", "3"),
        ("concurrency_limit", 0),
        ("concurrency_limit", 65),
        ("dpi_ratio", -0.01),
        ("dpi_ratio", 1.01),
        ("dpi_ratio", math.nan),
        ("sut_temperature", 2.5),
        ("timeout_seconds", 0),
        ("timeout_seconds", -1),
        ("timeout_seconds", math.inf),
        ("n_judge_retries", 6),
        ("n_sut_retries", -1),
        ("inverted", 1),
        ("metric_name", ""),
        ("weight", "heavy"),
    ],
)
def test_out_of_range_names_field_value_and_range(field, value):
    with pytest.raises(ConfigError) as info:
        SafetyConsistencyConfig(**{field: value})
    assert repr(field) in str(info.value)


def test_error_message_states_allowed_range():
    with pytest.raises(
        ConfigError,
        match=r"'concurrency_limit': 65 is out of range; expected integer >= 1 and <= 64",
    ):
        SafetyConsistencyConfig(concurrency_limit=65)
    with pytest.raises(ConfigError, match=r"expected number > 0"):
        SafetyConsistencyConfig(timeout_seconds=0)


def test_unknown_field_is_named():
    with pytest.raises(ConfigError, match="'respones_per_query'"):
        SafetyConsistencyConfig().replace(respones_per_query=3)
    with pytest.raises(ConfigError, match="'bogus'"):
        SafetyConsistencyConfig.from_dict({"bogus": 1})
    with pytest.raises(TypeError):
        SafetyConsistencyConfig(bogus=1)  # type: ignore[call-arg]


def test_bounds_are_inclusive_and_coerced():
    cfg = SafetyConsistencyConfig(
        responses_per_query=8,
        concurrency_limit=64,
        dpi_ratio=1,
        sut_temperature=0,
        n_judge_retries=0,
    )
    assert cfg.dpi_ratio == 1.0 and isinstance(cfg.dpi_ratio, float)
    assert cfg.responses_per_query == 8 and isinstance(cfg.responses_per_query, int)
    assert SafetyConsistencyConfig(responses_per_query=4.0).responses_per_query == 4


def test_round_trip_dict():
    cfg = SafetyConsistencyConfig(responses_per_query=5, metric_name="sc")
    assert SafetyConsistencyConfig.from_dict(cfg.to_dict()) == cfg
    assert [f.name for f in CONFIG_FIELDS] == list(cfg.to_dict())


def test_min_above_max_rejected():
    with pytest.raises(ConfigError, match="min must not exceed max"):
        SafetyConsistencyConfig(min=2.0, max=1.0)


def test_the_keywords_an_ide_shows_are_the_config_s_fields_and_the_run_s():
    # Every front's keyword options are one TypedDict (MetricOptions), stated beside the
    # config's field table: each field appears there once, with the type its kind says.
    import typing

    from safecons.config import CONFIG_FIELDS
    from safecons.metric import MetricOptions
    from safecons.run import CallOptions

    hints = typing.get_type_hints(MetricOptions)
    kinds = {"integer": int, "number": float, "boolean": bool, "string": str}
    for spec in CONFIG_FIELDS:
        assert hints[spec.name] is kinds[spec.kind], spec.name
    others = set(hints) - {spec.name for spec in CONFIG_FIELDS}
    assert others == {
        "config",
        "seed",
        "progress",
        "prefix",
        "toxicity_templates",
        "jailbreak_templates",
        "cache",
        "max_calls",
        "swap_share",
        "repeat_share",
        "allow_unscored",
    }
    assert set(typing.get_type_hints(CallOptions)) <= set(hints)


def test_an_unknown_option_is_named_by_every_front():
    import polars as pl

    import safecons as sc
    from safecons.testing import StandInJudge, StandInSUT

    df = pl.DataFrame({"input_id": [1], "prompt": ["Hi"], "sut_response": ["Hello!"]})
    with pytest.raises(sc.ConfigError, match=r"unknown config field.*'respones_per_query'"):
        sc.safety_consistency(df, sut=StandInSUT(), judge=StandInJudge(), respones_per_query=4)
    with pytest.raises(sc.ConfigError, match=r"unknown config field.*'retries'"):
        sc.planned_calls(df, sut=StandInSUT(), judge=StandInJudge(), retries=1)

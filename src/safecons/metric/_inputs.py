"""The checks every entry point of the metric makes before any call, naming what is wrong."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from .._record import output_schema
from .._text import SHOWN_VALUES
from ..config import SafetyConsistencyConfig
from ..errors import InputError
from ..variants import check_input_columns

__all__ = (
    "check_collisions",
    "check_frame_columns",
    "check_metric_name",
    "check_no_nulls",
    "check_rows",
    "check_stage_frame",
    "resolve_config",
)


def check_frame_columns(schema: pl.Schema) -> None:
    required = ["input_id", "prompt", "sut_response"]
    missing = [c for c in required if c not in schema]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(map(repr, missing))}; safety_consistency needs "
            f"{', '.join(required)} (found: {', '.join(schema.names()) or 'none'})"
        )
    check_input_columns(schema)
    if schema["sut_response"] not in (pl.String, pl.Null):
        raise InputError(
            f"column 'sut_response' has dtype {schema['sut_response']}; expected String"
        )


def check_collisions(schema: pl.Schema, added: Sequence[str]) -> None:
    clash = [c for c in added if c in schema]
    if clash:
        raise InputError(
            f"the frame already has column(s) {', '.join(map(repr, clash))} that "
            "safety_consistency would add; rename them or pass another prefix=/metric_name="
        )


def check_ids(df: pl.DataFrame) -> None:
    """Every row has an id (the frame needs an ``input_id`` column, nothing else)."""
    nulls = df.filter(pl.col("input_id").is_null()).height
    if nulls:
        raise InputError(f"column 'input_id' has {nulls} null value(s); every row needs an id")


def check_rows(df: pl.DataFrame) -> None:
    check_ids(df)
    bad = df.filter(pl.col("sut_response").is_null())["input_id"]
    if bad.len():
        shown = ", ".join(map(repr, bad.head(SHOWN_VALUES).to_list()))
        more = ", ..." if bad.len() > SHOWN_VALUES else ""
        raise InputError(
            f"column 'sut_response' is null in {bad.len()} row(s) (input_id {shown}{more}); the "
            "base answer is required (an empty string is a legitimate answer and is judged)"
        )


def check_metric_name(metric_name: str, prefix: str) -> None:
    prefixed = set(output_schema(prefix=prefix, metric_name="\x00"))
    if metric_name in prefixed:
        raise InputError(
            f"metric_name {metric_name!r} is also the name of a column safety_consistency adds "
            f"with prefix {prefix!r}; choose another metric_name or prefix"
        )


def resolve_config(
    config: SafetyConsistencyConfig | Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> SafetyConsistencyConfig:
    if config is None:
        base = SafetyConsistencyConfig()
    elif isinstance(config, SafetyConsistencyConfig):
        base = config
    elif isinstance(config, Mapping):
        base = SafetyConsistencyConfig.from_dict(config)
    else:
        raise InputError(
            f"config: expected a SafetyConsistencyConfig or a mapping, got {type(config).__name__}"
        )
    return base.replace(**overrides) if overrides else base


def check_stage_frame(
    df: object, *, prefix: str, needs: Sequence[str], adds: Sequence[str]
) -> pl.DataFrame:
    """The frame of a stage (``respond``, ``judge_responses``): the metric's input columns,
    the columns earlier stages added (``needs``), none of those it adds, no null to read."""
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"expected a polars DataFrame, got {type(df).__name__}")
    check_frame_columns(df.schema)
    missing = [c for c in needs if c not in df.schema]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(map(repr, missing))}; this stage reads the columns "
            f"that earlier stages add with prefix {prefix!r}"
        )
    check_collisions(df.schema, adds)
    check_rows(df)
    check_no_nulls(df, needs)
    return df


def check_no_nulls(df: pl.DataFrame, columns: Sequence[str]) -> None:
    for name in columns:
        bad = df.filter(pl.col(name).is_null())["input_id"]
        if bad.len():
            shown = ", ".join(map(repr, bad.head(SHOWN_VALUES).to_list()))
            raise InputError(f"column {name!r} is null in {bad.len()} row(s) (input_id {shown})")

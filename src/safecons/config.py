"""The metric's configuration, validated, and the metric's manifest as data.

:class:`SafetyConsistencyConfig` holds every field of the manifest's config schema with the
schema's default, bounds and type. :meth:`SafetyConsistencyConfig.json_schema` rebuilds the
schema from the field definitions below (it is not stored as a copy), and the test-suite
compares it with the contract field by field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Literal

import numpy as np

from .errors import ConfigError

__all__ = (
    "CONFIG_FIELDS",
    "DEFAULT_CONFIG",
    "DEFAULT_PREFIX",
    "FieldSpec",
    "SafetyConsistencyConfig",
    "manifest",
)

_Kind = Literal["integer", "number", "boolean", "string"]
_Role = Literal["operational", "scoring_metadata"]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of the metric's configuration schema."""

    name: str
    kind: _Kind
    default: Any
    title: str
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    role: _Role | None = None

    def schema(self) -> dict[str, Any]:
        """This field's JSON-schema entry, keys as the manifest spells them."""
        out: dict[str, Any] = {"default": self.default}
        if self.description is not None:
            out["description"] = self.description
        if self.exclusive_minimum is not None:
            out["exclusiveMinimum"] = self.exclusive_minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.minimum is not None:
            out["minimum"] = self.minimum
        out["title"] = self.title
        out["type"] = self.kind
        if self.role is not None:
            out["x-aip-param-role"] = self.role
        return out

    def bounds_text(self) -> str:
        lo = (
            f"> {self.exclusive_minimum:g}"
            if self.exclusive_minimum is not None
            else (f">= {self.minimum:g}" if self.minimum is not None else "")
        )
        hi = f"<= {self.maximum:g}" if self.maximum is not None else ""
        parts = [p for p in (lo, hi) if p]
        return f"{self.kind} {' and '.join(parts)}".strip()

    def validate(self, value: Any) -> Any:
        """Return ``value`` coerced to this field's type, or raise :class:`ConfigError`."""
        expected = self.bounds_text()
        # bool is a subclass of int: a stray True must not pass as responses_per_query=1.
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise ConfigError(f"config field {self.name!r}: got {value!r}; expected a boolean")
            return value
        if self.kind == "string":
            if not isinstance(value, str) or not value:
                raise ConfigError(
                    f"config field {self.name!r}: got {value!r}; expected a non-empty string"
                )
            return value
        # numbers.Real/Integral admit numpy scalars (np.int64(3) from np.arange sweeps).
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise ConfigError(f"config field {self.name!r}: got {value!r}; expected {expected}")
        if self.kind == "integer":
            if isinstance(value, numbers.Integral):
                value = int(value)
            else:
                as_float = float(value)
                if not as_float.is_integer():
                    raise ConfigError(
                        f"config field {self.name!r}: got {value!r}; expected {expected}"
                    )
                value = int(as_float)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(
                    f"config field {self.name!r}: got {value!r}; expected a finite {expected}"
                )
        too_low = (self.minimum is not None and value < self.minimum) or (
            self.exclusive_minimum is not None and value <= self.exclusive_minimum
        )
        too_high = self.maximum is not None and value > self.maximum
        if too_low or too_high:
            raise ConfigError(
                f"config field {self.name!r}: {value!r} is out of range; expected {expected}"
            )
        return value


CONFIG_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        "concurrency_limit",
        "integer",
        5,
        "Concurrency Limit",
        "Maximum SUT and judge calls in flight at once for this metric. A slot is held per "
        "attempt, so a backing-off retry does not occupy one while it waits.",
        minimum=1,
        maximum=64,
        role="operational",
    ),
    FieldSpec(
        "dpi_ratio",
        "number",
        0.25,
        "Dpi Ratio",
        "Probability that a row's adversarial variant is a jailbreak-wrapped prompt (the dpi "
        "variant) rather than a plain toxicity-template prompt. 0.0 uses only plain toxicity "
        "templates; 1.0 wraps every row in a jailbreak template.",
        minimum=0.0,
        maximum=1.0,
    ),
    FieldSpec("inverted", "boolean", False, "Inverted", role="scoring_metadata"),
    FieldSpec("max", "number", 1.0, "Max", role="scoring_metadata"),
    FieldSpec(
        "metric_name", "string", "safety_consistency", "Metric Name", role="scoring_metadata"
    ),
    FieldSpec("min", "number", 0.0, "Min", role="scoring_metadata"),
    FieldSpec(
        "n_judge_retries",
        "integer",
        2,
        "N Judge Retries",
        "Retries for a single judge call before that comparison is counted as failed. "
        "Defaults above 0: a transient judge failure would otherwise silently shrink the "
        "denominator the score is averaged over, which is the failure mode this budget exists "
        "to prevent.",
        minimum=0,
        maximum=5,
    ),
    FieldSpec(
        "n_sut_retries",
        "integer",
        2,
        "N Sut Retries",
        "Retries for a single SUT call before it is treated as a hard failure that errors the "
        "whole row. Defaults above 0: this family fans out responses_per_query SUT calls per "
        "row, so a single transient call failure would otherwise lose the row entirely.",
        minimum=0,
        maximum=5,
    ),
    FieldSpec(
        "responses_per_query",
        "integer",
        3,
        "Responses Per Query",
        "Total responses compared for a row, counting the row's existing sut_response as the "
        "base. The metric samples responses_per_query - 1 fresh responses to the adversarial "
        "variant and judges each one against that base response, so cost stays linear in this "
        "value.",
        minimum=2,
        maximum=8,
    ),
    FieldSpec(
        "sut_temperature",
        "number",
        0.7,
        "Sut Temperature",
        "Sampling temperature for the SUT calls that answer the adversarial variant. Above 0 so "
        "repeated samples can differ; the judge is always called at temperature 0.",
        minimum=0.0,
        maximum=2.0,
    ),
    FieldSpec(
        "timeout_seconds",
        "number",
        60.0,
        "Timeout Seconds",
        "Per-call timeout in seconds, applied to each individual SUT and judge request.",
        exclusive_minimum=0,
        role="operational",
    ),
    FieldSpec("weight", "number", 1.0, "Weight", role="scoring_metadata"),
)

_FIELDS_BY_NAME = {f.name: f for f in CONFIG_FIELDS}


@dataclass(frozen=True, kw_only=True, slots=True)
class SafetyConsistencyConfig:
    """Configuration of :func:`safecons.safety_consistency`, as in the metric's manifest.

    Every field is validated on construction: an unknown field, a wrong type or a value out of
    range raises :class:`~safecons.ConfigError` naming the field, the value and the allowed range.

    The scoring-metadata fields (``metric_name``, ``min``, ``max``, ``inverted``, ``weight``) never
    change a row's score: ``metric_name`` names the score column and the others are carried into
    the run's summary for hosts that aggregate metrics.

    Examples
    --------
    >>> from safecons import SafetyConsistencyConfig
    >>> cfg = SafetyConsistencyConfig(responses_per_query=4)
    >>> cfg.responses_per_query, cfg.sut_temperature
    (4, 0.7)
    >>> cfg.replace(dpi_ratio=1).dpi_ratio
    1.0
    >>> SafetyConsistencyConfig(responses_per_query=9)
    Traceback (most recent call last):
    ...
    safecons.errors.ConfigError: config field 'responses_per_query': 9 is out of range; expected integer >= 2 and <= 8
    """  # noqa: E501

    # Each default is the field table's: stated once, in CONFIG_FIELDS.
    concurrency_limit: int = _FIELDS_BY_NAME["concurrency_limit"].default
    dpi_ratio: float = _FIELDS_BY_NAME["dpi_ratio"].default
    inverted: bool = _FIELDS_BY_NAME["inverted"].default
    max: float = _FIELDS_BY_NAME["max"].default
    metric_name: str = _FIELDS_BY_NAME["metric_name"].default
    min: float = _FIELDS_BY_NAME["min"].default
    n_judge_retries: int = _FIELDS_BY_NAME["n_judge_retries"].default
    n_sut_retries: int = _FIELDS_BY_NAME["n_sut_retries"].default
    responses_per_query: int = _FIELDS_BY_NAME["responses_per_query"].default
    sut_temperature: float = _FIELDS_BY_NAME["sut_temperature"].default
    timeout_seconds: float = _FIELDS_BY_NAME["timeout_seconds"].default
    weight: float = _FIELDS_BY_NAME["weight"].default

    def __post_init__(self) -> None:
        for spec in CONFIG_FIELDS:
            checked = spec.validate(getattr(self, spec.name))
            object.__setattr__(self, spec.name, checked)
        if self.min > self.max:
            raise ConfigError(
                f"config fields 'min' ({self.min!r}) and 'max' ({self.max!r}): min must not "
                "exceed max"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SafetyConsistencyConfig:
        """Build a config from a mapping, rejecting unknown keys by name."""
        return cls().replace(**dict(values))

    def replace(self, **overrides: Any) -> SafetyConsistencyConfig:
        """Return a copy with ``overrides`` applied (validated like the constructor)."""
        unknown = sorted(set(overrides) - set(_FIELDS_BY_NAME))
        if unknown:
            raise ConfigError(
                f"unknown config field(s) {', '.join(map(repr, unknown))}; known fields: "
                f"{', '.join(sorted(_FIELDS_BY_NAME))}"
            )
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain mapping of field name to value."""
        return {spec.name: getattr(self, spec.name) for spec in CONFIG_FIELDS}

    @staticmethod
    def json_schema() -> dict[str, Any]:
        """The JSON schema of this config, equal to the one in the metric's manifest."""
        return {
            "properties": {spec.name: spec.schema() for spec in CONFIG_FIELDS},
            "title": "SafetyConsistencyConfig",
            "type": "object",
        }


#: The prefix of every column the metric adds but the score's (``prefix=``).
DEFAULT_PREFIX: Final = "sc_"

#: The config with every default: what an option not given means, for every entry point.
DEFAULT_CONFIG = SafetyConsistencyConfig()


def manifest() -> dict[str, Any]:
    """The metric's complete manifest, as data.

    It is the contract's manifest with two deliberate differences: ``entrypoint`` names
    safecons' own function (``safecons.safety_consistency``), and ``config_schema`` is built from
    :class:`SafetyConsistencyConfig`'s field definitions. The ``execution`` block says how a
    hosting platform schedules the metric; see ``docs/metric.md`` for how it maps to safecons.

    Examples
    --------
    >>> from safecons import manifest
    >>> m = manifest()
    >>> m["name"], m["entrypoint"], m["execution"]["timeout_seconds"]
    ('llm.safety_consistency', 'safecons.safety_consistency', 900)
    """
    text = resources.files("safecons.data").joinpath("manifest.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    data["config_schema"] = SafetyConsistencyConfig.json_schema()
    return copy.deepcopy(data)

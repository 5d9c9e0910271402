"""The options of a run, stated and validated in one place for every entry point.

The options that are also config fields (``concurrency_limit``, ``n_sut_retries``,
``n_judge_retries``, ``timeout_seconds``) take their defaults and bounds from the config's field
table (:data:`~safecons.config.CONFIG_FIELDS`); every front spells them the same way.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ..config import CONFIG_FIELDS, DEFAULT_CONFIG
from ..errors import InputError
from ._cache import CacheArg, ResponseCache

if TYPE_CHECKING:
    from ..config import SafetyConsistencyConfig
    from ._calls import CallKind
    from ._runner import Runner

__all__ = ("MAX_CONCURRENCY", "MAX_RETRIES", "CallOptions", "RunOptions", "whole_number")

_FIELDS = {f.name: f for f in CONFIG_FIELDS}
#: The bounds of the metric's manifest, used for every run.
MAX_CONCURRENCY = int(_FIELDS["concurrency_limit"].maximum or 0)
MAX_RETRIES = int(_FIELDS["n_sut_retries"].maximum or 0)
#: The config field that holds each kind of call's retries.
_RETRY_FIELDS: dict[str, str] = {
    "sut": "n_sut_retries",
    "judge": "n_judge_retries",
    "pairwise": "n_judge_retries",
}


class CallOptions(TypedDict, total=False):
    """The keyword options of every front that makes judge calls (``swap_test``,
    ``audit_judge``), which the metric's fronts take too; see :class:`RunOptions`."""

    concurrency_limit: int
    n_judge_retries: int
    timeout_seconds: float
    cache: CacheArg
    max_calls: int | None
    progress: bool
    seed: int


def whole_number(name: str, value: object, lo: int, hi: int | None) -> int:
    """``value`` as an ``int`` from ``lo`` to ``hi``, or an :class:`~safecons.InputError`
    naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name}: expected {_range(lo, hi)}, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        raise InputError(f"{name}: expected {_range(lo, hi)}, got {value!r}")
    return value


def _range(lo: int, hi: int | None) -> str:
    return f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number >= {lo}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How a run makes its calls; every entry point builds one and nothing else checks them.

    Parameters
    ----------
    concurrency_limit
        Attempts in flight at once over every kind of call of the run (1 to 64).
    retries
        Retries per kind of call (``"sut"``, ``"judge"``, ``"pairwise"``; 0 to 5 each): ``n``
        retries means at most ``n + 1`` attempts.
    timeout_seconds
        Deadline of each single attempt (> 0).
    cache
        A path, a :class:`~safecons.ResponseCache`, None (the session default) or False.
    max_calls
        Budget of network attempts (None: no budget).
    progress
        Show a progress bar.
    seed
        The run's seed (variant draws, sample seeds, retry jitter).

    Examples
    --------
    >>> RunOptions(concurrency_limit=8, retries={"judge": 1}).retries["judge"]
    1
    >>> RunOptions(max_calls="3")
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: max_calls: expected a whole number >= 0 or None, got '3'
    """

    concurrency_limit: int = DEFAULT_CONFIG.concurrency_limit
    retries: Mapping[str, int] = field(default_factory=dict)
    timeout_seconds: float = DEFAULT_CONFIG.timeout_seconds
    cache: CacheArg = None
    max_calls: int | None = None
    progress: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(
            self,
            "concurrency_limit",
            _FIELDS["concurrency_limit"].validate(self.concurrency_limit),
        )
        if not isinstance(self.retries, Mapping):
            raise InputError(
                f"retries: expected a mapping of call kind to retries, got {self.retries!r}"
            )
        unknown = sorted(set(map(str, self.retries)) - set(_RETRY_FIELDS))
        if unknown:
            raise InputError(
                f"retries: unknown call kind(s) {unknown}; expected {list(_RETRY_FIELDS)}"
            )
        retries = {}
        for kind, name in _RETRY_FIELDS.items():
            spec = _FIELDS[name]
            retries[kind] = spec.validate(self.retries.get(kind, spec.default))
        set_(self, "retries", retries)
        set_(self, "timeout_seconds", _FIELDS["timeout_seconds"].validate(self.timeout_seconds))
        if not (
            self.cache is None or isinstance(self.cache, bool | str | os.PathLike | ResponseCache)
        ):
            raise InputError(
                "cache: expected a path, a ResponseCache, None or False, got "
                f"{type(self.cache).__name__}"
            )
        max_calls: object = self.max_calls
        if max_calls is not None:
            if isinstance(max_calls, bool) or not isinstance(max_calls, numbers.Integral):
                raise InputError(
                    f"max_calls: expected a whole number >= 0 or None, got {max_calls!r}"
                )
            set_(self, "max_calls", whole_number("max_calls", max_calls, 0, None))
        progress: object = self.progress
        # Truthy flags as notebooks pass them (1, None, numpy booleans) read as booleans.
        if progress is None or isinstance(progress, numbers.Integral | np.bool_):
            progress = bool(progress)
        if not isinstance(progress, bool):
            raise InputError(f"progress: expected True or False, got {progress!r}")
        set_(self, "progress", progress)
        seed: object = self.seed
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise InputError(f"seed: expected an integer, got {seed!r}")
        set_(self, "seed", int(seed))

    @classmethod
    def of(cls, options: Mapping[str, Any], *, front: str, kind: CallKind) -> RunOptions:
        """The options of a front that makes one ``kind`` of call, from its keyword
        ``options`` (:class:`CallOptions`); an unknown keyword is an error naming it."""
        unknown = sorted(set(options) - set(CallOptions.__annotations__))
        if unknown:
            raise InputError(
                f"{front}: unknown option(s) {', '.join(map(repr, unknown))}; expected "
                f"{', '.join(CallOptions.__annotations__)}"
            )
        given = dict(options)
        if "n_judge_retries" in given:
            given["retries"] = {kind: given.pop("n_judge_retries")}
        return cls(**given)

    @classmethod
    def of_config(cls, config: SafetyConsistencyConfig, **options: Any) -> RunOptions:
        """The options of a metric run: the config's operational fields, and ``options``."""
        return cls(
            concurrency_limit=config.concurrency_limit,
            retries={"sut": config.n_sut_retries, "judge": config.n_judge_retries},
            timeout_seconds=config.timeout_seconds,
            **options,
        )

    def runner(self, cache: ResponseCache | None) -> Runner:
        """A runner for one run with these options and the opened ``cache``."""
        from ._runner import Runner

        return Runner(
            concurrency_limit=self.concurrency_limit,
            timeout_seconds=self.timeout_seconds,
            seed=self.seed,
            cache=cache,
            max_calls=self.max_calls,
        )

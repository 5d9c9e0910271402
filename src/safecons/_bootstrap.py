"""Seeded percentile bootstrap, vectorised over groups and replicates: every interval safecons
reports (the reliability statistics' and the score tables') is drawn here.

Two resampling schemes cover every statistic here:

- *cells*: the statistic is a function of per-group cell counts (position classes, a confusion
  matrix). Resampling a group's rows with replacement is a multinomial draw of its counts with
  the observed cell shares, so replicates are drawn for all groups at once without touching rows.
- *units*: the statistic is a function of sums of per-unit quantities (items rated by a panel,
  groups of repeated calls). Units are resampled with replacement within their group.

Both feed the same statistic function that computes the point estimate, so an interval can never
describe a different quantity from the estimate beside it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from .errors import InputError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Stat = Callable[[npt.NDArray[np.float64]], Mapping[str, FloatArray]]
Interval = dict[str, tuple[FloatArray, FloatArray]]

#: Resampled values held at once (replicates x values): bounds memory at a few tens of MB
#: whatever the group count.
BLOCK = 1 << 22
#: The fewest bootstrap replicates: one makes no distribution to take percentiles of.
_MIN_BOOT = 2


def mean_interval(
    values: FloatArray, *, ci: float, n_boot: int, seed: list[int]
) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` when they are resampled (one group)."""
    n = len(values)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    step = max(1, BLOCK // n)
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        picks = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[picks].mean(axis=1)
    lo, hi = _percentiles({"mean": [means]}, ci, axis=0)["mean"]
    return float(lo), float(hi)


def check_ci(ci: float | None, n_boot: int, seed: int, fn: str) -> None:
    if ci is None:
        return
    if isinstance(ci, bool) or not isinstance(ci, int | float) or not 0.0 < ci < 1.0:
        raise InputError(f"{fn}: ci= must be a coverage strictly between 0 and 1, got {ci!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < _MIN_BOOT:
        raise InputError(f"{fn}: n_boot= must be an int of at least {_MIN_BOOT}, got {n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"{fn}: seed= must be a non-negative int, got {seed!r}")


def _percentiles(
    replicates: Mapping[str, list[FloatArray]], ci: float, axis: int
) -> dict[str, tuple[FloatArray, FloatArray]]:
    alpha = (1.0 - ci) / 2.0
    out: dict[str, tuple[FloatArray, FloatArray]] = {}
    for name, blocks in replicates.items():
        values = np.concatenate(blocks, axis=axis)
        with warnings.catch_warnings():
            # A group whose every replicate is undefined (no usable rows) keeps NaN bounds.
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = np.nanquantile(values, [alpha, 1.0 - alpha], axis=0)
        out[name] = (np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64))
    return out


def cells_interval(counts: IntArray, stat: Stat, *, ci: float, n_boot: int, seed: int) -> Interval:
    """Percentile interval of ``stat`` under a row bootstrap within each group.

    ``counts`` is ``[G, k]``; ``stat`` maps counts ``[..., k]`` to arrays ``[...]``.
    """
    rng = np.random.default_rng(seed)
    n_groups, k = counts.shape
    n = counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = counts / np.where(n == 0, 1, n)[:, None]
    # An empty group draws zero rows; any valid probability vector will do.
    p[n == 0] = 1.0 / k
    chunk = max(1, BLOCK // max(1, n_boot * k))
    blocks: dict[str, list[FloatArray]] = {}
    for start in range(0, n_groups, chunk):
        sl = slice(start, min(start + chunk, n_groups))
        draws = rng.multinomial(n[sl], p[sl], size=(n_boot, sl.stop - sl.start))
        for name, values in stat(draws.astype(np.float64)).items():
            blocks.setdefault(name, []).append(np.asarray(values, dtype=np.float64))
    # Blocks split the groups: stitch them side by side.
    return _percentiles(blocks, ci, axis=1)


def units_interval(
    group: IntArray,
    q: FloatArray,
    n_groups: int,
    stat: Stat,
    *,
    ci: float,
    n_boot: int,
    seed: int,
) -> Interval:
    """Percentile interval of ``stat(sums)`` when units are resampled within their group.

    ``group`` gives each unit's group (units sorted by group), ``q`` is ``[U, d]`` and ``stat``
    maps per-group sums ``[..., G, d]`` to arrays ``[..., G]``.
    """
    rng = np.random.default_rng(seed)
    n_units, d = q.shape
    sizes = np.bincount(group, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    unit_start = starts[group]
    unit_size = sizes[group]
    reps = max(1, BLOCK // max(1, n_units * d))
    blocks: dict[str, list[FloatArray]] = {}
    for done in range(0, n_boot, reps):
        b = min(reps, n_boot - done)
        # Each unit slot draws a unit of its own group: start + floor(u * size).
        pick = unit_start + np.floor(rng.random((b, n_units)) * unit_size).astype(np.int64)
        sums = np.zeros((b, n_groups, d), dtype=np.float64)
        if n_units:
            np.add.at(sums, (np.arange(b)[:, None], group[None, :]), q[pick])
        for name, values in stat(sums).items():
            blocks.setdefault(name, []).append(np.asarray(values, dtype=np.float64))
    # Blocks split the replicates: stack them.
    return _percentiles(blocks, ci, axis=0)


def interval_columns(interval: Interval, names: tuple[str, ...]) -> dict[str, FloatArray]:
    """``name_lo`` / ``name_hi`` columns, in the order of ``names``."""
    out: dict[str, FloatArray] = {}
    for name in names:
        lo, hi = interval[name]
        out[f"{name}_lo"] = lo
        out[f"{name}_hi"] = hi
    return out


def ci_names(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{n}_{side}" for n in names for side in ("lo", "hi"))

"""The score, summarised honestly: per-group tables with intervals, and paired comparisons.

Pure functions of scored frames (what :func:`~safecons.safety_consistency` returns, or the
same frame read back from Parquet), like :mod:`safecons.reliability`: no network import.
Intervals are seeded percentile bootstraps that resample scored rows within each group (the
reliability toolkit's resampler), so the same seed gives the same interval.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from typing import Final

import numpy as np
import polars as pl

from ._bootstrap import check_ci, mean_interval
from ._record import DEFAULT_PREFIX, NOT_FINISHED, column_names
from .errors import InputError, JudgesDifferWarning
from .judges import NOMINAL_SCORES
from .reliability import repeat_noise
from .summary import conform
from .templates import template_families

__all__ = (
    "DERIVED_GROUPS",
    "MIN_ROWS_FOR_INTERVAL",
    "compare_runs",
    "score_table",
)

#: Grouping columns :func:`score_table` derives when the frame lacks them: the family of the
#: toxicity template and of the jailbreak template (null for a variant without one).
DERIVED_GROUPS: Final = ("toxicity_family", "jailbreak_family")
#: Columns of the frame a by= error lists (a scored frame has dozens).
_SHOWN_COLUMNS: Final = 12


def _by(by: str | Sequence[str] | None, fn: str) -> list[str]:
    if by is None:
        return []
    keys = [by] if isinstance(by, str) else list(by)
    if not all(isinstance(k, str) for k in keys):
        raise InputError(f"{fn}: by= must be a column name or a list of them, got {by!r}")
    if len(set(keys)) != len(keys):
        raise InputError(f"{fn}: by= names a column twice: {keys}")
    return keys


def with_groups(frame: pl.DataFrame, keys: list[str], prefix: str, fn: str) -> pl.DataFrame:
    """``frame`` with the derived groups among ``keys`` added (:data:`DERIVED_GROUPS`), once
    every key is checked to be a column; ``fn`` names the caller in the errors."""
    derived = [k for k in keys if k in DERIVED_GROUPS and k not in frame.columns]
    if derived:
        needed = [f"{prefix}toxicity_template_id", f"{prefix}jailbreak_template_id"]
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise InputError(f"{fn}: by={derived} is derived from {missing}, which are missing")
        frame = frame.with_columns(
            e for e in template_families(prefix) if e.meta.output_name() in derived
        )
    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise InputError(
            f"{fn}: by= names column(s) {missing} that the frame lacks (it has "
            f"{frame.columns[:_SHOWN_COLUMNS]}{'...' if frame.width > _SHOWN_COLUMNS else ''}; "
            f"derived groups: {list(DERIVED_GROUPS)})"
        )
    return frame


def _juries(frame: pl.DataFrame, jurors: str, ids: str) -> tuple[list[str], list[str] | None]:
    """The juries that judged ``frame``'s rows: each as its jurors' names, for a reader (none:
    a frame from a safecons before juries, or not judged), and each as what its jurors are
    (their ids: endpoint and settings), or None when a row judged by a jury has no ids (a
    frame of a safecons before them). A jury is its judges, in whatever order they were
    listed."""
    if jurors not in frame.columns:
        return [], None
    judged = frame.filter(pl.col(jurors).is_not_null())
    shown = sorted({", ".join(sorted(n)) for n in judged[jurors].unique().to_list()})
    if ids not in judged.columns or judged[ids].is_null().any():
        return shown, None
    known = judged[ids].to_list()
    if any(len(i) != len(n) for i, n in zip(known, judged[jurors].to_list(), strict=True)):
        return shown, None
    return shown, sorted({",".join(sorted(i)) for i in known})


def _judges_differ(before: pl.DataFrame, after: pl.DataFrame, names: dict[str, str]) -> str:
    """What tells the two runs' judges apart, for the warning, or "" when they are the same
    judges (or either run records none): by what the jurors are, where both frames say it,
    else by their names."""
    (shown_a, ids_a), (shown_b, ids_b) = (
        _juries(f, names["jurors"], names["juror_ids"]) for f in (before, after)
    )
    if not shown_a or not shown_b:
        return ""
    if ids_a is not None and ids_b is not None:
        if ids_a == ids_b:
            return ""
    elif shown_a == shown_b:
        return ""
    said = f"before: {'; '.join(shown_a)}; after: {'; '.join(shown_b)}"
    if shown_a == shown_b:
        said += ": the same names, but judges at other endpoints or with other settings"
    return said


def _scores_of(scored: object, prefix: str, metric_name: str, fn: str) -> pl.DataFrame:
    """The frame checked (as every reader of a scored frame checks it), NaN read as no score."""
    return conform(
        scored, fn=fn, needs=("score", "labels", "error"), prefix=prefix, metric_name=metric_name
    )


#: Fewer scored rows than this in a group and its interval is left empty: a bootstrap of one
#: to four values says nothing it has not seen.
MIN_ROWS_FOR_INTERVAL: Final = 5


def _group_seed(seed: int, key: tuple[object, ...]) -> list[int]:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return [seed, int.from_bytes(digest, "big")]


def _percentile_mean(
    values: np.ndarray, *, ci: float, n_boot: int, seed: list[int]
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (rows resampled)."""
    if len(values) < MIN_ROWS_FOR_INTERVAL:
        return float("nan"), float("nan")
    return mean_interval(values, ci=ci, n_boot=n_boot, seed=seed)


def _mean_interval(
    frame: pl.DataFrame,
    keys: list[str],
    value: str,
    groups: pl.DataFrame,
    *,
    ci: float,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap interval of the mean of ``value`` per group of ``groups`` (its rows with a
    value resampled). Each group draws from its own stream, seeded by ``seed`` and the group's
    key, so a group's interval does not depend on the other groups; values are sorted first,
    so it does not depend on row order either."""
    scratch = "__safecons_value"
    kept = frame.select(*keys, pl.col(value).cast(pl.Float64).alias(scratch)).filter(
        pl.col(scratch).is_not_null()
    )
    if keys:
        # Only the groups with enough values for an interval are taken apart, in one pass:
        # 100,000 one-row groups cost little more than one group of 100,000 rows.
        big = (
            kept.group_by(keys)
            .agg(pl.col(scratch).sort())
            .filter(pl.col(scratch).list.len() >= MIN_ROWS_FOR_INTERVAL)
        )
        flat = big[scratch].explode().to_numpy()
        sizes = big[scratch].list.len().cast(pl.Int64).to_numpy()
        ends = np.cumsum(sizes)
        starts = ends - sizes
        # Keys by their repr: a NaN key equals itself there, as it does in the group_by.
        parts = {
            repr(tuple(k)): flat[a:b]
            for k, a, b in zip(big.select(keys).iter_rows(), starts, ends, strict=True)
        }
        wanted = [tuple(r) for r in groups.select(keys).iter_rows()]
    else:
        parts = {repr(()): kept[scratch].sort().to_numpy()}
        wanted = [()]
    lo, hi = [], []
    for key in wanted:
        values = parts.get(repr(key))
        if values is None:  # fewer values than an interval needs: no stream is drawn
            lo.append(float("nan"))
            hi.append(float("nan"))
            continue
        a, b = _percentile_mean(values, ci=ci, n_boot=n_boot, seed=_group_seed(seed, key))
        lo.append(a)
        hi.append(b)
    return np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)


_TABLE_COLUMNS: Final = (
    "rows",
    "scored",
    "errored",
    "not_finished",
    "mean",
    "mean_lo",
    "mean_hi",
    "comparisons",
    "consistent",
    "slightly_inconsistent",
    "contradictory",
    "sut_attempts",
    "judge_attempts",
    "cache_hits",
    "tokens",
)


def score_table(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    by: str | Sequence[str] | None = None,
    ci: float | None = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
) -> pl.DataFrame:
    """Per group: rows, scored and errored rows, the mean score with a bootstrap interval, the
    label mix of the comparisons, and what the run spent.

    Parameters
    ----------
    scored
        A frame :func:`~safecons.safety_consistency` returned (or that frame read back).
    by
        Column(s) to group by: the variant kind (``"sc_variant_kind"``), a task type, a turn,
        any column of the frame, or ``"toxicity_family"`` / ``"jailbreak_family"`` (derived
        from the template ids when the frame lacks them: a built-in id ``tox.<family>.<n>`` or
        ``jb.<family>.<n>`` gives its family, a loaded set's id ``<set>.<id>`` the set's name,
        any other id is a group of its own; for a custom set's own families, add them as a
        column and group by it). Groups are sorted, nulls last. The rows with no value in a
        ``by`` column form one group with a null key (for ``jailbreak_family``, the variants
        without a jailbreak template): null, not a name, so the key keeps its column's dtype
        and reads as ``pl.col(key).is_null()``. :func:`~safecons.report.report` names that group
        ``null`` too, in its tables and charts.
    ci
        Coverage of the percentile bootstrap interval of the mean (None: no interval). A group
        with fewer than :data:`MIN_ROWS_FOR_INTERVAL` scored rows gets no interval; a group
        whose rows all scored the same gets a point interval (a bootstrap cannot show a
        spread it never saw): read ``scored`` beside it.
    n_boot, seed
        Bootstrap replicates and their seed. Each group draws from its own stream (the seed
        and the group's key), so the same seed gives the same interval for a group whatever
        the other groups and the row order.
    prefix, metric_name
        The run's column prefix and score column.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, then ``rows``, ``scored``, ``errored`` (rows without a score, for any
        reason, ``not_finished`` among them: left by a spent budget), ``mean`` (over scored
        rows), ``mean_lo`` / ``mean_hi``, ``comparisons`` (judged comparisons), the shares
        ``consistent``, ``slightly_inconsistent`` and ``contradictory`` of those, and the
        spend: ``sut_attempts``, ``judge_attempts``, ``cache_hits``, ``tokens`` (null where no
        server reported usage).

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> from safecons.testing import StandInSUT
    >>> scored = sc.demo_frame().pipe(sc.safety_consistency, sut=StandInSUT(),
    ...                               judge=sc.OfflineJudge(), progress=False)
    >>> table = sc.score_table(scored, by="sc_variant_kind")
    >>> table.select("sc_variant_kind", "rows", "scored").rows()
    [('dpi', 1, 1), ('toxicity', 11, 11)]
    >>> lo, mean, hi = table["mean_lo"], table["mean"], table["mean_hi"]
    >>> bool(((lo <= mean) & (mean <= hi)).all())
    True
    """
    fn = "score_table"
    names = column_names(prefix, metric_name)
    frame = _scores_of(scored, prefix, metric_name, fn)
    check_ci(ci, n_boot, seed, fn)
    keys = _by(by, fn)
    taken = set(_TABLE_COLUMNS) & set(keys)
    if taken:
        raise InputError(f"{fn}: by= names {sorted(taken)}, which the table itself adds")
    frame = with_groups(frame, keys, prefix, fn)
    score, labels, error = names["score"], names["labels"], names["error"]
    judged = pl.col(labels).list.drop_nulls()

    def share(label: str) -> pl.Expr:
        hits = judged.list.eval(pl.element() == label).list.sum().sum()
        total = judged.list.len().sum()
        return pl.when(total > 0).then(hits / total).otherwise(None)

    aggs: list[pl.Expr] = [
        pl.len().alias("rows"),
        pl.col(score).is_not_null().sum().alias("scored"),
        pl.col(score).is_null().sum().alias("errored"),
        pl.col(error)
        .cast(pl.String)
        .str.starts_with(NOT_FINISHED)
        .fill_null(False)
        .sum()
        .alias("not_finished"),
        pl.col(score).mean().alias("mean"),
        judged.list.len().sum().alias("comparisons"),
        share("Consistent").alias("consistent"),
        share("Slightly Inconsistent").alias("slightly_inconsistent"),
        share("Contradictory").alias("contradictory"),
    ]
    spend = names["spend"]
    if spend in frame.columns:
        field = pl.col(spend).struct.field
        # Summed in Int128, then Int64 where it fits (null where it would wrap).
        tokens = [
            field(f"{k}_{t}_tokens").cast(pl.Int128)
            for k in ("sut", "judge")
            for t in ("prompt", "completion")
        ]
        reported = pl.any_horizontal(t.is_not_null() for t in tokens)
        aggs += [
            field("sut_attempts").sum().alias("sut_attempts"),
            field("judge_attempts").sum().alias("judge_attempts"),
            (field("sut_cache_hits") + field("judge_cache_hits")).sum().alias("cache_hits"),
            pl.when(reported.any())
            .then(pl.sum_horizontal(tokens).sum().cast(pl.Int64, strict=False))
            .otherwise(None)
            .alias("tokens"),
        ]
    if keys:
        table = frame.group_by(keys).agg(aggs).sort(keys, nulls_last=True)
    else:
        table = frame.select(aggs)
    table = table.with_columns(
        pl.col("rows", "scored", "errored", "not_finished", "comparisons").cast(pl.Int64)
    )
    if ci is not None:
        lo, hi = _mean_interval(frame, keys, score, table, ci=ci, n_boot=n_boot, seed=seed)
        table = table.with_columns(
            pl.Series("mean_lo", lo, dtype=pl.Float64).fill_nan(None),
            pl.Series("mean_hi", hi, dtype=pl.Float64).fill_nan(None),
        )
        order = table.columns
        at = order.index("mean") + 1
        table = table.select(*order[:at], "mean_lo", "mean_hi", *order[at:-2])
    return table


def compare_runs(
    before: pl.DataFrame | pl.LazyFrame,
    after: pl.DataFrame | pl.LazyFrame,
    *,
    on: str = "input_id",
    by: str | Sequence[str] | None = None,
    ci: float | None = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
) -> pl.DataFrame:
    """Is ``after`` more consistent than ``before``? Two systems scored on the same rows.

    Rows are paired on ``on``; the difference is ``after - before`` over rows scored in both,
    with a paired bootstrap interval (pairs resampled together, within each group), which is
    far tighter than comparing two separate intervals when the rows differ in difficulty.

    Parameters
    ----------
    before, after
        Two scored frames of the same rows (e.g. the old and the new model).
    on
        The column that pairs rows (unique in each frame).
    by
        Column(s) of ``before`` to report per group (derived template families as in
        :func:`score_table`).
    ci, n_boot, seed
        Coverage (None: no interval), replicates and seed of the paired bootstrap, as in
        :func:`score_table`.
    prefix, metric_name
        The runs' column prefix and score column.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``paired`` (rows scored in both), ``only_before`` / ``only_after``
        (scored in one run only: not in the difference), ``mean_before``, ``mean_after``,
        ``difference``, ``difference_lo``, ``difference_hi``, ``better`` / ``worse`` /
        ``same`` (paired rows whose score rose, fell or stayed), ``judge_noise`` and
        ``within_judge_noise``. ``judge_noise`` is how far the runs' judges move a
        comparison's score by themselves, measured where a run judged comparisons twice
        (``repeat_share=``): the mean absolute change of a repeated comparison's label,
        each label read at the middle of its score band, for the juror that moved most, the
        larger of the two runs'. It is the most a mean could move if every comparison were
        judged again and every change went one way. ``within_judge_noise`` is True where
        ``|difference|`` is no more than that: the judges' own flips alone could have made
        the difference. Both are null when neither run repeated any comparison.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> old = pl.DataFrame({"input_id": [1, 2, 3], "safety_consistency": [0.25, 0.5, 0.75],
    ...                     "sc_labels": [["Contradictory"]] * 3, "sc_error": [None] * 3})
    >>> new = old.with_columns(pl.col("safety_consistency") + 0.25)
    >>> sc.compare_runs(old, new).select("paired", "difference", "better").rows()
    [(3, 0.25, 3)]
    """
    fn = "compare_runs"
    names = column_names(prefix, metric_name)
    a, b = (
        _scores_of(f, prefix, metric_name, f"{fn} ({side}=)")
        for f, side in ((before, "before"), (after, "after"))
    )
    for frame in (a, b):
        if on not in frame.columns:
            raise InputError(f"{fn}: on={on!r} is not a column of both frames")
        if frame[on].n_unique() != frame.height:
            raise InputError(f"{fn}: column {on!r} has duplicate values; expected one row per id")
    if a.schema[on] != b.schema[on]:
        raise InputError(
            f"{fn}: column {on!r} has dtype {a.schema[on]} before and {b.schema[on]} after; "
            "the same ids must have the same type"
        )
    check_ci(ci, n_boot, seed, fn)
    keys = _by(by, fn)
    if on in keys:
        raise InputError(f"{fn}: by= cannot name the pairing column {on!r}")
    differ = _judges_differ(a, b, names)
    if differ:
        warnings.warn(
            f"{fn}: the two runs were judged by different judges ({differ}): the difference "
            "mixes the systems' change with the judges'; judge both with the same judge "
            "(judge_responses re-judges stored answers) to compare the systems alone",
            JudgesDifferWarning,
            stacklevel=2,
        )
    a = with_groups(a, keys, prefix, fn)
    score = names["score"]
    x, y, d = "__safecons_before", "__safecons_after", "__safecons_difference"
    joined = a.select(*keys, on, pl.col(score).alias(x)).join(
        b.select(on, pl.col(score).alias(y)), on=on, how="full", coalesce=True
    )
    # A row only in ``after`` has no group of ``before``: it counts in the null group.
    xc, yc = pl.col(x), pl.col(y)
    both = xc.is_not_null() & yc.is_not_null()
    aggs = [
        both.sum().cast(pl.Int64).alias("paired"),
        (xc.is_not_null() & yc.is_null()).sum().alias("only_before"),
        (yc.is_not_null() & xc.is_null()).sum().alias("only_after"),
        xc.filter(both).mean().alias("mean_before"),
        yc.filter(both).mean().alias("mean_after"),
        (yc - xc).filter(both).mean().alias("difference"),
        (yc > xc).filter(both).sum().cast(pl.Int64).alias("better"),
        (yc < xc).filter(both).sum().cast(pl.Int64).alias("worse"),
        (yc == xc).filter(both).sum().cast(pl.Int64).alias("same"),
    ]
    if keys:
        table = joined.group_by(keys).agg(aggs).sort(keys, nulls_last=True)
    else:
        table = joined.select(aggs)
    table = table.with_columns(pl.col("only_before", "only_after").cast(pl.Int64))
    diffs = joined.with_columns(pl.when(both).then(yc - xc).alias(d))
    if ci is None:
        return _with_judge_noise(table, a, b, names)
    lo, hi = _mean_interval(diffs, keys, d, table, ci=ci, n_boot=n_boot, seed=seed)
    at = table.columns.index("difference") + 1
    table = table.with_columns(
        pl.Series("difference_lo", lo, dtype=pl.Float64).fill_nan(None),
        pl.Series("difference_hi", hi, dtype=pl.Float64).fill_nan(None),
    )
    order = table.columns
    table = table.select(*order[:at], "difference_lo", "difference_hi", *order[at:-2])
    return _with_judge_noise(table, a, b, names)


def _judge_noise(frame: pl.DataFrame, names: dict[str, str]) -> float | None:
    """The mean absolute change of a repeated comparison's nominal score, for the juror of
    ``frame`` that moved most; None when the frame repeated no comparison."""
    needed = [names[r] for r in ("jurors", "juror_labels", "repeat_labels")]
    if not set(needed) <= set(frame.columns):
        return None
    jurors = int(frame[names["jurors"]].list.len().max() or 0)  # type: ignore[arg-type]
    noise = repeat_noise(
        frame,
        jurors=jurors,
        juror_labels=names["juror_labels"],
        repeat_labels=names["repeat_labels"],
        scores=NOMINAL_SCORES,
    )
    moved = [m for m in noise.movement if m is not None]
    return max(moved) if noise.repeated and moved else None


def _with_judge_noise(
    table: pl.DataFrame, before: pl.DataFrame, after: pl.DataFrame, names: dict[str, str]
) -> pl.DataFrame:
    """``table`` with ``judge_noise`` (the larger of the two runs') and
    ``within_judge_noise`` (whether each difference is no more than it)."""
    measured = [n for n in (_judge_noise(f, names) for f in (before, after)) if n is not None]
    noise = max(measured) if measured else None
    return table.with_columns(
        pl.lit(noise, dtype=pl.Float64).alias("judge_noise"),
        (pl.col("difference").abs() <= pl.lit(noise, dtype=pl.Float64)).alias("within_judge_noise"),
    )

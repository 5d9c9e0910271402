"""Agreement of a judge with gold labels, and stability of repeated identical calls."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from .._bootstrap import cells_interval, check_ci, ci_names, interval_columns, units_interval
from ..errors import InputError
from ._columns import VERDICT
from ._common import (
    CELL,
    COUNT,
    MIN_PAIRABLE,
    FloatArray,
    FrameLike,
    IntArray,
    as_lazy,
    assemble,
    cell_tensor,
    check_columns,
    check_outputs,
    count_table,
    divide,
    flip_flag,
    is_label,
    is_text,
    key,
    label_families,
    normalize_by,
    unit_arrays,
    unit_sums,
    warn_disjoint,
    warn_undefined,
)
from ._kappa import kappa_from_confusion

__all__ = ("agreement", "repetition_stability")


def _check_labels(schema: pl.Schema, fn: str, **params: str) -> None:
    for param, name in params.items():
        dtype = schema[name]
        if not is_label(dtype):
            raise InputError(
                f"{fn}: column {name!r} (from {param}=) must hold nominal labels (text, "
                f"integers or booleans), got dtype {dtype}"
            )
    if len(label_families(schema[name] for name in params.values())) > 1:
        shown = ", ".join(f"{p}= ({schema[n]})" for p, n in params.items())
        raise InputError(f"{fn}: {shown} hold different kinds of labels")


class _AgreementStats:
    """Statistics of the tensor [..., pred, gold, flip]; the last pred/gold level is invalid."""

    def __init__(self, n_levels: int, tie_index: int | None, with_flips: bool) -> None:
        self.n_levels = n_levels
        self.keep_s2 = np.array([i for i in range(n_levels) if i != tie_index], dtype=np.intp)
        self.with_flips = with_flips

    def tensor(self, counts: np.ndarray) -> np.ndarray:
        side = self.n_levels + 1
        return counts.reshape(*counts.shape[:-1], side, side, 3)

    def confusions(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = self.tensor(counts)
        s1 = t[..., : self.n_levels, : self.n_levels, :].sum(axis=-1)
        s2 = s1[..., self.keep_s2, :][..., self.keep_s2]
        return s1, s2

    def __call__(self, counts: np.ndarray) -> dict[str, FloatArray]:
        s1, s2 = self.confusions(counts)
        out = {
            "agreement_s1": divide(np.trace(s1, axis1=-2, axis2=-1), s1.sum(axis=(-2, -1))),
            "kappa_s1": kappa_from_confusion(s1.astype(np.float64)),
            "agreement_s2": divide(np.trace(s2, axis1=-2, axis2=-1), s2.sum(axis=(-2, -1))),
            "kappa_s2": kappa_from_confusion(s2.astype(np.float64)),
        }
        if self.with_flips:
            t = self.tensor(counts)
            flips = t.sum(axis=(-3, -2))
            out["flip_rate"] = divide(flips[..., 1], flips[..., 0] + flips[..., 1])
        return out


def agreement(
    df: FrameLike,
    *,
    pred: str = VERDICT,
    gold: str,
    by: str | Sequence[str] | None = None,
    tie: str | int = "tie",
    error: str | int = "error",
    flipped: str | None = None,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Agreement of a judge's verdicts with gold labels, with ties (S1) and without (S2).

    Zheng et al. report both setups: S1 keeps every pair, so a tie must match a tie; S2 drops
    a pair when either the judge or the gold label is a tie. Each comes with the counts behind
    it and Cohen's kappa on the same pairs. When a flip column is given, the flip rate sits
    beside them; flipped pairs are never dropped from the agreement.

    Parameters
    ----------
    df
        One row per judged pair (a LazyFrame is collected).
    pred
        The judge's verdicts (by default the both-orders ``verdict`` column).
    gold
        The gold labels, in the same label set as ``pred``.
    by
        Column(s) to report per group; groups are sorted.
    tie
        The label that means a tie.
    error
        The label that means the judge gave no usable verdict. Such rows, and rows with a null
        on either side, are counted in ``n_error`` and left out of both setups.
    flipped
        Optional column telling whether the judge's verdict flipped when the answers swapped
        places: Boolean, or a position class (``primacy``/``recency`` count as flips,
        ``consistent`` not, anything else as unknown). Adds ``n_flip_checked`` (rows whose
        status is known), ``n_flipped`` and ``flip_rate``.
    ci
        Coverage of a percentile bootstrap interval on every rate and kappa, resampling rows
        within each group; adds ``_lo``/``_hi`` columns.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n_error``, then for S1 and S2: ``n_s*`` (pairs), ``n_agree_s*``,
        ``agreement_s*`` and ``kappa_s*`` (unweighted, over the labels present in the group);
        then the flip columns if asked. Rates and kappas are NaN for a group with no usable
        pair, and a kappa is NaN when undefined (both sides used one label throughout); each
        with an :class:`UndefinedStatisticWarning` saying which. When ``pred`` and ``gold``
        share no label at all (letters against ``x``/``y``), every pair disagrees and a
        :class:`DisjointLabelsWarning` names both columns; the figures are kept as computed.

    References
    ----------
    .. [1] L. Zheng et al. (2023). "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena".
       arXiv:2306.05685, section 4.2 and table 5.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "verdict": ["x", "y", "tie", "x", "tie", "y", "error"],
    ...     "human":   ["x", "y", "tie", "y", "x",   "y", "x"],
    ... })
    >>> agreement(df, gold="human").select("n_s1", "agreement_s1", "n_s2", "agreement_s2")
    shape: (1, 4)
    ┌──────┬──────────────┬──────┬──────────────┐
    │ n_s1 ┆ agreement_s1 ┆ n_s2 ┆ agreement_s2 │
    │ ---  ┆ ---          ┆ ---  ┆ ---          │
    │ i64  ┆ f64          ┆ i64  ┆ f64          │
    ╞══════╪══════════════╪══════╪══════════════╡
    │ 6    ┆ 0.666667     ┆ 4    ┆ 0.75         │
    └──────┴──────────────┴──────┴──────────────┘
    """
    fn = "agreement"
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    schema = lf.collect_schema()
    rates = _check_agreement(
        schema, keys, pred=pred, gold=gold, flipped=flipped, ci=ci, n_boot=n_boot, seed=seed
    )
    table = _verdict_counts(lf, schema, keys, pred=pred, gold=gold, flipped=flipped)
    p, g = key("p"), key("g")
    said = {c: set(table[c].drop_nulls().to_list()) - {str(error)} for c in (p, g)}
    # Warned here, not in a helper: the warnings' stacklevel points at agreement()'s caller.
    warn_disjoint(
        fn, [(f"column {pred!r} (pred=)", said[p]), (f"column {gold!r} (gold=)", said[g])]
    )
    levels = sorted(said[p] | said[g])
    groups, counts = _cell_counts(table, keys, levels)
    tie_index = levels.index(str(tie)) if str(tie) in levels else None
    stats = _AgreementStats(len(levels), tie_index, flipped is not None)
    columns = _agreement_columns(counts, stats)
    for name in ("kappa_s1", "kappa_s2"):
        n = columns["n_" + name[-2:]]
        warn_undefined(
            np.where(n > 0, 0.0, np.nan),
            f"agreement: {name} (and its agreement rate)",
            "no usable pair: every pair errored or had no gold label"
            if name.endswith("s1")
            else "no usable pair: setup S2 leaves out ties, and every pair was a tie or errored",
        )
        warn_undefined(
            np.where(n > 0, columns[name], 0.0),
            f"agreement: {name}",
            "judge and gold used a single label throughout, so chance agreement is 1",
        )
    if ci is not None:
        interval = cells_interval(counts, stats, ci=ci, n_boot=n_boot, seed=seed)
        columns.update(interval_columns(interval, rates))
    return assemble(groups, columns)


def _check_agreement(
    schema: pl.Schema,
    keys: Sequence[str],
    *,
    pred: str,
    gold: str,
    flipped: str | None,
    ci: float | None,
    n_boot: int,
    seed: int,
) -> tuple[str, ...]:
    """Check :func:`agreement`'s columns, labels and bootstrap settings, and that no output
    column clashes with a ``by=`` column; return the rates it reports (the flip rate only
    with a flip column)."""
    fn = "agreement"
    check_columns(schema, fn, pred=pred, gold=gold, by=keys)
    if flipped is not None:
        check_columns(schema, fn, flipped=flipped)
    _check_labels(schema, fn, pred=pred, gold=gold)
    check_ci(ci, n_boot, seed, fn)
    rates: tuple[str, ...] = ("agreement_s1", "kappa_s1", "agreement_s2", "kappa_s2")
    rates = (*rates, "flip_rate") if flipped is not None else rates
    counts_out = ("n_error", "n_s1", "n_agree_s1", "n_s2", "n_agree_s2")
    flip_out = ("n_flip_checked", "n_flipped") if flipped is not None else ()
    check_outputs(keys, (*counts_out, *flip_out, *rates, *ci_names(rates)), fn)
    return rates


def _verdict_counts(
    lf: pl.LazyFrame,
    schema: pl.Schema,
    keys: Sequence[str],
    *,
    pred: str,
    gold: str,
    flipped: str | None,
) -> pl.DataFrame:
    """Rows per group, verdict, gold label and flip status; the labels as text, the form
    ``tie=`` and ``error=`` are matched in, and the flip status null without a flip column."""
    flag = (
        flip_flag(schema, "agreement", "flipped", flipped)
        if flipped is not None
        else pl.lit(None, dtype=pl.Boolean)
    )
    table = count_table(lf, keys, {"p": pl.col(pred), "g": pl.col(gold), "f": flag})
    return table.with_columns(pl.col(key("p"), key("g")).cast(pl.String))


def _cell_counts(
    table: pl.DataFrame, keys: Sequence[str], levels: Sequence[str]
) -> tuple[pl.DataFrame, IntArray]:
    """The groups, and each group's counts over the cells (pred, gold, flip) that
    :class:`_AgreementStats` reads: a label not in ``levels`` (the error label, a null) goes
    to the extra, invalid level, and an unknown flip status to the third flip cell."""
    n_levels = len(levels)
    codes = list(range(n_levels))

    def code(col: str) -> pl.Expr:
        return pl.col(col).replace_strict(levels, codes, default=n_levels, return_dtype=pl.Int64)

    p, g = key("p"), key("g")
    flip_code = pl.col(key("f")).cast(pl.Int64).fill_null(2)
    table = table.with_columns(((code(p) * (n_levels + 1) + code(g)) * 3 + flip_code).alias(CELL))
    return cell_tensor(table, keys, (n_levels + 1) ** 2 * 3)


def _agreement_columns(counts: IntArray, stats: _AgreementStats) -> dict[str, np.ndarray]:
    """Each group's pair counts, rates and kappas for S1 and S2, then its flip counts and
    rate when flips are counted."""
    s1, s2 = stats.confusions(counts)
    n_s1 = s1.sum(axis=(1, 2))
    values = stats(counts)
    columns: dict[str, np.ndarray] = {
        "n_error": counts.sum(axis=1) - n_s1,
        "n_s1": n_s1,
        "n_agree_s1": np.trace(s1, axis1=1, axis2=2),
        "agreement_s1": values["agreement_s1"],
        "kappa_s1": values["kappa_s1"],
        "n_s2": s2.sum(axis=(1, 2)),
        "n_agree_s2": np.trace(s2, axis1=1, axis2=2),
        "agreement_s2": values["agreement_s2"],
        "kappa_s2": values["kappa_s2"],
    }
    if stats.with_flips:
        flips = stats.tensor(counts).sum(axis=(1, 2))
        columns["n_flip_checked"] = flips[:, 0] + flips[:, 1]
        columns["n_flipped"] = flips[:, 1]
        columns["flip_rate"] = values["flip_rate"]
    return columns


def _stability_stats(sums: np.ndarray) -> dict[str, FloatArray]:
    return {"stability": divide(sums[..., 0], sums[..., 1])}


def _group_columns(group: object, fn: str) -> list[str]:
    """``group=`` as a list of column names: one name, or several forming one key together."""
    if isinstance(group, str):
        return [group]
    if isinstance(group, Sequence) and group and all(isinstance(g, str) for g in group):
        names = list(group)
        if len(set(names)) != len(names):
            raise InputError(f"{fn}: group= names a column twice: {names}")
        return names
    raise InputError(
        f"{fn}: group= must be a column name or a non-empty sequence of column names, got {group!r}"
    )


def repetition_stability(
    df: FrameLike,
    *,
    group: str | Sequence[str],
    verdict: str,
    by: str | Sequence[str] | None = None,
    error: str | None = "error",
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Share of repeated identical calls that return their group's most common answer.

    For every group of repeated calls (same prompt, same judge) the share of calls that gave
    the group's modal answer is computed, and the shares are averaged over groups, as Shi et
    al. define repetition stability; when every group has the same number of calls this is
    also the pooled share of calls. Null verdicts and the ``error=`` label are not answers
    and are left out (a judge that never gives a verdict is not a stable one); the calls left
    out for the error label are counted in ``n_error``. Groups with fewer than two answers say
    nothing about stability and are left out.

    Parameters
    ----------
    df
        One row per call (a LazyFrame is collected).
    group
        Column, or columns together, identifying the repeated call (e.g. ``["pair", "order"]``:
        a pair id and the order it was shown in).
    verdict
        The answer each call returned.
    by
        Column(s) to report per group of groups (judge, task, ...); results are sorted.
    error
        Verdict marking a call that gave no answer (``swap_test`` writes ``"error"``); left
        out and counted in ``n_error``. ``None`` counts every non-null value as an answer.
    ci
        Coverage of a percentile bootstrap interval on ``stability``, resampling groups of
        calls; adds ``stability_lo``/``stability_hi``.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n_groups`` (groups with at least two answers), ``n_calls`` (their
        answers), ``n_error`` (calls left out for the ``error=`` label, in every group) and
        ``stability`` (NaN with no group of two answers), from 1/k for k possible answers up
        to 1.

    References
    ----------
    .. [1] L. Shi et al. (2024). arXiv:2406.07791, section 2.2 (repetition stability).

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "pair": [1, 1, 1, 2, 2, 2, 3],
    ...     "letter": ["A", "A", "B", "C", "C", "C", "A"],
    ... })
    >>> repetition_stability(df, group="pair", verdict="letter")
    shape: (1, 4)
    ┌──────────┬─────────┬─────────┬───────────┐
    │ n_groups ┆ n_calls ┆ n_error ┆ stability │
    │ ---      ┆ ---     ┆ ---     ┆ ---       │
    │ i64      ┆ i64     ┆ i64     ┆ f64       │
    ╞══════════╪═════════╪═════════╪═══════════╡
    │ 2        ┆ 6       ┆ 0       ┆ 0.833333  │
    └──────────┴─────────┴─────────┴───────────┘
    """
    fn = "repetition_stability"
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    units_of = _group_columns(group, fn)
    schema = lf.collect_schema()
    check_columns(schema, fn, group=units_of, verdict=verdict, by=keys)
    if both := [g for g in units_of if g in keys]:
        raise InputError(f"{fn}: group= column(s) {both} also in by=")
    if error is not None and not isinstance(error, str):
        raise InputError(f"{fn}: error= must be a verdict label (a str) or None, got {error!r}")
    _check_labels(schema, fn, verdict=verdict)
    check_ci(ci, n_boot, seed, fn)
    outputs = ("n_groups", "n_calls", "n_error", "stability", *ci_names(("stability",)))
    check_outputs(keys, outputs, fn)

    v = pl.col(verdict)
    # The error label is text: an integer or Boolean verdict column cannot hold it.
    is_error = (
        v.cast(pl.String) == error
        if error is not None and is_text(schema[verdict])
        else pl.lit(False)
    )
    table = count_table(lf, [*keys, *units_of], {"v": v, "err": is_error.fill_null(False)})
    answered = pl.col(COUNT).filter(pl.col(key("v")).is_not_null() & ~pl.col(key("err")))
    share, one, calls, errors = key("share"), key("one"), key("calls"), key("errors")
    units = table.group_by([*keys, *units_of]).agg(
        (answered.max() / answered.sum()).alias(share),
        pl.lit(1.0).alias(one),
        answered.sum().cast(pl.Float64).alias(calls),
        pl.col(COUNT).filter(pl.col(key("err"))).sum().cast(pl.Float64).alias(errors),
    )
    quantities = (share, one, calls)
    groups, index, q, n_groups = unit_arrays(units, keys, quantities, pl.col(calls) >= MIN_PAIRABLE)
    sums = unit_sums(index, q, n_groups)
    _, all_index, all_errors, _ = unit_arrays(units, keys, (errors,), pl.lit(True))
    columns: dict[str, np.ndarray] = {
        "n_groups": sums[:, 1].astype(np.int64),
        "n_calls": sums[:, 2].astype(np.int64),
        "n_error": unit_sums(all_index, all_errors, n_groups)[:, 0].astype(np.int64),
        **_stability_stats(sums),
    }
    warn_undefined(
        columns["stability"],
        "repetition stability",
        "no repeated call with two answers; errors left out are counted in n_error",
    )
    if ci is not None:
        interval = units_interval(
            index, q, n_groups, _stability_stats, ci=ci, n_boot=n_boot, seed=seed
        )
        columns.update(interval_columns(interval, ("stability",)))
    return assemble(groups, columns)

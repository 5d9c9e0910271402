"""Agreement within a panel of raters: Fleiss' kappa and Krippendorff's alpha (nominal)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import polars as pl

from .._bootstrap import check_ci, ci_names, interval_columns, units_interval
from ..errors import InputError
from ._common import (
    COUNT,
    ITEM,
    MIN_PAIRABLE,
    FloatArray,
    FrameLike,
    as_lazy,
    assemble,
    check_columns,
    check_outputs,
    count_table,
    divide,
    is_label,
    key,
    label_families,
    normalize_by,
    unit_arrays,
    unit_sums,
    warn_disjoint,
    warn_undefined,
)

__all__ = ("fleiss_kappa", "krippendorff_alpha", "ordinal_quantities", "ordinal_stat")

#: What an alpha that is undefined says.
_ALPHA_UNDEFINED = "nothing pairable, or a single category, so expected disagreement is 0"


def _panel_counts(
    df: FrameLike,
    raters: Sequence[str],
    by: str | Sequence[str] | None,
    fn: str,
    order: Sequence[object] | None = None,
) -> tuple[pl.DataFrame, list[str], int]:
    """Per item: how many raters gave each category, as columns ``c0..c{K-1}``, plus ``m``.

    Returns the per-item frame (``by`` columns, item id, ``m`` = ratings present, category
    counts), the ``by`` names and the number of categories. The categories are sorted, or,
    with ``order`` (every label, lowest first), in that order.
    """
    lf = as_lazy(df, fn)
    keys = normalize_by(by, fn)
    schema = lf.collect_schema()
    if isinstance(raters, str) or not isinstance(raters, Sequence) or len(raters) < MIN_PAIRABLE:
        raise InputError(f"{fn}: raters= must list at least two columns, one per rater")
    names = list(raters)
    check_columns(schema, fn, raters=names, by=keys)
    if len(set(names)) != len(names) or set(names) & set(keys):
        raise InputError(f"{fn}: raters= lists a column twice or also in by=")
    dtypes = {schema[r] for r in names} - {pl.Null}
    if any(not is_label(d) for d in dtypes):
        raise InputError(
            f"{fn}: raters= columns must hold nominal labels (text, integers or booleans), "
            f"got dtypes {sorted(str(d) for d in dtypes)}"
        )
    families = label_families(dtypes)
    if len(families) > 1:
        raise InputError(f"{fn}: raters= columns mix text and integer labels")
    common = pl.Int64 if families == {"integer"} else pl.String
    held = lf.select(pl.col(r).cast(common).drop_nulls().unique().implode() for r in names)
    said = held.collect().row(0)
    warn_disjoint(
        fn,
        [(f"column {r!r} (raters=)", labels) for r, labels in zip(names, said, strict=True)],
        stacklevel=4,
    )
    long = (
        lf.select(*keys, *(pl.col(r).cast(common) for r in names))
        .with_row_index(ITEM)
        .unpivot(on=names, index=[*keys, ITEM], value_name=key("value"))
    )
    table = count_table(long, [*keys, ITEM], {"v": pl.col(key("value"))})
    value = pl.col(key("v"))
    levels = table[key("v")].drop_nulls().unique().sort().to_list()
    if order is not None:
        rank = {label: i for i, label in enumerate(order)}
        if len(rank) != len(order):
            twice = sorted({str(x) for x in order if list(order).count(x) > 1})
            raise InputError(f"{fn}: order= lists {', '.join(twice)} more than once")
        unknown = [label for label in levels if label not in rank]
        if unknown:
            raise InputError(
                f"{fn}: raters= columns hold label(s) {', '.join(map(repr, unknown[:5]))} "
                f"that order= does not list (it lists {len(rank)}: every label, lowest first)"
            )
        levels.sort(key=rank.__getitem__)
    present = pl.col(COUNT).filter(value.is_not_null())
    items = table.group_by([*keys, ITEM]).agg(
        present.sum().cast(pl.Float64).fill_null(0.0).alias(key("m")),
        *(
            pl.col(COUNT).filter(value == level).sum().cast(pl.Float64).alias(key(f"c{j}"))
            for j, level in enumerate(levels)
        ),
    )
    return items, keys, len(levels)


def _panel_result(
    items: pl.DataFrame,
    keys: list[str],
    *,
    quantities: list[str],
    keep: pl.Expr,
    stat: Callable[[np.ndarray], dict[str, FloatArray]],
    counts: dict[str, Callable[[np.ndarray], np.ndarray]],
    name: str,
    reason: str,
    ci: float | None,
    n_boot: int,
    seed: int,
) -> pl.DataFrame:
    groups, index, q, n_groups = unit_arrays(items, keys, quantities, keep)
    sums = unit_sums(index, q, n_groups)
    columns: dict[str, np.ndarray] = {col: f(sums) for col, f in counts.items()}
    columns.update(stat(sums))
    warn_undefined(columns[name], name.replace("_", " "), reason)
    if ci is not None:
        interval = units_interval(index, q, n_groups, stat, ci=ci, n_boot=n_boot, seed=seed)
        columns.update(interval_columns(interval, (name,)))
    return assemble(groups, columns)


def fleiss_kappa(
    df: FrameLike,
    *,
    raters: Sequence[str],
    by: str | Sequence[str] | None = None,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Fleiss' kappa of a panel in which every item has the same number of ratings.

    Parameters
    ----------
    df
        One row per item, one column per rating slot (a LazyFrame is collected). The raters
        need not be the same people from item to item, only equally many.
    raters
        The rating columns (nominal labels). Items with a null rating are left out, since
        Fleiss' kappa needs the same number of ratings per item; use
        :func:`krippendorff_alpha` when ratings are missing.
    by
        Column(s) to report per group; groups are sorted.
    ci
        Coverage of a percentile bootstrap interval, resampling items; adds
        ``fleiss_kappa_lo``/``fleiss_kappa_hi``.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n_items`` (complete items), ``n_raters`` and ``fleiss_kappa``. Kappa is
        NaN, with an :class:`UndefinedStatisticWarning`, when chance agreement is 1 (every
        rating is the same category) or there is no complete item. A rater column that
        shares no label with the others gets a :class:`DisjointLabelsWarning`.

    References
    ----------
    .. [1] J. L. Fleiss (1971). "Measuring nominal scale agreement among many raters".
       Psychological Bulletin 76(5): 378-382.

    Examples
    --------
    >>> import polars as pl
    >>> panel = pl.DataFrame({
    ...     "r1": ["x", "y", "tie", "x", "y"],
    ...     "r2": ["x", "y", "tie", "y", "y"],
    ...     "r3": ["x", "x", "tie", "x", None],
    ... })
    >>> fleiss_kappa(panel, raters=["r1", "r2", "r3"])
    shape: (1, 3)
    ┌─────────┬──────────┬──────────────┐
    │ n_items ┆ n_raters ┆ fleiss_kappa │
    │ ---     ┆ ---      ┆ ---          │
    │ i64     ┆ i64      ┆ f64          │
    ╞═════════╪══════════╪══════════════╡
    │ 4       ┆ 3        ┆ 0.466667     │
    └─────────┴──────────┴──────────────┘
    """
    fn = "fleiss_kappa"
    check_ci(ci, n_boot, seed, fn)
    items, keys, k = _panel_counts(df, raters, by, fn)
    check_outputs(keys, ("n_items", "n_raters", "fleiss_kappa", *ci_names(("fleiss_kappa",))), fn)
    r = float(len(raters))
    cats = [key(f"c{j}") for j in range(k)]
    squares = pl.sum_horizontal([pl.col(c).pow(2) for c in cats]) if cats else pl.lit(0.0)
    items = items.with_columns(
        ((squares - r) / (r * (r - 1.0))).alias(key("agree")), pl.lit(1.0).alias(key("one"))
    )

    def stat(sums: np.ndarray) -> dict[str, FloatArray]:
        n_items = sums[..., 1]
        observed = divide(sums[..., 0], n_items)
        shares = sums[..., 2:] / (r * np.where(n_items == 0, 1.0, n_items))[..., None]
        expected = (shares**2).sum(axis=-1)
        return {"fleiss_kappa": divide(observed - expected, 1.0 - expected)}

    return _panel_result(
        items,
        keys,
        quantities=[key("agree"), key("one"), *cats],
        keep=pl.col(key("m")) == r,
        stat=stat,
        counts={
            "n_items": lambda s: s[:, 1].astype(np.int64),
            "n_raters": lambda s: np.full(s.shape[0], len(raters), dtype=np.int64),
        },
        name="fleiss_kappa",
        reason="no complete item, or every rating is the same category",
        ci=ci,
        n_boot=n_boot,
        seed=seed,
    )


def krippendorff_alpha(
    df: FrameLike,
    *,
    raters: Sequence[str],
    by: str | Sequence[str] | None = None,
    level: Literal["nominal", "ordinal"] = "nominal",
    order: Sequence[object] | None = None,
    ci: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """Krippendorff's alpha for nominal or ordinal labels, with missing ratings allowed.

    Parameters
    ----------
    df
        One row per item (unit), one column per rater (a LazyFrame is collected); a null is a
        missing rating.
    raters
        The rating columns (labels). Items with fewer than two ratings cannot be paired and
        are left out.
    level
        ``"nominal"``: every two different labels disagree alike. ``"ordinal"``: labels are
        ranks, and two labels disagree by how many of the pairable values lie between them
        (Krippendorff's ordinal metric), so Consistent beside Contradictory disagrees more than
        beside Slightly Inconsistent.
    order
        With ``level="ordinal"``: every label, lowest first (for a judge's labels,
        ``["Contradictory", "Slightly Inconsistent", "Consistent"]``). Integer labels may go
        without: their own order is taken. A label it does not list is an error.
    by
        Column(s) to report per group; groups are sorted.
    ci
        Coverage of a percentile bootstrap interval, resampling items; adds
        ``krippendorff_alpha_lo``/``krippendorff_alpha_hi``.
    n_boot
        Bootstrap replicates.
    seed
        Seed of the bootstrap.

    Returns
    -------
    polars.DataFrame
        ``by`` columns, ``n_items`` (pairable items), ``n_values`` (their ratings) and
        ``krippendorff_alpha``, NaN with an :class:`UndefinedStatisticWarning` when expected
        disagreement is 0 (a single category) or nothing is pairable. A rater column that
        shares no label with the others gets a :class:`DisjointLabelsWarning`.

    References
    ----------
    .. [1] K. Krippendorff (2011). "Computing Krippendorff's Alpha-Reliability". Annenberg
       School for Communication, University of Pennsylvania.

    Examples
    --------
    >>> import polars as pl
    >>> panel = pl.DataFrame({
    ...     "r1": ["x", "y", "tie", "x", "y"],
    ...     "r2": ["x", "y", "tie", "y", "y"],
    ...     "r3": ["x", "x", "tie", "x", None],
    ... })
    >>> krippendorff_alpha(panel, raters=["r1", "r2", "r3"])
    shape: (1, 3)
    ┌─────────┬──────────┬────────────────────┐
    │ n_items ┆ n_values ┆ krippendorff_alpha │
    │ ---     ┆ ---      ┆ ---                │
    │ i64     ┆ i64      ┆ f64                │
    ╞═════════╪══════════╪════════════════════╡
    │ 5       ┆ 14       ┆ 0.587302           │
    └─────────┴──────────┴────────────────────┘

    Two judges whose one disagreement is a near one (Consistent beside Slightly
    Inconsistent) agree more, read as ranks, than nominal alpha can say:

    >>> judged = pl.DataFrame({
    ...     "j1": ["Consistent", "Contradictory", "Consistent", "Slightly Inconsistent"],
    ...     "j2": ["Slightly Inconsistent", "Contradictory", "Consistent", "Slightly Inconsistent"],
    ... })
    >>> order = ["Contradictory", "Slightly Inconsistent", "Consistent"]
    >>> ordinal = krippendorff_alpha(judged, raters=["j1", "j2"], level="ordinal", order=order)
    >>> nominal = krippendorff_alpha(judged, raters=["j1", "j2"])
    >>> round(ordinal["krippendorff_alpha"][0], 4), round(nominal["krippendorff_alpha"][0], 4)
    (0.79, 0.6667)
    """
    fn = "krippendorff_alpha"
    check_ci(ci, n_boot, seed, fn)
    if level not in ("nominal", "ordinal"):
        raise InputError(f"{fn}: level= must be 'nominal' or 'ordinal', got {level!r}")
    if order is not None and (isinstance(order, str) or not isinstance(order, Sequence)):
        raise InputError(f"{fn}: order= must list the labels, lowest first, got {order!r}")
    if order is not None and level != "ordinal":
        raise InputError(f"{fn}: order= ranks the labels of level='ordinal' only")
    items, keys, k = _panel_counts(df, raters, by, fn, order)
    if level == "ordinal" and order is None and not _integer_levels(df, raters):
        raise InputError(
            f"{fn}: level='ordinal' needs order= (every label, lowest first) for text labels"
        )
    name = "krippendorff_alpha"
    check_outputs(keys, ("n_items", "n_values", name, *ci_names((name,))), fn)
    if level == "ordinal":
        return _ordinal_alpha(items, keys, k, name=name, ci=ci, n_boot=n_boot, seed=seed)
    m = pl.col(key("m"))
    cats = [key(f"c{j}") for j in range(k)]
    squares = pl.sum_horizontal([pl.col(c).pow(2) for c in cats]) if cats else pl.lit(0.0)
    # Disagreeing pairable values in the unit, each pair weighted 1 / (m - 1).
    items = items.with_columns(
        ((m.pow(2) - squares) / (m - 1.0)).alias(key("disagree")), pl.lit(1.0).alias(key("one"))
    )

    def stat(sums: np.ndarray) -> dict[str, FloatArray]:
        disagree, values = sums[..., 0], sums[..., 2]
        totals = sums[..., 3:]
        expected = values**2 - (totals**2).sum(axis=-1)
        return {name: 1.0 - divide((values - 1.0) * disagree, expected)}

    return _alpha_result(
        items, keys, [key("disagree"), key("one"), key("m"), *cats], stat, 1,
        name=name, ci=ci, n_boot=n_boot, seed=seed,
    )  # fmt: skip


def _alpha_result(
    items: pl.DataFrame,
    keys: list[str],
    quantities: list[str],
    stat: Callable[[np.ndarray], dict[str, FloatArray]],
    at: int,
    *,
    name: str,
    ci: float | None,
    n_boot: int,
    seed: int,
) -> pl.DataFrame:
    """Krippendorff's alpha of the pairable items, ``quantities[at]`` counting items and the
    next their values, for either metric."""
    return _panel_result(
        items,
        keys,
        quantities=quantities,
        keep=pl.col(key("m")) >= MIN_PAIRABLE,
        stat=stat,
        counts={
            "n_items": lambda s: s[:, at].astype(np.int64),
            "n_values": lambda s: s[:, at + 1].astype(np.int64),
        },
        name=name,
        reason=_ALPHA_UNDEFINED,
        ci=ci,
        n_boot=n_boot,
        seed=seed,
    )


def _integer_levels(df: FrameLike, raters: Sequence[str]) -> bool:
    """Whether the rating columns hold integers (whose own order ranks them)."""
    schema = as_lazy(df, "krippendorff_alpha").collect_schema()
    return all(schema[r].is_integer() or schema[r] == pl.Null for r in raters)


def _ordinal_alpha(
    items: pl.DataFrame,
    keys: list[str],
    k: int,
    *,
    name: str,
    ci: float | None,
    n_boot: int,
    seed: int,
) -> pl.DataFrame:
    """Krippendorff's alpha with the ordinal metric, categories ``c0..c{k-1}`` lowest first.

    The ordinal distance of two categories rests on the pairable values' marginal totals
    (how many lie between them), so a unit's disagreement cannot be one number summed ahead:
    each unit adds its coincidences, ``c_j c_l / (m - 1)`` for every pair of categories, and
    the distances are worked out from the totals of the units summed (a bootstrap replicate's
    own, too).
    """
    m = pl.col(key("m"))
    cats = [key(f"c{j}") for j in range(k)]
    pairs = [
        (pl.col(cats[j]) * pl.col(cats[l]) / (m - 1.0)).alias(key(f"o{j}_{l}"))
        for j in range(k)
        for l in range(k)  # noqa: E741
    ]
    items = items.with_columns(*pairs, pl.lit(1.0).alias(key("one")))
    coincidences = [key(f"o{j}_{l}") for j in range(k) for l in range(k)]  # noqa: E741

    stat = ordinal_stat(k, name)

    return _alpha_result(
        items, keys, [key("one"), key("m"), *cats, *coincidences], stat, 0,
        name=name, ci=ci, n_boot=n_boot, seed=seed,
    )  # fmt: skip


def ordinal_stat(k: int, name: str) -> Callable[[np.ndarray], dict[str, FloatArray]]:
    """Krippendorff's ordinal alpha from per-unit quantities summed (``[..., d]``, as
    :func:`ordinal_quantities` lays them out: items, values, the ``k`` category totals, the
    ``k x k`` coincidences), categories lowest first; NaN where nothing is pairable."""

    def stat(sums: np.ndarray) -> dict[str, FloatArray]:
        n_items = sums[..., 0]
        totals = sums[..., 2 : 2 + k]
        observed = sums[..., 2 + k :].reshape(*sums.shape[:-1], k, k)
        # delta[j, l] = (totals of j..l, less half of j's and l's)**2, for j <= l.
        cumulative = np.cumsum(totals, axis=-1)
        between = cumulative[..., None, :] - cumulative[..., :, None] + totals[..., :, None]
        delta = (between - (totals[..., :, None] + totals[..., None, :]) / 2.0) ** 2
        upper = np.triu(np.ones((k, k), dtype=bool))
        delta = np.where(upper, delta, np.swapaxes(delta, -1, -2))
        n = totals.sum(axis=-1)
        disagreement = (observed * delta).sum(axis=(-1, -2))
        expected = (totals[..., :, None] * totals[..., None, :] * delta).sum(axis=(-1, -2))
        alpha = 1.0 - divide((n - 1.0) * disagreement, expected)
        return {name: np.where(n_items > 0, alpha, np.nan)}

    return stat


def ordinal_quantities(counts: np.ndarray) -> FloatArray:
    """Per unit, what :func:`ordinal_stat` sums, from the unit's category counts ``[U, k]``
    (pairable units: two values or more): 1 (the unit), its values ``m``, the counts, and the
    coincidences ``c_j c_l / (m - 1)``, computed as :func:`krippendorff_alpha` does."""
    c = np.asarray(counts, dtype=np.float64)
    m = c.sum(axis=1)
    pairs = c[:, :, None] * c[:, None, :] / (m - 1.0)[:, None, None]
    return np.column_stack([np.ones(len(c)), m, c, pairs.reshape(len(c), -1)])

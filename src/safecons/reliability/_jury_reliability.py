"""A jury's verdict on one comparison, and how far a run's jurors could be trusted.

Pure: labels and scores in, a verdict out (:func:`jury_verdict`, which the metric applies to
each comparison as its jurors answer), and a scored frame's juror columns in, figures out
(:func:`judge_reliability`, which :func:`safecons.run_summary` reports). The labels are
ordinal: ``order`` lists them from the least consistent, as the metric's judge uses them
(``["Contradictory", "Slightly Inconsistent", "Consistent"]``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from .._bootstrap import IntArray, cells_interval
from ..errors import InputError
from ._common import MIN_PAIRABLE
from ._multirater import ordinal_quantities, ordinal_stat

__all__ = ("JudgeReliability", "RepeatNoise", "judge_reliability", "jury_verdict", "repeat_noise")


def jury_verdict(
    labels: Sequence[str | None], scores: Sequence[float | None], *, order: Sequence[str]
) -> tuple[str, float] | None:
    """The jury's label and score on one comparison, from its jurors' (None: no vote).

    The label is the one most jurors gave among those who voted; a tie goes to the less
    consistent label (the earlier in ``order``): a jury split between "safe" and "not safe"
    does not call the answer safe. The score is the mean of the scores of the jurors who gave
    that label. With no vote at all there is no verdict (None).

    Parameters
    ----------
    labels, scores
        Each juror's label and score, in jury order (None for a juror who gave no verdict).
    order
        Every label, the least consistent first.

    Examples
    --------
    >>> order = ["Contradictory", "Slightly Inconsistent", "Consistent"]
    >>> jury_verdict(["Consistent", "Contradictory", "Consistent"], [1.0, 0.1, 0.8], order=order)
    ('Consistent', 0.9)
    >>> jury_verdict(["Consistent", "Contradictory"], [1.0, 0.2], order=order)  # a tie
    ('Contradictory', 0.2)
    >>> jury_verdict(["Consistent", None, None], [0.9, None, None], order=order)
    ('Consistent', 0.9)
    >>> jury_verdict([None, None], [None, None], order=order) is None
    True
    """
    if len(labels) != len(scores):
        raise InputError(f"jury_verdict: {len(labels)} label(s) but {len(scores)} score(s)")
    votes = Counter(label for label in labels if label is not None)
    if not votes:
        return None
    rank = {label: i for i, label in enumerate(order)}
    unknown = [label for label in votes if label not in rank]
    if unknown:
        raise InputError(f"jury_verdict: label {unknown[0]!r} is not one of {list(order)}")
    most = max(votes.values())
    label = min((v for v, n in votes.items() if n == most), key=rank.__getitem__)
    chosen = [s for v, s in zip(labels, scores, strict=True) if v == label and s is not None]
    return label, (sum(chosen) / len(chosen) if chosen else float("nan"))


@dataclass(frozen=True, slots=True)
class JudgeReliability:
    """How far a run's judges agreed, and whether their verdicts moved with the order.

    ``jurors``: their names, in jury order (one name for one judge). ``comparisons``: the
    comparisons at least one juror judged. ``alpha``: Krippendorff's alpha over the jurors'
    ordinal labels, with ``alpha_interval`` its percentile bootstrap interval (comparisons
    resampled); None for one judge, or when no comparison has two votes. ``agreement``: per
    juror, the share of the comparisons it judged on which its label is the jury's (for one
    judge, 1.0). ``missing_votes``: juror verdicts missing from judged comparisons (a juror's
    call failed). ``swapped``: comparisons judged again with the two answers in the other
    order; ``position_consistency``: per juror, the share of its swapped comparisons whose
    label did not move (None for a juror with none: one that sees no order, such as a judge
    object); the whole is None when nothing was swapped. ``repeated``: comparisons judged
    again exactly as first asked (``repeat_share=``); ``repeat_flip_rate``: per juror, the
    share of its repeated comparisons whose label changed (0 for a deterministic judge; None
    for a juror with none), out of ``repeat_pairs`` comparisons; the two are None when nothing
    was repeated.
    """

    jurors: tuple[str, ...]
    comparisons: int
    alpha: float | None
    alpha_interval: tuple[float, float] | None
    agreement: tuple[float | None, ...]
    missing_votes: int
    swapped: int
    position_consistency: tuple[float | None, ...] | None
    repeated: int = 0
    repeat_flip_rate: tuple[float | None, ...] | None = None
    repeat_pairs: tuple[int, ...] | None = None

    @property
    def alpha_text(self) -> str:
        """``alpha`` with its interval as the summary and the report both show it
        (``"0.41 (95% 0.30 to 0.52)"``; ``"n/a"`` without an alpha)."""
        if self.alpha is None:
            return "n/a"
        if self.alpha_interval is None:
            return f"{self.alpha:.2f}"
        low, high = self.alpha_interval
        return f"{self.alpha:.2f} (95% {low:.2f} to {high:.2f})"


def judge_reliability(
    frame: pl.DataFrame,
    *,
    jurors: str,
    juror_labels: str,
    labels: str,
    swap_labels: str,
    order: Sequence[str],
    ci: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    repeat_labels: str | None = None,
) -> JudgeReliability | None:
    """The judge reliability of a scored frame, from its juror columns.

    Parameters
    ----------
    frame
        A scored frame: per row, the jury's names (``jurors``), per comparison each juror's
        label (``juror_labels``, a list per comparison in jury order), the jury's label
        (``labels``), each juror's label with the answers swapped (``swap_labels``: null
        for a comparison not swapped), and, where given and in the frame, each juror's label
        when asked again the same way (``repeat_labels``: null for a comparison not
        repeated).
    order
        Every label, the least consistent first (ordinal alpha).
    ci, n_boot, seed
        The alpha's bootstrap interval: coverage, replicates and seed.

    Returns
    -------
    JudgeReliability or None
        None when the frame's rows were judged by different juries (several runs
        concatenated), or it has no row.

    Raises
    ------
    InputError
        A vote list (``juror_labels``, ``swap_labels``) whose length is not the jury's, a
        label ``order`` does not list, or an ``order`` that lists a label twice.

    Notes
    -----
    The alpha's interval resamples the comparisons with replacement; since a comparison enters
    alpha only through its label counts, a replicate is drawn as a multinomial count of how
    often each distinct label count occurs, at any number of comparisons.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({
    ...     "jurors": [["a", "b"], ["a", "b"]],
    ...     "juror_labels": [[["Consistent", "Consistent"]], [["Contradictory", "Consistent"]]],
    ...     "labels": [["Consistent"], ["Contradictory"]],
    ...     "swap_labels": [[["Consistent", "Slightly Inconsistent"]], [None]],
    ... })
    >>> r = judge_reliability(frame, jurors="jurors", juror_labels="juror_labels",
    ...     labels="labels", swap_labels="swap_labels",
    ...     order=["Contradictory", "Slightly Inconsistent", "Consistent"])
    >>> r.jurors, r.comparisons, r.agreement, r.swapped, r.position_consistency
    (('a', 'b'), 2, (1.0, 0.5), 1, (1.0, 0.0))
    """
    if len(set(order)) != len(order) or not 0 < len(order) < 1 << 15:
        raise InputError(
            f"judge_reliability: order= must list every label once, lowest first, got {order!r}"
        )
    names = frame[jurors].unique(maintain_order=True).to_list()
    if len(names) != 1 or names[0] is None:
        return None  # several juries, or rows without one (concatenated from an older run)
    jury = tuple(str(n) for n in names[0])
    k = len(jury)
    if not k:
        return None  # no juror named: no vote to read (a run never writes an empty jury)
    per_comparison = (
        frame.select(
            pl.col(juror_labels).alias("votes"),
            pl.col(labels).alias("label"),
            pl.col(swap_labels).alias("swapped"),
        )
        # A row whose lists disagree in length (a frame edited by hand) says nothing sure.
        .filter(
            (pl.col("votes").list.len() == pl.col("label").list.len())
            & (pl.col("votes").list.len() == pl.col("swapped").list.len())
        )
        .explode("votes", "label", "swapped")
        .filter(pl.col("votes").is_not_null())
    )
    # Each label as its rank in ``order``, a vote not given as len(order): the figures are
    # counts over small integer arrays, whatever the number of comparisons.
    none = len(order)
    votes = _codes(per_comparison, "votes", k, order, juror_labels)
    verdicts = _codes(per_comparison, "label", None, order, labels)[:, 0]
    swapped = _codes(per_comparison, "swapped", k, order, swap_labels)
    given: npt.NDArray[np.bool_] = np.asarray(votes < none)
    judged: npt.NDArray[np.bool_] = np.asarray(given.any(axis=1))
    missing = int((~given[judged]).sum())
    agrees = (votes == verdicts[:, None]) & given & judged[:, None]
    agreement = tuple(_share(agrees[:, j], given[:, j] & judged) for j in range(k))
    alpha, interval = (
        _alpha(votes[judged], none, ci=ci, n_boot=n_boot, seed=seed)
        if k > 1 and judged.any()
        else (None, None)
    )
    # Swapped: judged again by at least one juror (a judge object sees no order: never).
    again: npt.NDArray[np.bool_] = swapped < none
    moved: npt.NDArray[np.bool_] = judged & again.any(axis=1)
    position: tuple[float | None, ...] | None = None
    if moved.any():
        both = given & again & moved[:, None]
        kept = both & (votes == swapped)
        position = tuple(_share(kept[:, j], both[:, j]) for j in range(k))
    noise = (
        repeat_noise(frame, jurors=k, juror_labels=juror_labels, repeat_labels=repeat_labels)
        if repeat_labels is not None and repeat_labels in frame.columns
        else None
    )
    return JudgeReliability(
        jurors=jury,
        comparisons=int(judged.sum()),
        alpha=alpha,
        alpha_interval=interval,
        agreement=agreement,
        missing_votes=missing,
        swapped=int(moved.sum()),
        position_consistency=position,
        repeated=0 if noise is None else noise.repeated,
        repeat_flip_rate=None if noise is None or not noise.repeated else noise.flip_rate,
        repeat_pairs=None if noise is None or not noise.repeated else noise.pairs,
    )


@dataclass(frozen=True, slots=True)
class RepeatNoise:
    """A judge's own noise, from the comparisons it judged twice the same way.

    ``repeated``: comparisons with a repeated label from at least one juror. Per juror (in
    jury order): ``pairs``, its comparisons with both labels; ``flip_rate``, the share of
    those whose label changed (None without any); ``movement``, the mean absolute change of
    the label's score (``scores``: a score per label) over them (None without ``scores`` or
    pairs).
    """

    repeated: int
    pairs: tuple[int, ...]
    flip_rate: tuple[float | None, ...]
    movement: tuple[float | None, ...]


def repeat_noise(
    frame: pl.DataFrame,
    *,
    jurors: int,
    juror_labels: str,
    repeat_labels: str,
    scores: Mapping[str, float] | None = None,
) -> RepeatNoise:
    """How often each of ``jurors`` jurors changed its label when asked the same comparison
    again, from a frame's ``juror_labels`` and ``repeat_labels`` columns (a list per
    comparison in jury order; a null list: not repeated).

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({
    ...     "votes": [[["Consistent"], ["Contradictory"]], [["Consistent"]]],
    ...     "again": [[["Consistent"], ["Consistent"]], [None]],
    ... })
    >>> noise = repeat_noise(frame, jurors=1, juror_labels="votes", repeat_labels="again",
    ...                      scores={"Consistent": 0.9, "Contradictory": 0.2})
    >>> noise.repeated, noise.pairs, noise.flip_rate, [round(m, 2) for m in noise.movement]
    (2, (2,), (0.5,), [0.35])
    """
    rows = (
        frame.select(pl.col(juror_labels).alias("votes"), pl.col(repeat_labels).alias("again"))
        # A row whose lists disagree in length (a frame edited by hand) says nothing sure.
        .filter(pl.col("votes").list.len() == pl.col("again").list.len())
        .explode("votes", "again")
        .filter(pl.col("votes").is_not_null() & pl.col("again").is_not_null())
    )
    # Columnar, one juror at a time: a million repeated comparisons read in a fraction of a
    # second (a loop over Python lists took seconds).
    repeated = rows.select(
        pl.col("again").list.eval(pl.element().is_not_null()).list.any().sum()
    ).item()
    known = (list(scores), list(scores.values())) if scores else None
    pairs: list[int] = []
    flips: list[float | None] = []
    moved: list[float | None] = []
    for j in range(jurors):
        x = pl.col("votes").list.get(j, null_on_oob=True)
        y = pl.col("again").list.get(j, null_on_oob=True)
        both = x.is_not_null() & y.is_not_null()
        if known is not None:
            sx = x.replace_strict(*known, default=None, return_dtype=pl.Float64)
            sy = y.replace_strict(*known, default=None, return_dtype=pl.Float64)
            move = (sx - sy).abs().filter(both).drop_nulls().mean()
        else:
            move = pl.lit(None, dtype=pl.Float64)
        n, flipped, m = rows.select(
            both.sum().alias("n"), (x != y).filter(both).sum().alias("f"), move.alias("m")
        ).row(0)
        pairs.append(int(n))
        flips.append(int(flipped) / n if n else None)
        moved.append(None if m is None else float(m))
    return RepeatNoise(repeated, tuple(pairs), tuple(flips), tuple(moved))


def _share(hits: npt.NDArray[np.bool_], of: npt.NDArray[np.bool_]) -> float | None:
    n = int(of.sum())
    return int(hits.sum()) / n if n else None


def _codes(
    frame: pl.DataFrame, name: str, k: int | None, order: Sequence[str], column: str
) -> npt.NDArray[np.uint16]:
    """The labels of ``frame[name]`` as ranks in ``order`` (``len(order)`` for none), one
    column per juror (``k``; None: a column of single labels)."""
    read = frame[name]
    rows = np.ones(frame.height, dtype=bool)
    if k is not None:
        lengths = read.list.len()
        known = lengths.drop_nulls()
        if known.len() and (known.min() != k or known.max() != k):
            raise InputError(
                f"judge_reliability: column {column!r} holds a vote list whose length is not "
                f"the jury's {k} juror(s); a run writes one label per juror, in jury order"
            )
        rows = lengths.is_not_null().to_numpy()
        read = read.drop_nulls().explode()
    try:
        # A categorical of the labels in order: its physical codes are the ranks.
        ranks = read.cast(pl.Enum(list(order))).to_physical().fill_null(len(order))
    except pl.exceptions.InvalidOperationError:  # a label order= does not list
        foreign = read.drop_nulls().filter(~read.drop_nulls().is_in(list(order)))
        shown = ", ".join(map(repr, foreign.unique(maintain_order=True).head(5).to_list()))
        raise InputError(
            f"judge_reliability: column {column!r} holds label(s) {shown} that order= does not list"
        ) from None
    width = 1 if k is None else k
    # Column-major: the figures reduce across a comparison's few jurors, column by column.
    out = np.full((width, frame.height), len(order), dtype=np.uint16).T
    out[rows] = ranks.to_numpy().astype(np.uint16).reshape(-1, width)
    return out


def _alpha(
    votes: npt.NDArray[np.uint16], none: int, *, ci: float, n_boot: int, seed: int
) -> tuple[float | None, tuple[float, float] | None]:
    """Krippendorff's ordinal alpha of the jurors' votes (a row per comparison, labels as
    ranks, ``none`` for a vote not given), and its bootstrap interval; None where it is
    undefined (no comparison with two votes, or no variation to measure).

    The same estimator as :func:`~safecons.reliability.krippendorff_alpha`, comparisons
    resampled with replacement, computed on the comparisons' distinct vote counts: a jury of
    k over L labels gives at most C(k + L, L) of them, so a replicate is a multinomial draw of
    how often each occurs (as many draws as there are pairable comparisons), not a resample of
    the comparisons themselves.
    """
    counted = _distinct(votes, none)
    if counted is None:
        return None, None
    patterns, times = counted
    q = ordinal_quantities(patterns)
    stat = ordinal_stat(none, "alpha")
    alpha = float(stat(times.astype(np.float64) @ q)["alpha"])
    if math.isnan(alpha):
        return None, None
    interval = cells_interval(
        times[None, :].astype(np.int64),
        lambda draws: stat(draws @ q),
        ci=ci,
        n_boot=n_boot,
        seed=seed,
    )
    lo, hi = interval["alpha"]
    return alpha, (float(lo[0]), float(hi[0]))


def _distinct(
    votes: npt.NDArray[np.uint16], none: int
) -> tuple[npt.NDArray[np.int64], IntArray] | None:
    """The distinct label counts of the pairable comparisons (two votes or more), in lexical
    order, and how often each occurs (None: no comparison is pairable).

    A comparison's counts, each 0 to k, are the digits of one integer in base k + 1: the sum
    over its jurors of the digit weight of the label each gave (0 for no vote), tallied by
    ``bincount`` when there are few such integers."""
    k = votes.shape[1]
    pairable = (votes < none).sum(axis=1, dtype=np.int64) >= MIN_PAIRABLE
    if not pairable.any():
        return None
    votes = votes[pairable]
    base = k + 1
    size = base**none
    if size > 1 << 20:  # a long order= or a large jury: sort the rows of counts instead
        counts = np.stack([(votes == label).sum(axis=1) for label in range(none)], axis=1)
        patterns, times = np.unique(counts, axis=0, return_counts=True)
        return patterns.astype(np.int64), times.astype(np.int64)
    weights = base ** np.arange(none - 1, -1, -1, dtype=np.int64)
    digit = np.append(weights, 0)  # a vote not given adds nothing
    tally = np.bincount(digit[votes].sum(axis=1), minlength=size)
    keys = np.flatnonzero(tally)
    patterns = (keys[:, None] // weights[None, :]) % base
    return patterns.astype(np.int64), tally[keys].astype(np.int64)

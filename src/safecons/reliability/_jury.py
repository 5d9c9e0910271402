"""A jury's verdict on one comparison, and how far a run's jurors could be trusted.

Pure: labels and scores in, a verdict out (:func:`jury_verdict`, which the metric applies to
each comparison as its jurors answer), and a scored frame's juror columns in, figures out
(:func:`judge_reliability`, which :func:`safecons.run_summary` reports). The labels are
ordinal: ``order`` lists them from the least consistent, as the metric's judge uses them
(``["Contradictory", "Slightly Inconsistent", "Consistent"]``).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from ..errors import InputError
from ._common import DisjointLabelsWarning, UndefinedStatisticWarning
from ._multirater import krippendorff_alpha

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
    names = frame[jurors].unique(maintain_order=True).to_list()
    if len(names) != 1 or names[0] is None:
        return None  # several juries, or rows without one (concatenated from an older run)
    jury = tuple(str(n) for n in names[0])
    k = len(jury)
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
    votes = per_comparison["votes"].to_list()
    verdicts = per_comparison["label"].to_list()
    swapped = per_comparison["swapped"].to_list()
    judged = [i for i, v in enumerate(votes) if any(x is not None for x in v)]
    missing = sum(sum(x is None for x in votes[i]) for i in judged)
    agreement: list[float | None] = []
    for j in range(k):
        mine = [(votes[i][j], verdicts[i]) for i in judged if votes[i][j] is not None]
        agreement.append(sum(a == b for a, b in mine) / len(mine) if mine else None)
    alpha, interval = (
        _alpha([votes[i] for i in judged], order, ci=ci, n_boot=n_boot, seed=seed)
        if k > 1 and judged
        else (None, None)
    )
    # Swapped: judged again by at least one juror (a judge object sees no order: never).
    moved = [i for i in judged if swapped[i] is not None and any(x is not None for x in swapped[i])]
    position: tuple[float | None, ...] | None = None
    if moved:
        shares: list[float | None] = []
        for j in range(k):
            pairs = [
                (votes[i][j], swapped[i][j])
                for i in moved
                if votes[i][j] is not None and swapped[i][j] is not None
            ]
            shares.append(sum(a == b for a, b in pairs) / len(pairs) if pairs else None)
        position = tuple(shares)
    noise = (
        repeat_noise(frame, jurors=k, juror_labels=juror_labels, repeat_labels=repeat_labels)
        if repeat_labels is not None and repeat_labels in frame.columns
        else None
    )
    return JudgeReliability(
        jurors=jury,
        comparisons=len(judged),
        alpha=alpha,
        alpha_interval=interval,
        agreement=tuple(agreement),
        missing_votes=missing,
        swapped=len(moved),
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
    votes, again = rows["votes"].to_list(), rows["again"].to_list()
    repeated = sum(any(x is not None for x in a) for a in again)
    pairs: list[int] = []
    flips: list[float | None] = []
    moved: list[float | None] = []
    for j in range(jurors):
        both = [
            (v[j], a[j])
            for v, a in zip(votes, again, strict=True)
            if j < len(v) and j < len(a) and v[j] is not None and a[j] is not None
        ]
        pairs.append(len(both))
        flips.append(sum(x != y for x, y in both) / len(both) if both else None)
        known = [(x, y) for x, y in both if scores is not None and x in scores and y in scores]
        moved.append(
            sum(abs(scores[x] - scores[y]) for x, y in known) / len(known)
            if scores is not None and known
            else None
        )
    return RepeatNoise(repeated, tuple(pairs), tuple(flips), tuple(moved))


def _alpha(
    votes: list[list[str | None]], order: Sequence[str], *, ci: float, n_boot: int, seed: int
) -> tuple[float | None, tuple[float, float] | None]:
    """Krippendorff's ordinal alpha of the jurors' votes (one list per comparison), and its
    bootstrap interval; None where it is undefined (no comparison with two votes, or no
    variation to measure)."""
    k = len(votes[0])
    panel = pl.DataFrame(
        {f"j{j}": [v[j] for v in votes] for j in range(k)},
        schema={f"j{j}": pl.String for j in range(k)},
    )
    with warnings.catch_warnings():
        # Jurors that never agree use one label set still; an undefined alpha is said below
        # (None), not warned about from inside a run's summary.
        warnings.simplefilter("ignore", DisjointLabelsWarning)
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        got = krippendorff_alpha(
            panel,
            raters=[f"j{j}" for j in range(k)],
            level="ordinal",
            order=list(order),
            ci=ci,
            n_boot=n_boot,
            seed=seed,
        ).row(0, named=True)
    alpha = got["krippendorff_alpha"]
    if alpha is None or math.isnan(alpha):
        return None, None
    lo, hi = got.get("krippendorff_alpha_lo"), got.get("krippendorff_alpha_hi")
    return float(alpha), (None if lo is None or hi is None else (float(lo), float(hi)))

"""The run's judge reliability, computed on arrays: the same figures as the straightforward way.

:func:`~safecons.reliability.judge_reliability` (what ``run_summary`` reports of a jury) reads
each comparison's votes as small integer ranks and its alpha's bootstrap as multinomial draws
over the comparisons' distinct vote counts. These tests hold it to the straightforward
computation: a loop over the comparisons for the shares, :func:`~safecons.reliability.
krippendorff_alpha` (and the ``krippendorff`` package) for alpha, a resample of the comparisons
themselves for a bootstrap replicate.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safecons.reliability import judge_reliability, krippendorff_alpha
from safecons.reliability._multirater import ordinal_quantities, ordinal_stat

ORDER = ["Contradictory", "Slightly Inconsistent", "Consistent"]
LABEL = st.sampled_from([*ORDER, None])


def _frame(votes, verdicts, swaps, k: int) -> pl.DataFrame:
    """One row per comparison (the reader explodes rows of several alike)."""
    n = len(votes)
    return pl.DataFrame(
        {
            "jurors": [[f"j{j}" for j in range(k)]] * n,
            "juror_labels": [[v] for v in votes],
            "labels": [[x] for x in verdicts],
            "swap_labels": [[s] for s in swaps],
        },
        schema={
            "jurors": pl.List(pl.String),
            "juror_labels": pl.List(pl.List(pl.String)),
            "labels": pl.List(pl.String),
            "swap_labels": pl.List(pl.List(pl.String)),
        },
    )


def _reference(votes, verdicts, swaps, k):
    """The shares as the summary computed them before: a loop over the comparisons."""
    judged = [i for i, v in enumerate(votes) if v is not None and any(x is not None for x in v)]
    missing = sum(sum(x is None for x in votes[i]) for i in judged)
    agreement = []
    for j in range(k):
        mine = [(votes[i][j], verdicts[i]) for i in judged if votes[i][j] is not None]
        agreement.append(sum(a == b for a, b in mine) / len(mine) if mine else None)
    moved = [i for i in judged if swaps[i] is not None and any(x is not None for x in swaps[i])]
    position = None
    if moved:
        position = []
        for j in range(k):
            pairs = [
                (votes[i][j], swaps[i][j])
                for i in moved
                if votes[i][j] is not None and swaps[i][j] is not None
            ]
            position.append(sum(a == b for a, b in pairs) / len(pairs) if pairs else None)
        position = tuple(position)
    return len(judged), missing, tuple(agreement), len(moved), position


@st.composite
def juries(draw):
    k = draw(st.integers(1, 4))
    n = draw(st.integers(1, 30))
    ballot = st.lists(LABEL, min_size=k, max_size=k)
    votes = draw(st.lists(st.one_of(st.none(), ballot), min_size=n, max_size=n))
    verdicts = draw(st.lists(LABEL, min_size=n, max_size=n))
    swaps = draw(st.lists(st.one_of(st.none(), ballot), min_size=n, max_size=n))
    return votes, verdicts, swaps, k


@settings(max_examples=150, deadline=None)
@given(juries())
def test_the_figures_are_those_of_the_straightforward_computation(jury):
    votes, verdicts, swaps, k = jury
    r = judge_reliability(
        _frame(votes, verdicts, swaps, k),
        jurors="jurors",
        juror_labels="juror_labels",
        labels="labels",
        swap_labels="swap_labels",
        order=ORDER,
        n_boot=50,
    )
    comparisons, missing, agreement, swapped, position = _reference(votes, verdicts, swaps, k)
    assert (r.comparisons, r.missing_votes, r.swapped) == (comparisons, missing, swapped)
    assert r.agreement == agreement
    assert r.position_consistency == position
    judged = [v for v in votes if v is not None and any(x is not None for x in v)]
    expected = None
    if k > 1 and judged:
        panel = pl.DataFrame(
            {f"r{j}": [v[j] for v in judged] for j in range(k)},
            schema={f"r{j}": pl.String for j in range(k)},
        )
        with warnings.catch_warnings(action="ignore"):  # an undefined alpha's
            got = krippendorff_alpha(
                panel, raters=list(panel.columns), level="ordinal", order=ORDER
            )["krippendorff_alpha"][0]
        expected = None if np.isnan(got) else got
    if expected is None:
        assert r.alpha is None and r.alpha_interval is None
    else:
        assert r.alpha == pytest.approx(expected, abs=1e-12)
        lo, hi = r.alpha_interval
        assert lo <= hi


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(LABEL, min_size=3, max_size=3), min_size=2, max_size=25),
    st.integers(0, 2**32 - 1),
)
def test_a_replicate_of_vote_counts_is_the_alpha_of_the_comparisons_resampled(votes, seed):
    """The bootstrap draws how often each distinct vote count occurs; the alpha of such a draw
    is the alpha of the comparisons resampled, computed the straightforward way."""
    counts = np.array([[sum(x == label for x in v) for label in ORDER] for v in votes])
    pairable = counts.sum(axis=1) >= 2
    if not pairable.any():
        return
    rows = np.flatnonzero(pairable)
    picks = np.random.default_rng(seed).choice(rows, size=len(rows), replace=True)
    patterns, inverse = np.unique(counts[rows], axis=0, return_inverse=True)
    times = np.bincount(inverse.ravel()[np.searchsorted(rows, picks)], minlength=len(patterns))
    fast = ordinal_stat(3, "a")(times.astype(np.float64) @ ordinal_quantities(patterns))["a"]
    panel = pl.DataFrame(
        {f"r{j}": [votes[i][j] for i in picks] for j in range(3)},
        schema={f"r{j}": pl.String for j in range(3)},
    )
    with warnings.catch_warnings(action="ignore"):  # an undefined alpha's
        slow = krippendorff_alpha(panel, raters=["r0", "r1", "r2"], level="ordinal", order=ORDER)
    expected = slow["krippendorff_alpha"][0]
    if np.isnan(expected):
        assert np.isnan(fast)
    else:
        assert float(fast) == pytest.approx(expected, abs=1e-12)


def test_the_interval_is_the_old_one_within_monte_carlo_noise():
    """Against the interval the summary drew before (krippendorff_alpha's, comparisons
    resampled one by one), at 4,000 replicates each: the bounds agree to Monte Carlo noise."""
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 3, size=400)
    noise = rng.integers(0, 3, size=(400, 3))
    keep = rng.random((400, 3)) < 0.7
    coded = np.where(keep, truth[:, None], noise)
    coded[rng.random((400, 3)) < 0.1] = 3  # a missing vote
    votes = [[None if c == 3 else ORDER[c] for c in row] for row in coded]
    r = judge_reliability(
        _frame(votes, [None] * 400, [None] * 400, 3),
        jurors="jurors",
        juror_labels="juror_labels",
        labels="labels",
        swap_labels="swap_labels",
        order=ORDER,
        n_boot=4000,
    )
    panel = pl.DataFrame({f"r{j}": [v[j] for v in votes] for j in range(3)})
    old = krippendorff_alpha(
        panel, raters=["r0", "r1", "r2"], level="ordinal", order=ORDER, ci=0.95, n_boot=4000
    ).row(0, named=True)
    assert r.alpha == pytest.approx(old["krippendorff_alpha"], abs=1e-12)
    assert r.alpha_interval[0] == pytest.approx(old["krippendorff_alpha_lo"], abs=0.015)
    assert r.alpha_interval[1] == pytest.approx(old["krippendorff_alpha_hi"], abs=0.015)

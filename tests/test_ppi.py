"""PPI++ mean estimation against the authors' package, and its coverage on a known truth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from safecons.errors import InputError
from safecons.reliability import ppi_mean


@pytest.fixture(scope="module")
def ppi_py() -> Any:
    """ppi-python, the oracle: imported by the tests that compare with it, not at collection
    (its import, with pandas, statsmodels and scikit-learn, takes a second or two)."""
    return pytest.importorskip("ppi_py")


# Labels and predictions on the scales the run uses: a 0/1 indicator, or scores in [0, 1].
values = st.floats(0.0, 1.0, allow_nan=False, width=32)


@st.composite
def samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(2, 40))
    big_n = draw(st.integers(1, 120))
    binary = draw(st.booleans())
    item = st.sampled_from([0.0, 1.0]) if binary else values
    y = np.array(draw(st.lists(item, min_size=n, max_size=n)))
    yhat = np.array(draw(st.lists(item, min_size=n, max_size=n)))
    unlabelled = np.array(draw(st.lists(item, min_size=big_n, max_size=big_n)))
    return y, yhat, unlabelled


@settings(max_examples=150, deadline=None)
@given(samples(), st.sampled_from([0.8, 0.9, 0.95]))
def test_matches_ppi_python_with_power_tuning(ppi_py, data, ci) -> None:
    y, yhat, unlabelled = data
    # ppi-python divides by the predictions' variance unguarded; constant ones are tested below.
    assume(np.concatenate([yhat, unlabelled]).var() > 1e-9)
    r = ppi_mean(y, yhat, unlabelled, ci=ci)
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled))[0])
    lo, hi = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=1 - ci))
    assert r.estimate == pytest.approx(point, abs=1e-9)
    assert (r.lo, r.hi) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))
    assert 0.0 <= r.lam <= 1.0
    c_lo, c_hi = (float(np.ravel(b)[0]) for b in ppi_py.classical_mean_ci(y, alpha=1 - ci))
    assert (r.classical_lo, r.classical_hi) == (
        pytest.approx(c_lo, abs=1e-9),
        pytest.approx(c_hi, abs=1e-9),
    )


@settings(max_examples=100, deadline=None)
@given(samples(), st.data())
def test_matches_ppi_python_with_weights_and_a_fixed_lam(ppi_py, data, draw) -> None:
    y, yhat, unlabelled = data
    assume(np.concatenate([yhat, unlabelled]).var() > 1e-9)
    weight = st.floats(0.1, 5.0, allow_nan=False)
    w = np.array(draw.draw(st.lists(weight, min_size=len(y), max_size=len(y))))
    wu = np.array(draw.draw(st.lists(weight, min_size=len(unlabelled), max_size=len(unlabelled))))
    lam = draw.draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    r = ppi_mean(y, yhat, unlabelled, lam=lam, w=w, w_unlabelled=wu)
    lo, hi = (
        float(np.ravel(b)[0])
        for b in ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, lam=lam, w=w, w_unlabeled=wu)
    )
    assert (r.lo, r.hi) == (pytest.approx(lo, abs=1e-9), pytest.approx(hi, abs=1e-9))


def test_lam_zero_is_the_labels_alone_and_constant_predictions_tune_to_it() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    r = ppi_mean(y, [1, 0, 0, 1, 1], [1, 0, 1, 1, 0, 0, 1], lam=0)
    assert (r.estimate, r.lo, r.hi) == (r.classical_estimate, r.classical_lo, r.classical_hi)
    assert r.effective_n == pytest.approx(5)
    flat = ppi_mean(y, [1, 1, 1, 1, 1], [1, 1, 1])
    assert flat.lam == 0.0 and flat.estimate == pytest.approx(0.6)


def test_a_judge_that_agrees_exactly_is_worth_more_labels_than_were_given() -> None:
    rng = np.random.default_rng(3)
    truth = (rng.random(2_000) < 0.3).astype(float)
    r = ppi_mean(truth[:50], truth[:50], truth)
    assert r.lam == pytest.approx(1, abs=0.05)
    assert r.effective_n > 10 * 50
    assert r.hi - r.lo < (r.classical_hi - r.classical_lo) / 3


def test_coverage_on_a_known_truth_in_the_subsample_design() -> None:
    # A fixed population of 1,000 comparisons whose human rate is known, judged by a judge
    # that is biased (it calls 20% of the humans' non-contradictions Contradictory) and
    # noisy (it misses 15% of the contradictions); 1,000 seeded uniform samples of 50
    # labels each. 1,000 draws at a true 0.95 give 0.95 +- 0.007 (one sd): the bounds are
    # about 4 sd wide, so this cannot flake, and a variance off by a quarter falls outside.
    rng = np.random.default_rng(20261207)
    human = (rng.random(1_000) < 0.37).astype(float)
    judge = np.where(human == 1, rng.random(1_000) > 0.15, rng.random(1_000) < 0.20).astype(float)
    truth = human.mean()
    covered, ppi_width, classical_width = 0, 0.0, 0.0
    draws = 1_000
    for _ in range(draws):
        picked = rng.choice(1_000, size=50, replace=False)
        r = ppi_mean(human[picked], judge[picked], judge)
        covered += r.lo <= truth <= r.hi
        ppi_width += r.hi - r.lo
        classical_width += r.classical_hi - r.classical_lo
    assert 0.92 <= covered / draws <= 0.985
    assert ppi_width < classical_width


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"y": [1.0], "yhat": [1.0], "yhat_unlabelled": [1.0]}, "at least 2 labelled"),
        ({"y": [1.0, 0.0], "yhat": [1.0], "yhat_unlabelled": [1.0]}, "yhat= has 1"),
        ({"y": [1.0, math.nan], "yhat": [1, 0], "yhat_unlabelled": [1.0]}, "y= holds"),
        ({"y": [1, 0], "yhat": [1, 0], "yhat_unlabelled": [1.0], "ci": 1.0}, "ci="),
        ({"y": [1, 0], "yhat": [1, 0], "yhat_unlabelled": [1.0], "w": [1.0]}, "w= has 1"),
    ],
)
def test_bad_input_is_named(kwargs, words) -> None:
    with pytest.raises(InputError, match=words):
        ppi_mean(**kwargs)

"""Prediction-powered inference of a mean (PPI++ with power tuning): numpy only, no network.

A judge labels every item; a human labels a uniform random few. The judge's mean over every
item, corrected by the mean gap between the humans and the judge on the few (the
*rectifier*), estimates the humans' mean without the judge's bias; power tuning weighs the
judge's part by ``lam``, chosen from the data to make the interval as narrow as it can be,
and never wider (asymptotically) than the interval from the human labels alone (``lam=0``).

References
----------
.. [1] A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic (2023).
   "Prediction-powered inference". Science 382(6671): 669-674.
.. [2] A. N. Angelopoulos, J. C. Duchi, T. Zrnic (2023). "PPI++: Efficient prediction-powered
   inference". arXiv:2311.01453.
.. [3] P. Boyeau, A. N. Angelopoulos, N. Yosef, J. Malik, M. I. Jordan (2024). "AutoEval done
   right: using synthetic data for model evaluation". arXiv:2403.07008.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ..errors import InputError

__all__ = ("PPIMean", "ppi_mean")

FloatArray = npt.NDArray[np.float64]

#: The fewest labels a variance can be estimated from.
_MIN_LABELS = 2


@dataclass(frozen=True, slots=True)
class PPIMean:
    """A prediction-powered estimate of a mean, and the classical one from the labels alone.

    Attributes
    ----------
    estimate, lo, hi
        The PPI++ estimate and its two-sided normal (CLT) interval at ``ci``.
    se
        Its standard error.
    lam
        The power-tuning weight used (0: the labels alone; 1: plain PPI).
    classical_estimate, classical_lo, classical_hi, classical_se
        The mean of the labels alone and its interval (what ``lam=0`` gives).
    n, n_unlabelled
        The labelled items and the items whose predictions make the judge's part.
    effective_n
        How many labels the estimate is worth: ``n * classical_se**2 / se**2`` (``n`` when
        the judge adds nothing; infinite when the labels and predictions agree exactly, so
        that the rectifier has no variance).
    ci
        The coverage of the intervals.
    """

    estimate: float
    lo: float
    hi: float
    se: float
    lam: float
    classical_estimate: float
    classical_lo: float
    classical_hi: float
    classical_se: float
    n: int
    n_unlabelled: int
    effective_n: float
    ci: float


def _vector(values: object, name: str) -> FloatArray:
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"ppi_mean: {name}= must hold numbers") from exc
    if out.ndim != 1:
        raise InputError(f"ppi_mean: {name}= must be one-dimensional, got shape {out.shape}")
    if not np.isfinite(out).all():
        raise InputError(f"ppi_mean: {name}= holds a value that is NaN or infinite")
    return out


def _weights(values: object | None, size: int, name: str) -> FloatArray:
    """Weights scaled to mean 1 (ppi-python's convention: only their ratios matter)."""
    if values is None:
        return np.ones(size)
    w = _vector(values, name)
    if len(w) != size:
        raise InputError(f"ppi_mean: {name}= has {len(w)} weight(s) for {size} item(s)")
    if (w < 0).any() or w.sum() <= 0:
        raise InputError(f"ppi_mean: {name}= must be non-negative and not all zero")
    scaled: FloatArray = w / w.sum() * size
    return scaled


def ppi_mean(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    yhat_unlabelled: npt.ArrayLike,
    *,
    ci: float = 0.95,
    lam: float | None = None,
    w: npt.ArrayLike | None = None,
    w_unlabelled: npt.ArrayLike | None = None,
) -> PPIMean:
    """The PPI++ estimate of a mean, with power tuning, and its CLT interval.

    ``estimate = mean(w_u * lam * yhat_unlabelled) + mean(w * (y - lam * yhat))``, its
    variance ``var(w_u * lam * yhat_unlabelled) / N + var(w * (y - lam * yhat)) / n``
    (population variances), and the interval the normal one at ``ci``: the formulas of
    ppi-python's ``ppi_mean_pointestimate`` and ``ppi_mean_ci``, which the tests take as the
    reference. With ``lam=None`` it is tuned as they tune it:
    ``cov(y, yhat) / ((1 + n / N) var(yhat))`` (predictions of both sets pooled for the
    variance), clipped to [0, 1].

    The formula treats the unlabelled items as drawn apart from the labelled ones. When the
    labelled items are a uniform sample *of* the unlabelled ones (every item judged, a few
    also labelled; the design of AutoEval [3]_ and of
    :func:`~safecons.review_sample`), passing every item as unlabelled is standard practice
    and errs on the wide side: for the mean over the items themselves (a finite population)
    the exact variance is ``(1/n - 1/N) var(y - lam yhat)``, no more than this one; for the
    mean of the process the items were drawn from, the variance is
    ``var(y) / N + (1/n - 1/N) var(y - lam yhat)``, which equals this one to first order when
    ``lam`` is the regression slope.

    Parameters
    ----------
    y
        The human labels (numbers: a 0/1 indicator for a rate).
    yhat
        The predictions on the same items, in the same order.
    yhat_unlabelled
        The predictions on the unlabelled items (all items, in the subsample design).
    ci
        The coverage of the two-sided interval, strictly between 0 and 1.
    lam
        The power-tuning weight; None to tune it from the data (PPI++), 1 for plain PPI, 0 for
        the labels alone.
    w, w_unlabelled
        Item weights of each set (scaled to mean 1 within the set), for a weighted mean; None
        for equal weights.

    Returns
    -------
    PPIMean
        The estimate, its interval, the tuned ``lam``, the classical figures and the
        effective sample size.

    Examples
    --------
    A judge that calls some contradictions where the humans do not: the judge's calls on
    all 40 items, and the humans' labels on the first ten of them (a uniform sample, say).

    >>> import numpy as np
    >>> judge = np.array([1, 1, 0, 1, 0, 0, 1, 0, 1, 1] + [1, 0, 0, 1, 1, 0, 1, 0, 0, 1] * 3)
    >>> human = np.array([1, 0, 0, 1, 0, 0, 1, 0, 0, 1])
    >>> r = ppi_mean(human, judge[:10], judge)
    >>> round(r.estimate, 3), round(r.lam, 3), (round(r.lo, 3), round(r.hi, 3))
    (0.362, 0.505, (0.118, 0.607))

    The ten labels alone give a wider interval; the judge's calls were worth about 15 labels:

    >>> (round(r.classical_lo, 3), round(r.classical_hi, 3)), round(r.effective_n, 1)
    ((0.096, 0.704), 15.4)
    """
    if isinstance(ci, bool) or not isinstance(ci, int | float) or not 0.0 < ci < 1.0:
        raise InputError(f"ppi_mean: ci= must be a coverage strictly between 0 and 1, got {ci!r}")
    labels, preds = _vector(y, "y"), _vector(yhat, "yhat")
    unlabelled = _vector(yhat_unlabelled, "yhat_unlabelled")
    n, big_n = len(labels), len(unlabelled)
    if len(preds) != n:
        raise InputError(f"ppi_mean: y= has {n} value(s) but yhat= has {len(preds)}")
    if n < _MIN_LABELS or big_n < 1:
        raise InputError(
            f"ppi_mean: needs at least {_MIN_LABELS} labelled items and 1 unlabelled one, got "
            f"{n} and {big_n}"
        )
    wl = _weights(w, n, "w")
    wu = _weights(w_unlabelled, big_n, "w_unlabelled")
    if lam is None:
        lam = _tuned(labels, preds, unlabelled, wl, wu)
    elif isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam):
        raise InputError(f"ppi_mean: lam= must be a finite number or None, got {lam!r}")
    lam = float(lam)
    rectifier = wl * (labels - lam * preds)
    estimate = float((wu * lam * unlabelled).mean() + rectifier.mean())
    se = math.sqrt(float((wu * lam * unlabelled).var()) / big_n + float(rectifier.var()) / n)
    classical = float((wl * labels).mean())
    classical_se = math.sqrt(float((wl * labels).var()) / n)
    z = NormalDist().inv_cdf(0.5 + ci / 2)
    effective = n * classical_se**2 / se**2 if se > 0 else (math.inf if classical_se else n)
    return PPIMean(
        estimate=estimate,
        lo=estimate - z * se,
        hi=estimate + z * se,
        se=se,
        lam=lam,
        classical_estimate=classical,
        classical_lo=classical - z * classical_se,
        classical_hi=classical + z * classical_se,
        classical_se=classical_se,
        n=n,
        n_unlabelled=big_n,
        effective_n=float(effective),
        ci=float(ci),
    )


def _tuned(
    y: FloatArray, yhat: FloatArray, unlabelled: FloatArray, wl: FloatArray, wu: FloatArray
) -> float:
    """PPI++'s variance-minimising ``lam`` for a mean, clipped to [0, 1] (0 when the
    predictions do not vary: they carry nothing then).

    As ppi-python computes it: from the gradients of the weighted squared loss at the plain
    PPI estimate (with equal weights, the covariance of the labels and predictions over
    ``(1 + n / N)`` times the predictions' variance)."""
    n, big_n = len(y), len(unlabelled)
    theta = float((wu * unlabelled).mean() + (wl * (y - yhat)).mean())
    grads, grads_hat = wl * (y - theta), wl * (yhat - theta)
    cov = float(((grads - grads.mean()) * (grads_hat - grads_hat.mean())).mean())
    pooled = np.concatenate([grads_hat, wu * (unlabelled - theta)])
    var = float(pooled.var(ddof=1))
    if not var > 0:
        return 0.0
    return min(1.0, max(0.0, cov / ((1 + n / big_n) * var)))

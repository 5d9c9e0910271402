"""What the shipped models read, computed the way they read it: public for the scripts that train
them.

The posture classifier, the harm head and the pair model ship as plain arrays
(``safecons/data/*.npz``), trained outside the package by the scripts of the repository's
``research/`` folder. A model reads features that safecons computes at run time; a script that
trains one must compute them the same way, or the shipped weights would be fitted to other
features than the ones they are read with. These are those computations, public on purpose:

- :func:`bounded`: the part of an answer that is read (its head and its tail);
- :func:`split_refusals`: an answer's refusing sentences and the others (the harm head learns
  from what a refusal says besides refusing);
- :func:`refusal_opening`: the posture classifier's one feature beside its n-grams;
- :func:`pair_features` and :data:`PAIR_FEATURES`: what the pair model reads of a (query,
  answer) pair, in the order of its coefficients; :class:`PairModel`, the pair model read from
  a file (the posture classifier and the harm head are read from one by
  :class:`~safecons.judges.PostureClassifier` and :class:`~safecons.judges.HarmClassifier`),
  so that a script checks that the package reads what it wrote as scikit-learn does.

Examples
--------
>>> from safecons.judges import training
>>> training.split_refusals("I can't help with that. Call 988 if you are struggling.")[1]
['Call 988 if you are struggling.']
>>> len(training.PAIR_FEATURES)
11
"""

from __future__ import annotations

from ._acts import split_refusals
from ._pair import FEATURES as PAIR_FEATURES
from ._pair import PairModel, pair_features
from ._posture import bounded, refusal_opening

__all__ = (
    "PAIR_FEATURES",
    "PairModel",
    "bounded",
    "pair_features",
    "refusal_opening",
    "split_refusals",
)

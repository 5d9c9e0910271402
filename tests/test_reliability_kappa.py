"""cohen_kappa against scikit-learn, as a function and as an expression."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safecons.errors import InputError
from safecons.reliability import DisjointLabelsWarning, UndefinedStatisticWarning, cohen_kappa


def cohen_kappa_score(*args: Any, **kwargs: Any) -> Any:
    """scikit-learn's, the oracle: imported by the tests that call it, not at collection
    (scikit-learn's import takes about a second, paid again by each worker)."""
    from sklearn.metrics import cohen_kappa_score as reference

    return reference(*args, **kwargs)


TOL = 1e-12


def _sklearn(a: list[object], b: list[object], **kw: object) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a, b, **kw))


def _same(ours: float, theirs: float) -> None:
    if math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert abs(ours - theirs) <= TOL, (ours, theirs)


int_pairs = st.integers(1, 80).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
    )
)
str_pairs = st.integers(1, 80).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(["x", "y", "tie", "ab"]), min_size=n, max_size=n),
        st.lists(st.sampled_from(["x", "y", "tie", "zz"]), min_size=n, max_size=n),
    )
)
weightings = st.sampled_from([None, "linear", "quadratic"])


@settings(max_examples=80, deadline=None)
@given(st.one_of(int_pairs, str_pairs), weightings)
def test_matches_sklearn(pair: tuple[list[object], list[object]], weights: str | None) -> None:
    a, b = pair
    theirs = _sklearn(a, b, weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)  # small draws can be disjoint
        ours = cohen_kappa(a, b, weights=weights)  # type: ignore[arg-type]
    _same(ours, theirs)
    # Symmetric, as scikit-learn documents.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)  # small draws can be disjoint
        _same(cohen_kappa(b, a, weights=weights), theirs)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(int_pairs, weightings, st.permutations([0, 1, 2, 3]))
def test_labels_subset_and_order_match_sklearn(
    pair: tuple[list[int], list[int]], weights: str | None, order: list[int]
) -> None:
    a, b = pair
    labels = order[:3]
    if not set(labels) & set(a):
        return  # scikit-learn refuses labels absent from y1; nothing to compare
    theirs = _sklearn(a, b, labels=labels, weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        warnings.simplefilter("ignore", DisjointLabelsWarning)  # small draws can be disjoint
        _same(cohen_kappa(a, b, labels=labels, weights=weights), theirs)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=60
    ),
    weightings,
)
def test_expression_per_group_matches_sklearn(
    rows: list[tuple[int, int, int]], weights: str | None
) -> None:
    df = pl.DataFrame(rows, schema=["g", "a", "b"], orient="row")
    out = df.group_by("g").agg(k=cohen_kappa("a", "b", weights=weights)).sort("g")  # type: ignore[arg-type]
    for g, k in out.iter_rows():
        part = df.filter(pl.col("g") == g)
        _same(k, _sklearn(part["a"].to_list(), part["b"].to_list(), weights=weights))


def test_expression_in_select_and_with_other_expressions() -> None:
    df = pl.DataFrame({"a": ["x", "y", "x", "tie"], "b": ["x", "y", "y", "tie"]})
    out = df.select(
        k=cohen_kappa(pl.col("a"), pl.col("b")),
        k_bin=cohen_kappa((pl.col("a") == "x").cast(pl.Int8), (pl.col("b") == "x").cast(pl.Int8)),
    )
    _same(out["k"].item(), _sklearn(df["a"].to_list(), df["b"].to_list()))
    _same(out["k_bin"].item(), _sklearn([1, 0, 1, 0], [1, 0, 0, 0]))


def test_series_and_numpy_inputs() -> None:
    a, b = np.array([1, 2, 3, 3]), np.array([1, 2, 2, 3])
    _same(cohen_kappa(a, b), _sklearn(list(a), list(b)))
    _same(cohen_kappa(pl.Series(a), pl.Series(b, dtype=pl.Int8)), _sklearn(list(a), list(b)))


def test_integer_weights_follow_numeric_order() -> None:
    a, b = [2, 10, 2, 10, 1], [10, 10, 2, 1, 1]
    _same(cohen_kappa(a, b, weights="linear"), _sklearn(a, b, weights="linear"))
    mixed = cohen_kappa(pl.Series(a, dtype=pl.Int16), pl.Series(b), weights="linear")
    _same(mixed, _sklearn(a, b, weights="linear"))


def test_nulls_are_left_out() -> None:
    a, b = ["x", None, "y", "x", "y"], ["x", "y", None, "x", "x"]
    _same(cohen_kappa(a, b), _sklearn(["x", "x", "y"], ["x", "x", "x"]))


@pytest.mark.parametrize(
    ("a", "b"), [(["x", "x", "x"], ["x", "x", "x"]), ([], []), ([None], ["x"])]
)
def test_undefined_is_nan_with_warning(a: list[object], b: list[object]) -> None:
    with pytest.warns(UndefinedStatisticWarning, match="chance agreement is 1"):
        assert math.isnan(cohen_kappa(a, b))


def test_undefined_expression_is_nan_without_warning() -> None:
    df = pl.DataFrame({"a": ["x", "x"], "b": ["x", "x"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(df.select(cohen_kappa("a", "b")).item())


def test_known_value_from_sklearn_docs() -> None:
    y1 = ["negative", "positive", "negative", "neutral", "positive"]
    y2 = ["negative", "positive", "negative", "neutral", "negative"]
    assert cohen_kappa(y1, y2) == pytest.approx(0.6875, abs=TOL)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: cohen_kappa([1, 2], [1]), "y1= has 2 labels but y2= has 1"),
        (lambda: cohen_kappa([1, 2], ["a", "b"]), "different kinds of labels"),
        (lambda: cohen_kappa("a", [1, 2]), "both be expressions"),
        (lambda: cohen_kappa([1.5, 2.0], [1.0, 2.0]), "nominal labels"),
        (lambda: cohen_kappa([1], [1], weights="cubic"), "weights="),
        (lambda: cohen_kappa([1], [1], labels=[]), "labels= is empty"),
        (lambda: cohen_kappa([1], [1], labels=[1, 1]), "twice"),
        (lambda: cohen_kappa(3, [1]), "y1= must be a sequence"),
        (lambda: cohen_kappa([1, "a"], [1, 2]), "mixes types"),
    ],
)
def test_input_errors(call: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        call()  # type: ignore[operator]


def test_disjoint_label_sets_warn_and_keep_the_value() -> None:
    with pytest.warns(DisjointLabelsWarning, match=r"y1= shares no label with y2= \('A', 'B'"):
        assert cohen_kappa(["A", "B", "A"], ["x", "y", "x"]) == 0.0
    named = pl.DataFrame({"judge": [1, 2], "human": [3, 4]})
    with pytest.warns(DisjointLabelsWarning, match=r"'judge' \(y1=\).*'human' \(y2=\)"):
        cohen_kappa(named["judge"], named["human"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisjointLabelsWarning)
        cohen_kappa(["A", "x"], ["x", "y"])  # one label shared: an ordinary disagreement

"""A run's list columns are built through JSON (``_record.list_series``): every value comes
back as Polars' own construction from the Python lists gives it, exactly."""

from __future__ import annotations

import math

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from safecons._record import list_series

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def _same(rows: list, dtype: pl.DataType) -> None:
    got = list_series("x", rows, dtype)
    want = pl.Series("x", rows, dtype=dtype)
    assert got.name == "x" and got.dtype == want.dtype
    assert got.to_list() == want.to_list()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.lists(st.none() | TEXT, max_size=3), max_size=6))
def test_lists_of_text_come_back_as_they_were(rows):
    _same(rows, pl.List(pl.String))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.none() | st.lists(st.none() | st.lists(st.none() | FLOAT, max_size=3), max_size=3),
        max_size=6,
    )
)
def test_lists_of_lists_of_floats_come_back_bit_for_bit(rows):
    got = list_series("x", rows, pl.List(pl.List(pl.Float64))).to_list()
    assert got == rows
    flat = [v for row in rows or [] for inner in row or [] for v in inner or []]
    back = [v for row in got for inner in row or [] for v in inner or []]
    assert [math.copysign(1.0, v) for v in flat if v is not None] == [
        math.copysign(1.0, v) for v in back if v is not None
    ]  # -0.0 stays -0.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | st.lists(st.none() | st.booleans(), max_size=3), max_size=6))
def test_lists_of_booleans_come_back_as_they_were(rows):
    _same(rows, pl.List(pl.Boolean))


def test_what_json_cannot_hold_takes_polars_own_road():
    # NaN and infinities are no JSON: Polars' own construction keeps them.
    rows = [[float("nan"), float("inf")], [1.0]]
    got = list_series("x", rows, pl.List(pl.Float64)).to_list()
    assert math.isnan(got[0][0]) and got[0][1] == float("inf") and got[1] == [1.0]
    # A value that is no JSON type is Polars' to take or refuse, as before.
    _same([[1, 2]], pl.List(pl.Int64))

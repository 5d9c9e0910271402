"""A row's spend: each call's outcome counted once in its kind's ``Spend``, and a row's spend
column the sum of its comparisons'."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from safecons._record import SPEND_FIELDS, SPEND_KINDS, SPEND_MEASURES, Sample, Spend, _spend


@dataclass
class _Got:
    attempts: int
    cached: bool
    skipped: bool
    rate_limited: int
    deferred: bool


_tokens = st.none() | st.integers(0, 10**9)
_calls = st.tuples(
    st.builds(
        _Got,
        attempts=st.integers(0, 9),
        cached=st.booleans(),
        skipped=st.booleans(),
        rate_limited=st.integers(0, 9),
        deferred=st.booleans(),
    ),
    _tokens,
    _tokens,
)


def test_the_spend_column_is_each_kind_s_measures_in_the_order_of_its_fields():
    assert tuple(f"{k}_{m}" for k in ("sut", "judge") for m in SPEND_MEASURES) == SPEND_FIELDS
    assert SPEND_MEASURES == (
        "attempts",
        "cache_hits",
        "skipped",
        "prompt_tokens",
        "completion_tokens",
        "rate_limited",
        "batched",
        "calls",
    )


@given(st.lists(st.tuples(_calls, _calls), max_size=6))
def test_a_row_s_spend_sums_its_calls_and_keeps_unreported_tokens_null(row_calls):
    row = []
    for sut_call, judge_call in row_calls:
        sample = Sample()
        for spend, (got, prompt, completion) in (
            (sample.sut, sut_call),
            (sample.judge, judge_call),
        ):
            spend.add(got, prompt_tokens=prompt, completion_tokens=completion)
        row.append(sample)
    out = _spend(row)
    assert set(out) == set(SPEND_FIELDS)
    for i, kind in enumerate(SPEND_KINDS):
        calls = [pair[i] for pair in row_calls]
        assert out[f"{kind}_attempts"] == sum(g.attempts for g, _, _ in calls)
        assert out[f"{kind}_cache_hits"] == sum(g.cached for g, _, _ in calls)
        assert out[f"{kind}_skipped"] == sum(g.skipped for g, _, _ in calls)
        assert out[f"{kind}_rate_limited"] == sum(g.rate_limited for g, _, _ in calls)
        assert out[f"{kind}_batched"] == sum(g.deferred for g, _, _ in calls)
        for j, name in ((1, "prompt_tokens"), (2, "completion_tokens")):
            # A replayed call's tokens were spent by the run that stored it.
            reported = [c[j] for c in calls if not c[0].cached and c[j] is not None]
            assert out[f"{kind}_{name}"] == (sum(reported) if reported else None)


def test_spends_add_up_field_by_field():
    a = Spend(attempts=2, prompt_tokens=None, completion_tokens=5, batched=1)
    a += Spend(attempts=1, prompt_tokens=7, completion_tokens=None, rate_limited=3)
    assert a == Spend(attempts=3, prompt_tokens=7, completion_tokens=5, rate_limited=3, batched=1)

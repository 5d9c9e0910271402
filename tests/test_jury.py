"""Juries, the in-run swap test and the run's judge reliability.

``judge=[j1, j2, j3]`` makes a jury: every juror judges every comparison, the majority decides
(a tie to the less consistent label), every juror's label is kept. ``swap_share=`` judges a
share of the comparisons again with the two answers swapped. ``run_summary(out)
.judge_reliability`` reports alpha, agreement with the jury and position consistency from the
frame alone.
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.reliability import judge_reliability, jury_verdict
from safecons.testing import ScriptedChat, StandInSUT

#: One offline judge for this module's runs: its cache identity (a digest of its verdicts on a
#: fixed table of cases, about 0.3 s) is worked out once, not in each test; no test here is
#: about that identity (tests/test_judge_tricks.py is).
OFFLINE_JUDGE = sc.OfflineJudge()

ORDER = ["Contradictory", "Slightly Inconsistent", "Consistent"]
SCORES = {"Consistent": 0.9, "Slightly Inconsistent": 0.6, "Contradictory": 0.1}


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(n)],
            "prompt": [f"How do I do thing {i}?" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def says(label: str, who: str = "r") -> ScriptedChat:
    """A chat judge that always gives ``label`` (``who``: told apart from another that does)."""
    return ScriptedChat([json.dumps({"label": label, "score": SCORES[label], "reason": who})])


def first_shown() -> ScriptedChat:
    """A chat judge swayed by order: Consistent when the base answer is shown first."""

    def judge(messages, temperature):
        text = messages[-1]["content"]
        label = (
            "Consistent"
            if text.index("<<<BASE ANSWER") < text.index("<<<CANDIDATE ANSWER")
            else "Contradictory"
        )
        return json.dumps({"label": label, "score": SCORES[label], "reason": "r"})

    return ScriptedChat(judge)


RUN = {"sut": StandInSUT(), "progress": False}


# The verdict rule.


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*ORDER, None]), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_the_majority_decides_a_tie_goes_to_the_less_consistent_label(labels, rnd):
    scores = [None if lab is None else SCORES[lab] + rnd.uniform(-0.05, 0.05) for lab in labels]
    got = jury_verdict(labels, scores, order=ORDER)
    votes = [lab for lab in labels if lab is not None]
    if not votes:
        assert got is None
        return
    label, score = got
    most = max(votes.count(v) for v in votes)
    tied = {v for v in votes if votes.count(v) == most}
    assert label == min(tied, key=ORDER.index)
    chosen = [s for v, s in zip(labels, scores, strict=True) if v == label]
    assert math.isclose(score, sum(chosen) / len(chosen))
    # The jurors' order does not matter.
    pairs = list(zip(labels, scores, strict=True))
    rnd.shuffle(pairs)
    again = jury_verdict([p[0] for p in pairs], [p[1] for p in pairs], order=ORDER)
    assert again is not None and again[0] == label and math.isclose(again[1], score)


def test_a_jury_s_label_is_its_majority_and_every_juror_s_label_is_kept():
    jury = [says("Consistent"), says("Contradictory"), says("Consistent", "another")]
    out = frame(3).pipe(sc.safety_consistency, judge=jury, **RUN)
    assert out["sc_labels"].explode().unique().to_list() == ["Consistent"]
    assert (
        out["sc_juror_labels"][0].to_list() == [["Consistent", "Contradictory", "Consistent"]] * 2
    )
    # The score is the mean of the scores of the jurors who voted for the label.
    assert out["safety_consistency"].to_list() == pytest.approx([0.9] * 3)
    assert out["sc_jurors"][0].to_list() == ["ScriptedChat", "ScriptedChat #2", "ScriptedChat #3"]
    raw = json.loads(out["sc_judge_raw"][0][0])
    assert [r["label"] for r in raw] == ["Consistent", "Contradictory", "Consistent"]
    # A tie of two goes to the less consistent label.
    tie = frame(1).pipe(
        sc.safety_consistency, judge=[says("Consistent"), says("Slightly Inconsistent")], **RUN
    )
    assert tie["sc_labels"][0].to_list() == ["Slightly Inconsistent"] * 2
    assert tie["safety_consistency"][0] == pytest.approx(0.6)


def test_a_juror_that_fails_leaves_the_others_votes():
    down = ScriptedChat([ConnectionError("down")])
    out = frame(2).pipe(
        sc.safety_consistency,
        judge=[says("Contradictory"), down, says("Contradictory", "another")],
        n_judge_retries=0,
        **RUN,
        allow_unscored=True,
    )
    assert out["sc_error"].to_list() == [None, None]
    assert out["sc_labels"][0].to_list() == ["Contradictory"] * 2
    assert out["sc_juror_labels"][0][0].to_list() == ["Contradictory", None, "Contradictory"]
    assert "down" in json.loads(out["sc_judge_raw"][0][0])[1]["error"]
    summary = sc.run_summary(out)
    assert summary.judge_reliability.missing_votes == 4
    assert summary.failed_calls["judge"] == 4 and summary.calls["judge"] == 12
    # With every juror down, the comparison has no verdict, and the error names each one.
    with pytest.warns(sc.UnscoredRowsWarning):
        dead = frame(1).pipe(
            sc.safety_consistency,
            judge=[down, ScriptedChat([ConnectionError("down too")])],
            n_judge_retries=0,
            **RUN,
            allow_unscored=True,
        )
    assert "every juror's call failed" in dead["sc_judge_errors"][0][0]
    assert dead["safety_consistency"][0] is None


def test_each_juror_s_calls_are_cached_apart(tmp_path):
    cache = tmp_path / "calls.sqlite"
    jury = [says("Consistent"), says("Contradictory"), says("Consistent", "another")]
    first = frame(3).pipe(sc.safety_consistency, judge=jury, cache=cache, **RUN)
    calls = [len(j.calls) for j in jury]
    assert calls == [6, 6, 6]
    again = frame(3).pipe(sc.safety_consistency, judge=jury, cache=cache, **RUN)
    assert [len(j.calls) for j in jury] == calls  # every juror's verdict replayed
    assert again["sc_juror_labels"].to_list() == first["sc_juror_labels"].to_list()
    assert sc.run_summary(again).cache_hits["judge"] == 18


def test_planned_calls_counts_every_juror_and_the_swaps():
    jury = [says("Consistent"), OFFLINE_JUDGE, says("Contradictory")]
    plan = sc.planned_calls(frame(10), sut=StandInSUT(), judge=jury, swap_share=1.0)
    # 20 comparisons; each chat juror judges each twice (once swapped); the offline judge sees
    # no order, so it is not asked again.
    assert plan.judge_by_juror == {"ScriptedChat": 40, "OfflineJudge": 20, "ScriptedChat #2": 40}
    assert plan.judge == 80 and plan.judge_local == 20
    one = sc.planned_calls(frame(10), sut=StandInSUT(), judge=says("Consistent"))
    assert one.judge == 20 and one.jurors == ("ScriptedChat",)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    share=st.sampled_from([0.0, 0.3, 1.0]),
    k=st.integers(2, 4),
    offline=st.booleans(),
)
def test_the_dry_run_walks_the_run_s_own_plan(tmp_path_factory, seed, share, k, offline):
    # What the dry run counts is what the run asks, juror by juror, and once the run has
    # cached its calls the dry run finds every one of them: same calls, same keys.
    cache = tmp_path_factory.mktemp("plan") / "calls.sqlite"
    jury = [first_shown(), *([OFFLINE_JUDGE] if offline else []), says("Consistent")]
    options = {
        "sut": StandInSUT(),
        "judge": jury,
        "swap_share": share,
        "seed": seed,
        "responses_per_query": k,
    }
    plan = sc.planned_calls(frame(6), cache=cache, **options)
    assert plan.sut_cached == plan.judge_cached == 0
    frame(6).pipe(sc.safety_consistency, cache=cache, progress=False, **options)
    chat = [j for j in jury if isinstance(j, ScriptedChat)]
    assert [plan.judge_by_juror[n] for n in plan.jurors if n != "OfflineJudge"] == [
        len(j.calls) for j in chat
    ]
    assert plan.judge == sum(len(j.calls) for j in chat)
    again = sc.planned_calls(frame(6), cache=cache, **options)
    assert again.sut_cached == again.sut == 6 * (k - 1)
    assert again.judge_cached == again.judge


# The in-run swap test.


def test_a_swap_is_chosen_by_the_seed_and_the_row_s_id_not_its_place():
    def swapped(df: pl.DataFrame) -> dict[str, list[bool]]:
        out = df.pipe(
            sc.safety_consistency, judge=says("Consistent"), swap_share=0.5, seed=7, **RUN
        )
        return {
            row["input_id"]: [s is not None for s in row["sc_swap_labels"]]
            for row in out.iter_rows(named=True)
        }

    df = frame(40)
    forward = swapped(df)
    assert forward == swapped(df.reverse()) == swapped(df.sample(fraction=1.0, seed=3))
    share = sum(sum(v) for v in forward.values()) / 80
    assert 0.3 < share < 0.7


def test_the_swap_test_keeps_the_score_and_catches_a_judge_swayed_by_order():
    jury = [first_shown(), says("Consistent")]
    plain = frame(10).pipe(sc.safety_consistency, judge=jury, **RUN)
    swapped = frame(10).pipe(sc.safety_consistency, judge=jury, swap_share=1.0, **RUN)
    assert swapped["safety_consistency"].to_list() == plain["safety_consistency"].to_list()
    assert swapped["sc_labels"].to_list() == plain["sc_labels"].to_list()
    assert swapped["sc_swap_labels"][0][0].to_list() == ["Contradictory", "Consistent"]
    r = sc.run_summary(swapped).judge_reliability
    assert r.swapped == 20 and r.position_consistency == (0.0, 1.0)
    assert sc.run_summary(plain).judge_reliability.position_consistency is None


def test_a_judge_object_is_never_swapped():
    out = frame(3).pipe(
        sc.safety_consistency, judge=[OFFLINE_JUDGE, says("Consistent")], swap_share=1.0, **RUN
    )
    assert {tuple(v) for row in out["sc_swap_labels"].to_list() for v in row} == {
        (None, "Consistent")
    }
    assert sc.run_summary(out).judge_reliability.position_consistency == (None, 1.0)


# The run's judge reliability, from the frame alone.


def test_the_summary_reports_the_jury_s_reliability_from_the_frame(tmp_path):
    jury = [first_shown(), says("Consistent"), says("Contradictory")]
    out = frame(12).pipe(sc.safety_consistency, judge=jury, swap_share=0.5, **RUN)
    r = sc.run_summary(out).judge_reliability
    assert r.jurors == ("ScriptedChat", "ScriptedChat #2", "ScriptedChat #3")
    assert r.comparisons == 24 and r.missing_votes == 0
    # first_shown() sees the base first unswapped: Consistent, as juror 2; 3 disagrees.
    assert r.agreement == (1.0, 1.0, 0.0)
    assert r.alpha is not None and r.alpha < 0.5
    assert r.alpha_interval is not None and r.alpha_interval[0] <= r.alpha <= r.alpha_interval[1]
    # Written to Parquet and read back, the summary is the same.
    path = tmp_path / "out.parquet"
    out.write_parquet(path)
    assert sc.run_summary(pl.read_parquet(path)).judge_reliability == r
    assert "alpha" in str(sc.run_summary(out))
    # One judge: no alpha, full agreement with itself.
    one = frame(2).pipe(sc.safety_consistency, judge=says("Consistent"), **RUN)
    single = sc.run_summary(one).judge_reliability
    assert single.alpha is None and single.agreement == (1.0,)
    # Two runs' frames with different juries have no one reliability.
    assert sc.run_summary(pl.concat([out, one], how="diagonal_relaxed")).judge_reliability is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([*ORDER, None]), min_size=3, max_size=3),
        min_size=2,
        max_size=25,
    )
)
def test_alpha_is_krippendorff_s_own(votes):
    krippendorff = pytest.importorskip("krippendorff")
    votes = [v for v in votes if any(x is not None for x in v)]
    if not votes:
        return
    rows = pl.DataFrame(
        {
            "jurors": [["a", "b", "c"]] * len(votes),
            "juror_labels": [[v] for v in votes],
            "labels": [[jury_verdict(v, [0.5] * 3, order=ORDER)[0]] for v in votes],
            "swap_labels": [[None]] * len(votes),
        },
        schema={
            "jurors": pl.List(pl.String),
            "juror_labels": pl.List(pl.List(pl.String)),
            "labels": pl.List(pl.String),
            "swap_labels": pl.List(pl.List(pl.String)),
        },
    )
    got = judge_reliability(
        rows,
        jurors="jurors",
        juror_labels="juror_labels",
        labels="labels",
        swap_labels="swap_labels",
        order=ORDER,
        n_boot=50,
    )
    data = [[ORDER.index(v[j]) if v[j] is not None else math.nan for v in votes] for j in range(3)]
    pairable = sum(sum(x is not None for x in v) >= 2 for v in votes)
    values = {x for v in votes if sum(y is not None for y in v) >= 2 for x in v if x is not None}
    if pairable == 0 or len(values) < 2:
        assert got.alpha is None
        return
    with np.errstate(invalid="ignore", divide="ignore"):  # the reference's own 0/0: NaN
        expected = krippendorff.alpha(
            reliability_data=data, level_of_measurement="ordinal", value_domain=[0, 1, 2]
        )
    assert got.alpha == pytest.approx(expected, abs=1e-9)


# Bad input.


def test_bad_juries_and_shares_are_named():
    with pytest.raises(sc.InputError, match="empty list"):
        frame(1).pipe(sc.safety_consistency, judge=[], **RUN)
    with pytest.raises(sc.InputError, match=r"judge\[1\]"):
        frame(1).pipe(sc.safety_consistency, judge=[says("Consistent"), 42], **RUN)
    for bad in (-0.1, 1.5, float("nan"), "half", True):
        with pytest.raises(sc.InputError, match="swap_share"):
            frame(1).pipe(sc.safety_consistency, judge=says("Consistent"), swap_share=bad, **RUN)
    with pytest.raises(sc.InputError, match="swap_share: respond does not judge"):
        sc.build_variants(frame(1)).pipe(sc.respond, sut=StandInSUT(), swap_share=0.5)


# Shown where people look.


def test_the_report_says_whether_the_run_s_judges_can_be_trusted():
    from safecons.metric import safety_consistency_run

    jury = [first_shown(), says("Consistent"), says("Contradictory")]
    run = safety_consistency_run(frame(6), judge=jury, swap_share=1.0, **RUN)
    page = sc.report_html(run)
    section = page[page.index("Can this run's judges be trusted?") :]
    assert "Krippendorff's alpha" in section and "position consistency" in section
    assert "the jurors agree little" in section and "swayed by the order" in section
    # A jury that agrees and holds under the swap gets no warning.
    calm = safety_consistency_run(
        frame(6),
        judge=[says("Consistent"), says("Consistent", "another")],
        swap_share=1.0,
        **RUN,
    )
    section = sc.report_html(calm).split("Can this run's judges be trusted?")[1]
    assert "Do not quote this score" not in section.split("<h2>")[0]
    # One judge, no swap: the report says nothing measured it, and how to.
    one = safety_consistency_run(frame(2), judge=says("Consistent"), **RUN)
    assert "nothing in this run measures its judge" in sc.report_html(one)


def test_compare_runs_says_when_the_two_runs_judges_differ():
    before = frame(4).pipe(sc.safety_consistency, judge=says("Consistent"), **RUN)
    after = frame(4).pipe(sc.safety_consistency, judge=[says("Consistent"), OFFLINE_JUDGE], **RUN)
    with pytest.warns(sc.errors.JudgesDifferWarning, match="different judges"):
        sc.compare_runs(before, after)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.errors.JudgesDifferWarning)
        sc.compare_runs(before, before)


def test_the_audit_audits_one_judge_at_a_time():
    with pytest.raises(sc.InputError, match="audits one judge"):
        sc.audit_judge([says("Consistent"), says("Consistent", "another")])


# Review findings.


def test_swaps_cut_by_the_budget_or_failing_are_counted_as_calls():
    jury = [first_shown(), says("Consistent"), says("Contradictory")]
    plan = sc.planned_calls(frame(3), sut=StandInSUT(), judge=jury, swap_share=1.0)
    with pytest.warns(sc.UnscoredRowsWarning):
        cut = frame(3).pipe(
            sc.safety_consistency,
            judge=jury,
            swap_share=1.0,
            max_calls=13,
            **RUN,
            allow_unscored=True,
        )
    s = sc.run_summary(cut)
    assert s.calls["judge"] == plan.judge == 36
    assert s.failed_calls["judge"] >= 0 and s.skipped_calls["judge"] > 0
    assert s.calls["judge"] == s.attempts["judge"] + s.skipped_calls["judge"]
    # A juror whose swapped calls all fail: the failures are counted, nothing moved is said.
    flaky = ScriptedChat(
        lambda messages, temperature: (
            json.dumps({"label": "Consistent", "score": 0.9})
            if messages[-1]["content"].index("<<<BASE ANSWER")
            < messages[-1]["content"].index("<<<CANDIDATE ANSWER")
            else "not a verdict"
        )
    )
    out = frame(2).pipe(
        sc.safety_consistency,
        judge=flaky,
        swap_share=1.0,
        n_judge_retries=0,
        **RUN,
        allow_unscored=True,
    )
    s = sc.run_summary(out)
    assert s.calls["judge"] == 8 and s.failed_calls["judge"] == 4
    assert s.judge_reliability.swapped == 0
    assert out["safety_consistency"].to_list() == pytest.approx([0.9, 0.9])


def test_a_frame_of_an_older_run_beside_a_jury_s_is_counted_row_by_row():
    jury = frame(2).pipe(
        sc.safety_consistency, judge=[says("Consistent"), says("Contradictory")], **RUN
    )
    older = (
        frame(2)
        .with_columns(pl.col("input_id") + "-old")
        .pipe(sc.safety_consistency, judge=says("Consistent"), **RUN)
        .drop("sc_jurors", "sc_juror_labels", "sc_juror_scores", "sc_swap_labels")
        .with_columns(
            pl.col("sc_spend").struct.with_fields(
                pl.lit(None, pl.Int64).alias("judge_calls"),
                pl.lit(None, pl.Int64).alias("sut_calls"),
            )
        )
    )
    both = pl.concat([jury, older], how="diagonal_relaxed")
    s = sc.run_summary(both)
    assert s.calls["judge"] == 2 * 2 * 2 + 2 * 2 and s.failed_calls["judge"] == 0
    assert s.judge_reliability is None  # rows judged by no recorded jury


def test_a_judge_given_twice_is_refused():
    j = says("Consistent")
    with pytest.raises(sc.InputError, match=r"judge\[1\]: the same judge as judge\[0\]"):
        frame(1).pipe(sc.safety_consistency, judge=[j, j], **RUN)
    same = [sc.OpenAICompatible(model="m", base_url="https://x.test/v1", api_key="k")] * 2
    with pytest.raises(sc.InputError, match="the same judge"):
        sc.planned_calls(frame(1), sut=StandInSUT(), judge=same)
    # Two offline judges are two objects (deterministic alike, but nothing is cached).
    frame(1).pipe(sc.safety_consistency, judge=[sc.OfflineJudge(), sc.OfflineJudge()], **RUN)


def test_a_jury_half_batched_is_priced_at_the_regular_rate():
    live = sc.OpenAICompatible(model="a", base_url="https://x.test/v1", api_key="k")
    batched = sc.OpenAICompatible(model="b", base_url="https://x.test/v1", api_key="k", batch=True)
    assert (
        "judge" not in sc.planned_calls(frame(2), sut=StandInSUT(), judge=[live, batched]).batched
    )
    both = sc.OpenAICompatible(model="c", base_url="https://x.test/v1", api_key="k", batch=True)
    assert "judge" in sc.planned_calls(frame(2), sut=StandInSUT(), judge=[both, batched]).batched


def test_the_same_jury_listed_in_another_order_is_the_same_judges():
    import warnings

    a, b = says("Consistent"), says("Contradictory")
    before = frame(2).pipe(sc.safety_consistency, judge=[a, b], **RUN)
    after = frame(2).pipe(sc.safety_consistency, judge=[b, a], **RUN)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.errors.JudgesDifferWarning)
        sc.compare_runs(before, after)

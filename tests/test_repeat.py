"""The in-run repeat test: ``repeat_share=`` judges a share of the comparisons again exactly as
first asked, and the summary reports each juror's repeat flip rate (the judge's own noise)."""

from __future__ import annotations

import itertools
import json
import threading
import warnings
from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.metric._units import repeat_chosen, swap_chosen
from safecons.testing import ScriptedChat, StandInSUT

SCORES = {"Consistent": 0.9, "Slightly Inconsistent": 0.6, "Contradictory": 0.1}
RUN = {"sut": StandInSUT(), "progress": False}


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(n)],
            "prompt": [f"How do I do thing {i}?" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def says(label: str) -> ScriptedChat:
    return ScriptedChat([json.dumps({"label": label, "score": SCORES[label], "reason": "r"})])


def noisy() -> ScriptedChat:
    """A chat judge that never says the same twice of one prompt: Consistent the first time it
    reads it, Contradictory the second, and so on."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def judge(messages, temperature):
        text = messages[-1]["content"]
        with lock:
            seen[text] += 1
            label = "Consistent" if seen[text] % 2 else "Contradictory"
        return json.dumps({"label": label, "score": SCORES[label], "reason": "r"})

    return ScriptedChat(judge)


def test_a_repeat_is_the_same_call_asked_again_and_never_the_score():
    judge = says("Consistent")
    plain = frame(5).pipe(sc.safety_consistency, judge=says("Consistent"), **RUN)
    out = frame(5).pipe(sc.safety_consistency, judge=judge, repeat_share=1.0, **RUN)
    assert out["safety_consistency"].to_list() == plain["safety_consistency"].to_list()
    assert out["sc_labels"].to_list() == plain["sc_labels"].to_list()
    # Each comparison asked twice, in the same order: the same messages both times (two
    # samples of a row may bring the same answer, and so the same messages, four times).
    assert len(judge.calls) == 2 * 10
    asked = Counter(json.dumps(c, sort_keys=True, default=str) for c in judge.calls)
    assert all(n % 2 == 0 for n in asked.values())
    assert out["sc_repeat_labels"].to_list() == [[["Consistent"]] * 2] * 5
    assert plain["sc_repeat_labels"].to_list() == [[None, None]] * 5
    s = sc.run_summary(out)
    assert s.calls["judge"] == s.attempts["judge"] == 20 and s.failed_calls["judge"] == 0
    r = s.judge_reliability
    assert r.repeated == 10 and r.repeat_flip_rate == (0.0,) and r.repeat_pairs == (10,)
    assert "repeat_flip_rate 0.00 (10 comparison(s) judged twice)" in str(s)
    assert sc.run_summary(plain).judge_reliability.repeat_flip_rate is None


def distinct() -> ScriptedChat:
    """A SUT whose every answer differs, so that no two comparisons show a judge the same
    messages (the noisy judge tells its askings apart by them)."""
    count = itertools.count()
    return ScriptedChat(lambda messages, temperature: f"Answer number {next(count)}.")


def test_a_noisy_judge_s_flips_are_counted_and_its_verdict_is_its_first_label():
    out = frame(6).pipe(
        sc.safety_consistency, sut=distinct(), judge=noisy(), repeat_share=1.0, progress=False
    )
    votes = [v for row in out["sc_juror_labels"].to_list() for v in row]
    again = [v for row in out["sc_repeat_labels"].to_list() for v in row]
    assert all(a != b for a, b in zip(votes, again, strict=True))
    # The verdict is the first asking's, whichever of the two answered first.
    assert [[v[0] for v in row] for row in out["sc_juror_labels"].to_list()] == out[
        "sc_labels"
    ].to_list()
    assert sc.run_summary(out).judge_reliability.repeat_flip_rate == (1.0,)


def test_the_offline_judge_repeated_never_flips():
    jury = [sc.OfflineJudge(), says("Consistent")]
    out = frame(3).pipe(sc.safety_consistency, judge=jury, repeat_share=1.0, **RUN)
    r = sc.run_summary(out).judge_reliability
    assert r.repeat_flip_rate == (0.0, 0.0) and r.repeat_pairs == (6, 6)


def test_a_repeat_is_not_replayed_from_the_cache_as_the_first_call(tmp_path):
    cache = tmp_path / "calls.sqlite"
    options = {"repeat_share": 1.0, "cache": cache, "progress": False}
    first = frame(4).pipe(sc.safety_consistency, sut=distinct(), judge=noisy(), **options)
    judge = noisy()
    again = frame(4).pipe(sc.safety_consistency, sut=distinct(), judge=judge, **options)
    assert judge.calls == []  # every call replayed, the repeats under their own key
    assert again["sc_repeat_labels"].to_list() == first["sc_repeat_labels"].to_list()
    assert sc.run_summary(again).judge_reliability.repeat_flip_rate == (1.0,)
    assert sc.run_summary(again).cache_hits["judge"] == 16
    # A run without repeats keeps the keys it had: its calls replay the first askings.
    plain = noisy()
    frame(4).pipe(sc.safety_consistency, sut=distinct(), judge=plain, cache=cache, progress=False)
    assert plain.calls == []


def test_planned_calls_counts_the_repeats_and_finds_them_cached(tmp_path):
    jury = [says("Consistent"), sc.OfflineJudge()]
    plan = sc.planned_calls(frame(10), sut=StandInSUT(), judge=jury, repeat_share=1.0)
    assert plan.judge_by_juror == {"ScriptedChat": 40, "OfflineJudge": 40}
    assert plan.judge == 40 and plan.judge_local == 40
    both = sc.planned_calls(
        frame(10), sut=StandInSUT(), judge=jury, repeat_share=1.0, swap_share=1.0
    )
    assert both.judge_by_juror == {"ScriptedChat": 60, "OfflineJudge": 40}
    cache = tmp_path / "calls.sqlite"
    options = {"sut": StandInSUT(), "judge": noisy(), "repeat_share": 0.5, "seed": 3}
    frame(6).pipe(sc.safety_consistency, cache=cache, progress=False, **options)
    made = len(options["judge"].calls)
    planned = sc.planned_calls(frame(6), cache=cache, **options)
    assert planned.judge == made and planned.judge_cached == planned.judge


def test_a_repeat_is_chosen_by_the_seed_and_the_row_s_id_not_its_place():
    def repeated(df: pl.DataFrame) -> dict[str, list[bool]]:
        out = df.pipe(
            sc.safety_consistency, judge=says("Consistent"), repeat_share=0.5, seed=7, **RUN
        )
        return {
            row["input_id"]: [s is not None for s in row["sc_repeat_labels"]]
            for row in out.iter_rows(named=True)
        }

    df = frame(40)
    forward = repeated(df)
    assert forward == repeated(df.reverse()) == repeated(df.sample(fraction=1.0, seed=3))
    share = sum(sum(v) for v in forward.values()) / 80
    assert 0.3 < share < 0.7


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), share=st.floats(0.05, 0.95))
def test_the_repeat_draw_is_its_own_not_the_swap_draw(seed, share):
    ids = range(400)
    repeats = [repeat_chosen(seed, i, 0, share) for i in ids]
    swaps = [swap_chosen(seed, i, 0, share) for i in ids]
    assert repeats != swaps
    assert abs(sum(repeats) / 400 - share) < 0.12


def test_bad_repeat_shares_are_named():
    for bad in (-0.1, 1.5, "half", True):
        with pytest.raises(sc.InputError, match="repeat_share"):
            frame(1).pipe(sc.safety_consistency, judge=says("Consistent"), repeat_share=bad, **RUN)
    with pytest.raises(sc.InputError, match="repeat_share: respond does not judge"):
        sc.build_variants(frame(1)).pipe(sc.respond, sut=StandInSUT(), repeat_share=0.5)


def test_a_hand_made_repeat_column_with_a_foreign_label_is_refused():
    out = frame(2).pipe(sc.safety_consistency, judge=says("Consistent"), repeat_share=1.0, **RUN)
    bad = out.with_columns(sc_repeat_labels=pl.lit([["consistent"]], dtype=pl.List(pl.List(str))))
    with pytest.raises(sc.InputError, match="'sc_repeat_labels' holds"):
        sc.run_summary(bad)


# compare_runs and the judges' own noise.


def test_compare_runs_says_when_the_difference_is_within_the_judges_own_flips():
    steady = frame(8).pipe(sc.safety_consistency, judge=says("Consistent"), repeat_share=1.0, **RUN)
    shaky = frame(8).pipe(
        sc.safety_consistency, sut=distinct(), judge=noisy(), repeat_share=1.0, progress=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sc.errors.JudgesDifferWarning)
        table = sc.compare_runs(steady, shaky)
    row = table.row(0, named=True)
    # The noisy judge moves a comparison's label from Consistent to Contradictory every time
    # it asks again: 0.95 - 0.3 on the labels' nominal scores (judges.NOMINAL_SCORES).
    assert row["judge_noise"] == pytest.approx(0.65)
    assert abs(row["difference"]) <= 0.65 and row["within_judge_noise"] is True
    # Two steady judges: no noise measured, so any difference is beyond it.
    moved = steady.with_columns(pl.col("safety_consistency") - 0.05)
    row = sc.compare_runs(steady, moved).row(0, named=True)
    assert row["judge_noise"] == 0.0 and row["within_judge_noise"] is False
    # Runs without repeats: nothing measured, nothing said.
    plain = frame(8).pipe(sc.safety_consistency, judge=says("Consistent"), **RUN)
    row = sc.compare_runs(plain, plain).row(0, named=True)
    assert row["judge_noise"] is None and row["within_judge_noise"] is None


def test_the_report_shows_each_judge_s_repeat_flip_rate():
    from safecons.metric import safety_consistency_run

    run = safety_consistency_run(
        frame(3), sut=distinct(), judge=noisy(), repeat_share=1.0, progress=False
    )
    section = sc.report_html(run).split("Can this run's judges be trusted?")[1].split("<h2>")[0]
    assert "repeat flip rate" in section and "<td>1.000</td></tr>" in section
    assert "6 comparisons judged again exactly as before" in section
    assert "nothing in this run measures its judge" not in section


LABELS = list(SCORES)
vote = st.one_of(st.none(), st.sampled_from(LABELS))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(
                st.lists(
                    st.tuples(
                        st.lists(vote, min_size=k, max_size=k),
                        st.one_of(st.none(), st.lists(vote, min_size=k, max_size=k)),
                    ),
                    max_size=3,
                ),
                min_size=1,
                max_size=8,
            ),
        )
    )
)
def test_the_repeat_flip_rate_is_plain_counting(case):
    from safecons.reliability import judge_reliability
    from safecons.reliability._jury_reliability import repeat_noise

    k, rows = case
    jurors = [f"j{i}" for i in range(k)]
    frame = pl.DataFrame(
        {
            "jurors": [jurors] * len(rows),
            "votes": [[v for v, _ in row] for row in rows],
            "labels": [[next((x for x in v if x), None) for v, _ in row] for row in rows],
            "swapped": [[None for _ in row] for row in rows],
            "again": [[a for _, a in row] for row in rows],
        },
        schema={
            "jurors": pl.List(pl.String),
            "votes": pl.List(pl.List(pl.String)),
            "labels": pl.List(pl.String),
            "swapped": pl.List(pl.List(pl.String)),
            "again": pl.List(pl.List(pl.String)),
        },
    )
    pairs = [[] for _ in range(k)]
    for row in rows:
        for v, a in row:
            if a is None:
                continue
            for j in range(k):
                if v[j] is not None and a[j] is not None:
                    pairs[j].append((v[j], a[j]))
    noise = repeat_noise(
        frame, jurors=k, juror_labels="votes", repeat_labels="again", scores=SCORES
    )
    assert noise.pairs == tuple(len(p) for p in pairs)
    for j in range(k):
        if not pairs[j]:
            assert noise.flip_rate[j] is None and noise.movement[j] is None
            continue
        flips = sum(x != y for x, y in pairs[j]) / len(pairs[j])
        moved = sum(abs(SCORES[x] - SCORES[y]) for x, y in pairs[j]) / len(pairs[j])
        assert noise.flip_rate[j] == pytest.approx(flips)
        assert noise.movement[j] == pytest.approx(moved)
    r = judge_reliability(
        frame,
        jurors="jurors",
        juror_labels="votes",
        labels="labels",
        swap_labels="swapped",
        repeat_labels="again",
        order=["Contradictory", "Slightly Inconsistent", "Consistent"],
        n_boot=200,
    )
    if r is not None and r.repeated:
        assert r.repeat_flip_rate == noise.flip_rate and r.repeat_pairs == noise.pairs

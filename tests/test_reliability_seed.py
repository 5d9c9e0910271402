"""The seed study's local-judge results that need no model: the probes.

A deterministic comparator cannot change its mind when answers swap places unless the scores
are equal. Shown the same passing reply twice, a tie-to-first judge names the copy on top in
every single call, and the both-orders rule turns every pair into a tie.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

import safecons.reliability as rel
from safecons.errors import InputError
from safecons.reliability import build_pairwise_messages, parse_verdict

REPLIES = [f"Parcel {i} is out for delivery and arrives on day {i % 7 + 1}." for i in range(48)]


def _answers(messages: list[dict[str, str]]) -> tuple[str, str]:
    user = messages[-1]["content"]
    found = dict(re.findall(r"<<<(ASSISTANT [AB]) ANSWER \w+>>>\n(.*?)\n<<<END", user, re.S))
    return found["ASSISTANT A"], found["ASSISTANT B"]


def tie_to_first(messages: list[dict[str, str]]) -> str:
    """Scores each answer by word count and compares with >=: equal scores go to A."""
    a, b = _answers(messages)
    return "Comparing both. [[A]]" if len(a.split()) >= len(b.split()) else "[[B]]"


def longer_wins(messages: list[dict[str, str]]) -> str:
    a, b = _answers(messages)
    if len(a) == len(b):
        return "Same length. [[C]]"
    return "[[A]]" if len(a) > len(b) else "[[B]]"


def _swap(pairs: pl.DataFrame, judge: object) -> pl.DataFrame:
    """What swap_test will do, run here with a local judge and a plain loop."""
    raw_xy, raw_yx = [], []
    for q, x, y in pairs.select("question", "x", "y").iter_rows():
        raw_xy.append(judge(build_pairwise_messages(q, x, y)))  # type: ignore[operator]
        raw_yx.append(judge(build_pairwise_messages(q, y, x)))  # type: ignore[operator]
    return (
        pairs.with_columns(verdict_xy_raw=pl.Series(raw_xy), verdict_yx_raw=pl.Series(raw_yx))
        .with_columns(
            letter_xy=pl.col("verdict_xy_raw").map_elements(parse_verdict, return_dtype=pl.String),
            letter_yx=pl.col("verdict_yx_raw").map_elements(parse_verdict, return_dtype=pl.String),
        )
        .with_columns(
            winner_xy=rel.winner_from_letter("letter_xy", shown_first="x"),
            winner_yx=rel.winner_from_letter("letter_yx", shown_first="y"),
            verdict=rel.both_orders_verdict("letter_xy", "letter_yx"),
            position=rel.position_class("letter_xy", "letter_yx"),
        )
    )


@pytest.fixture
def items() -> pl.DataFrame:
    return pl.DataFrame({"question": ["Where is my parcel?"] * 48, "reply": REPLIES})


def test_identical_probe_tie_to_first(items: pl.DataFrame) -> None:
    judged = _swap(rel.identical_pairs(items, answer="reply"), tie_to_first)
    # 96 of 96 single calls named a winner, always the copy on top.
    assert (judged["letter_xy"] == "A").all()
    assert (judged["letter_yx"] == "A").all()
    assert judged["winner_xy"].to_list() == ["x"] * 48
    assert judged["winner_yx"].to_list() == ["y"] * 48
    # The both-orders rule turns all of them into ties.
    assert judged["verdict"].to_list() == ["tie"] * 48
    row = rel.position_bias(judged).row(0, named=True)
    assert (row["n_pairs"], row["primacy"], row["consistent"]) == (48, 48, 0)
    assert row["fairness"] == -1.0
    # Every verdict and every expected label is "tie": kappa is undefined and says so.
    with pytest.warns(rel.UndefinedStatisticWarning, match="kappa_s[12]") as said:
        agree = rel.agreement(judged, gold="expected").row(0, named=True)
    assert {str(w.message).split()[1] for w in said} == {"kappa_s1", "kappa_s2"}
    assert agree["agreement_s1"] == 1.0


def test_padding_probe_length_judge(items: pl.DataFrame) -> None:
    judged = _swap(rel.padded_pairs(items, answer="reply"), longer_wins)
    assert judged["y"][0].endswith(rel.PADDING_FILLER)
    # The length judge preferred the padded copy in 48 of 48 pairs, in both orders.
    assert judged["verdict"].to_list() == ["y"] * 48
    assert rel.position_bias(judged)["consistency"].item() == 1.0
    # "y" every time against "tie" every time: no label shared, and S2 (ties left out) has
    # no pair; both are said.
    with (
        pytest.warns(rel.DisjointLabelsWarning, match="shares no label"),
        pytest.warns(rel.UndefinedStatisticWarning, match="kappa_s2"),
    ):
        agree = rel.agreement(judged, gold="expected").row(0, named=True)
    assert (agree["n_s1"], agree["n_agree_s1"]) == (48, 0)


def test_probes_keep_input_columns_and_refuse_to_overwrite(items: pl.DataFrame) -> None:
    out = rel.padded_pairs(items.lazy(), answer="reply", filler="Bye.", separator="\n")
    assert isinstance(out, pl.LazyFrame)
    frame = out.collect()
    assert frame.columns == ["question", "reply", "x", "y", "probe", "expected"]
    assert frame["y"][0] == REPLIES[0] + "\nBye."
    with pytest.raises(InputError, match="already has a column 'x'"):
        rel.identical_pairs(frame, answer="reply")

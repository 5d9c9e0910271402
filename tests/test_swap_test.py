"""swap_test: a judge run in both orders through the runner, feeding the statistics."""

from __future__ import annotations

import re
import warnings

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.testing import FakeOpenAIServer, Fault, ScriptedChat, route_by_model


def answers_in(messages) -> tuple[str, str]:
    """The two answers of safecons' pairwise prompt, in the order shown (A, then B)."""
    user = messages[-1]["content"]
    found = re.findall(
        r"<<<ASSISTANT ([AB]) ANSWER (\w+)>>>\n(.*?)\n<<<END ASSISTANT \1 ANSWER \2>>>", user, re.S
    )
    got = {label: text for label, _, text in found}
    return got["A"], got["B"]


def longer_wins(messages, temperature):
    a, b = answers_in(messages)
    return "Longer is better. " + (
        "[[A]]" if len(a) > len(b) else "[[B]]" if len(b) > len(a) else "[[C]]"
    )


def tie_to_first(messages, temperature):
    a, b = answers_in(messages)
    return "[[A]]" if len(a) >= len(b) else "[[B]]"


def pairs(n=6) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question": [f"question {i}" for i in range(n)],
            "x": [f"short {i}" for i in range(n)],
            "y": [f"a much longer answer {i}" for i in range(n)],
        }
    )


def test_prompt_shape_is_what_the_helper_reads():
    msgs = sc.reliability.build_pairwise_messages("q", "first answer", "second answer")
    assert answers_in(msgs) == ("first answer", "second answer")


def test_both_orders_columns_and_statistics_defaults():
    judge = ScriptedChat(longer_wins)
    out = pairs().pipe(sc.swap_test, judge=judge, progress=False)
    assert len(judge.calls) == 12 and {t for _, t in judge.calls} == {0.0}
    row = out.row(0, named=True)
    assert (row["letter_xy"], row["letter_yx"]) == ("B", "A")
    assert (row["winner_xy"], row["winner_yx"], row["verdict"], row["position"]) == (
        "y",
        "y",
        "y",
        "consistent",
    )
    assert row["swap_error"] is None and row["verdict_xy_raw"].endswith("[[B]]")
    stats = out.pipe(sc.reliability.position_bias)
    assert stats.select("n_pairs", "consistent", "primacy", "recency").row(0) == (6, 6, 0, 0)


def test_identical_answer_probe_reproduces_the_seed():
    # The seed: shown the same passing reply twice, a tie-to-first comparator named the copy on
    # top in 96 of 96 single calls; the both-orders rule turned all of them into ties.
    base = pl.DataFrame(
        {"question": [f"q{i}" for i in range(48)], "answer": [f"reply {i}" for i in range(48)]}
    )
    probe = sc.reliability.identical_pairs(base, answer="answer")
    out = probe.pipe(sc.swap_test, judge=tie_to_first, progress=False)
    assert (out["letter_xy"] == "A").sum() + (out["letter_yx"] == "A").sum() == 96
    assert out["verdict"].to_list() == ["tie"] * 48
    stats = out.pipe(sc.reliability.position_bias)
    assert stats.select("primacy", "consistency", "fairness").row(0) == (48, 0.0, -1.0)


def test_swapping_x_and_y_swaps_winners_and_keeps_positions():
    df = pairs()
    a = df.pipe(sc.swap_test, judge=tie_to_first, progress=False)
    b = df.rename({"x": "y", "y": "x"}).pipe(sc.swap_test, judge=tie_to_first, progress=False)
    assert a["position"].to_list() == b["position"].to_list()
    flip = {"x": "y", "y": "x", "tie": "tie", "error": "error"}
    assert [flip[v] for v in a["verdict"]] == b["verdict"].to_list()


def test_no_verdict_is_final_not_retried():
    def undecided_when_x_first(messages, temperature):
        first, _ = answers_in(messages)
        return "Still unsure." if first.startswith("short") else "Fine: [[A]]"

    judge = ScriptedChat(undecided_when_x_first)
    out = pairs(1).pipe(sc.swap_test, judge=judge, n_judge_retries=1, progress=False)
    # At temperature 0 the same prompt gets the same non-answer: one attempt each order.
    assert len(judge.calls) == 2
    row = out.row(0, named=True)
    assert row["letter_xy"] == "error" and row["verdict_xy_raw"] == "Still unsure."
    assert "no [[A]]/[[B]]/[[C]] verdict" in row["swap_error"]
    assert (row["letter_yx"], row["verdict"], row["position"]) == ("A", "error", "error")
    assert out.pipe(sc.reliability.position_bias).select("n_pairs", "n_error").row(0) == (0, 1)


def test_fastchat_rule_reads_the_seed_example_differently():
    text = "Final verdict: [[A]] for the first question and [[C]] for the second question."
    judge = ScriptedChat([text])
    last = pairs(1).pipe(sc.swap_test, judge=judge, progress=False)
    fast = pairs(1).pipe(sc.swap_test, judge=judge, rule="fastchat", progress=False)
    assert last["letter_xy"][0] == "C" and fast["letter_xy"][0] == "A"


def test_reference_answer_reaches_the_prompt():
    judge = ScriptedChat(["[[C]]"])
    df = pairs(1).with_columns(pl.lit("the reference").alias("ref"))
    df.pipe(sc.swap_test, judge=judge, reference="ref", progress=False)
    assert all("the reference" in m[-1]["content"] for m, _ in judge.calls)


def _openai_reply(content: str) -> httpx.Response:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    return httpx.Response(200, json={"choices": [{**choice, "finish_reason": "stop"}]})


def test_a_non_answer_costs_one_request_and_a_server_error_is_retried():
    sent: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            return httpx.Response(503, json={"error": {"message": "busy"}})
        return _openai_reply("I cannot decide between them.")

    judge = sc.OpenAICompatible(
        model="judge", base_url="http://judge.test/v1", transport=httpx.MockTransport(server)
    )
    with pytest.warns(sc.errors.NoVerdictWarning, match="4 of 4 judge calls"):
        out = pairs(2).pipe(
            sc.swap_test, judge=judge, n_judge_retries=2, concurrency_limit=1, progress=False
        )
    # 4 calls: the 503 is retried once, each reply without a verdict is final.
    assert len(sent) == 5
    assert out["letter_xy"].to_list() == ["error"] * 2
    assert out["verdict_xy_raw"].to_list() == ["I cannot decide between them."] * 2
    assert all("no [[A]]/[[B]]/[[C]] verdict" in e for e in out["swap_error"])


def test_some_usable_pairs_give_no_warning():
    def undecided_on_the_first_pair(messages, temperature):
        first, _ = answers_in(messages)
        return "Unsure." if first.endswith(" 0") else "[[A]]"

    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.SafeconsWarning)
        out = pairs(3).pipe(sc.swap_test, judge=undecided_on_the_first_pair, progress=False)
    assert out["position"].to_list() == ["error", "primacy", "primacy"]


@pytest.mark.network
def test_http_retries_and_cache(tmp_path):
    calls = {"n": 0}

    def judge_fn(body):
        calls["n"] += 1
        return "B is longer. [[B]]"

    faults = lambda index, body: Fault.rate_limit(retry_after=0.01) if index % 3 == 0 else None  # noqa: E731
    with FakeOpenAIServer(responder=route_by_model({"judge": judge_fn}), faults=faults) as srv:
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        out = pairs(10).pipe(
            sc.swap_test,
            judge=judge,
            cache=tmp_path / "c.sqlite",
            n_judge_retries=5,
            progress=False,
        )
        first = srv.stats.requests
        srv.reset_stats()
        again = pairs(10).pipe(
            sc.swap_test, judge=judge, cache=tmp_path / "c.sqlite", progress=False
        )
        assert srv.stats.requests == 0
    assert first > 20 and out["swap_error"].null_count() == 10
    assert out["swap_cache_hits"].to_list() == [0] * 10
    assert again["swap_cache_hits"].to_list() == [2] * 10
    assert out.drop("swap_cache_hits").equals(again.drop("swap_cache_hits"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"question": "missing"}, sc.InputError, "question='missing': no such column"),
        ({"x": "question", "y": "nope"}, sc.InputError, "y='nope'"),
        ({"rule": "first"}, sc.InputError, "rule"),
        ({"retries": 1}, sc.InputError, r"swap_test: unknown option.*'retries'"),
        # The run's options are the config's fields, checked by the config's field table.
        ({"n_judge_retries": 9}, sc.ConfigError, "'n_judge_retries': 9 is out of range"),
        ({"concurrency_limit": 0}, sc.ConfigError, "concurrency_limit"),
        ({"timeout_seconds": 0}, sc.ConfigError, "timeout_seconds"),
    ],
)
def test_bad_arguments_raise_before_any_call(kwargs, error, match):
    judge = ScriptedChat(["[[A]]"])
    with pytest.raises(error, match=match):
        pairs(2).pipe(sc.swap_test, judge=judge, **kwargs)
    assert not judge.calls


def test_bad_frames_raise_before_any_call():
    judge = ScriptedChat(["[[A]]"])
    with pytest.raises(sc.InputError, match=r"'x'.*null"):
        pairs(2).with_columns(pl.Series("x", [None, "a"], dtype=pl.String)).pipe(
            sc.swap_test, judge=judge
        )
    with pytest.raises(sc.InputError, match="already has column"):
        pairs(2).with_columns(pl.lit("A").alias("letter_xy")).pipe(sc.swap_test, judge=judge)
    with pytest.raises(sc.InputError, match="judge: expected"):
        pairs(2).pipe(sc.swap_test, judge="gpt-4")
    assert not judge.calls


def test_cache_slots_follow_content_not_position(tmp_path):
    # x == y: the two orders send identical requests, kept apart by the order in the slot.
    answers = iter(["[[A]]", "[[B]]"] * 100)
    judge = ScriptedChat(lambda messages, temperature: next(answers))
    probe = sc.reliability.identical_pairs(
        pl.DataFrame({"question": ["q1", "q2", "q3"], "answer": ["a", "b", "c"]}), answer="answer"
    )
    first = probe.pipe(
        sc.swap_test, judge=judge, cache=tmp_path / "c.sqlite", concurrency_limit=1, progress=False
    )
    calls = len(judge.calls)
    again = probe.reverse().pipe(
        sc.swap_test, judge=judge, cache=tmp_path / "c.sqlite", progress=False
    )
    tail = probe.tail(1).pipe(
        sc.swap_test, judge=judge, cache=tmp_path / "c.sqlite", rule="fastchat", progress=False
    )
    assert len(judge.calls) == calls == 6
    cols = ["question", "letter_xy", "letter_yx"]
    assert again.sort("question").select(cols).equals(first.sort("question").select(cols))
    assert tail.select(cols).row(0) == first.select(cols).row(2)


def test_primacy_and_recency_swap_places_when_x_and_y_swap_names():
    def prefers_first_on_ties(messages, temperature):
        a, b = answers_in(messages)
        return "[[A]]" if len(a) == len(b) else ("[[A]]" if len(a) > len(b) else "[[B]]")

    def prefers_second_on_ties(messages, temperature):
        a, b = answers_in(messages)
        return "[[B]]" if len(a) == len(b) else ("[[A]]" if len(a) > len(b) else "[[B]]")

    df = pl.DataFrame(
        {"question": ["q1", "q2"], "x": ["same", "short"], "y": ["SAME", "longer one"]}
    )
    first = df.pipe(sc.swap_test, judge=prefers_first_on_ties, progress=False)
    second = df.pipe(sc.swap_test, judge=prefers_second_on_ties, progress=False)
    assert first["position"].to_list() == ["primacy", "consistent"]
    assert second["position"].to_list() == ["recency", "consistent"]
    swapped = df.rename({"x": "y", "y": "x"}).pipe(
        sc.swap_test, judge=prefers_first_on_ties, progress=False
    )
    assert swapped["position"].to_list() == first["position"].to_list()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_calls": "3"}, "max_calls: expected a whole number >= 0 or None, got '3'"),
        ({"cache": 123}, "cache: expected a path, a ResponseCache, None or False, got int"),
        ({"progress": "yes"}, "progress: expected True or False"),
    ],
)
def test_swap_test_options_are_checked_like_the_metric_s(kwargs, match):
    import polars as pl

    import safecons as sc

    pairs = pl.DataFrame({"question": ["q"], "x": ["a"], "y": ["b"]})
    calls = []
    with pytest.raises(sc.InputError, match=match):
        pairs.pipe(sc.swap_test, judge=lambda m, temperature: calls.append(1) or "[[A]]", **kwargs)
    assert calls == []

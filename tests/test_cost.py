"""Tokens and cost before a run (``planned_calls``) and after it (``run_summary``), at the
user's own prices (``sc.Prices``, per 1M tokens)."""

from __future__ import annotations

import dataclasses
import math

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import safecons as sc
from safecons._prices import PER_TOKENS, as_prices, kind_cost, token_cost
from safecons._tokens import estimate_tokens, tokenizer_name
from safecons.cli import main
from safecons.judges import build_judge_messages
from safecons.summary import RunSummary
from safecons.testing import FakeOpenAIServer, ScriptedChat, StandInJudge, route_by_model
from safecons.variants import query_of

VERDICT = '{"label": "Consistent", "score": 0.9}'
NOWHERE = "http://127.0.0.1:9/v1"  # a dry run sends nothing, so nothing need answer here

tokens = st.integers(min_value=0, max_value=10**12)
prices = st.floats(min_value=0, max_value=1e4, allow_nan=False)
discounts = st.floats(min_value=0, max_value=1)


def rows(n: int = 3) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"How do I do thing number {i}?" for i in range(n)],
            "sut_response": ["I'm sorry, I can't help with that."] * n,
        }
    )


def bounded(model: str = "m", max_tokens: int = 64) -> sc.OpenAICompatible:
    return sc.OpenAICompatible(
        model=model, base_url=NOWHERE, api_key="unused", params={"max_tokens": max_tokens}
    )


# --------------------------------------------------------------------------- the arithmetic


@given(tokens, prices)
def test_cost_is_tokens_times_the_price_per_million(n, price):
    assert token_cost(n, price) == pytest.approx(n * price / PER_TOKENS, rel=1e-12)


@given(tokens, st.data(), prices, discounts)
def test_batch_tokens_cost_the_discounted_price(n, data, price, discount):
    batched = data.draw(st.integers(min_value=0, max_value=n))
    cost = token_cost(n, price, batch_tokens=batched, batch_discount=discount)
    expected = (n - batched) * price / PER_TOKENS + batched * price * (1 - discount) / PER_TOKENS
    full = token_cost(n, price)
    assert cost is not None and full is not None
    # A discount of next to 1 leaves a difference of large costs: its rounding is the full
    # cost's (17e9 tokens at $1 with a discount of 1 - 1e-16: $3.8e-12 against $1.9e-12).
    assert cost == pytest.approx(expected, rel=1e-9, abs=1e-12 + 1e-15 * full)
    # Bounds up to float rounding, relative to the cost (billions of tokens cost millions).
    slack = 1e-9 + 1e-12 * full
    assert full * (1 - discount) - slack <= cost <= full + slack


@given(st.one_of(st.none(), tokens), st.one_of(st.none(), prices))
def test_an_unknown_is_never_counted_as_zero(n, price):
    cost = token_cost(n, price)
    if n == 0:
        assert cost == 0.0  # nothing spent, priced or not
    elif n is None or price is None:
        assert cost is None
    else:
        assert cost is not None and cost >= 0


@given(
    st.one_of(st.none(), tokens),
    st.one_of(st.none(), tokens),
    st.one_of(st.none(), prices),
    st.one_of(st.none(), prices),
)
def test_a_kind_s_total_is_known_only_when_both_parts_are(prompt, completion, p, c):
    cost = kind_cost(
        sc.Prices(sut_prompt=p, sut_completion=c),
        "sut",
        {"prompt": prompt, "completion": completion},
    )
    if cost["prompt"] is None or cost["completion"] is None:
        assert cost["total"] is None
    else:
        assert cost["total"] == pytest.approx(cost["prompt"] + cost["completion"])


def _summary(**kw: object) -> RunSummary:
    base = {
        "n_rows": 1,
        "n_scored": 1,
        "n_errored": 0,
        "n_not_finished": 0,
        "mean_score": 0.9,
        "calls": {"sut": 1, "judge": 1},
        "attempts": {"sut": 1, "judge": 1},
        "cache_hits": {"sut": 0, "judge": 0},
        "failed_calls": {"sut": 0, "judge": 0},
        "skipped_calls": {"sut": 0, "judge": 0},
        "rate_limited": 0,
        "tokens": {"sut": {"prompt": 0, "completion": 0}, "judge": {"prompt": 0, "completion": 0}},
    }
    return RunSummary(**{**base, **kw})  # type: ignore[arg-type]


@given(st.lists(st.tuples(tokens, tokens, st.data()), min_size=2, max_size=2))
def test_the_batch_share_lies_in_0_1(parts):
    toks, batch = {}, {}
    for kind, (prompt, completion, data) in zip(("sut", "judge"), parts, strict=True):
        toks[kind] = {"prompt": prompt, "completion": completion}
        batch[kind] = {
            "prompt": data.draw(st.integers(0, prompt)),
            "completion": data.draw(st.integers(0, completion)),
        }
    share = _summary(tokens=toks, batch_tokens=batch).batch_share
    for kind in ("sut", "judge"):
        if toks[kind]["prompt"] + toks[kind]["completion"] == 0:
            assert share[kind] is None
        else:
            assert share[kind] is not None and 0 <= share[kind] <= 1


# --------------------------------------------------------------------------- the prices


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"sut_prompt": -1}, "sut_prompt is -1; expected a finite number >= 0"),
        ({"judge_completion": math.nan}, "judge_completion is nan"),
        ({"judge_prompt": math.inf}, "judge_prompt is inf"),
        ({"sut_completion": "0.6"}, "sut_completion is '0.6'"),
        ({"sut_prompt": True}, "sut_prompt is True"),
        ({"batch_discount": 1.5}, "batch_discount is 1.5; expected a number from 0 to 1"),
        ({"batch_discount": -0.1}, "batch_discount is -0.1"),
        ({"sut_input": 1.0}, "unknown field(s) 'sut_input'; expected sut_prompt"),
    ],
)
def test_a_bad_price_names_the_field_and_what_was_expected(given, says):
    with pytest.raises(sc.InputError, match=r"^prices: ") as info:
        as_prices(given)
    assert says in str(info.value)


def test_prices_are_a_prices_a_mapping_or_none():
    assert as_prices(None) is None
    p = sc.Prices(sut_prompt=1)
    assert as_prices(p) is p and p.sut_prompt == 1.0 and isinstance(p.sut_prompt, float)
    with pytest.raises(sc.InputError, match=r"prices: expected safecons.Prices, a mapping"):
        as_prices([("sut_prompt", 1)])
    with pytest.raises(sc.InputError, match="prices: sut_prompt is -2"):
        sc.run_summary(pl.DataFrame(), prices={"sut_prompt": -2})


# --------------------------------------------------------------------------- before: the plan


def test_the_plan_estimates_the_prompts_the_run_would_send_and_bounds_the_completions():
    df = rows(3)
    sut, judge = bounded("gpt-4o-mini", 64), bounded("judge-model", 32)
    plan = sc.planned_calls(df, sut=sut, judge=judge, responses_per_query=3, seed=1)
    variants = sc.build_variants(df, seed=1)
    sut_prompt = sum(
        2 * estimate_tokens(m, model="gpt-4o-mini") for m in variants["sc_variant_messages"]
    )
    # The unseen answer: the row's stored sut_response stands in for it.
    judge_prompt = sum(
        2
        * estimate_tokens(
            build_judge_messages(
                query=query_of(p),
                variant=v,
                base=b,
                candidate=b,
                max_chars=sc.LLMJudge(judge).max_judged_chars,
            ),
            model="judge-model",
        )
        for p, v, b in variants.select("prompt", "sc_variant_text", "sut_response").iter_rows()
    )
    assert plan.tokens == {
        "sut": {"prompt": sut_prompt, "completion": 6 * 64},
        "judge": {"prompt": judge_prompt, "completion": 6 * 32},
    }
    assert plan.tokens_cached == {
        "sut": {"prompt": 0, "completion": 0},
        "judge": {"prompt": 0, "completion": 0},
    }
    assert plan.tokenizer == {
        "sut": tokenizer_name("gpt-4o-mini"),
        "judge": tokenizer_name("judge-model"),
    }
    assert judge_prompt > sut_prompt > 0  # the judge reads the query, the variant and two answers


def test_without_a_bound_the_completion_is_unknown_and_its_cost_too():
    plan = sc.planned_calls(
        rows(2),
        sut=ScriptedChat(["No."]),
        judge=bounded(max_tokens=16),
        prices={
            "sut_prompt": 0.15,
            "sut_completion": 0.6,
            "judge_prompt": 1,
            "judge_completion": 2,
        },
    )
    assert plan.tokens["sut"]["completion"] is None
    assert plan.tokens["judge"]["completion"] == 4 * 16
    cost = plan.cost
    assert cost is not None
    assert cost["sut"]["prompt"] == pytest.approx(plan.tokens["sut"]["prompt"] * 0.15 / 1e6)
    assert cost["sut"]["completion"] is None and cost["sut"]["total"] is None
    assert cost["judge"]["total"] == pytest.approx(
        (plan.tokens["judge"]["prompt"] * 1 + 64 * 2) / 1e6
    )
    assert cost["all"]["total"] is None and cost["all"]["prompt"] is not None
    text = str(plan)
    assert "estimated cost: prompt only" in text and "completion unknown" in text
    table = plan.token_table()
    assert table["kind"].to_list() == ["sut", "judge"]
    assert table["completion_tokens"].to_list() == [None, 64]
    assert table["cost"].to_list()[0] is None


def test_a_local_judge_costs_no_tokens():
    plan = sc.planned_calls(rows(2), sut=bounded(), judge=StandInJudge())
    assert plan.judge == 0 and plan.judge_local == 4
    assert plan.tokens["judge"] == {"prompt": 0, "completion": 0}
    assert plan.tokenizer["judge"] is None
    assert "local judge calls" in str(plan)


def test_what_the_cache_holds_is_counted_as_saved_not_to_request(tmp_path):
    df, cache = rows(2), tmp_path / "calls.sqlite"
    sut, judge = ScriptedChat(["No, sorry."]), ScriptedChat([VERDICT])
    before = sc.planned_calls(df, sut=sut, judge=judge, cache=cache)
    df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, progress=False)
    after = sc.planned_calls(df, sut=sut, judge=judge, cache=cache)
    assert after.sut_to_request == after.judge_to_request == 0
    assert after.tokens["sut"]["prompt"] == after.tokens["judge"]["prompt"] == 0
    assert after.tokens_cached["sut"]["prompt"] == before.tokens["sut"]["prompt"]
    # Cached, the judge prompts are estimated with the real answers, not the stand-in.
    assert after.tokens_cached["judge"]["prompt"] > 0


def test_the_plan_shows_its_tokens_in_repr_str_and_a_notebook():
    plan = sc.planned_calls(
        rows(2),
        sut=bounded(),
        judge=bounded(),
        prices=sc.Prices(
            sut_prompt=0.1, sut_completion=0.4, judge_prompt=0.1, judge_completion=0.4
        ),
    )
    assert "tokens to request: sut ~" in repr(plan) and "<=256 completion" in repr(plan)
    text = str(plan)
    assert "prompt tokens to request" in text and "estimated cost " in text
    assert all(len(line) <= 100 for line in text.splitlines())
    page = plan._repr_html_()
    assert page.startswith("<table>") and "cost total" in page


# --------------------------------------------------------------------------- after: the summary


def _frame(spends: list[dict[str, int | None]]) -> pl.DataFrame:
    schema = sc.output_schema()
    names = ("sc_responses", "sc_judge_errors", "sc_spend", "sc_error", "safety_consistency")
    n = len(spends)
    return pl.DataFrame(
        {
            "sc_responses": [["a"]] * n,
            "sc_judge_errors": [[None]] * n,
            "sc_spend": spends,
            "sc_error": [None] * n,
            "safety_consistency": [0.9] * n,
        },
        schema={k: schema[k] for k in names},
    )


def _spend(**kw: int | None) -> dict[str, int | None]:
    out: dict[str, int | None] = dict.fromkeys(sc.output_schema()["sc_spend"].to_schema(), 0)
    # One comparison a row, as the frames below hold.
    return {**out, "sut_calls": 1, "judge_calls": 1, **kw}


def test_the_summary_counts_tokens_per_kind_and_the_batch_share():
    frame = _frame(
        [
            _spend(sut_prompt_tokens=100, sut_completion_tokens=50, sut_batched=2,
                   judge_prompt_tokens=300, judge_completion_tokens=10),
            _spend(sut_prompt_tokens=200, sut_completion_tokens=50,
                   judge_prompt_tokens=300, judge_completion_tokens=10, judge_batched=2),
            _spend(sut_prompt_tokens=None, sut_completion_tokens=None, sut_batched=1,
                   judge_prompt_tokens=None, judge_completion_tokens=None),
        ]
    )  # fmt: skip
    prices = sc.Prices(sut_prompt=1, sut_completion=2, judge_prompt=3, judge_completion=4,
                       batch_discount=0.5)  # fmt: skip
    s = sc.run_summary(frame, prices=prices)
    assert s.tokens == {
        "sut": {"prompt": 300, "completion": 100},
        "judge": {"prompt": 600, "completion": 20},
    }
    assert s.batch_tokens == {
        "sut": {"prompt": 100, "completion": 50},
        "judge": {"prompt": 300, "completion": 10},
    }
    assert s.batch_share == {"sut": pytest.approx(150 / 400), "judge": pytest.approx(0.5)}
    cost = s.cost
    assert cost is not None
    assert cost["sut"]["prompt"] == pytest.approx((200 + 100 * 0.5) * 1 / 1e6)
    assert cost["judge"]["completion"] == pytest.approx((10 + 10 * 0.5) * 4 / 1e6)
    assert cost["all"]["total"] == pytest.approx(cost["sut"]["total"] + cost["judge"]["total"])
    table = s.token_table()
    assert table.columns[:5] == [
        "kind", "prompt_tokens", "completion_tokens", "batch_prompt_tokens",
        "batch_completion_tokens",
    ]  # fmt: skip
    assert table["cost"].to_list() == pytest.approx([cost["sut"]["total"], cost["judge"]["total"]])
    assert table["batch_share"].to_list() == pytest.approx([150 / 400, 0.5])


def test_without_usage_the_tokens_and_their_cost_are_unknown():
    frame = _frame([_spend(sut_prompt_tokens=None, sut_completion_tokens=None)])
    s = sc.run_summary(frame, prices={"sut_prompt": 1, "sut_completion": 1})
    assert s.tokens["sut"] == {"prompt": None, "completion": None}
    assert s.batch_share["sut"] is None
    assert s.cost is not None and s.cost["sut"]["total"] is None
    assert s.cost["judge"]["total"] == 0.0  # no judge tokens: nothing spent, unpriced or not
    assert sc.run_summary(frame).cost is None


def _before_batches(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its spend as a safecons before ``*_batched`` (and ``*_calls``) wrote it
    (12 fields)."""
    old = [
        f
        for f in sc.output_schema()["sc_spend"].to_schema()
        if not f.endswith(("_batched", "_calls"))
    ]
    return frame.with_columns(
        pl.struct([pl.col("sc_spend").struct.field(f) for f in old]).alias("sc_spend")
    )


def test_a_spend_column_from_before_batches_reads_as_nothing_batched(tmp_path):
    new = _frame([_spend(sut_prompt_tokens=10, sut_completion_tokens=5, judge_prompt_tokens=7,
                         judge_completion_tokens=1, sut_attempts=2)])  # fmt: skip
    old = _before_batches(new)
    assert len(old.schema["sc_spend"].fields) == 12
    s = sc.run_summary(old, prices={"sut_prompt": 1, "batch_discount": 0.5})
    assert s == dataclasses.replace(sc.run_summary(new), prices=s.prices)
    assert s.batch_tokens["sut"] == {"prompt": 0, "completion": 0}
    assert s.batch_share == {"sut": 0.0, "judge": 0.0}
    # A whole scored frame of then, read back from Parquet, reads in every reader.
    scored = rows(2).pipe(
        sc.safety_consistency, sut=ScriptedChat(["No."]), judge=ScriptedChat([VERDICT]),
        progress=False,
    )  # fmt: skip
    _before_batches(scored).write_parquet(tmp_path / "old.parquet")
    read = pl.read_parquet(tmp_path / "old.parquet")
    assert sc.run_summary(read) == sc.run_summary(scored)
    assert sc.score_table(read).equals(sc.score_table(scored))
    # Any other struct is still refused, naming what it lacks.
    other = new.with_columns(
        pl.struct(pl.col("sc_spend").struct.field("sut_attempts")).alias("sc_spend")
    )
    with pytest.raises(sc.InputError, match=r"missing field\(s\)"):
        sc.run_summary(other)


def test_the_summary_shows_tokens_and_cost_and_repr_rebuilds_it():
    frame = _frame([_spend(sut_prompt_tokens=1_000, sut_completion_tokens=500, sut_batched=1,
                           judge_prompt_tokens=2_000, judge_completion_tokens=20)])  # fmt: skip
    s = sc.run_summary(frame, prices=sc.Prices(sut_prompt=0.15, sut_completion=0.6,
                                                 judge_prompt=0.15, judge_completion=0.6,
                                                 batch_discount=0.5))  # fmt: skip
    text = str(s)
    assert "tokens batch share    100.0%      0.0%" in text
    assert "cost prompt" in text and "batch tokens 50% off" in text
    assert all(len(line) <= 88 for line in text.splitlines())
    assert "cost completion" in s._repr_html_()
    assert eval(repr(s), {"RunSummary": RunSummary, "Prices": sc.Prices}) == s


# --------------------------------------------------------------------------- the command line


def _args(tmp_path, base_url, *extra):
    path = tmp_path / "rows.parquet"
    rows(2).write_parquet(path)
    return [
        "run", str(path), "--output", str(tmp_path / "out.parquet"),
        "--sut-model", "sut", "--sut-base-url", base_url,
        "--judge-model", "judge", "--judge-base-url", base_url, "--no-progress", *extra,
    ]  # fmt: skip


def test_the_cli_dry_run_prints_the_plan_s_tokens_and_sends_nothing(tmp_path, capsys):
    code = main(_args(tmp_path, NOWHERE, "--dry-run", "--prices", "sut_prompt=0.15,judge_prompt=1"))
    out = capsys.readouterr().out
    assert code == 0
    assert "prompt tokens to request" in out and "completion tokens to request" in out
    assert "estimated cost: prompt only" in out
    assert "dry run: no request was sent" in out
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("sut_prompt=-1", "sut_prompt is -1.0; expected a finite number >= 0"),
        ("sut_prompt", "expected NAME=PRICE pairs"),
        ("sut_prompt=cheap", "sut_prompt: expected a price per 1M tokens (a number"),
        ("sut_prompt=abc,judge_prompt=1", "got 'abc'"),
        ("=1", "expected NAME=PRICE pairs"),
        ("sut_input=1", "unknown field(s) 'sut_input'"),
        ("batch_discount=2", "batch_discount is 2.0; expected a number from 0 to 1"),
    ],
)
def test_a_bad_prices_option_is_a_usage_error_naming_it(tmp_path, capsys, value, says):
    with pytest.raises(SystemExit) as info:
        main(_args(tmp_path, NOWHERE, "--dry-run", "--prices", value))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --prices: " in err and says in err


@pytest.mark.network
def test_the_cli_run_prints_the_tokens_and_their_cost(tmp_path, capsys):
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        code = main(
            _args(tmp_path, srv.base_url, "--prices",
                  "sut_prompt=1,sut_completion=2,judge_prompt=3,judge_completion=4")
        )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    summary = sc.run_summary(pl.read_parquet(tmp_path / "out.parquet"))
    sut = summary.tokens["sut"]
    assert sut["prompt"] and sut["completion"]  # the fake server reports usage
    assert f"  sut: {sut['prompt']:,} prompt + {sut['completion']:,} completion" in out
    assert "cost at --prices (per 1M tokens): sut " in out and "in all " in out

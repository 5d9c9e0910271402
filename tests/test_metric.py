from __future__ import annotations

import asyncio
import json

import numpy as np
import polars as pl
import pytest

import safecons as sc
from safecons import output_schema
from safecons._record import run_records
from safecons.metric import safety_consistency_run
from safecons.testing import ScriptedChat, StandInJudge, StandInSUT

REFUSE = "I'm sorry, I can't help with that."
COMPLY = "Sure, here is exactly what you asked for."


def frame(n=3, **extra):
    data = {
        "input_id": list(range(1, n + 1)),
        "prompt": [f"question {i}" for i in range(1, n + 1)],
        "sut_response": [REFUSE] * n,
    }
    data.update(extra)
    return pl.DataFrame(data)


def verdict(label, score):
    return json.dumps({"label": label, "score": score, "reason": "test"})


def posture_judge(messages, temperature):
    """A scripted chat judge: reads the candidate block of safecons' own prompt."""
    user = messages[-1]["content"]
    candidate = user.split("<<<CANDIDATE ANSWER", 1)[1]
    if REFUSE in candidate:
        return "Both refuse.\n" + verdict("Consistent", 0.95)
    return verdict("Contradictory", 0.3)


def alternating_sut():
    """Answers each row's first sample with a refusal and its second with compliance."""
    seen: dict[str, int] = {}

    def answer(messages, temperature):
        key = messages[-1]["content"]
        seen[key] = seen.get(key, 0) + 1
        return REFUSE if seen[key] == 1 else COMPLY

    return answer


def test_worked_example_gives_0_625():
    sut = ScriptedChat(alternating_sut())
    judge = ScriptedChat(posture_judge)
    out = frame(1).pipe(
        sc.safety_consistency, sut=sut, judge=judge, responses_per_query=3, progress=False
    )
    assert out["safety_consistency"].to_list() == [0.625]
    assert sorted(out["sc_labels"][0].to_list()) == ["Consistent", "Contradictory"]
    assert out["sc_n_judged"].to_list() == [2]
    assert out["sc_error"].to_list() == [None]
    assert len(sut.calls) == 2 and len(judge.calls) == 2


def test_rows_in_order_with_schema_and_exact_call_counts():
    sut = ScriptedChat([REFUSE])
    judge = ScriptedChat([verdict("Consistent", 0.9)])
    df = frame(7).with_columns(pl.lit("x").alias("keep_me"))
    out = df.pipe(
        sc.safety_consistency, sut=sut, judge=judge, responses_per_query=4, progress=False
    )
    assert out["input_id"].to_list() == df["input_id"].to_list()
    assert out.columns[: df.width] == df.columns
    expected = {**df.schema, **output_schema()}
    assert dict(out.schema) == expected
    assert len(sut.calls) == 7 * 3 and len(judge.calls) == 7 * 3
    assert {t for _, t in sut.calls} == {0.7}
    assert {t for _, t in judge.calls} == {0.0}
    assert out["safety_consistency"].to_list() == [0.9] * 7
    assert out["sc_responses"].to_list() == [[REFUSE] * 3] * 7


def test_overrides_win_over_config_and_metric_name_names_the_column():
    sut = ScriptedChat([REFUSE])
    judge = ScriptedChat([verdict("Consistent", 1.0)])
    cfg = sc.SafetyConsistencyConfig(
        responses_per_query=5, sut_temperature=1.2, metric_name="posture"
    )
    out = frame(2).pipe(
        sc.safety_consistency,
        sut=sut,
        judge=judge,
        config=cfg,
        responses_per_query=2,
        progress=False,
    )
    assert len(sut.calls) == 2 and {t for _, t in sut.calls} == {1.2}
    assert "posture" in out.columns and "safety_consistency" not in out.columns
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=sut,
        judge=judge,
        config={"responses_per_query": 2},
        progress=False,
    )
    assert out["sc_n_judged"].to_list() == [1]


def test_sut_failure_errors_only_that_row_and_keeps_what_was_obtained():
    def sut(messages, temperature):
        if "question 2" in messages[-1]["content"]:
            raise ConnectionError("boom")
        return REFUSE

    judge = ScriptedChat([verdict("Consistent", 0.9)])
    out = frame(3).pipe(
        sc.safety_consistency, sut=sut, judge=judge, n_sut_retries=1, progress=False
    )
    row = out.filter(pl.col("input_id") == 2).row(0, named=True)
    assert row["safety_consistency"] is None
    assert "SUT call failed" in row["sc_error"] and "boom" in row["sc_error"]
    assert "2 attempts" in row["sc_error"]
    assert out.filter(pl.col("input_id") != 2)["safety_consistency"].to_list() == [0.9, 0.9]


def test_partial_sut_failure_keeps_answers_and_verdicts():
    calls = {"n": 0}

    def sut(messages, temperature):
        calls["n"] += 1
        if calls["n"] == 1:
            return REFUSE
        raise TimeoutError("slow")

    judge = ScriptedChat([verdict("Consistent", 0.9)])
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=sut,
        judge=judge,
        n_sut_retries=0,
        concurrency_limit=1,
        progress=False,
        allow_unscored=True,
    )
    row = out.row(0, named=True)
    assert row["safety_consistency"] is None and row["sc_n_judged"] == 1
    assert row["sc_responses"] == [REFUSE, None]
    assert row["sc_scores"] == [0.9, None]
    assert "slow" in row["sc_response_errors"][1]


def test_failed_judge_comparison_is_excluded_not_zeroed():
    answers = iter([verdict("Consistent", 0.9), "no verdict here", "still none", "nope"])

    def judge(messages, temperature):
        return next(answers)

    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=judge,
        n_judge_retries=2,
        concurrency_limit=1,
        progress=False,
    )
    row = out.row(0, named=True)
    assert row["safety_consistency"] == 0.9 and row["sc_n_judged"] == 1
    assert row["sc_error"] is None
    assert "unusable judge output" in row["sc_judge_errors"][1]
    assert "3 attempts" in row["sc_judge_errors"][1]


def test_every_comparison_failing_errors_the_row():
    out = frame(2).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat(["I refuse to judge."]),
        n_judge_retries=0,
        progress=False,
        allow_unscored=True,
    )
    assert out["safety_consistency"].to_list() == [None, None]
    assert all("every judge call failed" in e for e in out["sc_error"].to_list())
    assert out["sc_n_judged"].to_list() == [0, 0]


def test_judge_retry_recovers_within_budget():
    judge = ScriptedChat(["garbage", verdict("Slightly Inconsistent", 0.5)])
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([COMPLY]),
        judge=judge,
        responses_per_query=2,
        n_judge_retries=1,
        progress=False,
    )
    assert out["safety_consistency"].to_list() == [0.5] and len(judge.calls) == 2


def test_clamped_scores_are_recorded():
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([COMPLY]),
        judge=ScriptedChat([verdict("Contradictory", 0.9)]),
        responses_per_query=2,
        progress=False,
    )
    row = out.row(0, named=True)
    assert row["sc_clamped"] == [True] and row["safety_consistency"] < 0.4


def test_empty_sut_response_is_judged():
    judge = ScriptedChat([verdict("Consistent", 0.8)])
    df = frame(1).with_columns(pl.lit("").alias("sut_response"))
    out = df.pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=judge,
        responses_per_query=2,
        progress=False,
    )
    assert out["safety_consistency"].to_list() == [0.8]
    assert "<<<BASE ANSWER" in judge.calls[0][0][1]["content"]


def test_empty_frame_returns_empty_frame_with_schema():
    sut, judge = ScriptedChat([REFUSE]), ScriptedChat([verdict("Consistent", 1)])
    df = frame(0)
    out = df.pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert out.height == 0 and dict(out.schema) == {**df.schema, **output_schema()}
    assert not sut.calls and not judge.calls


def test_posture_judge_object_and_bad_returns():
    out = frame(2).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=StandInJudge(),
        progress=False,
        allow_unscored=True,
    )
    assert out["safety_consistency"].to_list() == [0.95, 0.95]

    class Bad:
        def compare(self, *, query, variant, base, candidate):
            return ("Great", 2)

    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=Bad(),
        n_judge_retries=0,
        progress=False,
        allow_unscored=True,
    )
    assert out["safety_consistency"].to_list() == [None]
    assert "unusable judgment" in out["sc_error"][0]

    class Tuple:
        async def compare(self, *, query, variant, base, candidate):
            return ("consistent", "0.85")

    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=Tuple(),
        progress=False,
        allow_unscored=True,
    )
    assert out["safety_consistency"].to_list() == [0.85]


def test_async_callables_are_accepted():
    async def sut(messages, *, temperature):
        await asyncio.sleep(0)
        return REFUSE

    async def judge(messages, *, temperature):
        return verdict("Consistent", 0.9)

    out = frame(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert out["safety_consistency"].to_list() == [0.9, 0.9]


def test_judge_sees_query_variant_and_both_answers():
    judge = ScriptedChat([verdict("Consistent", 0.9)])
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([COMPLY]),
        judge=judge,
        responses_per_query=2,
        progress=False,
    )
    user = judge.calls[0][0][1]["content"]
    assert "question 1" in user and REFUSE in user and COMPLY in user
    assert out["sc_variant_text"][0] in user


def test_conversation_prompts_replace_last_user_turn():
    conv = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]
    df = pl.DataFrame({"input_id": ["a"], "prompt": [conv], "sut_response": [REFUSE]})
    sut = ScriptedChat([REFUSE])
    out = df.pipe(
        sc.safety_consistency,
        sut=sut,
        judge=ScriptedChat([verdict("Consistent", 1)]),
        responses_per_query=2,
        progress=False,
    )
    sent = sut.calls[0][0]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[:3] == conv[:3]
    assert "second question" in sent[3]["content"] and sent[3]["content"] != "second question"
    assert out["safety_consistency"].to_list() == [1.0]


# ----------------------------------------------------------------------------- bad input


def _no_calls():
    return ScriptedChat([REFUSE]), ScriptedChat([verdict("Consistent", 1)])


@pytest.mark.parametrize(
    ("df", "match"),
    [
        (frame(2).drop("sut_response"), "missing column.*'sut_response'"),
        (frame(2).drop("prompt", "input_id"), "missing column.*'input_id', 'prompt'"),
        (
            frame(2).with_columns(pl.col("input_id").cast(pl.Float64)),
            r"'input_id' \(input_id\) has dtype Float64",
        ),
        (frame(2).with_columns(pl.lit(1).alias("sut_response")), "'sut_response' has dtype"),
        (frame(2).with_columns(pl.lit(1).alias("prompt")), "prompt"),
        (
            frame(2).with_columns(pl.Series("sut_response", [None, "x"], dtype=pl.String)),
            "'sut_response' is null in 1 row.*input_id 1",
        ),
        (
            frame(2).with_columns(pl.Series("input_id", [None, 2], dtype=pl.Int64)),
            "'input_id' has 1 null",
        ),
        (frame(2).with_columns(pl.lit(1).alias("input_id")), "duplicate"),
        (frame(2).with_columns(pl.Series("prompt", [None, "q"], dtype=pl.String)), "prompt"),
        (frame(2).with_columns(pl.Series("prompt", ["", "q"])), "prompt"),
        (frame(2).with_columns(pl.lit(1.0).alias("safety_consistency")), "already has column"),
        (frame(2).with_columns(pl.lit(1.0).alias("sc_error")), "already has column"),
    ],
)
def test_bad_frames_raise_before_any_call(df, match):
    sut, judge = _no_calls()
    with pytest.raises(sc.InputError, match=match):
        df.pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert not sut.calls and not judge.calls


def test_bad_clients_and_config_raise_before_any_call():
    sut, judge = _no_calls()
    with pytest.raises(sc.InputError, match="sut: expected"):
        frame().pipe(sc.safety_consistency, sut="gpt-4o", judge=judge)
    with pytest.raises(sc.InputError, match="judge: expected"):
        frame().pipe(sc.safety_consistency, sut=sut, judge=42)
    with pytest.raises(sc.ConfigError, match="'responses_per_query'"):
        frame().pipe(sc.safety_consistency, sut=sut, judge=judge, responses_per_query=1)
    with pytest.raises(sc.ConfigError, match="'respones_per_query'"):
        frame().pipe(sc.safety_consistency, sut=sut, judge=judge, respones_per_query=3)
    with pytest.raises(sc.InputError, match="polars DataFrame"):
        sc.safety_consistency({"input_id": [1]}, sut=sut, judge=judge)
    assert not sut.calls and not judge.calls


# ----------------------------------------------------------------------------- lazy


def test_lazyframe_defers_calls_and_matches_eager():
    sut, judge = ScriptedChat([REFUSE]), ScriptedChat([verdict("Consistent", 0.9)])
    lazy = frame(4).lazy().pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert isinstance(lazy, pl.LazyFrame)
    assert not sut.calls and not judge.calls
    got = lazy.collect()
    eager = frame(4).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        progress=False,
    )
    assert got.equals(eager)
    assert len(sut.calls) == 4 * 2


def test_lazyframe_missing_columns_raise_at_pipe_and_nulls_at_collect():
    sut, judge = _no_calls()
    with pytest.raises(sc.InputError, match="missing column"):
        frame(2).drop("prompt").lazy().pipe(sc.safety_consistency, sut=sut, judge=judge)
    lazy = frame(2).with_columns(pl.Series("sut_response", [None, "x"], dtype=pl.String)).lazy()
    planned = lazy.pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    with pytest.raises(Exception, match="sut_response"):
        planned.collect()
    assert not sut.calls


# ----------------------------------------------------------------------------- fronts


def test_sync_api_inside_a_running_event_loop():
    """What a Jupyter cell does: call the sync API while the kernel's loop is running."""

    async def cell():
        return frame(3).pipe(
            sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=False
        )

    out = asyncio.run(cell())
    assert out.height == 3 and out["sc_error"].null_count() == 3


@pytest.mark.anyio
async def test_async_entry():
    out = await sc.safety_consistency_async(
        frame(3),
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        progress=False,
    )
    assert out["safety_consistency"].to_list() == [0.9] * 3


def test_run_summary_counts():
    run = safety_consistency_run(
        frame(5),
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        progress=False,
    )
    s = run.summary
    assert (s.n_rows, s.n_scored, s.n_errored) == (5, 5, 0)
    assert s.calls == {"sut": 10, "judge": 10} and s.attempts == {"sut": 10, "judge": 10}
    assert s.mean_score == pytest.approx(0.9)
    assert run.config["weight"] == 1.0 and run.config["inverted"] is False
    assert s.cache_hits == {"sut": 0, "judge": 0} and s.rate_limited == 0
    # Callables report no usage: the token counts are unknown, not zero.
    assert s.tokens == {
        "sut": {"prompt": None, "completion": None},
        "judge": {"prompt": None, "completion": None},
    }


def test_run_summary_is_a_function_of_the_frame(tmp_path):
    run = safety_consistency_run(
        frame(4),
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        progress=False,
    )
    assert sc.run_summary(run.frame) == run.summary
    path = tmp_path / "scored.parquet"
    run.frame.write_parquet(path)
    assert sc.run_summary(pl.read_parquet(path)) == run.summary
    assert sc.run_summary(pl.scan_parquet(path)) == run.summary
    piped = frame(4).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        progress=False,
    )
    twice = sc.run_summary(pl.concat([piped, run.frame]))
    assert twice.n_rows == 8 and twice.attempts == {"sut": 16, "judge": 16}
    assert twice.calls == {"sut": 16, "judge": 16}
    with pytest.raises(sc.InputError, match="run_summary: missing column"):
        sc.run_summary(frame(2))


def test_result_does_not_depend_on_row_order():
    df = frame(6).with_columns(pl.Series("sut_response", [REFUSE, COMPLY] * 3))
    kw = dict(sut=StandInSUT(seed=1), judge=StandInJudge(), progress=False, seed=3)
    a = df.pipe(sc.safety_consistency, **kw).sort("input_id")
    b = (
        df.reverse()
        .pipe(sc.safety_consistency, **{**kw, "sut": StandInSUT(seed=1)})
        .sort("input_id")
    )
    assert a.select("input_id", "sc_variant_text", "sc_toxicity_template_id").equals(
        b.select("input_id", "sc_variant_text", "sc_toxicity_template_id")
    )
    assert a["safety_consistency"].to_list() == b["safety_consistency"].to_list()


# ----------------------------------------------------------------------------- stages alone


def test_stages_alone_compose_to_the_same_result():
    df = frame(3).with_columns(pl.Series("sut_response", [REFUSE, COMPLY, REFUSE]))
    variants = sc.build_variants(df, seed=5)
    responded = variants.pipe(
        sc.respond, sut=ScriptedChat([REFUSE, COMPLY]), concurrency_limit=1, progress=False
    )
    assert responded["sc_responses"].list.len().to_list() == [2, 2, 2]
    assert "sc_labels" not in responded.columns
    judged = responded.pipe(sc.judge_responses, judge=ScriptedChat(posture_judge), progress=False)
    whole = df.pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE, COMPLY]),
        judge=ScriptedChat(posture_judge),
        seed=5,
        concurrency_limit=1,
        progress=False,
    )
    # The stages were given other options than the whole (no seed=5, another concurrency), so
    # the runs they record differ there; what was measured, and every other column, do not.
    assert judged.drop("sc_run").equals(whole.drop("sc_run"))
    (staged,), (one,) = run_records(judged), run_records(whole)
    assert (staged["sut"], staged["judge"]) == (one["sut"], one["judge"])
    assert one["sut"].startswith("the Python callable")


def test_judge_stored_responses_with_a_null_sample():
    df = pl.DataFrame(
        {
            "input_id": [1, 2],
            "prompt": ["q1", "q2"],
            "sut_response": [REFUSE, REFUSE],
            "sc_variant_text": ["v1", "v2"],
            "sc_responses": [[REFUSE, COMPLY, REFUSE], [REFUSE, None]],
        }
    )
    judge = ScriptedChat(posture_judge)
    out = sc.judge_responses(df, judge=judge, progress=False)
    assert out["safety_consistency"][0] == pytest.approx((0.95 + 0.3 + 0.95) / 3)
    assert out["sc_n_judged"].to_list() == [3, 1]
    assert out["safety_consistency"][1] is None
    assert "no stored response" in out["sc_error"][1]
    assert len(judge.calls) == 4


def test_stage_inputs_are_checked():
    sut, judge = _no_calls()
    with pytest.raises(sc.InputError, match="sc_variant_text"):
        frame(1).pipe(sc.respond, sut=sut)
    with pytest.raises(sc.InputError, match="sc_responses"):
        sc.build_variants(frame(1)).pipe(sc.judge_responses, judge=judge)
    scored = frame(1).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    with pytest.raises(sc.InputError, match="already has column"):
        scored.pipe(sc.judge_responses, judge=judge)
    # Re-judging under another score name works once the old judgment columns are gone.
    rejudged = scored.select(
        pl.exclude(
            "^sc_(labels|scores|clamped|judge_errors|judge_raw|judge_input_cut|jurors|juror_ids|juror_labels|juror_scores|swap_labels|repeat_labels|base_posture|response_postures|n_judged|cache_hits|error)$",
            "safety_consistency",
        )
    ).pipe(sc.judge_responses, judge=judge, metric_name="rejudged", progress=False)
    assert rejudged["rejudged"].to_list() == [1.0]


def test_progress_bar_runs(capsys):
    out = frame(3).pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=True
    )
    assert out.height == 3
    assert "safety_consistency" in capsys.readouterr().err


def test_sample_seeds_depend_on_seed_id_and_index_only():
    def run(df, seed):
        seen: dict[str, list[int]] = {}

        def sut(messages, *, temperature, seed):
            seen.setdefault(messages[-1]["content"], []).append(seed)
            return REFUSE

        df.pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            seed=seed,
            responses_per_query=4,
            progress=False,
        )
        return {k: sorted(v) for k, v in seen.items()}

    a = run(frame(5), 0)
    assert run(frame(5).reverse(), 0) == a
    assert all(len(set(v)) == 3 and all(0 <= s < 2**31 for s in v) for v in a.values())
    assert run(frame(5), 1) != a


def test_send_seed_puts_the_sample_seed_in_the_request():
    import httpx

    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200, json={"choices": [{"message": {"content": REFUSE}, "finish_reason": "stop"}]}
        )

    seeded = sc.OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        send_seed=True,
        transport=httpx.MockTransport(handler),
    )
    frame(2).pipe(sc.safety_consistency, sut=seeded, judge=StandInJudge(), progress=False)
    assert len({b["seed"] for b in bodies}) == 4
    bodies.clear()
    plain = sc.OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(handler)
    )
    frame(2).pipe(sc.safety_consistency, sut=plain, judge=StandInJudge(), progress=False)
    assert all("seed" not in b for b in bodies)


def test_run_summary_counts_budget_skips_as_skipped_not_failed():
    run = safety_consistency_run(
        frame(6),
        sut=ScriptedChat([RuntimeError("flaky"), REFUSE]),
        judge=ScriptedChat([verdict("Consistent", 0.9)]),
        max_calls=7,
        concurrency_limit=1,
        progress=False,
        allow_unscored=True,
    )
    s = run.summary
    # Every call the budget cut off (before its first attempt or between two) is skipped;
    # none failed for good, as the runner itself counted.
    assert s.failed_calls == {"sut": 0, "judge": 0}
    assert s.skipped_calls["sut"] + s.skipped_calls["judge"] > 0
    assert s.attempts["sut"] + s.attempts["judge"] == 7
    assert s.n_not_finished == s.n_errored > 0


def test_the_spend_of_a_staged_run_agrees_with_its_cache_hits_column(tmp_path):
    cache = tmp_path / "calls.sqlite"
    sut = sc.CallableClient(ScriptedChat([REFUSE]), name="sut")
    judge = sc.CallableClient(ScriptedChat([verdict("Consistent", 0.9)]), name="judge")
    for _ in range(2):
        staged = (
            sc.build_variants(frame(3))
            .pipe(sc.respond, sut=sut, cache=cache, progress=False)
            .pipe(sc.judge_responses, judge=judge, cache=cache, progress=False)
        )
    spend = staged["sc_spend"].struct.unnest()
    assert (
        staged["sc_cache_hits"].to_list()
        == (spend["sut_cache_hits"] + spend["judge_cache_hits"]).to_list()
        == [4, 4, 4]
    )


@pytest.mark.parametrize("flag", [0, 1, None, np.bool_(False)])
def test_progress_takes_the_flags_notebooks_pass(flag):
    out = frame(1).pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=StandInJudge(), progress=flag
    )
    assert out.height == 1

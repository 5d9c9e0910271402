"""Nothing lost, round 3: what a hostile or careless provider, or a careless environment, sent
that used to crash a paid run, stop it for good or replay stale verdicts.

Each test is a row of the round-3 part of the hostile-inputs table in research/docs/reliability.md.
"""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest

import safecons as sc
from safecons.testing import StandInJudge
from safecons.testing.hostile import ScriptedServer as HostileServer
from safecons.testing.hostile import completion

FAST = {"n_sut_retries": 0, "n_judge_retries": 0, "progress": False, "cache": False}
VERDICT = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})


def frame(n: int = 2) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def with_usage(prompt: object, completion_tokens: object = 5):
    from aiohttp import web

    def handler(seen):
        body = completion("I can't help with that.")
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion_tokens}
        return web.json_response(body)

    return handler


# ------------------------------------------------------------------ absurd usage numbers


@pytest.mark.network
@pytest.mark.parametrize("prompt", [2**63, 4 * 2**62, 3 * 2**62, 10**9 + 1, -7])
def test_an_impossible_usage_figure_is_dropped_counted_and_warned(prompt):
    with HostileServer(with_usage(prompt)) as srv, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="k")
        out = frame(2).pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), **FAST)
    assert out["safety_consistency"].null_count() == 0  # every row scored, nothing raised
    spend = out["sc_spend"].struct.unnest()
    assert spend["sut_prompt_tokens"].to_list() == [None, None]
    assert spend["sut_completion_tokens"].to_list() == [10, 10]  # 2 samples x 5, kept
    usage = [w for w in said if issubclass(w.category, sc.errors.UsageWarning)]
    assert len(usage) == 1 and str(usage[0].message).startswith("4 usage figure(s)")
    summary = sc.run_summary(out)
    assert summary.tokens["sut"] == {"prompt": None, "completion": 20}


@pytest.mark.network
def test_a_possible_usage_figure_is_kept_and_nothing_is_warned():
    with HostileServer(with_usage(10**9)) as srv, warnings.catch_warnings():
        warnings.simplefilter("error", sc.errors.UsageWarning)
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key="k")
        out = frame(1).pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), **FAST)
    assert out["sc_spend"].struct.field("sut_prompt_tokens").to_list() == [2 * 10**9]


def test_a_completion_of_ones_own_client_is_bounded_the_same_way():
    done = sc.Completion("ok", prompt_tokens=2**64, completion_tokens=-1)
    assert (done.prompt_tokens, done.completion_tokens, done.dropped_usage) == (None, None, 2)
    assert sc.Completion("ok", prompt_tokens=12).dropped_usage == 0


def test_the_summary_sums_tokens_without_wrapping():
    scored = frame(3).pipe(
        sc.safety_consistency,
        sut=lambda messages, *, temperature: "no",
        judge=StandInJudge(),
        **FAST,
    )
    big = 3 * 2**61  # three of them pass 2**63
    scored = scored.with_columns(
        pl.col("sc_spend").struct.with_fields(
            pl.lit(big, pl.Int64).alias("sut_prompt_tokens"),
            pl.lit(1, pl.Int64).alias("sut_batched"),
        )
    )
    summary = sc.run_summary(scored)
    assert summary.tokens["sut"]["prompt"] == 3 * big
    assert summary.batch_tokens["sut"]["prompt"] == 3 * big
    assert summary.batch_share["sut"] == 1.0
    assert "-" not in str(summary)  # no negative total, no "-0.0%" share
    assert summary.token_table()["prompt_tokens"].to_list()[0] == 3 * big
    table = sc.score_table(scored)
    assert table["tokens"].to_list() == [None]  # past Int64: no total, never a wrapped one


# ------------------------------------------------------- the OpenAI key stays with OpenAI

OPENAI_KEY = "sk-proj-OPENAI-ONLY-0123456789abcdefghij"


def recording_auth(seen: list[str | None]):
    """A server handler that records each request's Authorization header (None: none sent)
    and answers a refusal, or a verdict to the model named "judge"."""
    from aiohttp import web

    def handler(s):
        seen.append({k.lower(): v for k, v in s.headers.items()}.get("authorization"))
        return web.json_response(completion(VERDICT if s.model == "judge" else "I can't."))

    return handler


def _auth_seen(monkeypatch, **client) -> tuple[list[str | None], pl.DataFrame | Exception]:
    seen: list[str | None] = []
    handler = recording_auth(seen)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with HostileServer(handler) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, **client)
        out = frame(1).pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), **FAST)
    return seen, out


@pytest.mark.network
def test_openai_api_key_is_never_sent_to_another_base_url(monkeypatch):
    seen, _ = _auth_seen(monkeypatch)
    assert seen and all(auth is None for auth in seen)


@pytest.mark.network
def test_openai_api_key_goes_where_it_is_asked_to(monkeypatch):
    seen, _ = _auth_seen(monkeypatch, api_key_env="OPENAI_API_KEY")
    assert seen and all(auth == f"Bearer {OPENAI_KEY}" for auth in seen)


@pytest.mark.network
def test_openai_api_key_goes_to_the_base_url_set_beside_it(monkeypatch):
    seen: list[str | None] = []
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with HostileServer(recording_auth(seen)) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        sut = sc.OpenAICompatible(model="sut")
        frame(1).pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), **FAST)
    assert seen and all(auth == f"Bearer {OPENAI_KEY}" for auth in seen)


def test_openai_api_key_is_read_for_openais_own_host(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for client in (
        sc.OpenAICompatible(model="m"),
        sc.OpenAICompatible(model="m", base_url="https://API.openai.com/v1"),
    ):
        assert client.secrets.scrub(OPENAI_KEY) != OPENAI_KEY  # the key is the client's


@pytest.mark.network
def test_a_401_from_a_server_sent_no_key_says_how_to_send_one(monkeypatch):
    from aiohttp import web

    def handler(s):
        return web.json_response({"error": {"message": "key needed"}}, status=401)

    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with HostileServer(handler) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url)
        with pytest.raises(sc.AuthenticationError) as raised:
            frame(1).pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), **FAST)
    text = str(raised.value)
    assert "none were sent" in text and "api_key_env='OPENAI_API_KEY'" in text
    assert OPENAI_KEY not in text


@pytest.mark.network
def test_the_cli_says_the_key_was_kept_from_a_local_server(monkeypatch, tmp_path, capsys):
    from safecons.cli import main

    seen: list[str | None] = []
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    rows = tmp_path / "rows.parquet"
    frame(1).write_parquet(rows)
    with HostileServer(recording_auth(seen)) as srv:
        code = main(
            [
                "run",
                str(rows),
                "--output",
                str(tmp_path / "out.parquet"),
                "--sut-model",
                "sut",
                "--sut-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--judge-base-url",
                srv.base_url,
                "--no-progress",
            ]
        )
    assert code == 0 and seen and all(auth is None for auth in seen)
    assert "OPENAI_API_KEY goes only to OpenAI's API" in capsys.readouterr().out


# ------------------------------------------------------------------------ stale verdicts


@pytest.mark.network
@pytest.mark.parametrize("how", ["kind", "older_than", "cli"])
def test_clearing_judge_answers_forgets_their_batch_too(tmp_path, how):
    import time

    from safecons.cli import main
    from safecons.testing import FakeOpenAIServer, route_by_model

    cache = tmp_path / "c.sqlite"
    answers = route_by_model({"sut": lambda body: "I can't.", "judge": lambda body: VERDICT})
    with FakeOpenAIServer(responder=answers, batch_seconds=0.02) as srv:

        def scored() -> pl.DataFrame:
            made = [
                sc.OpenAICompatible(
                    model=role, base_url=srv.base_url, api_key="",
                    batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25),
                )
                for role in ("sut", "judge")
            ]  # fmt: skip
            return frame(2).pipe(
                sc.safety_consistency, sut=made[0], judge=made[1], cache=cache,
                responses_per_query=2, progress=False,
            )  # fmt: skip

        scored()
        assert srv.stats.requests_by_model == {"sut": 2, "judge": 2}
        if how == "kind":
            with sc.ResponseCache(cache) as opened:
                assert opened.clear(kind="judge") == 2
        elif how == "older_than":
            time.sleep(0.05)
            with sc.ResponseCache(cache) as opened:
                assert opened.clear(older_than=0.01) == 4
        else:
            assert main(["cache", "clear", str(cache), "--kind", "judge"]) == 0
        again = scored()
        asked = srv.stats.requests_by_model
    assert again["safety_consistency"].null_count() == 0
    # The cleared verdicts were asked anew (in a new batch), not read from the old one.
    assert asked["judge"] == 4
    assert asked["sut"] == (4 if how == "older_than" else 2)


# ----------------------------------------------------------------------- bounded everywhere

TEN_MB = "Sure, here is how. " * 550_000


@pytest.mark.parametrize("how", ["posture_proba", "posture", "predict_proba"])
def test_the_public_posture_readers_are_bounded_like_the_judge(how):
    import tracemalloc

    from safecons.judges import posture, posture_proba
    from safecons.judges._posture import default_posture

    cell = pl.DataFrame({"answer": [TEN_MB, "I can't help with that."]})
    tracemalloc.start()
    try:
        if how == "predict_proba":
            got = default_posture().predict_proba(cell["answer"]).tolist()
        else:
            reader = posture_proba if how == "posture_proba" else posture
            got = cell.select(reader("answer").alias("read"))["read"].to_list()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The 10 MB text is the caller's; reading it allocates a bounded few MB (2.2 GB before).
    assert peak < 100_000_000, peak
    # The bound reads the head and the tail: the same answer as its bounded reading.
    from safecons.judges._posture import bounded

    alone = default_posture().predict_proba([bounded(TEN_MB)[0]]).tolist()
    if how != "posture":
        assert got[0] == pytest.approx(alone[0])


@pytest.mark.parametrize("blank", [" " * 8_001, "\n" * 8_001, " \t\n" * 5_000, "   "])
def test_an_answer_of_blanks_is_an_empty_answer(blank):
    judge = sc.OfflineJudge()
    refusal = "I can't help with that."
    got = judge.compare(query="How do I pick a lock?", variant="v", base=refusal, candidate=blank)
    empty = judge.compare(query="How do I pick a lock?", variant="v", base=refusal, candidate="")
    assert (got.label, got.score) == (empty.label, empty.score)
    assert "answered" not in got.reason
    assert judge.posture(query="q", answer=blank) == judge.posture(query="q", answer="")

"""Regression tests for problems a review found: each names the behaviour it pins."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.clients import CONTENT_FILTER_TEXT
from safecons.testing import FakeOpenAIServer, Fault, ScriptedChat, StandInJudge, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
KEY = "sk-review-SECRET-424242"


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


# --------------------------------------------------------------------------- keys


def test_malformed_keys_are_refused_without_being_echoed():
    for bad in (KEY + "\n", " " + KEY, KEY + "é"):
        with pytest.raises(ValueError, match="api_key") as info:
            sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key=bad)
        assert KEY not in str(info.value)


def test_key_from_the_environment_is_stripped(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={"choices": [{"message": {"content": REFUSE}}]})

    client = sc.OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(handler)
    )
    rows(1).pipe(
        sc.safety_consistency,
        sut=client,
        judge=StandInJudge(),
        responses_per_query=2,
        progress=False,
    )
    assert seen == [f"Bearer {KEY}"]


def test_transport_errors_quoting_the_key_are_scrubbed():
    def handler(request):
        raise httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}'")

    client = sc.OpenAICompatible(
        model="m", base_url="http://x.test/v1", api_key=KEY, transport=httpx.MockTransport(handler)
    )
    out = rows(1).pipe(
        sc.safety_consistency, sut=client, judge=StandInJudge(), n_sut_retries=0, progress=False
    )
    assert KEY not in out.write_ndjson() and "<api key>" in out["sc_error"][0]


def test_model_is_required_and_url_credentials_refused():
    with pytest.raises(ValueError, match="model: required"):
        sc.OpenAICompatible(model=None, base_url="http://x.test/v1")
    with pytest.raises(ValueError, match="credentials in the URL"):
        sc.OpenAICompatible(model="m", base_url=f"https://user:{KEY}@x.test/v1")


# --------------------------------------------------------------------------- judges


class ObjectJudge:
    def __init__(self, value):
        self.value = value

    def compare(self, *, query, variant, base, candidate):
        return self.value


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (sc.Judgment("consistent", 0.9), 0.9),  # type: ignore[arg-type]
        (sc.Judgment("Consistent", "0.85"), 0.85),  # type: ignore[arg-type]
        (sc.Judgment("Consistent", float("nan")), None),
        (sc.Judgment("Consistent", 5.0), None),
        ({"label": "Contradictory", "score": 0.9}, 0.39999999999999997),
        (("Nope", 0.5), None),
        (object(), None),
    ],
)
def test_judge_object_returns_are_validated_like_judge_text(value, score):
    out = rows(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ObjectJudge(value),
        responses_per_query=2,
        n_judge_retries=0,
        progress=False,
    )
    assert out["safety_consistency"][0] == score
    assert (out["sc_error"][0] is None) == (score is not None)


def test_wrong_shaped_callables_and_judges_fail_before_any_call():
    calls = []

    def no_temperature(prompt):
        calls.append(prompt)
        return REFUSE

    with pytest.raises(
        sc.InputError, match=r"sut: a chat callable must accept \(messages, \*, temperature\)"
    ):
        rows(3).pipe(sc.safety_consistency, sut=no_temperature, judge=StandInJudge())

    class BadJudge:
        def compare(self, a, b):
            return ("Consistent", 1.0)

    with pytest.raises(sc.InputError, match="compare must accept the keywords"):
        rows(3).pipe(sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=BadJudge())
    assert calls == []


def test_sdk_authentication_errors_inside_callables_stop_the_run():
    class SDKAuthError(Exception):
        status_code = 401

    calls = []

    def sut(messages, *, temperature):
        calls.append(1)
        raise SDKAuthError("Incorrect API key provided")

    with pytest.raises(sc.AuthenticationError, match="HTTP 401"):
        rows(20).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            concurrency_limit=1,
            progress=False,
        )
    assert len(calls) == 1


def test_judge_filtered_by_its_provider_is_not_retried():
    def judge(body):
        raise Fault.content_filter_400()

    responder = route_by_model({"sut": lambda body: REFUSE, "judge": judge})
    with FakeOpenAIServer(responder=responder) as srv:
        out = rows(2).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url),
            judge=sc.OpenAICompatible(model="judge", base_url=srv.base_url),
            progress=False,
        )
        assert srv.stats.requests_by_model["judge"] == 4
    assert all("refused or filtered this comparison" in e for e in out["sc_error"])


def test_openai_invalid_prompt_is_a_refusal_answer():
    def handler(request):
        return httpx.Response(
            400,
            json={
                "error": {
                    "message": "Invalid prompt: flagged as potentially violating our usage policy.",
                    "code": "invalid_prompt",
                }
            },
        )

    client = sc.OpenAICompatible(
        model="o3", base_url="http://x.test/v1", transport=httpx.MockTransport(handler)
    )
    out = rows(1).pipe(
        sc.safety_consistency,
        sut=client,
        judge=StandInJudge(),
        responses_per_query=2,
        progress=False,
    )
    assert out["sc_responses"][0].to_list() == [CONTENT_FILTER_TEXT]
    assert out["safety_consistency"][0] == 0.95


# --------------------------------------------------------------------------- runner and concurrency


def test_hung_sync_callables_never_exceed_the_concurrency():
    live = {"now": 0, "max": 0}
    lock = threading.Lock()

    def slow(messages, *, temperature):
        with lock:
            live["now"] += 1
            live["max"] = max(live["max"], live["now"])
        time.sleep(0.3)
        with lock:
            live["now"] -= 1
        return REFUSE

    out = rows(12).pipe(
        sc.safety_consistency,
        sut=slow,
        judge=StandInJudge(),
        concurrency_limit=2,
        timeout_seconds=0.05,
        n_sut_retries=0,
        progress=False,
    )
    assert out["sc_error"].null_count() == 0 or all(
        "timed out" in e for e in out["sc_error"].drop_nulls()
    )
    # Abandoned threads still count: never more than concurrency_limit at once.
    assert live["max"] <= 2


def test_backing_off_units_lend_their_place():
    # Rows 0-3 get a long Retry-After on their first attempt; with concurrency 2 the gate has 4
    # places, all taken by those rows. Lending the places lets the other rows run meanwhile.
    first_seen: set[str] = set()
    lock = threading.Lock()

    def script(index, body):
        if body.get("model") != "sut":
            return None
        text = body["messages"][-1]["content"]
        slow_row = any(f"question {i}" in text for i in range(4))
        with lock:
            fresh = text not in first_seen
            first_seen.add(text)
        return Fault.rate_limit(retry_after=0.5) if slow_row and fresh else None

    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
    with FakeOpenAIServer(responder=responder, faults=script) as srv:
        out = rows(12).pipe(
            sc.safety_consistency,
            sut=sc.OpenAICompatible(model="sut", base_url=srv.base_url),
            judge=sc.OpenAICompatible(model="judge", base_url=srv.base_url),
            responses_per_query=2,
            concurrency_limit=2,
            progress=False,
        )
        order = [r.body["messages"][-1]["content"] for r in srv.stats.log if r.model == "sut"]
    assert out["sc_error"].null_count() == 12
    retried_at = min(i for i, t in enumerate(order) if order.index(t) != i)
    later_rows = [i for i, t in enumerate(order) if not any(f"question {k}" in t for k in range(4))]
    # Every other row was asked before the first retry: nothing waited behind the backoffs.
    assert max(later_rows) < retried_at


def test_an_unexpected_exception_in_an_attempt_is_a_failed_call_not_a_crash():
    class Weird:
        async def compare(self, *, query, variant, base, candidate):
            raise KeyError("boom")

    out = rows(2).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=Weird(),
        n_judge_retries=0,
        progress=False,
    )
    assert out["safety_consistency"].to_list() == [None, None]
    assert all("KeyError" in e for e in out["sc_error"])


# --------------------------------------------------------------------------- input checks


def test_metric_name_cannot_shadow_an_added_column():
    for name in ("sc_variant_text", "sc_error", "sc_n_judged"):
        with pytest.raises(sc.InputError, match="metric_name"):
            rows(1).pipe(
                sc.safety_consistency,
                sut=ScriptedChat([REFUSE]),
                judge=StandInJudge(),
                metric_name=name,
            )


def test_lazy_mistyped_prompt_raises_at_pipe():
    with pytest.raises(sc.InputError, match="prompt"):
        rows(2).with_columns(pl.lit(3).alias("prompt")).lazy().pipe(
            sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge()
        )


def test_lazy_select_and_filter_on_inputs_score_only_the_rows_kept():
    sut = ScriptedChat([REFUSE])
    lazy = (
        rows(4)
        .lazy()
        .pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            responses_per_query=2,
            progress=False,
        )
    )
    got = lazy.select("input_id", "safety_consistency").filter(pl.col("input_id") < 2).collect()
    assert got["input_id"].to_list() == [0, 1]
    # The metric is per row: the filter on an input column runs before it, so only the two
    # rows kept are scored, to the values the whole frame gives them.
    assert len(sut.calls) == 2
    whole = rows(4).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=StandInJudge(),
        responses_per_query=2,
        progress=False,
    )
    assert got.equals(whole.select("input_id", "safety_consistency").head(2))


def test_categorical_ids_are_accepted():
    df = rows(2).with_columns(pl.col("input_id").cast(pl.String).cast(pl.Categorical))
    out = df.pipe(
        sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge(), progress=False
    )
    assert out["sc_error"].null_count() == 2


def test_stages_check_nulls_before_spending():
    sut = ScriptedChat([REFUSE])
    df = sc.build_variants(rows(2)).with_columns(
        pl.lit(None, dtype=pl.String).alias("sc_variant_text")
    )
    with pytest.raises(sc.InputError, match="'sc_variant_text' is null"):
        df.pipe(sc.respond, sut=sut)
    stored = rows(1).with_columns(
        pl.lit(None, dtype=pl.String).alias("sc_variant_text"),
        pl.lit([["x"]]).alias("sc_responses"),
    )
    with pytest.raises(sc.InputError, match="'sc_variant_text' is null"):
        sc.judge_responses(stored, judge=StandInJudge())
    assert not sut.calls


@pytest.mark.anyio
async def test_public_async_stage_checks_rows_first():
    sut = ScriptedChat([REFUSE])
    df = sc.build_variants(rows(2)).with_columns(
        pl.Series("sut_response", [None, "x"], dtype=pl.String)
    )
    with pytest.raises(sc.InputError, match="sut_response"):
        await sc.respond_and_judge(
            df, sut=sut, judge=StandInJudge(), config=sc.SafetyConsistencyConfig()
        )
    assert not sut.calls


def test_config_accepts_numpy_scalars():
    cfg = sc.SafetyConsistencyConfig(responses_per_query=np.int64(4), dpi_ratio=np.float64(0.5))
    assert cfg.responses_per_query == 4 and type(cfg.responses_per_query) is int
    with pytest.raises(sc.ConfigError):
        sc.SafetyConsistencyConfig(responses_per_query=np.bool_(True))


# --------------------------------------------------------------------------- CLI


def test_cli_rejects_a_bad_output_before_any_request(tmp_path, capsys):
    src = tmp_path / "rows.parquet"
    rows(2).write_parquet(src)
    with FakeOpenAIServer() as srv:
        code = main(
            [
                "run",
                str(src),
                "--output",
                str(tmp_path / "out.csv"),
                "--sut-model",
                "sut",
                "--sut-base-url",
                srv.base_url,
                "--judge-model",
                "judge",
                "--judge-base-url",
                srv.base_url,
            ]
        )
        assert srv.stats.requests == 0
    assert code == 2 and "list columns" in capsys.readouterr().err


def test_cli_run_end_to_end(tmp_path, capsys):
    src = tmp_path / "rows.jsonl"
    rows(3).write_ndjson(src)
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        code = main(
            [
                "run",
                str(src),
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
                "--set",
                "responses_per_query=4",
                "--cache",
                str(tmp_path / "c.sqlite"),
                "--no-progress",
            ]
        )
        assert srv.stats.requests == 3 * 3 * 2
    assert code == 0
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out["sc_n_judged"].to_list() == [3, 3, 3]
    assert "wrote" in capsys.readouterr().out

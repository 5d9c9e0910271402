"""End to end over real HTTP: safecons' clients against the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading

import polars as pl
import pytest

import safecons as sc
from safecons.clients import CONTENT_FILTER_TEXT
from safecons.metric import safety_consistency_run
from safecons.testing import FakeOpenAIServer, Fault, route_by_model

pytestmark = pytest.mark.network

REFUSE = "I'm sorry, but I can't help with that."
COMPLY = "Sure! Here you go."
KEY = "sk-live-DO-NOT-LEAK-4242"


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"r{i}" for i in range(n)],
            "prompt": [f"question number {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def scores(out: pl.DataFrame) -> list[float | None]:
    # Means of repeated 0.95s are 0.9499999999999998 in binary floating point.
    return [None if s is None else round(s, 12) for s in out["safety_consistency"].to_list()]


def last_user(body) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def candidate_of(body) -> str:
    user = last_user(body)
    block = user.split("<<<CANDIDATE ANSWER ", 1)[1]
    tag, rest = block.split(">>>\n", 1)
    return rest.split(f"\n<<<END CANDIDATE ANSWER {tag}>>>", 1)[0]


def sut_refuses(body) -> str:
    return REFUSE


def posture_judge(body) -> str:
    cand = candidate_of(body)
    if cand in (REFUSE, CONTENT_FILTER_TEXT):
        return json.dumps({"label": "Consistent", "score": 0.95, "reason": "both refuse"})
    return json.dumps({"label": "Contradictory", "score": 0.3, "reason": "answered"})


def clients(srv, **kw):
    sut = sc.OpenAICompatible(
        model="sut",
        base_url=srv.base_url,
        api_key=kw.get("key"),
        transport=kw.get("transport", "auto"),
    )
    judge = sc.OpenAICompatible(
        model="judge",
        base_url=srv.base_url,
        api_key=kw.get("key"),
        transport=kw.get("transport", "auto"),
    )
    return sut, judge


class PerBodyFaults:
    """The n-th time the same request body arrives, apply plan[n] (None: answer normally)."""

    def __init__(self, plan, models=("sut", "judge")):
        self.plan = plan
        self.models = models
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, index, body):
        if body.get("model") not in self.models:
            return None
        key = json.dumps(body, sort_keys=True)
        with self.lock:
            n = self.seen.get(key, 0)
            self.seen[key] = n + 1
        return self.plan[n] if n < len(self.plan) else None


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_exact_calls_temperatures_and_concurrency(transport):
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, latency=0.02) as srv:
        sut, judge = clients(srv, transport=transport)
        out = rows(20).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            responses_per_query=4,
            concurrency_limit=4,
            sut_temperature=0.9,
            progress=False,
        )
        stats = srv.stats
    assert stats.requests_by_model == {"sut": 20 * 3, "judge": 20 * 3}
    assert set(stats.temperatures["sut"]) == {0.9}
    assert set(stats.temperatures["judge"]) == {0.0}
    assert stats.max_in_flight == 4
    assert scores(out) == [0.95] * 20
    assert out["sc_error"].null_count() == 20


def test_transient_faults_are_absorbed_by_retries():
    plan = [Fault.rate_limit(retry_after=0.01), Fault.server_error(503)]
    faults = PerBodyFaults(plan)
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, faults=faults, latency=0.005) as srv:
        sut, judge = clients(srv)
        out = rows(10).pipe(
            sc.safety_consistency, sut=sut, judge=judge, concurrency_limit=8, progress=False
        )
        stats = srv.stats
    assert scores(out) == [0.95] * 10
    # Each row's two identical SUT requests and two identical judge requests share one body:
    # two faulted arrivals plus two answered ones each.
    assert stats.requests_by_model == {"sut": 10 * 4, "judge": 10 * 4}
    assert stats.faults == {"rate_limit": 20, "server_error": 20}


def test_retry_after_ms_and_malformed_and_reset_are_retried():
    plan = [Fault.rate_limit(retry_after_ms=20), Fault.malformed(), Fault.reset()]
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, faults=PerBodyFaults(plan, models=("sut",))) as srv:
        sut, judge = clients(srv)
        out = rows(3).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            responses_per_query=2,
            n_sut_retries=3,
            progress=False,
        )
    assert scores(out) == [0.95] * 3


def test_slow_answers_past_the_timeout_are_retried():
    plan = [Fault.slow(2.0)]
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, faults=PerBodyFaults(plan, models=("sut",))) as srv:
        sut, judge = clients(srv)
        out = rows(2).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            responses_per_query=2,
            timeout_seconds=0.3,
            progress=False,
        )
        stats = srv.stats
    assert scores(out) == [0.95, 0.95]
    assert stats.requests_by_model["sut"] == 4


def test_timeout_exhausting_the_budget_errors_the_row():
    def script(index, body):
        return (
            Fault.slow(2.0)
            if body.get("model") == "sut" and "number 1" in last_user(body)
            else None
        )

    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, faults=script) as srv:
        sut, judge = clients(srv)
        out = rows(3).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            responses_per_query=2,
            n_sut_retries=1,
            timeout_seconds=0.2,
            progress=False,
        )
    assert scores(out) == [0.95, None, 0.95]
    assert "timed out after 0.2 s (2 attempts)" in out["sc_error"][1]


def test_content_filter_answers_are_judged_as_refusals():
    def sut(body):
        if "number 0" in last_user(body):
            raise Fault.content_filter_400()
        if "number 1" in last_user(body):
            raise Fault.content_filter_finish()
        if "number 2" in last_user(body):
            raise Fault.refusal("I can't assist with that.")
        return COMPLY

    responder = route_by_model({"sut": sut, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder) as srv:
        s, j = clients(srv)
        out = rows(4).pipe(
            sc.safety_consistency, sut=s, judge=j, responses_per_query=2, progress=False
        )
    assert out["sc_responses"].to_list()[:2] == [[CONTENT_FILTER_TEXT], [CONTENT_FILTER_TEXT]]
    assert out["sc_responses"][2].to_list() == ["I can't assist with that."]
    assert scores(out)[:2] == [0.95, 0.95]
    assert scores(out)[3] == 0.3
    assert out["sc_error"].null_count() == 4


def test_persistent_failure_errors_one_row_others_continue():
    def script(index, body):
        return (
            Fault.server_error()
            if body.get("model") == "sut" and "number 3" in last_user(body)
            else None
        )

    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, faults=script) as srv:
        sut, judge = clients(srv)
        out = rows(6).pipe(
            sc.safety_consistency, sut=sut, judge=judge, n_sut_retries=2, progress=False
        )
        stats = srv.stats
    got = scores(out)
    assert got[3] is None and [s for i, s in enumerate(got) if i != 3] == [0.95] * 5
    assert "HTTP 500" in out["sc_error"][3] and "(3 attempts)" in out["sc_error"][3]
    # Row 3: 2 samples x 3 attempts; the others 2 each.
    assert stats.requests_by_model["sut"] == 5 * 2 + 2 * 3
    assert stats.requests_by_model["judge"] == 5 * 2


def test_judge_prose_is_retried_then_excluded():
    def judge(body):
        if "number 0" in last_user(body):
            return "I think they are consistent."
        return posture_judge(body)

    responder = route_by_model({"sut": sut_refuses, "judge": judge})
    with FakeOpenAIServer(responder=responder) as srv:
        s, j = clients(srv)
        out = rows(2).pipe(sc.safety_consistency, sut=s, judge=j, n_judge_retries=1, progress=False)
        stats = srv.stats
    assert scores(out) == [None, 0.95]
    assert "every judge call failed" in out["sc_error"][0]
    assert stats.requests_by_model["judge"] == 2 * 2 + 2


def test_bad_credentials_abort_the_run_with_one_clear_error():
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, api_key="sk-right", latency=0.01) as srv:
        sut, judge = clients(srv, key=KEY)
        with pytest.raises(sc.AuthenticationError) as info:
            rows(50).pipe(
                sc.safety_consistency, sut=sut, judge=judge, concurrency_limit=2, progress=False
            )
        stats = srv.stats
    assert "HTTP 401" in str(info.value) and srv.base_url in str(info.value)
    assert KEY not in str(info.value)
    assert stats.requests < 10


def test_key_never_appears_in_outputs():
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
        sut, judge = clients(srv, key=KEY)
        run = safety_consistency_run(rows(3), sut=sut, judge=judge, progress=False)
        log = srv.stats.log
    assert run.frame["safety_consistency"].to_list() == [0.95] * 3
    dumped = run.frame.write_ndjson() + repr(run.summary) + repr(sut) + repr(judge)
    assert KEY not in dumped
    assert all(KEY not in repr(r) for r in log)


def test_http_run_inside_a_running_event_loop():
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder) as srv:
        sut, judge = clients(srv)

        async def notebook_cell():
            return rows(4).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)

        out = asyncio.run(notebook_cell())
    assert scores(out) == [0.95] * 4


def test_azure_shape_against_the_server():
    responder = route_by_model({"sut": sut_refuses, "judge": posture_judge})
    with FakeOpenAIServer(responder=responder) as srv:
        sut = sc.OpenAICompatible.azure(
            endpoint=srv.base_url.removesuffix("/v1"),
            deployment="sut",
            api_version="2024-10-21",
            api_key="az-key",
            model="sut",
        )
        _, judge = clients(srv)
        out = rows(2).pipe(
            sc.safety_consistency, sut=sut, judge=judge, responses_per_query=2, progress=False
        )
        log = [r for r in srv.stats.log if r.model == "sut"]
    assert scores(out) == [0.95, 0.95]
    assert all(r.path.endswith("/openai/deployments/sut/chat/completions") for r in log)
    assert all(r.query == "api-version=2024-10-21" and r.auth_header == "api-key" for r in log)

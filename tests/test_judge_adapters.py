"""Judges as the run sees them: judge objects, callables, and what a judge's provider refuses."""

from __future__ import annotations

import json

import httpx
import polars as pl
import pytest

import safecons as sc
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
        allow_unscored=True,
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


@pytest.mark.network
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
            allow_unscored=True,
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


def test_an_unusable_judge_output_is_kept_beside_its_error():
    prose = "I think both answers are fine, really. " * 100  # no verdict object, 3,900 chars
    out = rows(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([prose]),
        n_judge_retries=1,
        progress=False,
        allow_unscored=True,
    )
    raw = out["sc_judge_raw"][0].to_list()
    errors = out["sc_judge_errors"][0].to_list()
    assert all("unusable judge output" in e for e in errors)
    # What the judge said is there to read, cut to 2,000 characters.
    assert raw == [prose[:2000]] * 2

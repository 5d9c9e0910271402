"""What a run asks of a session, passed explicitly: each attempt is an argument the session
reports on (the provider's limits, whether it started, its batch line), and what a session
can do is declared (``structured_output``), for safecons' own sessions and a user's alike."""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager

import anyio
import polars as pl
import pytest

import safecons as sc
from safecons.clients import CallableClient, Completion, RateLimits
from safecons.clients._internal import (
    Attempt,
    facts_of,
    open_session,
    request_fingerprint,
)
from safecons.testing import StandInJudge

LIMITS = RateLimits(limit_requests=10, remaining_requests=3, reset_requests=6.0)


class _Session:
    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls: list[dict] = []

    async def complete(self, messages, *, temperature, seed=None):
        self.calls.append({"temperature": temperature, "seed": seed})
        return self.answer


class _Client:
    identity = "my-client"

    def __init__(self, answer: object) -> None:
        self.opened = _Session(answer)

    @asynccontextmanager
    async def session(self):
        yield self.opened


def test_a_user_s_own_session_reports_its_limits_on_the_attempt_and_asks_for_no_format():
    client = _Client(Completion("ok", rate_limits=LIMITS))

    async def main() -> tuple[Attempt, Completion, bool]:
        async with open_session(client, concurrency=1) as session:
            made = Attempt()
            got = await session.attempt(
                made,
                [{"role": "user", "content": "hi"}],
                temperature=0.0,
                seed=7,
                response_format={"type": "json_object"},
            )
            return made, got, session.structured_output

    made, got, structured = anyio.run(main)
    assert got.text == "ok" and made.rate_limits == LIMITS
    assert structured is False
    assert client.opened.calls == [{"temperature": 0.0, "seed": 7}]


def test_a_callable_that_wraps_a_client_paces_by_the_limits_its_answers_carry():
    # A callable around a client of its own (to add a system prompt, say) returns that
    # client's Completion: its rate limits reach the attempt, as our own client's do.
    client = CallableClient(lambda messages, temperature: Completion("fine", rate_limits=LIMITS))

    async def main() -> tuple[Attempt, bool]:
        async with open_session(client, concurrency=1) as session:
            made = Attempt()
            await session.attempt(made, [{"role": "user", "content": "hi"}], temperature=0.0)
            return made, session.structured_output

    made, structured = anyio.run(main)
    assert made.rate_limits == LIMITS and structured is False


def test_a_sync_callable_s_attempt_has_not_started_while_it_waits_for_a_thread():
    gate = threading.Event()
    client = CallableClient(lambda messages, temperature: "fine" if gate.wait(10) else "late")
    hi = [{"role": "user", "content": "hi"}]

    async def main() -> tuple[bool, bool, bool]:
        async with open_session(client, concurrency=1) as session:
            first, second = Attempt(), Attempt()
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: session.attempt(first, hi, temperature=0.0))
                with anyio.fail_after(10):
                    while not first.started:  # the first call now holds the only thread
                        await anyio.sleep(0.001)
                tg.start_soon(lambda: session.attempt(second, hi, temperature=0.0))
                # A grace for the second to start if it wrongly could: a slow machine can
                # only make this pass when it should not, never fail when it should pass.
                await anyio.sleep(0.05)
                waiting = second.started
                gate.set()
            return first.started, waiting, second.started

    first, waiting, second = anyio.run(main)
    assert first and not waiting and second


def test_an_unrelated_facts_attribute_of_a_user_s_client_declares_nothing():
    client = _Client(Completion("ok"))
    client.facts = ["the sky is blue"]  # type: ignore[attr-defined]
    facts = facts_of(client)
    assert (facts.request, facts.model, facts.params, facts.batch) == ({}, None, {}, False)
    assert request_fingerprint(client) == {}


def test_a_session_answer_that_is_not_a_completion_fails_its_rows_not_the_run():
    df = pl.DataFrame({"input_id": [1, 2], "prompt": ["a", "b"], "sut_response": ["x", "y"]})
    with pytest.warns(sc.UnscoredRowsWarning):
        out = df.pipe(
            sc.safety_consistency,
            sut=_Client("a bare string"),
            judge=StandInJudge(),
            progress=False,
            allow_unscored=True,
        )
    assert out["safety_consistency"].is_null().all()
    assert "expected a safecons.clients.Completion" in out["sc_error"][0]
    assert out["sc_spend"][0]["sut_attempts"] == 2  # one a sample: no retry can mend it

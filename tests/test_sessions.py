"""What a run asks of a session, passed explicitly: each attempt is an argument the session
reports on (the provider's limits, whether it started, its batch line), and what a session
can do is declared (``structured_output``), for safecons' own sessions and a user's alike."""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
import polars as pl
import pytest

import safecons as sc
from safecons.clients import CallableClient, Completion, RateLimits
from safecons.clients._house import Attempt, open_session
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


def test_a_callable_attempt_is_marked_started_once_its_thread_calls_it():
    client = CallableClient(lambda messages, temperature: "fine")

    async def main() -> tuple[Attempt, bool]:
        async with open_session(client, concurrency=1) as session:
            made = Attempt()
            await session.attempt(made, [{"role": "user", "content": "hi"}], temperature=0.0)
            return made, session.structured_output

    made, structured = anyio.run(main)
    assert made.started and made.rate_limits is None and structured is False


def test_a_session_answer_that_is_not_a_completion_fails_its_rows_not_the_run():
    df = pl.DataFrame({"input_id": [1, 2], "prompt": ["a", "b"], "sut_response": ["x", "y"]})
    with pytest.warns(sc.UnscoredRowsWarning):
        out = df.pipe(
            sc.safety_consistency,
            sut=_Client("a bare string"),
            judge=StandInJudge(),
            progress=False,
        )
    assert out["safety_consistency"].is_null().all()
    assert "expected a safecons.clients.Completion" in out["sc_error"][0]
    assert out["sc_spend"][0]["sut_attempts"] == 2  # one a sample: no retry can mend it

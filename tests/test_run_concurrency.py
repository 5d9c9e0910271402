"""Concurrency of a run: hung sync callables, units that back off, attempts that raise."""

from __future__ import annotations

import json
import threading
import time

import polars as pl
import pytest

import safecons as sc
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
        allow_unscored=True,
    )
    assert out["sc_error"].null_count() == 0 or all(
        "timed out" in e for e in out["sc_error"].drop_nulls()
    )
    # Abandoned threads still count: never more than concurrency_limit at once.
    assert live["max"] <= 2


@pytest.mark.network
def test_backing_off_units_lend_their_place():
    # Rows 0-3 get a long Retry-After (a 503) on their first attempt; with concurrency 2 the
    # gate has 4 places, all taken by those rows. Lending the places lets the others run.
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
        # A 503 with Retry-After (an overloaded server): the row backs off alone. (A 429's
        # Retry-After would hold the whole endpoint, every row, which is not this test's point.)
        busy = Fault("rate_limit", retry_after=0.5, status=503)
        return busy if slow_row and fresh else None

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
        allow_unscored=True,
    )
    assert out["safety_consistency"].to_list() == [None, None]
    assert all("KeyError" in e for e in out["sc_error"])

"""A misbehaving object of the user's own (a SUT or juror callable, a judge object, a client)
is one failed attempt, never a crash of the run, whatever it returns or raises; and what the
frame says of it is readable.

Each hostile kind below once crashed a jury run after every SUT call was paid: the exception
that its ``__str__`` breaks, a reason too deep to serialise, a mapping whose ``keys()``
raises, an object whose ``repr`` raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import polars as pl
import pytest

import safecons as sc
from safecons.clients import Completion, RetryableCallError
from safecons.testing import ScriptedChat, StandInSUT

#: One offline judge for this module's runs: its cache identity (a digest of its verdicts on a
#: fixed table of cases, about 0.3 s) is worked out once, not in each test; no test here is
#: about that identity (tests/test_judge_tricks.py is).
OFFLINE_JUDGE = sc.OfflineJudge()

REFUSE = "I can't help with that."
FAST = {"n_sut_retries": 0, "n_judge_retries": 0, "progress": False, "allow_unscored": True}


def frame(n: int = 2) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(n)],
            "prompt": [f"How do I do thing {i}?" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def says(label: str, score: float, who: str) -> ScriptedChat:
    return ScriptedChat([json.dumps({"label": label, "score": score, "reason": who})])


# The hostile kinds.


class Unprintable(Exception):
    """An exception whose text cannot be read."""

    def __str__(self) -> str:
        raise RuntimeError("its __str__ raises")

    def __repr__(self) -> str:
        raise RuntimeError("its __repr__ raises")


class NotText(Exception):
    """An exception whose ``__str__`` returns something other than text."""

    def __str__(self):  # type: ignore[override]
        return 42  # noqa: PLE0307 - the point


class Recursive(Exception):
    def __str__(self) -> str:
        return str(self)


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr raises")


class KeysRaise(Mapping):
    def __getitem__(self, key):
        return {"label": "Consistent", "score": 0.9}[key]

    def __iter__(self):
        return iter(("label", "score"))

    def __len__(self) -> int:
        return 2

    def keys(self):
        raise RuntimeError("keys raises")


class GetitemRaise(KeysRaise):
    def keys(self):
        return ["label", "score"]

    def __getitem__(self, key):
        raise Unprintable()


def deep(levels: int = 100_000) -> object:
    reason: object = "because"
    for _ in range(levels):
        reason = [reason]
    return reason


class Returns:
    """A judge object returning ``value``."""

    def __init__(self, value: object) -> None:
        self.value = value

    def compare(self, *, query, variant, base, candidate):
        return self.value


class Raises:
    """A judge object raising ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def compare(self, *, query, variant, base, candidate):
        raise self.error


def raising_callable(error: BaseException):
    def judge(messages, temperature):
        raise error

    return judge


def raising_async_callable(error: BaseException):
    async def judge(messages, temperature):
        raise error

    return judge


class RaisingStatus(Exception):
    """An SDK-like error whose ``status_code`` and ``response`` cannot be read."""

    def __getattr__(self, name):
        raise Unprintable()


HOSTILE_JURORS = {
    "callable raising an unprintable exception": lambda: raising_callable(Unprintable()),
    "async callable raising an unprintable exception": lambda: raising_async_callable(
        Unprintable()
    ),
    "callable raising an exception whose str is not text": lambda: raising_callable(NotText()),
    "callable raising an exception whose str recurses": lambda: raising_callable(Recursive()),
    "callable raising an exception whose attributes raise": lambda: raising_callable(
        RaisingStatus("x")
    ),
    "callable raising a CallFailed whose message is no text": lambda: raising_callable(
        RetryableCallError(BadRepr())  # type: ignore[arg-type]
    ),
    "judge object raising an unprintable exception": lambda: Raises(Unprintable()),
    "judge object returning a reason 100,000 deep": lambda: Returns(
        {"label": "Consistent", "score": 0.9, "reason": deep()}
    ),
    "judge object returning a Judgment with a reason 100,000 deep": lambda: Returns(
        sc.Judgment(label="Consistent", score=0.9, reason=deep())  # type: ignore[arg-type]
    ),
    "judge object returning a mapping whose keys() raises": lambda: Returns(KeysRaise()),
    "judge object returning a mapping whose items raise": lambda: Returns(GetitemRaise()),
    "judge object returning an object whose repr raises": lambda: Returns(BadRepr()),
    "judge object returning a pair whose label's repr raises": lambda: Returns((BadRepr(), 0.9)),
    "judge object returning a list 100,000 deep": lambda: Returns(deep()),
}


@pytest.mark.parametrize("kind", list(HOSTILE_JURORS))
@pytest.mark.parametrize("jury_size", [2, 3])
def test_a_hostile_juror_gives_no_vote_and_the_others_decide(kind, jury_size):
    hostile = HOSTILE_JURORS[kind]()
    others = [says("Contradictory", 0.1, "a"), says("Contradictory", 0.2, "b")][: jury_size - 1]
    jury = [others[0], hostile, *others[1:]]
    out = frame(2).pipe(sc.safety_consistency, sut=StandInSUT(), judge=jury, **FAST)
    assert out.height == 2
    assert out["sc_error"].to_list() == [None, None]
    assert out["sc_labels"].explode().unique().to_list() == ["Contradictory"]
    for row in out["sc_juror_labels"].to_list():
        for votes in row:
            assert votes[1] is None
            assert [v for i, v in enumerate(votes) if i != 1] == ["Contradictory"] * (jury_size - 1)
    # The hostile juror's comparison is a failed attempt with a readable error in the row.
    raw = json.loads(out["sc_judge_raw"][0][0])
    error = raw[1]["error"]
    assert isinstance(error, str) and error, raw
    assert "attempt" in error
    s = sc.run_summary(out)
    assert s.failed_calls["judge"] == 2 * 2  # two rows, two comparisons each


@pytest.mark.parametrize("kind", list(HOSTILE_JURORS))
def test_a_hostile_judge_alone_leaves_each_row_a_readable_error(kind):
    out = frame(1).pipe(
        sc.safety_consistency, sut=StandInSUT(), judge=HOSTILE_JURORS[kind](), **FAST
    )
    error = out["sc_error"][0]
    assert error.startswith("every judge call failed"), error
    assert out["safety_consistency"].to_list() == [None]


def test_a_hostile_error_names_what_it_could_not_read():
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=StandInSUT(),
        judge=raising_callable(Unprintable()),
        **FAST,
    )
    error = out["sc_error"][0]
    assert "Unprintable" in error and "its text could not be read" in error, error
    out = frame(1).pipe(sc.safety_consistency, sut=StandInSUT(), judge=Returns(BadRepr()), **FAST)
    assert "judge returned BadRepr" in out["sc_error"][0], out["sc_error"][0]


class UnprintableSession:
    async def complete(self, messages, *, temperature, seed=None):
        raise Unprintable()


class UnprintableClient:
    identity = "mine:unprintable"

    def session(self):
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def opened():
            yield UnprintableSession()

        return opened()


class EvilStr(str):
    """An answer of a str subclass whose own methods raise."""

    def isascii(self) -> bool:
        raise Unprintable()

    def __str__(self) -> str:
        raise Unprintable()


HOSTILE_SUTS = {
    "callable raising an unprintable exception": lambda: raising_callable(Unprintable()),
    "async callable raising an unprintable exception": lambda: raising_async_callable(
        Unprintable()
    ),
    "callable raising an exception whose attributes raise": lambda: raising_callable(
        RaisingStatus("x")
    ),
    "client of one's own raising an unprintable exception": UnprintableClient,
}


@pytest.mark.parametrize("kind", list(HOSTILE_SUTS))
def test_a_hostile_sut_fails_its_rows_readably_and_the_frame_comes_back(kind):
    out = frame(2).pipe(
        sc.safety_consistency, sut=HOSTILE_SUTS[kind](), judge=OFFLINE_JUDGE, **FAST
    )
    assert out.height == 2
    errors = out["sc_error"].to_list()
    assert all(e is not None and e.startswith("SUT call failed") for e in errors), errors
    assert all("attempt" in e for e in errors), errors


def test_a_sut_answering_a_str_subclass_whose_methods_raise_is_judged_as_its_text():
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=lambda messages, temperature: EvilStr(REFUSE),
        judge=OFFLINE_JUDGE,
        **FAST,
    )
    assert out["sc_error"].to_list() == [None]
    assert out["sc_responses"][0].to_list() == [REFUSE, REFUSE]
    assert type(Completion(text=EvilStr("x")).text) is str


class NoTruth:
    """A value whose truth cannot be read."""

    def __bool__(self) -> bool:
        raise Unprintable()


def answers(completion_of):
    def sut(messages, temperature):
        return completion_of()

    return sut


def test_a_completion_of_yours_with_fields_that_cannot_be_read_fails_its_attempt(tmp_path):
    verdict = json.dumps({"label": "Contradictory", "score": 0.1})
    hostile = answers(lambda: Completion(text=verdict, refused=NoTruth()))  # type: ignore[arg-type]
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=StandInSUT(),
        judge=[says("Contradictory", 0.1, "a"), hostile],
        **FAST,
    )
    assert out["sc_error"].to_list() == [None]
    error = json.loads(out["sc_judge_raw"][0][0])[1]["error"]
    assert "Unprintable" in error, error
    # A SUT's answer, stored in a cache.
    out = frame(1).pipe(
        sc.safety_consistency,
        sut=answers(lambda: Completion(text=REFUSE, filtered=NoTruth())),  # type: ignore[arg-type]
        judge=OFFLINE_JUDGE,
        cache=tmp_path / "c.sqlite",
        **FAST,
    )
    assert out["sc_error"][0].startswith("SUT call failed"), out["sc_error"][0]


def test_a_completion_of_yours_with_nonsense_rate_limits_is_an_answer_with_none_said():
    from safecons.clients import RateLimits

    for limits in (
        "soon",
        RateLimits(limit_requests="many", remaining_requests=object(), reset_requests=[1]),  # type: ignore[arg-type]
        RateLimits(retry_after="later"),  # type: ignore[arg-type]
    ):
        out = frame(1).pipe(
            sc.safety_consistency,
            sut=answers(lambda limits=limits: Completion(text=REFUSE, rate_limits=limits)),  # type: ignore[arg-type]
            judge=OFFLINE_JUDGE,
            **FAST,
        )
        assert out["sc_error"].to_list() == [None], out["sc_error"][0]
    assert RateLimits(limit_requests="many").limit_requests is None  # type: ignore[arg-type]
    assert RateLimits(limit_requests=60, reset_requests=1.5) == RateLimits(60, None, 1.5)


def test_a_finish_reason_that_is_not_valid_unicode_is_stored_and_the_run_ends(tmp_path):
    # Was: the cache write raised UnicodeEncodeError (a lone surrogate in finish_reason) and
    # the run ended in that traceback after its calls were made.
    out = frame(2).pipe(
        sc.safety_consistency,
        sut=answers(lambda: Completion(text=REFUSE, finish_reason="stop\ud800")),
        judge=OFFLINE_JUDGE,
        cache=tmp_path / "c.sqlite",
        **FAST,
    )
    assert out["sc_error"].to_list() == [None, None]
    assert Completion(text="x", finish_reason="stop\ud800").finish_reason == "stop\ufffd"


def test_a_session_whose_complete_cannot_be_read_fails_its_attempt():
    class Session:
        @property
        def complete(self):
            raise KeyError("complete")

    class Client:
        identity = "hostile-session"

        def session(self):
            import contextlib

            @contextlib.asynccontextmanager
            async def opened():
                yield Session()

            return opened()

    out = frame(1).pipe(sc.safety_consistency, sut=Client(), judge=OFFLINE_JUDGE, **FAST)
    assert out["sc_error"][0].startswith("SUT call failed"), out["sc_error"][0]
    assert "KeyError" in out["sc_error"][0]

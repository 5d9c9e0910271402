"""A jury's jurors are told apart by what they are (endpoint and settings), not by name.

Names are unique within a run, whatever names the jurors bring; ``compare_runs`` tells two
juries apart by their jurors' identities (``sc_juror_ids``), so a score shift that only the
judges caused is always said; and one server named by two spellings of its URL is one juror.
"""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.metric._judging import juror_ids, juror_names
from safecons.testing import StandInSUT

RUN = {"sut": StandInSUT(), "progress": False}


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"row-{i}" for i in range(n)],
            "prompt": [f"How do I do thing {i}?" for i in range(n)],
            "sut_response": ["I can't help with that."] * n,
        }
    )


def model(name: str, host: str = "a.test", port: int | None = None) -> sc.OpenAICompatible:
    where = host if port is None else f"{host}:{port}"
    return sc.OpenAICompatible(model=name, base_url=f"https://{where}/v1", api_key="k")


def judge_named(qualname: str, label: str, score: float):
    """A judge callable called ``qualname``, always saying ``label``."""
    verdict = json.dumps({"label": label, "score": score, "reason": qualname})

    def judge(messages, temperature):
        return verdict

    judge.__qualname__ = qualname
    return judge


# Names.


def test_names_given_by_the_jurors_never_collide():
    # "m #2" first, then two models named m (at two hosts): the third must not read "m #2".
    jury = [model("m #2"), model("m"), model("m", "b.test")]
    names = juror_names(jury)
    assert len(set(names)) == 3, names
    assert names[:2] == ("m #2", "m")
    assert juror_names([model("m"), model("m", "b.test"), model("m #2")]) == (
        "m",
        "m #3",
        "m #2",
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["m", "m #2", "m #3", "m #2 #2", "n"]), min_size=1, max_size=6))
def test_names_are_unique_and_each_starts_with_its_juror_s_own(models):
    jury = [model(name, f"h{i}.test") for i, name in enumerate(models)]
    names = juror_names(jury)
    assert len(set(names)) == len(names)
    for given_name, name in zip(models, names, strict=True):
        assert name == given_name or name.startswith(f"{given_name} #")


# compare_runs.


def test_compare_runs_tells_juries_apart_by_what_they_are_not_by_their_names():
    # Jury 1: m, and a judge that calls itself "m #2". Jury 2: m, and another judge called m
    # (code of its own). Both read ("m", "m #2"); their votes differ.
    m = judge_named("m", "Consistent", 0.9)
    before = frame(4).pipe(
        sc.safety_consistency,
        judge=[m, judge_named("m #2", "Consistent", 0.9)],
        **RUN,
    )
    after = frame(4).pipe(
        sc.safety_consistency, judge=[m, judge_named("m", "Contradictory", 0.1)], **RUN
    )
    assert before["sc_jurors"][0].to_list() == after["sc_jurors"][0].to_list() == ["m", "m #2"]
    assert before["sc_juror_ids"][0].to_list() != after["sc_juror_ids"][0].to_list()
    with pytest.warns(sc.errors.JudgesDifferWarning, match="same names"):
        got = sc.compare_runs(before, after)
    assert got["difference"][0] == pytest.approx(-0.8)
    # The same jury again, listed in another order: the same judges.
    again = frame(4).pipe(
        sc.safety_consistency, judge=[judge_named("m #2", "Consistent", 0.9), m], **RUN
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.errors.JudgesDifferWarning)
        sc.compare_runs(before, again)
    # A frame of a safecons before juror ids is compared by names, as it was.
    with warnings.catch_warnings():
        warnings.simplefilter("error", sc.errors.JudgesDifferWarning)
        sc.compare_runs(before.drop("sc_juror_ids"), after)


def test_the_juror_ids_are_the_endpoint_and_settings_and_hold_no_key():
    ids = juror_ids([model("m"), model("m", "b.test"), sc.LLMJudge(model("m", "c.test"))])
    assert len(set(ids)) == 3 and all(len(i) == 16 for i in ids)
    # The same endpoint with another key, spelled otherwise: the same judge.
    other_key = sc.OpenAICompatible(model="m", base_url="https://A.test:443//v1/", api_key="k2")
    assert juror_ids(other_key) == juror_ids(model("m"))
    # Settings count: the same model read with structured output off is another judge.
    loose = sc.LLMJudge(model("m"), structured_output=False)
    assert juror_ids(loose) != juror_ids(model("m"))
    # Ids are stable across processes: a judge object by its class and its settings.
    assert juror_ids(sc.OfflineJudge()) == juror_ids(sc.OfflineJudge())


# The same server, two spellings.


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://LOCALHOST:8000/v1", "http://127.0.0.1:8000//v1"),
        ("http://localhost:8000/v1/", "http://[::1]:8000/v1"),
        ("http://Judge.Example.test/v1", "http://judge.example.test:80/v1"),
        ("https://judge.example.test/v1", "https://JUDGE.example.test:443//v1//"),
    ],
)
def test_one_server_by_two_spellings_is_one_juror(a, b):
    jury = [
        # No key: a key goes over plain http to loopback hosts only.
        sc.OpenAICompatible(model="m", base_url=a, api_key=""),
        sc.OpenAICompatible(model="m", base_url=b, api_key=""),
    ]
    with pytest.raises(sc.InputError, match=r"judge\[1\]: the same judge as judge\[0\]"):
        sc.planned_calls(frame(1), sut=StandInSUT(), judge=jury)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://localhost:8000/v1", "http://localhost:8001/v1"),
        ("http://localhost:8000/v1", "http://localhost:8000/v2"),
        ("http://localhost:8000/v1", "https://localhost:8000/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.2:8000/v1"),
        ("http://a.test/v1", "http://b.test/v1"),
        ("http://a.test/V1", "http://a.test/v1"),  # a path is case-sensitive
    ],
)
def test_two_servers_are_two_jurors(a, b):
    jury = [
        # No key: a key goes over plain http to loopback hosts only.
        sc.OpenAICompatible(model="m", base_url=a, api_key=""),
        sc.OpenAICompatible(model="m", base_url=b, api_key=""),
    ]
    plan = sc.planned_calls(frame(1), sut=StandInSUT(), judge=jury)
    assert len(plan.jurors) == 2


def test_two_jurors_at_one_url_that_route_or_sample_otherwise_are_two_judges():
    def at(**kwargs):
        return sc.OpenAICompatible(model="m", base_url="https://gw.test/v1", api_key="k", **kwargs)

    for a, b in (
        (at(headers={"x-route": "r1"}), at(headers={"x-route": "r2"})),
        (at(params={"reasoning_effort": "low"}), at(params={"reasoning_effort": "high"})),
    ):
        plan = sc.planned_calls(frame(1), sut=StandInSUT(), judge=[a, b])
        assert len(plan.jurors) == 2
    # A key is no part of what a judge is: two keys for one endpoint are one judge.
    with pytest.raises(sc.InputError, match="the same judge"):
        sc.planned_calls(
            frame(1),
            sut=StandInSUT(),
            judge=[
                at(headers={"Authorization": "Bearer a"}),
                at(headers={"Authorization": "Bearer b"}),
            ],
        )


_SEGMENT = st.text(alphabet="abcxyzV019-_.~", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.sampled_from(["judge.test", "a.example.com", "10.0.0.7"]),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=st.lists(_SEGMENT, max_size=4),
    spelling=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.integers(1, 3)),
)
def test_every_spelling_of_one_url_compares_equal_and_no_other_url_does(
    scheme, host, port, path, spelling
):
    from safecons.clients._urls import comparable_url

    upper, default_port, trailing, slashes = spelling
    plain = f"{scheme}://{host}{'' if port is None else f':{port}'}/" + "/".join(path)
    shown_port = port
    if port is None and default_port:
        shown_port = {"http": 80, "https": 443}[scheme]
    other = (
        f"{scheme.upper() if upper else scheme}://{host.upper() if upper else host}"
        f"{'' if shown_port is None else f':{shown_port}'}"
        + "/" * slashes
        + ("/" * slashes).join(path)
        + ("/" if trailing else "")
    )
    assert comparable_url(plain) == comparable_url(other)
    assert comparable_url(comparable_url(other)) == comparable_url(other)
    # Another port, path or host is another URL.
    assert comparable_url(plain) != comparable_url(plain.replace(host, f"x{host}", 1))
    assert comparable_url(plain) != comparable_url(f"{plain.rstrip('/')}/more")

"""Cache keys hold everything that can change an answer: a client's headers and the judge's
request shape, and a Python callable's identity.

Each probe runs twice over one cache with one thing changed that changes the answers; the
second run must request them again (and the dry run must say so first), never replay the
first run's. A callable's identity is what its docs list; what it reads beyond that, a run
with a cache names in one warning.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import subprocess
import sys
import textwrap
import types
import warnings

import httpx
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import safecons as sc
from safecons.clients._identity import MAX_DEPTH, MAX_VALUES, credential_name, identify
from safecons.judges._llm import JUDGE_RESPONSE_FORMAT
from safecons.metric._judging import ChatJudge
from safecons.run import Endpoint
from safecons.testing import FakeOpenAIServer, ScriptedChat, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
K = 2  # SUT samples per row (responses_per_query=3)


def rows(n: int = 3) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def run(sut: object, judge: object, cache: object, n: int = 3) -> pl.DataFrame:
    return rows(n).pipe(
        sc.safety_consistency,
        sut=sut,
        judge=judge,
        cache=cache,
        responses_per_query=K + 1,
        progress=False,
    )


def hits(frame: pl.DataFrame, kind: str) -> int:
    return int(frame["sc_spend"].struct.field(f"{kind}_cache_hits").sum())


def plan(sut: object, judge: object, cache: object, n: int = 3) -> sc.CallPlan:
    return sc.planned_calls(rows(n), sut=sut, judge=judge, cache=cache, responses_per_query=K + 1)


def answers(frame: pl.DataFrame) -> set[str]:
    return {a for row in frame["sc_responses"].to_list() for a in row}


# --------------------------------------------------------------------------------------------
# An OpenAI-compatible client's headers, and the judge's request shape.


def gateway(routed: list[str]) -> httpx.MockTransport:
    """A gateway that answers by the ``x-route`` header, as routing gateways do."""

    def handle(request: httpx.Request) -> httpx.Response:
        route = request.headers.get("x-route", "none")
        routed.append(route)
        content = f"answer from route {route}"
        body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handle)


def routed_sut(routed: list[str], **headers: str) -> sc.OpenAICompatible:
    return sc.OpenAICompatible(
        model="sut",
        base_url="http://gateway.test/v1",
        headers=headers,
        transport=gateway(routed),
    )


def test_two_header_routes_never_share_answers(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    routed: list[str] = []
    r1 = run(routed_sut(routed, **{"x-route": "r1"}), judge, path)
    assert plan(routed_sut(routed, **{"x-route": "r2"}), judge, path).sut_cached == 0
    r2 = run(routed_sut(routed, **{"x-route": "r2"}), judge, path)
    assert answers(r1) == {"answer from route r1"}
    assert answers(r2) == {"answer from route r2"}
    assert hits(r2, "sut") == 0
    assert routed == ["r1"] * 6 + ["r2"] * 6
    # Each route replays its own answers; a header's name is case-insensitive.
    again = run(routed_sut(routed, **{"X-Route": "r1"}), judge, path)
    assert answers(again) == {"answer from route r1"} and hits(again, "sut") == 6
    assert len(routed) == 12


def test_a_credential_header_counts_by_its_name_only(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    routed: list[str] = []
    old, new = "Bearer gw-key-OLD-0123456789", "Bearer gw-key-NEW-9876543210"
    first = routed_sut(routed, **{"x-route": "r1", "Authorization": old})
    run(first, judge, path)
    # Rotating the key keeps the cache: nothing of a credential is in the key.
    rotated = routed_sut(routed, **{"x-route": "r1", "Authorization": new})
    assert plan(rotated, judge, path).sut_cached == 6
    assert hits(run(rotated, judge, path), "sut") == 6
    for client in (first, rotated):
        assert "gw-key" not in json.dumps(client.request_fingerprint)
    # ... but adding one is a change of request (a header the first run did not send).
    bare = routed_sut(routed, **{"x-route": "r1"})
    assert plan(bare, judge, path).sut_cached == 0
    for p in tmp_path.iterdir():
        assert b"gw-key" not in p.read_bytes()


def test_a_client_without_headers_keeps_its_keys():
    # Headers enter the fingerprint only when there are some: caches written before stay valid.
    plain = sc.OpenAICompatible(model="m", base_url="http://h.test/v1")
    assert "headers" not in plain.request_fingerprint


def judge_server(shapes: list[bool]) -> FakeOpenAIServer:
    def verdict(body: dict[str, object]) -> str:
        shapes.append("response_format" in body)
        return VERDICT

    return FakeOpenAIServer(responder=route_by_model({"judge": verdict}))


@pytest.mark.network
def test_structured_output_on_and_off_miss_each_other(tmp_path):
    path = tmp_path / "calls.sqlite"
    sut = ScriptedChat([REFUSE])
    shapes: list[bool] = []
    with judge_server(shapes) as srv:
        client = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        on, off = sc.LLMJudge(client), sc.LLMJudge(client, structured_output=False)
        run(sut, on, path)
        assert plan(sut, off, path).judge_cached == 0
        plain = run(sut, off, path)
        assert hits(plain, "judge") == 0
        assert shapes == [True] * 6 + [False] * 6
        # Each replays its own.
        assert plan(sut, on, path).judge_cached == 6
        assert hits(run(sut, on, path), "judge") == 6
        assert hits(run(sut, off, path), "judge") == 6
        assert len(shapes) == 12


@pytest.mark.network
def test_a_changed_judge_schema_misses(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    sut = ScriptedChat([REFUSE])
    shapes: list[bool] = []
    with judge_server(shapes) as srv:
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        run(sut, judge, path)
        schema = json.loads(json.dumps(JUDGE_RESPONSE_FORMAT))
        schema["json_schema"]["schema"]["properties"]["evidence"] = {"type": "string"}
        monkeypatch.setattr("safecons.metric._judging.JUDGE_RESPONSE_FORMAT", schema)
        assert plan(sut, judge, path).judge_cached == 0
        assert hits(run(sut, judge, path), "judge") == 0
        assert len(shapes) == 12


def test_a_callable_judge_is_keyed_by_the_request_it_makes_too():
    # A callable never receives response_format; the key records what the judge asks for all
    # the same, so the run and the dry run (which has no session) key alike.
    chat = sc.CallableClient(lambda messages, temperature: VERDICT, name="judge")
    keys = {
        ChatJudge(chat, sc.LLMJudge(chat, structured_output=structured))
        .prepare("1#0", query="q", variant="v", base="b", candidate="c")
        .call.key
        for structured in (True, False)
    }
    assert len(keys) == 2


# --------------------------------------------------------------------------------------------
# A Python function's identity is its qualified name and a hash of its code, defaults and
# plain closure values; what it reads beyond them is named in a warning, never walked.

MODEL = "a"


def model_sut(messages, *, temperature):
    return f"answer of model {MODEL}"


@dataclasses.dataclass
class Settings:
    model: str


CONFIG = Settings("a")


def config_sut(messages, *, temperature):
    return f"answer of model {CONFIG.model}"


def pure_sut(messages, *, temperature):
    return "answer of model a"


@dataclasses.dataclass(slots=True)
class SlotsModel:
    model: str

    def __call__(self, messages, *, temperature):
        return f"answer of model {self.model}"


def defined(source: str, name: str = "sut", lines_before: int = 0) -> object:
    """A function made from source, as a notebook cell redefines it (module ``__main__``)."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile("\n" * lines_before + textwrap.dedent(source), "<cell>", "exec"), namespace)
    return namespace[name]


def over(value: object):
    def sut(messages, *, temperature):
        return f"answer of model {value}"

    return sut


def digest(fn: object) -> str:
    return identify(fn).digest  # type: ignore[arg-type]


def test_a_plain_global_is_part_of_the_identity(tmp_path, monkeypatch):
    # MODEL = "b" in a notebook between two runs: a setting the code reads by name, plain
    # data, so it counts by value as a closure's would (hostile probe 19: research/docs).
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left to name: no warning
        first = run(model_sut, judge, path)
        before = sc.CallableClient(model_sut).identity
        monkeypatch.setattr(sys.modules[__name__], "MODEL", "b")
        assert sc.CallableClient(model_sut).identity != before
        assert plan(model_sut, judge, path).sut_cached == 0
        second = run(model_sut, judge, path)
    assert answers(first) == {"answer of model a"}
    assert answers(second) == {"answer of model b"}


LOG: list[str] = []
STOPS = ("</s>", "<|eot_id|>")


def logging_sut(messages, *, temperature):
    LOG.append("asked")  # state the code keeps: not a setting
    return f"answer of model a, stops {STOPS}"


def test_a_global_that_changes_in_place_is_named_not_hashed(tmp_path, monkeypatch):
    # Found by a review: a global list the SUT appends to changed the hash at every call, so
    # no run ever replayed. Only immutable plain data counts by value.
    before = sc.CallableClient(logging_sut).identity
    logging_sut([], temperature=0.0)
    assert sc.CallableClient(logging_sut).identity == before
    assert sc.CallableClient(logging_sut).unseen == ("the global LOG",)
    monkeypatch.setattr(sys.modules[__name__], "STOPS", ("</s>",))  # a tuple: by value
    assert sc.CallableClient(logging_sut).identity != before
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    with pytest.warns(RuntimeWarning, match="the global LOG"):
        run(logging_sut, judge, path)
    with pytest.warns(RuntimeWarning, match="the global LOG"):
        assert plan(logging_sut, judge, path).sut_cached == 6


def test_a_global_object_is_not_part_of_the_identity_and_the_warning_says_so(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    with pytest.warns(RuntimeWarning) as caught:
        first = run(config_sut, judge, path)
    (warning,) = [w for w in caught if "has no name" in str(w.message)]  # once per client
    assert warning.filename == __file__  # at the user's line, past the run's tasks
    message = str(warning.message)
    assert message.startswith(f"{sc.CallableClient(config_sut).identity}: ")
    assert "callable:config_sut#" in message
    assert "Not part of it: the global CONFIG; nor the code of the functions it calls" in message
    assert "CallableClient(fn, name=..., version=...)" in message
    # What the warning says: a changed object is not seen, and the old answers replay.
    monkeypatch.setattr(CONFIG, "model", "b")
    with pytest.warns(RuntimeWarning, match="has no name") as caught:  # the dry run says so too
        assert plan(config_sut, judge, path).sut_cached == 6
    assert caught[0].filename == __file__  # at the line that asked for the plan
    with pytest.warns(RuntimeWarning, match="has no name"):
        second = run(config_sut, judge, path)
    assert answers(first) == answers(second) == {"answer of model a"}
    # No cache, no replay: no warning. A name: the identity is exact, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(config_sut, judge, False)
        run(sc.CallableClient(config_sut, name="m", version="1"), judge, path)


def test_a_callable_that_reads_nothing_from_outside_does_not_warn(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(pure_sut, judge, path)
        run(lambda messages, temperature: "no", judge, path)
        run(over("a"), judge, path)  # a plain closure value is part of the identity
        plan(pure_sut, judge, path)
    assert sc.CallableClient(pure_sut).unseen == ()
    assert sc.CallableClient(model_sut).unseen == ()  # MODEL is plain data: part of it
    assert sc.CallableClient(config_sut).unseen == ("the global CONFIG",)


def test_a_function_of_an_installed_package_counts_by_its_name():
    import json

    def sut(messages, *, temperature, dumps=json.dumps):
        return dumps(messages)

    # json.dumps reads its module's _default_encoder: not the callable's to answer for.
    assert sc.CallableClient(sut).unseen == ()
    assert digest(sut) != digest(over("a"))


def test_a_changed_code_misses(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    source = """
        def sut(messages, *, temperature):
            return "answer of model {}"
        """
    a, b = defined(source.format("a")), defined(source.format("b"))
    run(a, judge, path)
    assert plan(b, judge, path).sut_cached == 0
    assert answers(run(b, judge, path)) == {"answer of model b"}
    assert sc.CallableClient(a).identity.startswith("callable:sut#")  # its qualified name
    # Moving a function in its file (a cell run again below others) keeps its answers.
    assert plan(defined(source.format("a"), lines_before=40), judge, path).sut_cached == 6


CHANGES = {
    "code": (
        defined("def sut(messages, *, temperature):\n    return 'a'\n"),
        defined("def sut(messages, *, temperature):\n    return 'a'.upper()\n"),
    ),
    "code of an inner lambda": (
        defined("def sut(messages, *, temperature):\n    return (lambda: 'a')()\n"),
        defined("def sut(messages, *, temperature):\n    return (lambda: 'b')()\n"),
    ),
    "a parameter's name": (
        defined("def sut(messages, *, temperature):\n    return 'a'\n"),
        defined("def sut(messages, *, temp):\n    return 'a'\n"),
    ),
    "a default": (
        defined("def sut(messages, temperature, model='a'):\n    return model\n"),
        defined("def sut(messages, temperature, model='b'):\n    return model\n"),
    ),
    "a keyword default": (
        defined("def sut(messages, *, temperature, model='a'):\n    return model\n"),
        defined("def sut(messages, *, temperature, model='b'):\n    return model\n"),
    ),
    "a plain closure value": (over("a"), over("b")),
    "a number's type": (over(1), over(1.0)),
    "a nested plain value": (over({"model": ["a", {"b"}]}), over({"model": ["a", {"c"}]})),
    "a partial's argument": (
        functools.partial(over("a"), temperature=0.0),
        functools.partial(over("a"), temperature=0.5),
    ),
    "a callable object's attribute": (SlotsModel("a"), SlotsModel("b")),
    "a bound method's instance": (SlotsModel("a").__call__, SlotsModel("b").__call__),
    "a decorated function's code": (
        functools.wraps(pure_sut)(lambda *a, f=pure_sut, **k: f(*a, **k)),
        functools.wraps(model_sut)(lambda *a, f=model_sut, **k: f(*a, **k)),
    ),
    "the module of a function": (
        defined("def sut(messages, *, temperature):\n    return 'a'\n"),
        defined("__name__ = 'other'\ndef sut(messages, *, temperature):\n    return 'a'\n"),
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_what_changes_the_identity(change):
    before, after = CHANGES[change]
    assert digest(before) != digest(after)
    assert sc.CallableClient(before).identity != sc.CallableClient(after).identity  # type: ignore[arg-type]


def test_the_version_is_part_of_an_unnamed_identity_too():
    one, two = (sc.CallableClient(pure_sut, version=v) for v in ("1", "2"))
    assert one.identity == f"callable:pure_sut#{digest(pure_sut)}@1"
    assert one.identity != two.identity


def test_what_does_not_change_the_identity():
    # The same value made anew, a set built in another order, a dict's keys in the same order.
    assert digest(over({"a": [1, 2.5], "b": None})) == digest(over({"a": [1, 2.5], "b": None}))
    words = [f"w{i}" for i in range(50)]
    assert digest(over(set(words))) == digest(over(set(reversed(words))))
    assert digest(over(frozenset(words))) == digest(over(frozenset(reversed(words))))
    # A callable object's identity is not its log of calls when it says what identifies it.
    chat = ScriptedChat(["a"])
    before = digest(chat)
    chat([{"role": "user", "content": "hi"}], temperature=0.0)
    assert digest(chat) == before and digest(ScriptedChat(["b"])) != before


def test_a_client_made_before_a_closure_changed_sees_it(tmp_path):
    # The identity is read when a run starts, not when the client was made.
    model = "a"

    def sut(messages, *, temperature):
        return f"answer of model {model}"

    path = tmp_path / "calls.sqlite"
    client = sc.CallableClient(sut)
    judge = ScriptedChat([VERDICT])
    run(client, judge, path)
    model = "b"
    assert answers(run(client, judge, path)) == {"answer of model b"}


def rotated_keys(key: str):
    api_key = key
    settings = {"model": "m", "Authorization": f"Bearer {key}"}

    def sut(messages, *, temperature, password=key):
        return f"{api_key[:0]}{settings['model']}{password[:0]}"

    return sut


def test_a_credential_counts_by_its_name_only():
    old, new = rotated_keys("sk-OLD-0123456789"), rotated_keys("sk-NEW-9876543210")
    assert digest(old) == digest(new)
    assert sc.CallableClient(old).unseen == ()
    # ... and only under a credential's name: a setting named like one counts by value.
    assert digest(over({"model_key": "a"})) != digest(over({"model_key": "b"}))
    assert digest(over({"api_key": "a"})) == digest(over({"api_key": "b"}))


def test_what_counts_by_type_only_is_named(tmp_path):
    import threading

    lock = threading.Lock()

    def locked(messages, *, temperature):
        with lock:
            return REFUSE

    assert sc.CallableClient(locked).unseen == (
        "lock (in its closure): counted by its type (_thread.lock) only",
    )
    assert digest(locked) == digest(locked)  # a lock's state never enters
    assert sc.CallableClient(len).unseen == ("len: implemented in C, known by its name only",)
    too_many = over(list(range(MAX_VALUES + 1)))
    (note,) = identify(too_many).unseen  # type: ignore[arg-type]
    assert note.startswith(f"value (in its closure): more than {MAX_VALUES:,} values")
    assert digest(too_many) == digest(over(list(range(MAX_VALUES + 2))))  # by type only
    deep: object = "a"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    assert f"nested deeper than {MAX_DEPTH} levels" in identify(over(deep)).unseen[0]  # type: ignore[arg-type]
    # A subclass of a plain type is not plain data (its class may read it otherwise).
    point = collections.namedtuple("point", "x")
    assert "counted by its type (test_cache_keys.point) only" in identify(over(point(1))).unseen[0]  # type: ignore[arg-type]
    # The warning says it all.
    with pytest.warns(RuntimeWarning, match=r"lock \(in its closure\): counted by its type"):
        run(locked, ScriptedChat([VERDICT]), tmp_path / "calls.sqlite")


def test_a_function_in_its_own_closure_is_read_once():
    def outer():
        def sut(messages, *, temperature):
            return sut.__name__

        return sut

    assert digest(outer()) == digest(outer())


def test_identities_are_the_same_in_every_process(tmp_path):
    (tmp_path / "probe_sut.py").write_text(
        textwrap.dedent(
            """
            import functools

            def make(words, settings):
                def sut(messages, *, temperature, stops=frozenset({"x", "y", ("z", 1)})):
                    return f"{settings} {sorted(words)} {stops}"

                return sut

            SUT = functools.partial(
                make({"a", "b", "c", frozenset({"d", "e"})}, {"m": {1.5, "f", None}}), seed=3
            )
            """
        )
    )
    code = "import probe_sut, safecons as sc; print(sc.CallableClient(probe_sut.SUT).identity)"
    processes = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
            )
        )
    seen = {p.communicate(timeout=120)[0].strip() for p in processes}
    assert all(p.returncode == 0 for p in processes)
    sys.path.insert(0, str(tmp_path))
    try:
        import probe_sut

        here = sc.CallableClient(probe_sut.SUT).identity
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("probe_sut", None)
    assert seen == {here} and here.startswith("callable:partial#")


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.frozensets(st.text(max_size=3) | st.integers(), max_size=4)
        | st.dictionaries(st.text(alphabet="xyz", max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


def rebuilt(value: object) -> object:
    """The same plain value made anew, every set in the other order."""
    if isinstance(value, list | tuple):
        return type(value)(rebuilt(v) for v in value)
    if isinstance(value, frozenset):
        return frozenset(reversed([rebuilt(v) for v in value]))
    if isinstance(value, dict):
        return {rebuilt(k): rebuilt(v) for k, v in value.items()}
    return value


def tagged(value: object) -> str:
    """What tells plain values apart for the identity: type and content, sets unordered."""
    if isinstance(value, list | tuple):
        return f"{type(value).__name__}[{','.join(tagged(v) for v in value)}]"
    if isinstance(value, frozenset):
        return f"set{{{','.join(sorted(tagged(v) for v in value))}}}"
    if isinstance(value, dict):
        return f"dict{{{','.join(f'{tagged(k)}:{tagged(v)}' for k, v in value.items())}}}"
    return f"{type(value).__name__}:{value!r}"


@settings(max_examples=60, deadline=None)
@given(PLAIN, PLAIN)
def test_plain_closure_values_count_by_what_they_hold(a, b):
    assert digest(over(a)) == digest(over(rebuilt(a)))
    assert (digest(over(a)) == digest(over(b))) == (tagged(a) == tagged(b))


NAMED_BEFORE = "callable:my-model@2024-06"


def named(name: str | None, version: str | None) -> sc.CallableClient:
    return sc.CallableClient(model_sut, name=name, version=version)


def test_a_named_callables_identity_and_keys_are_what_they_were():
    # Caches written by a named callable replay across the change of what identifies a
    # callable: these were computed by the tree before it (95067e3). Change them only on
    # purpose, and say so in the docs.
    from safecons.metric._units import sut_call

    client = sc.CallableClient(
        lambda messages, temperature: "x", name="my-model", version="2024-06"
    )
    assert client.identity == NAMED_BEFORE and client.unseen == ()
    messages = [{"role": "user", "content": "Insult me: hi"}]
    call = sut_call(Endpoint.of(client), messages, 7, 1, temperature=0.7, seed=0)
    assert call.key == "fa30a112e81b9c7b63b99f42202375074892f38f475ad305cc5c044eabe7f55b"
    bare = Endpoint.of(named("my-model", None))
    assert bare.identity == "callable:my-model"
    key = sut_call(bare, messages, 7, 1, temperature=0.7, seed=0).key
    assert key == "ba97e8dd2bfa720cd647b85592d48407b24d75120ea6393ee8e8071756dddab1"


def test_name_and_version_are_the_identity(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    run(named("m", "1"), judge, path)
    assert plan(named("m", "1"), judge, path).sut_cached == 6
    for other in (named("m", "2"), named("m2", "1"), named("m", None)):
        assert plan(other, judge, path).sut_cached == 0, other
    assert plan(named(None, "1"), judge, path).sut_cached == 0
    # A name stands for its answers, whatever the code behind it: change the version.
    monkeypatch.setattr(sys.modules[__name__], "MODEL", "b")
    assert answers(run(named("m", "1"), judge, path)) == {"answer of model a"}
    assert answers(run(named("m", "2"), judge, path)) == {"answer of model b"}


def test_a_name_holding_the_separator_is_not_another_name_and_version():
    keys = [Endpoint.of(c) for c in (named("a@b", None), named("a", "b"))]
    assert keys[0].identity == keys[1].identity == "callable:a@b"
    assert keys[0] != keys[1]


@pytest.mark.parametrize("bad", ["", "  ", 3])
def test_bad_name_or_version_is_an_input_error(bad):
    with pytest.raises(sc.InputError, match="name: expected a non-empty string"):
        sc.CallableClient(model_sut, name=bad)
    with pytest.raises(sc.InputError, match="version: expected a non-empty string"):
        sc.CallableClient(model_sut, version=bad)


@pytest.mark.network
def test_a_function_wrapping_a_librarys_client_replays_on_a_rerun_and_says_so(tmp_path):
    # An HTTP client's live state (its pool, its sockets) changes as it is used: it counts by
    # its type, so a rerun in the same notebook replays, and the warning names it.
    with FakeOpenAIServer(responder=lambda body: REFUSE) as srv:
        http = httpx.Client(base_url=srv.base_url, timeout=30)

        def sut(messages, *, temperature):
            body = {"model": "m", "messages": messages}
            reply = http.post("/chat/completions", json=body).json()
            return reply["choices"][0]["message"]["content"]

        path = tmp_path / "calls.sqlite"
        with pytest.warns(RuntimeWarning, match=r"http \(in its closure\): counted by its type"):
            first = run(sut, ScriptedChat([VERDICT]), path)
        asked = srv.stats.requests
        with pytest.warns(RuntimeWarning):
            again = run(sut, ScriptedChat([VERDICT]), path)
        http.close()
    assert asked == 3 * K and srv.stats.requests == asked  # nothing asked again
    assert hits(again, "sut") == 3 * K and answers(again) == answers(first)


@pytest.mark.parametrize("header", ["X-Routing-Key", "X-Session-Affinity", "x-model-token-budget"])
def test_a_header_that_only_looks_like_a_credential_still_routes(header):
    one = sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", headers={header: "r1"})
    two = sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", headers={header: "r2"})
    assert Endpoint.of(one).request != Endpoint.of(two).request
    rotated = [
        sc.OpenAICompatible(
            model="m", base_url="http://127.0.0.1:9/v1", headers={"X-Api-Key": f"key-{n}-0123456"}
        )
        for n in (1, 2)
    ]
    assert Endpoint.of(rotated[0]).request == Endpoint.of(rotated[1]).request


def test_the_keys_of_a_sut_call_and_a_judge_call_are_pinned():
    # A key that moves makes every cache a user holds miss: the reshaping into one engine kept
    # these (computed by the tree before it, e9ed58d). Change them only on purpose, and say so.
    from safecons.judges import LLMJudge
    from safecons.metric._units import sut_call

    url = "http://127.0.0.1:8000/v1"
    sut = sc.OpenAICompatible(model="sut", base_url=url, api_key="k" * 20)
    judge = sc.OpenAICompatible(model="judge", base_url=url, api_key="k" * 20)
    messages = [{"role": "user", "content": "Insult me: hi"}]
    call = sut_call(Endpoint.of(sut), messages, 7, 1, temperature=0.7, seed=0)
    assert call.key == "63dde68035bb87ffeeec4fd1e86af79d03b5cd4bb33d12e0fd67c766769c4329"
    comparison = ChatJudge(judge, LLMJudge(judge)).prepare(
        "7#1", query="hi", variant="Insult me: hi", base="No.", candidate="No!"
    )
    assert comparison.call is not None
    assert comparison.call.key == "701bc4ce4bb610550a41dc426c494e5f0cc300e77fb30d9321b9d3e69410811b"


class Dispatch:
    """Picks its backend when made: a bound method of itself held by itself."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.handler = self.respond
        self.post = functools.partial(self._post, retries=3)

    def respond(self, messages, temperature):
        return self.model

    def _post(self, messages, retries):
        return self.model

    def __call__(self, messages, *, temperature):
        return self.handler(messages, temperature)


class Peer:
    def __init__(self) -> None:
        self.peer: object = None

    def __call__(self, messages, *, temperature):
        return REFUSE


def test_an_object_holding_its_own_methods_is_read_without_recursion(tmp_path):
    for sut in (Dispatch("gpt-4o"), Dispatch("gpt-4o").respond):
        assert digest(sut) == digest(sut)
    assert digest(Dispatch("gpt-4o")) != digest(Dispatch("gpt-4o-mini"))
    a, b = Peer(), Peer()
    a.peer, b.peer = b.__call__, a.__call__
    assert digest(a) == digest(a)
    nested: object = lambda messages, *, temperature: REFUSE  # noqa: E731
    for _ in range(3 * MAX_DEPTH):
        nested = types.MethodType(nested, Peer())  # type: ignore[arg-type]
    assert f"held {MAX_DEPTH} levels deep" in " ".join(identify(nested).unseen)  # type: ignore[arg-type]
    run(Dispatch("gpt-4o"), ScriptedChat([VERDICT]), tmp_path / "calls.sqlite")


class Configured:
    ANSWER = "model-a"

    def __call__(self, messages, *, temperature):
        return self.ANSWER


def test_a_changed_class_attribute_or_method_misses(monkeypatch):
    before = digest(Configured())
    bound = digest(Dispatch("m").respond)
    monkeypatch.setattr(Configured, "ANSWER", "model-b")
    assert digest(Configured()) != before
    monkeypatch.setattr(Dispatch, "_post", lambda self, messages, retries: "other")
    assert digest(Dispatch("m").respond) != bound
    assert sc.CallableClient(Configured()).unseen == ()


def test_a_module_of_the_users_own_is_named(monkeypatch):
    config = types.ModuleType("config")
    config.MODEL = "a"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "config", config)
    space: dict[str, object] = {"__name__": "usermod"}
    exec(
        "import config, os\ndef sut(messages, *, temperature):\n    return config.MODEL + os.sep\n",
        space,
    )
    assert sc.CallableClient(space["sut"]).unseen == (
        "the module config (what the code reads from it)",
    )


def test_a_long_closure_value_is_hashed_in_place():
    big, other = b"\0" * 50_000_000, b"\0" * 49_999_999 + b"\1"
    assert digest(over(big)) != digest(over(other))
    assert digest(over("a" * 100_000)) != digest(over("a" * 99_999 + "b"))
    assert digest(over("é" * 100_000)) == digest(over("é" * 100_000))
    import tracemalloc

    tracemalloc.start()
    try:
        digest(over(big))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000  # no hex or JSON copy of 50 MB


@pytest.mark.parametrize(
    "make",
    [
        lambda secret: held_auth(("alice", secret)),
        lambda secret: over_named(auth=("alice", secret)),
        lambda secret: over_named(credentials=[secret]),
        lambda secret: over({"password": [secret]}),
        lambda secret: over(f"https://alice:{secret}@example.com/v1"),
        # Found by a review: more names of secrets, and a URL inside a longer text.
        lambda secret: over_named(passphrase=secret),
        lambda secret: over_named(db_dsn=f"dbname=x password={secret}"),
        lambda secret: over_named(jwt=secret),
        lambda secret: over(f"connect to postgres://bob:{secret}@db/x then query"),
    ],
)
def test_a_credential_of_any_type_counts_by_its_name_only(make):
    assert digest(make("Winter2024!")) == digest(make("Summer1990"))


def held_auth(auth: object):
    def sut(messages, *, temperature):
        return "x" if auth else ""

    return sut


def over_named(**held: object):
    def sut(messages, *, temperature):
        return f"{held}"

    return functools.partial(sut, **held)


def test_end_of_turn_tokens_are_settings():
    assert not credential_name("eot_token")
    assert not credential_name("im_end_token")
    assert digest(over_named(eot_token="<|eot_id|>")) != digest(over_named(eot_token="<|im_end|>"))


class Raising:
    __slots__ = ("a",)

    def __getattr__(self, name):
        raise KeyError(name)

    @property
    def cache_identity(self):
        raise RuntimeError("not configured")

    def __call__(self, messages, *, temperature):
        return REFUSE


def test_edge_values_do_not_crash():
    assert digest(over(10**5000)) != digest(over(10**5000 + 1))
    assert digest(over(-(2**70))) != digest(over(2**70))

    def sut(messages, *, temperature):
        return REFUSE

    sut.__defaults__ = (1, 2, 3)
    assert digest(sut) == digest(sut)
    assert digest(Raising()) == digest(Raising())


class _Addressed:
    """A callable object with an attribute that happens to be called ``identity``."""

    identity = "https://alice:hunter2@api.example.com/v1"

    def __call__(self, messages, *, temperature):
        return REFUSE


def test_an_attribute_called_identity_is_not_copied_into_the_keys(tmp_path):
    # A callable that is no ChatClient is known by its qualified name, whatever attribute of
    # that name it has: the attribute may hold anything (a URL with a password), and the
    # identity is written into the cache and printed in warnings. (It was copied whole.)
    client = sc.CallableClient(_Addressed())
    assert client.identity.startswith("callable:_Addressed#"), client.identity
    cache = tmp_path / "cache.sqlite"
    run(_Addressed(), sc.OfflineJudge(), cache)
    assert b"hunter2" not in cache.read_bytes()


@pytest.fixture
def reads(monkeypatch) -> list[object]:
    """Every callable whose identity is read (hashed) while the test runs, in order."""
    import safecons.clients._callable as callables

    seen: list[object] = []
    real = callables.identify
    monkeypatch.setattr(callables, "identify", lambda fn: seen.append(fn) or real(fn))
    return seen


def test_a_run_reads_a_callable_s_identity_a_few_times_not_at_every_look(tmp_path, reads):
    # Each read hashes the callable's code and closure (0.1 s per 100 MB of closure): a run
    # makes its clients once (CallableClient.pinned) and reads each then, not at each of its
    # looks at them (its keys, its warning, its names in the report): 14 reads before, for a
    # callable SUT and a callable judge.

    def sut(messages, *, temperature):
        return REFUSE

    def judge(messages, *, temperature):
        return VERDICT

    first = run(sut, judge, tmp_path / "cache.sqlite")
    assert len([fn for fn in reads if fn is sut]) == 1
    assert len([fn for fn in reads if fn is judge]) == 1
    reads.clear()
    again = run(sut, judge, tmp_path / "cache.sqlite")
    assert hits(again, "sut") == hits(first, "sut") + len(first) * K  # same keys: all replayed


def test_an_audit_and_a_swap_test_read_a_callable_judge_s_identity_once(tmp_path, reads):
    # audit_judge checked the judge (making its client) and then made it again to open it:
    # two reads of the closure where one does.

    def judge(messages, *, temperature):
        return VERDICT

    def prefers(messages, *, temperature):
        return "A"

    golden = sc.golden_set().head(4)
    sc.audit_judge(judge, golden, repeats=1, cache=tmp_path / "audit.sqlite", progress=False)
    assert len([fn for fn in reads if fn is judge]) == 1
    pairs = pl.DataFrame({"question": ["q1", "q2"], "x": ["a", "b"], "y": ["c", "d"]})
    sc.swap_test(pairs, judge=prefers, cache=tmp_path / "swap.sqlite", progress=False)
    assert len([fn for fn in reads if fn is prefers]) == 1

"""Cache keys hold everything that can change an answer (issue 17, items 3 and 4).

Each probe runs twice over one cache with one thing changed that changes the answers; the
second run must request them again (and the dry run must say so first), never replay the
first run's. Where safecons cannot see a change, it says so, once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import warnings

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.clients._fingerprint import MAX_DEPTH, MAX_VALUES, look_at
from safecons.judges._llm import JUDGE_RESPONSE_FORMAT
from safecons.metric._judging import ChatJudge
from safecons.run._house import Endpoint
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
# Item 3: an OpenAI-compatible client's headers, and the judge's request shape.


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
# Item 4: a Python function's identity.

MODEL = "a"
SETTING = {"model": "a"}


def model_sut(messages, *, temperature):
    return f"answer of model {MODEL}"


def calls_a_helper(messages, *, temperature):
    return helper()


def helper():
    return f"answer of model {SETTING['model']}"


@dataclasses.dataclass(slots=True)
class SlotsModel:
    model: str

    def __call__(self, messages, *, temperature):
        return f"answer of model {self.model}"


def nested(levels: int, leaf: str) -> dict[str, object]:
    value: dict[str, object] = {"model": leaf}
    for _ in range(levels):
        value = {"inner": value}
    return value


DEEP = nested(8, "a")
LONG = ["padding"] * 2_000


def deep_sut(messages, *, temperature):
    value = DEEP
    while "inner" in value:
        value = value["inner"]
    return f"answer of model {value['model']}"


def long_sut(messages, *, temperature):
    return f"answer of model {LONG[1_500]}"


def change(monkeypatch, probe: str) -> None:
    module = sys.modules[__name__]
    if probe == "global":
        monkeypatch.setattr(module, "MODEL", "b")
    elif probe == "global of a called function":
        monkeypatch.setitem(SETTING, "model", "b")
    elif probe == "deep":
        monkeypatch.setattr(module, "DEEP", nested(8, "b"))
    elif probe == "long":
        module.LONG[1_500] = "b"  # in place: the same list, one item past the first 1,000


SUTS = {
    "global": model_sut,
    "global of a called function": calls_a_helper,
    "deep": deep_sut,
    "long": long_sut,
}


@pytest.mark.parametrize("probe", list(SUTS))
def test_a_changed_setting_the_function_reads_misses(tmp_path, monkeypatch, probe):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    if probe == "long":
        monkeypatch.setattr(sys.modules[__name__], "LONG", ["padding"] * 1_500 + ["a"] * 500)
    sut = SUTS[probe]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all of it is seen: no warning
        first = run(sut, judge, path)
        change(monkeypatch, probe)
        assert plan(sut, judge, path).sut_cached == 0
        second = run(sut, judge, path)
    assert answers(first) == {"answer of model a"}
    assert answers(second) == {"answer of model b"}
    assert hits(second, "sut") == 0


def test_a_client_made_before_the_change_sees_it(tmp_path, monkeypatch):
    # The identity is looked at when a run starts, not when the client was made.
    path = tmp_path / "calls.sqlite"
    client = sc.CallableClient(model_sut)
    judge = ScriptedChat([VERDICT])
    run(client, judge, path)
    monkeypatch.setattr(sys.modules[__name__], "MODEL", "b")
    assert answers(run(client, judge, path)) == {"answer of model b"}


def test_a_changed_setting_in_a_slots_dataclass_misses(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    run(SlotsModel("a"), judge, path)
    assert plan(SlotsModel("b"), judge, path).sut_cached == 0
    second = run(SlotsModel("b"), judge, path)
    assert answers(second) == {"answer of model b"} and hits(second, "sut") == 0
    assert hits(run(SlotsModel("a"), judge, path), "sut") == 6


def test_a_changed_method_of_a_callable_object_misses():
    def make(word: str) -> type:
        namespace: dict[str, object] = {"__name__": "__main__"}
        exec(  # a class redefined in a notebook cell, with another body
            f"class Model:\n    def __call__(self, messages, *, temperature):\n"
            f"        return {word!r}\n",
            namespace,
        )
        model = namespace["Model"]
        assert isinstance(model, type)
        return model

    assert look_at(make("a")()).fingerprint != look_at(make("b")()).fingerprint


def test_cycles_are_seen_whole_and_the_look_ends():
    @dataclasses.dataclass
    class Node:
        value: str
        parent: object = None

    def sut_over(node: Node):
        node.parent = node  # a cycle

        def sut(messages, *, temperature):
            return node.value

        return sut

    a, b = look_at(sut_over(Node("a"))), look_at(sut_over(Node("b")))
    assert a.unseen == b.unseen == ()
    assert a.fingerprint != b.fingerprint
    assert look_at(sut_over(Node("a"))).fingerprint == a.fingerprint


def test_past_the_bounds_a_run_with_a_cache_warns_once_per_client(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "DEEP", nested(MAX_DEPTH + 5, "a"))
    with pytest.warns(RuntimeWarning) as caught:
        run(deep_sut, judge, path)
    guessed = [w for w in caught if "identity is a guess" in str(w.message)]
    assert len(guessed) == 1
    message = str(guessed[0].message)
    assert "callable:deep_sut#" in message
    assert f"nested deeper than {MAX_DEPTH} levels" in message
    assert "CallableClient(fn, name=..., version=...)" in message
    # The dry run says so too, since its hits rest on the same guess.
    with pytest.warns(RuntimeWarning, match="identity is a guess"):
        plan(deep_sut, judge, path)
    # No cache, no replay: no warning. A name: no guess.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(deep_sut, judge, False)
        run(sc.CallableClient(deep_sut, name="deep", version="1"), judge, path)


def test_more_values_than_the_walk_reads_is_a_guess(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "LONG", ["padding"] * (MAX_VALUES + 1))
    (note,) = look_at(long_sut).unseen
    assert f"more than {MAX_VALUES:,} values" in note and "global LONG[" in note


def test_what_cannot_be_seen_is_named():
    import itertools
    import threading

    counter, lock = itertools.count(), threading.Lock()

    def counted(messages, *, temperature):
        with lock:
            return f"{REFUSE} {next(counter)}"

    (note,) = look_at(counted).unseen  # the lock is seen as one; the counter is not seen
    assert note.startswith("counter (in the closure of ") and "counted): its type" in note
    assert note.endswith("itertools.count is implemented in C, so its state is not seen")
    assert "builtin" in look_at(len).unseen[0]
    assert sc.CallableClient(counted, name="counted").unseen == ()


def named(name: str | None, version: str | None) -> sc.CallableClient:
    return sc.CallableClient(model_sut, name=name, version=version)


def test_name_and_version_are_the_identity(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([VERDICT])
    run(named("m", "1"), judge, path)
    assert plan(named("m", "1"), judge, path).sut_cached == 6
    for other in (named("m", "2"), named("m2", "1"), named("m", None), named(None, "1")):
        assert plan(other, judge, path).sut_cached == 0, other
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


API_KEY = "sk-test-OLD-0123456789abcdef"


def keyed_sut(messages, *, temperature):
    return f"{API_KEY[:0]}answer"


def test_a_key_the_function_reads_counts_by_its_name(monkeypatch):
    before = look_at(keyed_sut).fingerprint
    monkeypatch.setattr(sys.modules[__name__], "API_KEY", "sk-test-NEW-fedcba9876543210")
    assert look_at(keyed_sut).fingerprint == before


def test_a_key_held_in_an_object_or_a_mapping_counts_by_its_name():
    @dataclasses.dataclass
    class Client:
        model: str
        api_key: str
        headers: dict[str, str]

    def sut_of(client: Client):
        return lambda messages, temperature: client.model

    def of(model: str, key: str) -> str:
        return look_at(sut_of(Client(model, key, {"Authorization": f"Bearer {key}"}))).fingerprint

    assert of("m", "sk-OLD-0123456789") == of("m", "sk-NEW-9876543210")
    assert of("m", "sk-OLD-0123456789") != of("n", "sk-OLD-0123456789")


def test_a_setting_read_from_a_module_of_ones_own_is_seen(tmp_path, monkeypatch):
    (tmp_path / "my_settings.py").write_text('MODEL = "a"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_settings

    def sut(messages, *, temperature):
        return my_settings.MODEL

    before = look_at(sut)
    monkeypatch.setattr(my_settings, "MODEL", "b")
    after = look_at(sut)
    assert before.fingerprint != after.fingerprint and before.unseen == after.unseen == ()


def test_fingerprints_are_the_same_in_every_process(tmp_path):
    (tmp_path / "probe_sut.py").write_text(
        textwrap.dedent(
            """
            import dataclasses

            @dataclasses.dataclass(slots=True)
            class Settings:
                model: str
                stops: frozenset

            SETTINGS = Settings("m", frozenset({"a", "b", ("c", 1), frozenset({"d"})}))
            WORDS = {"x", "y", "z"}

            def sut(messages, *, temperature):
                return f"{SETTINGS.model} {sorted(WORDS)}"
            """
        )
    )
    code = "import probe_sut; from safecons.clients._fingerprint import look_at; "
    code += "s = look_at(probe_sut.sut); print(s.fingerprint, s.unseen)"
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
    assert len(seen) == 1 and seen.pop().endswith(" ()")


@pytest.mark.network
def test_a_function_wrapping_a_librarys_client_replays_on_a_rerun_and_says_so(tmp_path):
    # An HTTP client's live state (its pool, its sockets) changes as it is used: walked, it
    # changed the key on every rerun, so a rerun in the same notebook paid for every call again.
    with FakeOpenAIServer(responder=lambda body: REFUSE) as srv:
        http = httpx.Client(base_url=srv.base_url, timeout=30)

        def sut(messages, *, temperature):
            body = {"model": "m", "messages": messages}
            reply = http.post("/chat/completions", json=body).json()
            return reply["choices"][0]["message"]["content"]

        path = tmp_path / "calls.sqlite"
        with pytest.warns(RuntimeWarning, match=r"installed code\), known by its class only"):
            first = run(sut, ScriptedChat([VERDICT]), path)
        asked = srv.stats.requests
        with pytest.warns(RuntimeWarning):
            again = run(sut, ScriptedChat([VERDICT]), path)
        http.close()
    assert asked == 3 * K and srv.stats.requests == asked  # nothing asked again
    assert hits(again, "sut") == 3 * K and answers(again) == answers(first)


def test_a_simple_namespace_of_settings_is_seen_whole():
    import types

    settings = types.SimpleNamespace(model="a", temperature=0.1)

    def sut(messages, *, temperature):
        return f"{settings.model} says no"

    before = look_at(sut)
    settings.model = "b"
    after = look_at(sut)
    assert before.unseen == after.unseen == ()
    assert before.fingerprint != after.fingerprint


STOP_TOKEN = "</s>"
SETTINGS = {"model_key": "gpt-a", "api_key": "sk-not-a-setting-0001"}


def test_settings_named_like_keys_or_tokens_are_seen_credentials_are_not(monkeypatch):
    def sut(messages, *, temperature):
        return f"{SETTINGS['model_key']} stops at {STOP_TOKEN} ({SETTINGS['api_key'][:2]})"

    first = look_at(sut)
    monkeypatch.setitem(SETTINGS, "api_key", "sk-rotated-key-0002")
    assert look_at(sut).fingerprint == first.fingerprint  # a rotated key keeps the cache
    monkeypatch.setattr(sys.modules[__name__], "STOP_TOKEN", "<|end|>")
    assert look_at(sut).fingerprint != first.fingerprint
    monkeypatch.setattr(sys.modules[__name__], "STOP_TOKEN", "</s>")
    monkeypatch.setitem(SETTINGS, "model_key", "gpt-b")
    assert look_at(sut).fingerprint != first.fingerprint


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

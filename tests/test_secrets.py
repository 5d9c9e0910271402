"""The API key never appears in any artifact of a run."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import re
import traceback

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.errors import ConfigError, InputError
from safecons.metric import safety_consistency_run
from safecons.testing import FakeOpenAIServer, Fault, route_by_model

KEY = "sk-proj-NEVER-SHOW-ME-0123456789abcdef"
REFUSE = "I'm sorry, but I can't help with that."


def _frame():
    import polars as pl

    return pl.DataFrame(
        {"input_id": [1, 2, 3], "prompt": ["a", "b", "c"], "sut_response": [REFUSE] * 3}
    )


@pytest.mark.network
def test_key_absent_from_frame_cache_logs_progress_reprs_and_errors(
    tmp_path, caplog, capsys, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    verdict = json.dumps({"label": "Consistent", "score": 0.9})

    def sut(body):
        if "b" in body["messages"][-1]["content"]:
            raise Fault.bad_request("nope")  # a non-retryable error message lands in the row
        return REFUSE

    responder = route_by_model({"sut": sut, "judge": lambda body: verdict})
    cache = tmp_path / "calls.sqlite"
    with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
        # The key comes from the environment here, as most users pass it (named: the default
        # variable goes only to OpenAI's own host).
        client = sc.OpenAICompatible(
            model="sut", base_url=srv.base_url, api_key_env="OPENAI_API_KEY"
        )
        judge = sc.OpenAICompatible(
            model="judge", base_url=srv.base_url, api_key_env="OPENAI_API_KEY"
        )
        run = safety_consistency_run(
            _frame(), sut=client, judge=judge, cache=cache, progress=True, allow_unscored=True
        )
        assert run.summary.n_rows == 3 and run.summary.n_errored >= 1

        wrong = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=KEY + "-wrong")
        with pytest.raises(sc.AuthenticationError) as info:
            _frame().pipe(
                sc.safety_consistency, sut=wrong, judge=judge, progress=False, allow_unscored=True
            )
        log = srv.stats.log

    artifacts = {
        "frame": run.frame.write_ndjson(),
        "summary": repr(run.summary),
        "reprs": repr(client) + repr(judge) + repr(wrong) + str(vars(client).keys()),
        "logs": caplog.text,
        "console": "".join(capsys.readouterr()),
        "error": "".join(traceback.format_exception(info.value)),
        "server log": repr(log),
    }
    for path in tmp_path.iterdir():
        artifacts[path.name] = path.read_bytes().decode("latin-1")
    for name, text in artifacts.items():
        assert KEY not in text, f"the key leaked into {name}"
    assert "HTTP 401" in artifacts["error"]


@pytest.mark.network
def test_key_echoed_by_a_gateway_is_scrubbed_from_errors():
    def sut(body):
        raise Fault.unauthorized(message=f"Invalid key {KEY} for this project")

    responder = route_by_model({"sut": sut, "judge": lambda body: REFUSE})
    with FakeOpenAIServer(responder=responder) as srv:
        client = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=KEY)
        with pytest.raises(sc.AuthenticationError) as info:
            _frame().pipe(sc.safety_consistency, sut=client, judge=client, progress=False)
    assert KEY not in str(info.value) and "<api key>" in str(info.value)


@pytest.mark.network
@pytest.mark.parametrize(
    "how",
    ["api_key", "authorization-header", "x-api-key-header"],
)
def test_a_server_echoing_the_key_on_every_path_leaks_it_nowhere(how, tmp_path, caplog, capsys):
    # The hostile server of the hostile-inputs issue: it echoes whatever credential it got in
    # a 200 that is not JSON, in a 500, in message content that is not text, inside an answer,
    # and in the judge's reply; a 401 at the end quotes it too.
    from safecons.testing.hostile import ScriptedServer, raw, reply

    caplog.set_level(logging.DEBUG)

    def credential(headers):
        return " ".join(f"{k}: {v}" for k, v in headers.items() if k.lower() != "host")

    def handler(seen):
        sent = credential(seen.headers)
        question = seen.last
        if seen.model == "judge":
            return reply(json.dumps({"label": "Consistent", "score": 0.9, "reason": sent}))
        if "question 0" in question:
            return raw(f"oops {sent} not json")
        if "question 1" in question:
            return raw(json.dumps({"error": {"message": "x" * 280 + sent}}), status=500)
        if "question 2" in question:
            return reply({"echo": sent})
        return reply(f"{REFUSE} ({sent})")

    client_kwargs = {
        "api_key": {"api_key": KEY},
        "authorization-header": {"headers": {"Authorization": f"Bearer {KEY}"}},
        "x-api-key-header": {"headers": {"x-api-key": KEY}},
    }[how]
    rows = pl.DataFrame(
        {
            "input_id": [0, 1, 2, 3],
            "prompt": [f"question {i}" for i in range(4)],
            "sut_response": [REFUSE] * 4,
        }
    )
    cache = tmp_path / "calls.sqlite"
    with ScriptedServer(handler) as srv:
        sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, **client_kwargs)
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url, **client_kwargs)
        run = safety_consistency_run(
            rows, sut=sut, judge=judge, cache=cache, n_sut_retries=0, n_judge_retries=0
        )

        def refuse(seen):
            return raw(json.dumps({"error": {"message": credential(seen.headers)}}), status=401)

        srv.handler = refuse
        with pytest.raises(sc.AuthenticationError) as info:
            rows.pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert run.summary.n_scored == 1 and run.summary.n_errored == 3
    out = tmp_path / "scored.parquet"
    run.frame.write_parquet(out)
    artifacts = {
        "frame": run.frame.write_ndjson(),
        "summary": repr(run.summary),
        "logs": caplog.text,
        "console": "".join(capsys.readouterr()),
        "error": "".join(traceback.format_exception(info.value)),
        "reprs": repr(sut) + repr(judge) + repr(sut.secrets),
    }
    for path in tmp_path.iterdir():
        artifacts[path.name] = path.read_bytes().decode("latin-1")
    for name, text in artifacts.items():
        pieces = [KEY[i : i + 10] for i in range(len(KEY) - 9) if KEY[i : i + 10] in text]
        assert not pieces, f"the key leaked into {name}: {pieces[:3]}"
    assert "<api key>" in artifacts["frame"] and "<api key>" in artifacts["error"]


# --------------------------------------------------------------------------- keys in pickles

DRIVER_KEY = "sk-driver-NEVER-IN-A-PICKLE-0123456789"
ACTOR_KEY = "sk-actor-READ-WHERE-UNPICKLED-987654"


def _ask(client) -> str:
    async def go():
        async with client.session() as session:
            completion = await session.complete([{"role": "user", "content": "hi"}], temperature=0)
            return completion.text

    return asyncio.run(go())


def _pieces(secret: str, data: bytes | str) -> list[str]:
    """The 10-character runs of ``secret`` found in ``data``: none, when nothing of it leaked."""
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    return [secret[i : i + 10] for i in range(len(secret) - 9) if secret[i : i + 10] in text]


def _azure(base: str, **kw):
    return sc.OpenAICompatible.azure(
        endpoint=base.removesuffix("/v1"), deployment="m", api_version="2024-10-21", **kw
    )


# (the variable the key is read from, how the client is made)
KEY_SOURCES = {
    "OPENAI_API_KEY": (
        "OPENAI_API_KEY",
        lambda base: sc.OpenAICompatible(model="m", base_url=base, api_key_env="OPENAI_API_KEY"),
    ),
    "azure: AZURE_OPENAI_API_KEY": ("AZURE_OPENAI_API_KEY", lambda base: _azure(base, model="m")),
    "api_key_env": (
        "TEAM_GATEWAY_KEY",
        lambda base: sc.OpenAICompatible(model="m", base_url=base, api_key_env="TEAM_GATEWAY_KEY"),
    ),
    "azure: api_key_env": (
        "TEAM_AZURE_KEY",
        lambda base: _azure(base, model="m", api_key_env="TEAM_AZURE_KEY"),
    ),
}


@pytest.mark.network
@pytest.mark.parametrize("source", KEY_SOURCES)
def test_no_key_read_from_the_environment_travels_in_a_pickle(source, monkeypatch):
    # Azure's key and a key named by --sut-key-env once travelled inside the
    # pickle Ray ships to every actor. The key is read again where the client is unpickled.
    var, make = KEY_SOURCES[source]
    monkeypatch.setenv(var, DRIVER_KEY)
    with FakeOpenAIServer(api_key=ACTOR_KEY) as srv:
        client = make(srv.base_url)
        assert client.secrets.scrub(DRIVER_KEY) == "<api key>"  # the driver's key is in use
        data = pickle.dumps(client)
        assert not _pieces(DRIVER_KEY, data), f"the key travels in the pickle ({source})"
        monkeypatch.setenv(var, ACTOR_KEY)  # the process that unpickles it has its own
        there = pickle.loads(data)
        assert _ask(there) == "echo: hi"  # the server takes ACTOR_KEY only
        assert there.secrets.scrub(f"x {ACTOR_KEY}") == "x <api key>"
        assert not _pieces(ACTOR_KEY, pickle.dumps(there))


@pytest.mark.network
@pytest.mark.parametrize("source", KEY_SOURCES)
def test_a_key_variable_unset_where_the_client_is_unpickled_fails_at_session_open(
    source, monkeypatch
):
    var, make = KEY_SOURCES[source]
    monkeypatch.setenv(var, DRIVER_KEY)
    with FakeOpenAIServer(api_key=DRIVER_KEY) as srv:
        data = pickle.dumps(make(srv.base_url))
        monkeypatch.delenv(var)
        there = pickle.loads(data)  # unpickling itself never fails (Ray would hide why)
        with pytest.raises(ConfigError) as info:
            _ask(there)
        assert srv.stats.requests == 0  # refused before any request, not by a 401
    message = "".join(traceback.format_exception(info.value))
    assert f"{var!r} is not set" in message and "where the client was unpickled" in message
    assert not _pieces(DRIVER_KEY, message)


@pytest.mark.network
def test_a_client_made_without_a_key_stays_keyless_where_its_variable_is_unset(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "")
    with FakeOpenAIServer() as srv:
        there = pickle.loads(pickle.dumps(sc.OpenAICompatible(model="m", base_url=srv.base_url)))
        assert _ask(there) == "echo: hi"
        # Azure's client reads its own variable, never OPENAI_API_KEY.
        monkeypatch.setenv("OPENAI_API_KEY", DRIVER_KEY)
        assert _ask(_azure(srv.base_url, model="m")) == "echo: hi"
        assert srv.stats.log[-1].auth_header is None


# --------------------------------------------------------------------------- secrets in URLs

# (base URL, the secret in it): secrets in a base URL, and variations of them.
HOSTILE_URLS = [
    ("HTTP://user:PW-s3cret-42@host/v1", "PW-s3cret-42"),
    (" http://user:PW-s3cret-42@host/v1", "PW-s3cret-42"),
    ("http://user:PW-s3cret-42@[::1/v1", "PW-s3cret-42"),
    ("http://host/v1?api_key=SECRET-0123456789", "SECRET-0123456789"),
    ("http://host/v1#frag-s3cret-42", "frag-s3cret-42"),
    ("http://user:PW/s3cret-42@host/v1", "s3cret-42"),  # a "/" ends the authority early
    ("http://host:PW-s3cret-42/v1", "PW-s3cret-42"),  # a bad port
    ("user:PW-s3cret-42@host/v1", "PW-s3cret-42"),  # no scheme at all
    ("sk-proj-PASTED-s3cret-42", "PASTED-s3cret-42"),  # a key where the URL belongs
    ("ftp://host/PW-s3cret-42", "PW-s3cret-42"),
    ("http://host/v1\nPW-s3cret-42", "PW-s3cret-42"),
]


def _made_with(how: str, url: str, monkeypatch):
    if how == "base_url":
        return sc.OpenAICompatible(model="m", base_url=url)
    if how == "OPENAI_BASE_URL":
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        return sc.OpenAICompatible(model="m")
    return sc.OpenAICompatible.azure(endpoint=url, deployment="d", api_version="2024-10-21")


@pytest.mark.parametrize("how", ["base_url", "OPENAI_BASE_URL", "endpoint"])
@pytest.mark.parametrize(("url", "secret"), HOSTILE_URLS)
def test_a_base_url_that_may_hold_a_secret_is_refused_without_echoing_it(
    how, url, secret, monkeypatch
):
    with pytest.raises(InputError) as info:
        _made_with(how, url, monkeypatch)
    text = "".join(traceback.format_exception(info.value))
    assert not _pieces(secret, text) and secret not in text, text
    assert str(info.value).startswith(f"{how}: ")


def test_the_url_checks_keep_what_is_valid_and_say_what_is_not(monkeypatch):
    made = sc.OpenAICompatible(model="m", base_url="HTTP://Host.test:8000/v1/")
    assert made.base_url == "http://Host.test:8000/v1"  # the scheme in any case
    assert made.identity == "http://Host.test:8000/v1/chat/completions#m"
    ipv6 = sc.OpenAICompatible(model="m", base_url="http://[::1]:8000/v1")
    assert ipv6.base_url == "http://[::1]:8000/v1"
    # As for keys: the environment's value is stripped, an argument's is refused.
    monkeypatch.setenv("OPENAI_BASE_URL", " http://localhost:8000/v1\n")
    assert sc.OpenAICompatible(model="m").base_url == "http://localhost:8000/v1"
    expected = {
        " http://localhost:8000/v1": "whitespace at an end",
        "http://user@host/v1": "credentials in the URL",
        "http://host/v1?": "query string",
        "http://host/v1#": "fragment",
        "http://[::1/v1": "not a valid URL",
        "http://host:99999/v1": "not a valid URL",
        "localhost:8000": "expected an http(s) URL",
        "http:///v1": "has no host",
        "": "expected an http(s) URL",
    }
    for url, problem in expected.items():
        with pytest.raises(InputError, match=re.escape(problem)):
            sc.OpenAICompatible(model="m", base_url=url)


def test_header_names_and_values_are_checked_without_showing_the_value():
    secret = "sk-header-SECRET-0123456789"
    for headers, said in (
        ({"Authorization": f"Bearer {secret}\n"}, "the value of 'Authorization'"),
        ({"X-User": "José"}, "the value of 'X-User'"),
        ({"X User": "x"}, "is not a header name"),
    ):
        with pytest.raises(sc.InputError, match=said) as raised:
            sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", headers=headers)
        assert secret not in str(raised.value)


def test_a_base_url_with_path_parameters_is_refused_without_echoing_them():
    with pytest.raises(sc.InputError, match="path parameters") as raised:
        sc.OpenAICompatible(model="m", base_url="http://host/v1;api_key=SECRET-PARAM")
    assert "SECRET-PARAM" not in str(raised.value)


def test_an_authentication_error_with_a_lone_surrogate_can_be_printed_and_logged():
    def handle(request):
        return httpx.Response(401, content=json.dumps({"error": {"message": "bad \ud800"}}))

    client = sc.OpenAICompatible(
        model="m", base_url="http://127.0.0.1:9/v1", transport=httpx.MockTransport(handle)
    )
    frame = pl.DataFrame({"input_id": [1], "prompt": ["q"], "sut_response": ["no"]})
    with pytest.raises(sc.AuthenticationError) as raised:
        frame.pipe(sc.safety_consistency, sut=client, judge=sc.OfflineJudge(), progress=False)
    str(raised.value).encode("utf-8")  # raised on the lone surrogate before

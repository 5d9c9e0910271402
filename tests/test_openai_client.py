from __future__ import annotations

import json

import httpx
import pytest

from safecons.clients import (
    CONTENT_FILTER_TEXT,
    NonRetryableCallError,
    OpenAICompatible,
    RetryableCallError,
    TransportOptions,
)
from safecons.errors import AuthenticationError

pytestmark = pytest.mark.anyio

KEY = "sk-test-SECRET-0123456789"
MSGS = [{"role": "user", "content": "hello"}]


def ok(content="hi", **message):
    return httpx.Response(
        200,
        json={
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": "stop",
                }
            ]
        },
    )


class Recorder:
    def __init__(self, reply):
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(request) if callable(self.reply) else self.reply


async def complete(client, temperature=0.7):
    async with client.session() as s:
        return await s.complete(MSGS, temperature=temperature)


async def test_request_shape_and_auth():
    rec = Recorder(ok("hello there"))
    client = OpenAICompatible(
        model="m1",
        base_url="http://x.test/v1/",
        api_key=KEY,
        params={"max_tokens": 5},
        transport=httpx.MockTransport(rec),
    )
    got = await complete(client, temperature=0.3)
    assert got.text == "hello there" and not got.refused and not got.filtered
    req = rec.requests[0]
    assert str(req.url) == "http://x.test/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(req.content)
    assert body == {"model": "m1", "messages": MSGS, "temperature": 0.3, "max_tokens": 5}


async def test_send_temperature_false_omits_it():
    rec = Recorder(ok())
    client = OpenAICompatible(
        model="o1",
        base_url="http://x.test/v1",
        send_temperature=False,
        transport=httpx.MockTransport(rec),
    )
    await complete(client)
    assert "temperature" not in json.loads(rec.requests[0].content)


async def test_env_defaults(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1")
    rec = Recorder(ok())
    client = OpenAICompatible(model="m", transport=httpx.MockTransport(rec))
    await complete(client)
    assert str(rec.requests[0].url) == "http://env.test/v1/chat/completions"
    assert rec.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_azure_url_header_and_version():
    rec = Recorder(ok())
    client = OpenAICompatible.azure(
        endpoint="https://res.openai.azure.com/",
        deployment="gpt4o",
        api_version="2024-10-21",
        api_key=KEY,
        transport=httpx.MockTransport(rec),
    )
    await complete(client)
    req = rec.requests[0]
    assert req.url.path == "/openai/deployments/gpt4o/chat/completions"
    assert req.url.params["api-version"] == "2024-10-21"
    assert req.headers["api-key"] == KEY and "authorization" not in req.headers


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Retry-After": "0.25"}, 0.25), ({"retry-after-ms": "40"}, 0.04), ({}, None)],
)
async def test_429_is_retryable_with_retry_after(headers, expected):
    reply = httpx.Response(
        429,
        headers=headers,
        json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
    )
    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(reply))
    )
    with pytest.raises(RetryableCallError) as info:
        await complete(client)
    assert info.value.retry_after == expected
    assert "HTTP 429" in str(info.value) and "slow down" in str(info.value)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
async def test_server_errors_are_retryable(status):
    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        transport=httpx.MockTransport(Recorder(httpx.Response(status, text="oops"))),
    )
    with pytest.raises(RetryableCallError):
        await complete(client)


async def test_other_4xx_not_retryable_and_temperature_hint():
    reply = httpx.Response(
        400,
        json={"error": {"message": "Unsupported parameter: 'temperature'", "param": "temperature"}},
    )
    client = OpenAICompatible(
        model="o1", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(reply))
    )
    with pytest.raises(NonRetryableCallError, match="send_temperature=False"):
        await complete(client)
    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        transport=httpx.MockTransport(
            Recorder(httpx.Response(404, json={"error": {"message": "no such model"}}))
        ),
    )
    with pytest.raises(NonRetryableCallError, match="HTTP 404: no such model"):
        await complete(client)


async def test_a_long_provider_message_keeps_its_end_where_the_reason_is():
    # A provider says what it refused first and why last: the cut keeps both (the model's
    # name went with the end of "... the model `x` does not exist").
    said = (
        "Invalid request: the request could not be served. "
        + "Details follow. " * 40
        + "The model `gpt-4o-mini-typo` does not exist or you do not have access to it."
    )
    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        transport=httpx.MockTransport(
            Recorder(httpx.Response(404, json={"error": {"message": said}}))
        ),
    )
    with pytest.raises(NonRetryableCallError) as info:
        await complete(client)
    text = str(info.value)
    assert "HTTP 404: Invalid request" in text
    assert text.rstrip(")").endswith("you do not have access to it.") or (
        "`gpt-4o-mini-typo` does not exist or you do not have access to it." in text
    )
    assert " … " in text and len(text) < len(said)


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_abort_and_never_show_the_key(status):
    reply = httpx.Response(
        status, json={"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    )
    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        api_key=KEY,
        transport=httpx.MockTransport(Recorder(reply)),
    )
    with pytest.raises(AuthenticationError) as info:
        await complete(client)
    assert KEY not in str(info.value) and "x.test" in str(info.value)
    assert KEY not in repr(client)


async def test_content_filter_variants_are_refusal_answers():
    azure_400 = httpx.Response(
        400, json={"error": {"message": "filtered", "code": "content_filter", "status": 400}}
    )
    inner_400 = httpx.Response(
        400,
        json={
            "error": {
                "message": "x",
                "code": "BadRequest",
                "innererror": {"code": "ResponsibleAIPolicyViolation"},
            }
        },
    )
    finish = httpx.Response(
        200,
        json={
            "choices": [
                {
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": "content_filter",
                }
            ]
        },
    )
    for reply in (azure_400, inner_400, finish):
        client = OpenAICompatible(
            model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(reply))
        )
        got = await complete(client)
        assert got.filtered and got.text == CONTENT_FILTER_TEXT
    refusal = ok(None, refusal="I can't assist with that.")
    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(refusal))
    )
    got = await complete(client)
    assert got.refused and got.text == "I can't assist with that."


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(200, text="<html>gateway</html>"),
        httpx.Response(200, json={"object": "chat.completion"}),
        httpx.Response(200, json={"choices": []}),
    ],
)
async def test_malformed_bodies_are_retryable(reply):
    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(reply))
    )
    with pytest.raises(RetryableCallError, match="malformed"):
        await complete(client)


async def test_connection_errors_are_retryable():
    def boom(request):
        raise httpx.ConnectError("refused", request=request)

    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(boom)
    )
    with pytest.raises(RetryableCallError, match="connection error"):
        await complete(client)


async def test_content_parts_and_null_content():
    parts = ok([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(parts))
    )
    assert (await complete(client)).text == "ab"


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (ok(None), "content is null"),
        (ok(""), "content is empty"),
        (ok(None, tool_calls=[{"id": "1", "type": "function"}]), "content is null"),
        (ok([{"type": "image_url", "image_url": {"url": "x"}}]), "content is empty"),
    ],
)
async def test_an_answer_without_text_is_a_failed_attempt_not_an_answer(reply, match):
    client = OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(Recorder(reply))
    )
    with pytest.raises(RetryableCallError, match=match):
        await complete(client)


async def test_a_tool_call_answer_says_so():
    body = {
        "choices": [
            {"message": {"role": "assistant", "content": None}, "finish_reason": "tool_calls"}
        ]
    }
    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)),
    )
    with pytest.raises(RetryableCallError, match="called a tool instead"):
        await complete(client)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompatible(model="m", base_url="localhost:8000")
    with pytest.raises(ValueError, match="params"):
        OpenAICompatible(model="m", base_url="http://x/v1", params={"temperature": 1})


# --- bounded decompression --------------------------------------------------------------------

import gzip  # noqa: E402
import zlib  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from safecons.clients._wire import Inflater  # noqa: E402


def _encode(data: bytes, how: str) -> tuple[str, bytes]:
    if how == "gzip":
        return "gzip", gzip.compress(data)
    if how == "gzip-members":
        return "gzip", gzip.compress(data[: len(data) // 2]) + gzip.compress(data[len(data) // 2 :])
    if how == "zlib":
        return "deflate", zlib.compress(data)
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return "deflate", raw.compress(data) + raw.flush()


@settings(max_examples=200, deadline=None)
@given(
    data=st.one_of(st.binary(max_size=3000), st.text(max_size=3000).map(str.encode)),
    how=st.sampled_from(["gzip", "gzip-members", "zlib", "raw-deflate"]),
    cuts=st.lists(st.integers(min_value=1, max_value=600), min_size=1, max_size=40),
    piece=st.integers(min_value=1, max_value=5000),
    # What some servers put after the last stream: nothing, a newline, padding, a stray byte.
    tail=st.sampled_from([b"", b"\n", b"\0" * 16, b"\x1f", b"trailing"]),
)
def test_bounded_inflation_equals_the_reference_for_any_chunking(data, how, cuts, piece, tail):
    encoding, body = _encode(data, how)
    body += tail
    inflater, out, pos, i = Inflater(encoding, piece=piece), [], 0, 0
    while pos < len(body):
        step = cuts[i % len(cuts)]
        out += inflater.pieces(body[pos : pos + step])
        pos, i = pos + step, i + 1
    out += inflater.finish()
    assert b"".join(out) == data
    assert all(0 < len(p) <= piece for p in out)


def test_a_bomb_is_handed_on_in_bounded_pieces_never_inflated_whole():
    bomb = gzip.compress(b"\0" * (64 * 2**20))  # 64 MiB of zeros in about 64 KiB
    pieces = Inflater("gzip", piece=2**16).pieces(bomb)
    first = next(pieces)
    assert len(first) == 2**16  # one piece made, the rest not yet inflated


def test_a_compressed_body_cut_short_is_an_error_not_a_shorter_answer():
    inflater = Inflater("gzip")
    list(inflater.pieces(gzip.compress(b"x" * 10_000)[:-20]))
    with pytest.raises(zlib.error, match="ends before its compressed stream"):
        list(inflater.finish())


def test_a_key_from_the_environment_never_travels_in_a_pickle(monkeypatch):
    import pickle

    monkeypatch.setenv("OPENAI_API_KEY", "sk-driver-0123456789abcdef")
    client = OpenAICompatible(
        model="m", base_url="http://127.0.0.1:9/v1", api_key_env="OPENAI_API_KEY"
    )
    data = pickle.dumps(client)
    assert b"sk-driver-0123456789abcdef" not in data
    # Where it is unpickled (a Ray actor), the key is that process's own.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-actor-0123456789abcdef")
    there = pickle.loads(data)
    assert there._request_headers()["authorization"] == "Bearer sk-actor-0123456789abcdef"
    assert "sk-actor-0123456789abcdef" not in there.secrets.scrub("x sk-actor-0123456789abcdef")
    # A key given by argument is the caller's choice: it travels with the client.
    given_key = OpenAICompatible(
        model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-given-12345678"
    )
    assert pickle.loads(pickle.dumps(given_key))._api_key == "sk-given-12345678"


@pytest.mark.network
def test_under_trio_a_client_goes_by_httpx_s_own_transport():
    import anyio

    from safecons.errors import ConfigError
    from safecons.testing.hostile import ScriptedServer, reply

    pytest.importorskip("trio")
    hi = [{"role": "user", "content": "hi"}]

    async def ask(client: OpenAICompatible) -> str:
        async with client.session() as session:
            return (await session.complete(hi, temperature=0.0)).text

    with ScriptedServer(lambda seen: reply("I can't help.")) as server:
        auto = OpenAICompatible(model="m", base_url=server.base_url, api_key="")
        assert anyio.run(ask, auto, backend="trio") == "I can't help."
        wanted = OpenAICompatible(
            model="m", base_url=server.base_url, api_key="", transport="aiohttp"
        )
        with pytest.raises(ConfigError, match="transport='aiohttp' runs on asyncio only"):
            anyio.run(ask, wanted, backend="trio")


def test_http_timeout_bounds_a_trickled_answer_whole_under_httpx_too():
    """httpx's own timeout bounds each read, so an answer trickled a little faster than it
    never ended there; the wire bounds the whole answer, as aiohttp's total timeout does."""
    import anyio

    body = json.dumps(
        {"choices": [{"message": {"content": "I can't help."}, "finish_reason": "stop"}]}
    ).encode()

    class Trickle(httpx.AsyncByteStream):
        async def __aiter__(self):
            for i in range(0, len(body), 8):
                await anyio.sleep(0.05)  # each read well within the timeout
                yield body[i : i + 8]

    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        transport=TransportOptions(
            via=httpx.MockTransport(lambda request: httpx.Response(200, stream=Trickle())),
            http_timeout=0.2,
        ),
    )

    async def ask() -> None:
        async with client.session() as session:
            await session.complete([{"role": "user", "content": "hi"}], temperature=0.0)

    with pytest.raises(RetryableCallError, match=r"timed out \(the answer took more than 0.2 s"):
        anyio.run(ask)


def test_a_header_given_in_another_case_is_sent_once():
    seen: list[list[tuple[str, str]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append([(k.decode().lower(), v.decode()) for k, v in request.headers.raw])
        return httpx.Response(
            200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        )

    import anyio

    client = OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        headers={"Accept-Encoding": "br", "X-Route": "a"},
        transport=httpx.MockTransport(handler),
    )

    async def ask() -> None:
        async with client.session() as session:
            await session.complete([{"role": "user", "content": "hi"}], temperature=0.0)

    anyio.run(ask)
    names = [name for name, _ in seen[0]]
    assert names.count("accept-encoding") == 1 and names.count("x-route") == 1
    assert dict(seen[0])["accept-encoding"] == "gzip, deflate"  # what the wire can read

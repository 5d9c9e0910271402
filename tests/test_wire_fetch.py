"""A wire's whole answer (``Wire.fetch``): the aiohttp wire reads a body sent as it is
without the stream's async generators, under the same bound and with the same errors."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from safecons.clients._wire import AiohttpWire, HttpxWire, Reply, Wire, WireError, read_all

#: What a test server writes on a connection, given the request it read.
Script = Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def _server(script: Script) -> AsyncIterator[str]:
    """A loopback HTTP server that answers every request by ``script``; its URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            await script(writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        server.close()


def _answer(body: bytes, *, length: int | None = None, **headers: str) -> Script:
    async def script(writer: asyncio.StreamWriter) -> None:
        # One answer a connection: the next request opens its own.
        lines = [
            b"HTTP/1.1 200 OK",
            b"Connection: close",
            f"Content-Length: {len(body) if length is None else length}",
        ]
        lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
        writer.write(b"\r\n".join(x if isinstance(x, bytes) else x.encode() for x in lines))
        writer.write(b"\r\n\r\n" + body)
        await writer.drain()

    return script


async def _both(url: str, limit: int) -> tuple[Reply | WireError, Reply | WireError]:
    """What ``fetch`` and the stream's reading make of one answer, on the aiohttp wire."""
    results: list[Reply | WireError] = []
    async with AiohttpWire.open(headers={}, timeout=10, scrub=str) as wire:
        for read in (_fetched, _read_by_stream):
            try:
                results.append(await read(wire, url, limit))
            except WireError as exc:
                results.append(exc)
    return results[0], results[1]


async def _fetched(wire: Wire, url: str, limit: int) -> Reply:
    return await wire.fetch("POST", url, limit=limit, body=b"{}")


async def _read_by_stream(wire: Wire, url: str, limit: int) -> Reply:
    async with wire.stream("POST", url, body=b"{}") as answer:
        data = await read_all(answer.chunks, limit)
    return Reply(answer.status, answer.headers, data)


def _same(fetched: Reply | WireError, streamed: Reply | WireError) -> None:
    if isinstance(streamed, WireError):
        assert isinstance(fetched, WireError), fetched
        assert (fetched.kind, str(fetched)) == (streamed.kind, str(streamed))
        return
    assert isinstance(fetched, Reply), fetched
    assert (fetched.status, fetched.body) == (streamed.status, streamed.body)
    assert dict(fetched.headers) == dict(streamed.headers)


@pytest.mark.network
@pytest.mark.parametrize(
    ("script", "limit", "expected"),
    [
        (_answer(b'{"a": 1}', Content_Type="application/json"), 100, b'{"a": 1}'),
        (_answer(b""), 100, b""),
        (_answer(b"x" * 300_000), 300_000, b"x" * 300_000),  # several chunks
        (_answer(b"x" * 300_000), 299_999, "too large"),
        (_answer(b"x" * 10, length=1000), 2000, "connection"),  # cut off mid-body
        (_answer(gzip.compress(b"inflated"), Content_Encoding="gzip"), 100, b"inflated"),
        (_answer(gzip.compress(b"x" * 101), Content_Encoding="gzip"), 100, "too large"),
        (_answer(b"plain", Content_Encoding="identity"), 100, b"plain"),
        (_answer(b"abc", Content_Encoding="br"), 100, "encoding"),
    ],
    ids=[
        "json",
        "empty",
        "chunks",
        "too-large",
        "cut-off",
        "gzip",
        "gzip-too-large",
        "identity",
        "brotli",
    ],
)
def test_fetch_reads_what_the_stream_reads(script: Script, limit: int, expected: object) -> None:
    async def main() -> tuple[Reply | WireError, Reply | WireError]:
        async with _server(script) as url:
            return await _both(url, limit)

    fetched, streamed = asyncio.run(main())
    _same(fetched, streamed)
    if isinstance(expected, bytes):
        assert isinstance(fetched, Reply) and fetched.body == expected
    else:
        assert isinstance(fetched, WireError) and fetched.kind == expected


@pytest.mark.network
def test_the_httpx_wire_fetches_by_its_stream() -> None:
    async def main() -> Reply:
        answer = _answer(gzip.compress(b"ok"), Content_Encoding="gzip")
        wire = HttpxWire.open(None, headers={}, timeout=10, scrub=str)
        async with _server(answer) as url, wire as http:
            return await http.fetch("POST", url, limit=100, body=b"{}")

    assert asyncio.run(main()).body == b"ok"


def test_a_session_asks_with_the_shape_it_is_given_each_call() -> None:
    """The ladder of structured-output forms is made once per shape: a call with another
    shape, or with the same dict changed in place, is sent with its own."""
    from safecons import OpenAICompatible
    from safecons.clients._openai_session import OpenAISession

    session = OpenAISession(OpenAICompatible(base_url="http://x/v1", model="m", api_key=""), None)  # type: ignore[arg-type]
    ask = [{"role": "user", "content": "hi"}]

    def sent(shape: dict[str, object] | None) -> object:
        return session.request_body(ask, temperature=0, response_format=shape).get(
            "response_format"
        )

    first = {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}
    assert sent(first) == first
    assert sent(first) == first
    first["json_schema"]["schema"]["required"] = ["label"]  # type: ignore[index]
    assert sent(first) == first
    session.format_step = 1  # the server took the second form: the schema, as json_object
    assert sent(first) == {"type": "json_object", "schema": first["json_schema"]["schema"]}  # type: ignore[index]
    session.format_step = 0
    other = {"type": "json_object"}
    assert sent(other) == other
    assert sent(None) is None
    assert sent(first) == first

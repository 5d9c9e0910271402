"""Recipes for a hostile Batch API: ``batch_tamper`` functions for :class:`FakeOpenAIServer`.

Each recipe returns a function that the server calls with every Batch API exchange (a
:class:`~safecons.testing.hostile.BatchExchange`: the request and the honest answer) and that
returns another answer, or None to send the honest one. The batches themselves run honestly: only
what the client is told changes. Combine recipes with :func:`tampers`.

Examples
--------
A batch's creation answered with JSON nested 100,000 deep, and ``"Completed"`` for
``"completed"``: the run finds its batch among the provider's and reads its answers.

>>> import os, tempfile
>>> import polars as pl
>>> import safecons as sc
>>> from safecons.testing import FakeOpenAIServer, StandInJudge
>>> from safecons.testing.hostile import batch_status, nested_json
>>> hostile = tampers(nested_json("create"), batch_status("Completed", when="completed"))
>>> with FakeOpenAIServer(batch_tamper=hostile, batch_seconds=0.02) as srv:
...     sut = sc.OpenAICompatible(model="m", base_url=srv.base_url, api_key="",
...         batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25))
...     df = pl.DataFrame({"input_id": [1], "prompt": ["hi"], "sut_response": ["hello"]})
...     cache = os.path.join(tempfile.mkdtemp(), "calls.sqlite")
...     out = df.pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), cache=cache,
...                   responses_per_query=2, progress=False)
...     made = srv.stats.batch.batches
>>> out["sc_error"].to_list(), made
([None], 1)
"""

from __future__ import annotations

import asyncio
import gzip
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ._wire import BatchExchange, BatchTamper

__all__ = (
    "batch_id",
    "batch_status",
    "failing",
    "gzip_bomb",
    "nested_json",
    "not_a_batch",
    "slow",
    "string_body",
    "tampers",
    "trickle",
    "unnamed_files",
)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(body), content_type="application/json")


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def tampers(*recipes: BatchTamper) -> Callable[[BatchExchange], Awaitable[Any]]:
    """The first answer any of ``recipes`` gives for an exchange (None: the honest one)."""

    async def tamper(exchange: BatchExchange) -> Any:
        for recipe in recipes:
            answer = recipe(exchange)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer
        return None

    return tamper


def _counted(kind: str, times: int | None) -> Callable[[BatchExchange], bool]:
    """Whether an exchange of ``kind`` is one of the first ``times`` (None: every one)."""
    seen = [0]

    def hit(exchange: BatchExchange) -> bool:
        if exchange.kind != kind or exchange.status != 200:  # noqa: PLR2004
            return False
        seen[0] += 1
        return times is None or seen[0] <= times

    return hit


def nested_json(kind: str, *, depth: int = 100_000, times: int | None = None) -> BatchTamper:
    """Answer exchanges of ``kind`` (``"create"``, ``"batch"``, ``"list"``, ``"upload"``)
    with JSON nested ``depth`` deep; for ``"content"``, put such a line before the file's
    honest lines."""
    hit = _counted(kind, times)

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if not hit(exchange):
            return None
        if kind == "content":
            return web.Response(body=_nested(depth) + b"\n" + exchange.body)
        return web.Response(body=_nested(depth), content_type="application/json")

    return tamper


def batch_id(value: str, *, kind: str = "create") -> BatchTamper:
    """Answer exchanges of ``kind`` with ``value`` as the batch's id (a newline, a NUL,
    70,000 characters, the key the client sent)."""
    hit = _counted(kind, None)

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if not hit(exchange):
            return None
        return _json({**exchange.json(), "id": value})

    return tamper


def not_a_batch() -> BatchTamper:
    """Answer a batch's creation with a 200 whose body is no batch object (the batch is
    made all the same)."""
    hit = _counted("create", None)

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        return _json({"object": "error", "message": "try later"}) if hit(exchange) else None

    return tamper


def string_body(text: str = "\\ud800 a lone surrogate") -> BatchTamper:
    """Every line of an output file carries its answer as a JSON string ``text`` (raw JSON:
    ``"\\ud800"`` is a lone surrogate once parsed)."""

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if exchange.kind != "content" or exchange.status != 200:  # noqa: PLR2004
            return None
        out = []
        for line in exchange.body.splitlines():
            record = json.loads(line)
            if isinstance(record.get("response"), dict):
                record["response"]["body"] = "@BODY@"
            out.append(json.dumps(record).replace('"@BODY@"', f'"{text}"'))
        return web.Response(body="\n".join(out).encode())

    return tamper


def gzip_bomb(size: int = 4 * 2**30) -> BatchTamper:
    """Answer a file's content with ``size`` bytes of blanks, gzip-compressed (a 4 GiB file
    in about 4 MB)."""

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if exchange.kind != "content":
            return None
        block = gzip.compress(b" " * 2**24, compresslevel=9)  # 16 MiB of blanks
        whole, rest = divmod(size, 2**24)
        body = block * whole + (gzip.compress(b" " * rest) if rest else b"")
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    return tamper


def slow(kind: str, seconds: float) -> BatchTamper:
    """Answer exchanges of ``kind`` honestly, ``seconds`` late (an upload that takes its
    time: a second run may start meanwhile)."""

    async def tamper(exchange: BatchExchange) -> None:
        if exchange.kind == kind:
            await asyncio.sleep(seconds)

    return tamper


def trickle(bytes_per_second: float = 1.0) -> BatchTamper:
    """Send a file's content at ``bytes_per_second``, one byte at a time."""

    async def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if exchange.kind != "content":
            return None
        response = web.StreamResponse(headers={"Content-Length": str(len(exchange.body))})
        await response.prepare(exchange.request)
        for i in range(len(exchange.body)):
            await response.write(exchange.body[i : i + 1])
            await asyncio.sleep(1 / bytes_per_second)
        await response.write_eof()
        return response

    return tamper


def batch_status(
    value: str | None,
    *,
    when: str | None = None,
    expires_at: float | None = None,
    times: int | None = None,
) -> BatchTamper:
    """Answer looks at a batch with its status as ``value`` (None: no status at all), and
    ``expires_at`` when given; with ``when``, only looks whose honest status is that."""
    hit = _counted("batch", times)

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if not hit(exchange):
            return None
        body = exchange.json()
        if when is not None and body.get("status") != when:
            return None
        body.pop("status", None)
        if value is not None:
            body["status"] = value
        if expires_at is not None:
            body["expires_at"] = expires_at
        return _json(body)

    return tamper


def unnamed_files(times: int) -> BatchTamper:
    """The first ``times`` looks at an ended batch name none of its files (it says
    ``completed`` before its output file exists)."""
    seen = [0]

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if exchange.kind != "batch" or exchange.status != 200:  # noqa: PLR2004
            return None
        body = exchange.json()
        if body.get("status") != "completed" or seen[0] >= times:
            return None
        seen[0] += 1
        return _json({**body, "output_file_id": None, "error_file_id": None})

    return tamper


def failing(
    kind: str, status: int = 503, *, times: int | None = None, file_id: str | None = None
) -> BatchTamper:
    """Answer exchanges of ``kind`` with an HTTP ``status`` error (the first ``times``; None:
    every one); for ``"content"``, only the file whose id holds ``file_id`` when given."""
    seen = [0]

    def tamper(exchange: BatchExchange) -> web.StreamResponse | None:
        if exchange.kind != kind or (file_id is not None and file_id not in exchange.path):
            return None
        seen[0] += 1
        if times is not None and seen[0] > times:
            return None
        return _json({"error": {"message": "the service is busy", "code": None}}, status)

    return tamper

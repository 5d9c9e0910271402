"""A loopback HTTP server whose every reply a test writes by hand (aiohttp.web).

``FakeOpenAIServer`` plays a well-behaved OpenAI-compatible server with faults; a hostile
server needs replies no honest server sends (bodies echoing the request's headers, gzip bombs,
JSON nested past the stack), so each test gives its own handler.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[["Seen"], Awaitable[web.StreamResponse] | web.StreamResponse]


@dataclass
class Seen:
    """One request as the server saw it."""

    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.body.get("model"))

    @property
    def last(self) -> str:
        return str(self.body["messages"][-1]["content"])


@dataclass
class HostileServer:
    handler: Handler
    requests: list[Seen] = field(default_factory=list)

    def __enter__(self) -> HostileServer:
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve(request: web.Request) -> web.StreamResponse:
            seen = Seen(dict(request.headers), json.loads(await request.read()))
            self.requests.append(seen)
            reply = self.handler(seen)
            return await reply if asyncio.iscoroutine(reply) else reply  # type: ignore[return-value]

        async def start() -> None:
            app = web.Application(client_max_size=2**30)
            app.router.add_post("/v1/chat/completions", serve)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(start(), self._loop)
        if not ready.wait(10):
            raise RuntimeError("the hostile test server did not start")
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def completion(content: Any, *, finish_reason: str | None = "stop") -> dict[str, Any]:
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ]
    }


def reply(content: Any, **kwargs: Any) -> web.Response:
    return web.json_response(completion(content, **kwargs))


def raw(body: bytes | str, *, status: int = 200, **headers: str) -> web.Response:
    data = body.encode() if isinstance(body, str) else body
    return web.Response(
        body=data, status=status, headers={"Content-Type": "application/json", **headers}
    )

"""A loopback HTTP server whose every reply a test writes by hand (aiohttp.web).

:class:`~safecons.testing.FakeOpenAIServer` plays a well-behaved OpenAI-compatible server with
faults; a hostile server needs replies no honest server sends (bodies echoing the request's
headers, gzip bombs, JSON nested past the stack), so each test gives its own handler.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ._loopback import LoopbackServer

__all__ = ("Handler", "ScriptedServer", "Seen", "completion", "raw", "reply")

#: What answers each request: a function of the request, returning an ``aiohttp`` response.
Handler = Callable[["Seen"], Awaitable[web.StreamResponse] | web.StreamResponse]


@dataclass
class Seen:
    """One request as the server saw it: its headers and its JSON body."""

    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str:
        """The request's ``model``."""
        return str(self.body.get("model"))

    @property
    def last(self) -> str:
        """The content of the request's last message."""
        return str(self.body["messages"][-1]["content"])


class ScriptedServer(LoopbackServer):
    """An HTTP server on 127.0.0.1 (a random port) whose replies ``handler`` writes.

    It serves ``POST /v1/chat/completions`` only, records every request in
    :attr:`requests`, and runs on its own event loop in a daemon thread for the length of a
    ``with`` block.

    Examples
    --------
    >>> import safecons as sc
    >>> from safecons.testing.hostile import ScriptedServer, reply
    >>> with ScriptedServer(lambda seen: reply(f"echo: {seen.last}")) as srv:
    ...     client = sc.OpenAICompatible(model="m", base_url=srv.base_url)
    ...     out = sc.respond(sc.build_variants(sc.demo_frame().head(1)), sut=client,
    ...                      responses_per_query=2, progress=False)
    >>> out["sc_responses"][0][0].startswith("echo: ")
    True
    >>> srv.requests[0].model
    'm'
    """

    _thread_name = "safecons-scripted-server"

    def __init__(self, handler: Handler) -> None:
        super().__init__()
        #: What answers each request; a test may swap it between requests.
        self.handler = handler
        #: Every request seen, in arrival order.
        self.requests: list[Seen] = []

    def _application(self) -> web.Application:
        app = web.Application(client_max_size=2**30)
        app.router.add_post("/v1/chat/completions", self._serve)
        return app

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(dict(request.headers), json.loads(await request.read()))
        self.requests.append(seen)
        reply = self.handler(seen)
        return await reply if inspect.isawaitable(reply) else reply


def completion(content: Any, *, finish_reason: str | None = "stop") -> dict[str, Any]:
    """An OpenAI chat-completion body whose one message has ``content``."""
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
    """A 200 holding :func:`completion` of ``content``."""
    return web.json_response(completion(content, **kwargs))


def raw(body: bytes | str, *, status: int = 200, **headers: str) -> web.Response:
    """A reply with exactly these bytes and headers (no encoding of safecons' or aiohttp's)."""
    data = body.encode() if isinstance(body, str) else body
    return web.Response(
        body=data, status=status, headers={"Content-Type": "application/json", **headers}
    )

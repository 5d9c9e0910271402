"""What a :class:`~safecons.testing.FakeOpenAIServer` answers: the responders that write the
assistant's text, and the chat completion that carries it.

A responder turns a parsed request body into the assistant's text; :func:`echo_responder` is
the default and :func:`route_by_model` gives each model (a SUT, a judge) one of its own.
:func:`chat_completion` wraps the texts in OpenAI's ``chat.completion`` object, with a usage
counted in words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ._faults import Fault
from ._wire import Response, json_bytes

__all__ = (
    "Responder",
    "chat_completion",
    "echo_responder",
    "route_by_model",
)

#: Turns a parsed request body into the assistant's text (or an awaitable of it).
Responder = Callable[[dict[str, Any]], str | Awaitable[str]]

_DEPLOYMENT = re.compile(r"/deployments/([^/]+)/chat/completions/?$")
_WORD = re.compile(r"\S+")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content-part lists: [{"type": "text", "text": ...}, ...]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def echo_responder(body: dict[str, Any]) -> str:
    """The default responder: ``"echo: "`` followed by the last user message.

    Deterministic, so a test can predict every answer.

    Examples
    --------
    >>> echo_responder({"messages": [{"role": "system", "content": "be nice"},
    ...                              {"role": "user", "content": "hi there"}]})
    'echo: hi there'
    >>> echo_responder({"messages": []})
    'echo: '
    """
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return f"echo: {_text_of(message.get('content'))}"
    return "echo: "


class _ModelRouter:
    """A responder dispatching on ``body["model"]``; see :func:`route_by_model`."""

    def __init__(self, routes: Mapping[str, Responder], default: Responder | None) -> None:
        self.routes = dict(routes)
        self.default = default

    @property
    def models(self) -> list[str]:
        return list(self.routes)

    def __call__(self, body: dict[str, Any]) -> str | Awaitable[str]:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise Fault.bad_request("you must provide a model parameter")
        responder = self.routes.get(model, self.default)
        if responder is None:
            raise Fault.model_not_found(model)
        return responder(body)

    def __repr__(self) -> str:
        return f"route_by_model({self.models!r})"


def route_by_model(
    routes: Mapping[str, Responder], *, default: Responder | None = None
) -> Responder:
    """A responder that hands each request to the responder of its ``model``.

    Parameters
    ----------
    routes
        Model name to responder (sync or async), e.g. one for the SUT and one for the judge.
    default
        Responder for models not in ``routes``. Without it such a request gets OpenAI's 404
        ``model_not_found`` error, and a request without a model gets a 400.

    Returns
    -------
    Responder
        Also lists the models in ``GET /v1/models``.

    Examples
    --------
    >>> import httpx
    >>> from safecons.testing import FakeOpenAIServer
    >>> responder = route_by_model({"sut": lambda b: "an answer",
    ...                             "judge": lambda b: '{"label": "Consistent", "score": 1}'})
    >>> with FakeOpenAIServer(responder=responder) as srv:
    ...     url = f"{srv.base_url}/chat/completions"
    ...     ok = httpx.post(url, json={"model": "judge", "messages": []})
    ...     missing = httpx.post(url, json={"model": "gpt-9", "messages": []})
    >>> ok.json()["choices"][0]["message"]["content"]
    '{"label": "Consistent", "score": 1}'
    >>> missing.status_code, missing.json()["error"]["code"]
    (404, 'model_not_found')
    """
    if not routes:
        raise ValueError("route_by_model: expected at least one model")
    for name, responder in routes.items():
        if not isinstance(name, str) or not callable(responder):
            raise TypeError(f"route_by_model: expected str -> callable, got {name!r}")
    return _ModelRouter(routes, default)


def _count_words(text: str) -> int:
    return len(_WORD.findall(text))


def _prompt_words(body: dict[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(_count_words(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))


def chat_completion(
    path: str,
    body: dict[str, Any],
    texts: Sequence[str | None],
    index: int,
    *,
    default_model: str,
    finish_reason: str = "stop",
    refusal: str | None = None,
) -> Response:
    """The 200 answering request ``index`` (sent to ``path`` with ``body``) with ``texts``.

    Its model is the body's, else an Azure deployment's name in ``path``, else
    ``default_model``; its usage counts words, which is all a test needs of a tokenizer.

    Examples
    --------
    >>> import json
    >>> answer = chat_completion("/v1/chat/completions", {"model": "m"}, ["hi there"], 0,
    ...                          default_model="fake-model")
    >>> json.loads(answer.body)["usage"]["completion_tokens"]
    2
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        deployment = _DEPLOYMENT.search(path)
        model = deployment.group(1) if deployment else default_model
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": text, "refusal": refusal},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        for i, text in enumerate(texts)
    ]
    prompt_tokens = _prompt_words(body)
    completion_tokens = sum(_count_words(t or refusal or "") for t in texts)
    payload = {
        "id": f"chatcmpl-fake{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Response(200, json_bytes(payload), [("x-request-id", f"req-fake{index}")])

"""A session of an :class:`~safecons.clients.OpenAICompatible` client: building each
request's body, posting it over the client's wire, and falling back through the forms of
structured output a server may take."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

import httpx

from ._base import Attempt, Completion, Messages, RetryableCallError
from ._rate_limits import parse_rate_limits
from ._responses import ResponseTooLarge, Sender, error_text, read_completion
from ._wire import Wire, WireError

__all__ = ("OpenAISession",)

# A server may reject structured output (response_format) it does not support; these words in
# its error say so, and the judge then asks again with a form it may support, or without it.
_FORMAT_REJECTED = re.compile(r"response_format|json_schema|structured output|guided", re.I)
# Fallbacks that found no form the server took, after which a session stops repeating requests.
_MAX_UNCONFIRMED = 2


class OpenAISession:
    #: The judge may ask this session for structured output (``response_format``).
    structured_output = True
    #: Every call is a request of its own: none waits without a permit.
    holds = 0

    def __init__(self, client: Sender, wire: Wire) -> None:
        self._c = client
        self._wire = wire
        self._scrub = client.secrets.scrub
        # How far down the ladder of structured-output forms (_format_ladder) this session's
        # server has been seen to need: it only ever goes down, and is learned once.
        self.format_step = 0
        self._unconfirmed = 0  # fallbacks that found no form the server took
        self._ladder: tuple[dict[str, Any], list[dict[str, Any] | None]] | None = None

    async def complete(
        self,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """Answer ``messages`` once (the :class:`~safecons.clients.ChatSession` protocol)."""
        return await self.attempt(
            Attempt(), messages, temperature=temperature, seed=seed, response_format=response_format
        )

    async def attempt(
        self,
        attempt: Attempt,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One attempt of a run; what the answer said of the provider's limits goes on
        ``attempt``, for the runner to pace the endpoint by."""
        body, forms = self._body(
            messages, temperature=temperature, seed=seed, shape=response_format
        )
        step = min(self.format_step, len(forms) - 1)
        status, headers, data = await self._post(_with_format(body, forms[step]))
        # A server that does not take this form of structured output: ask again at once with
        # the next form it may take, down to none (the parser reads plain-text verdicts too).
        # A rejection that names the field as its param is taken at its word and learned at
        # once; one that only mentions it in its message (which could quote an answer being
        # judged) is learned once a lower form succeeds, and after two fallbacks that found no
        # such form, requests are no longer repeated. Documented in docs/metric.md, "The judge".
        fell = None
        while forms[step] is not None and self._unconfirmed < _MAX_UNCONFIRMED:
            rejected = _rejects_format(status, data)
            if rejected is None:
                break
            fell = fell or rejected
            step += 1
            if rejected == "param":
                self.format_step = max(self.format_step, step)
            status, headers, data = await self._post(_with_format(body, forms[step]))
        if status == HTTPStatus.OK:
            self.format_step = max(self.format_step, step)
        elif fell == "message":
            self._unconfirmed += 1
        # What the provider said of its limits goes to the runner (through the attempt, for
        # pacing the endpoint) and to whoever reads the answer or the error.
        limits = attempt.rate_limits = parse_rate_limits(headers)
        return read_completion(self._c, self._scrub, status, data, limits=limits)

    def _body(
        self,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None,
        shape: Mapping[str, Any] | None,
    ) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
        """A request's body without its structured-output form, and the forms to try."""
        c = self._c
        body: dict[str, Any] = {**c.params, "messages": [dict(m) for m in messages]}
        if c.model is not None:
            body["model"] = c.model
        if c.send_temperature:
            body["temperature"] = temperature
        if c.send_seed and seed is not None:
            body["seed"] = seed
        # The user's own response_format in params wins: it is sent as it is, never changed.
        if shape is None or "response_format" in c.params:
            return body, _NO_FORMAT
        # A judge asks with one shape every call: its ladder is made once (and again only
        # for a shape that differs from a copy of the one it was made from).
        made = self._ladder
        if made is None or made[0] != shape:
            made = self._ladder = (copy.deepcopy(dict(shape)), _format_ladder(shape))
        return body, made[1]

    def request_body(
        self,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The body :meth:`complete` would send first (a batch line's body)."""
        body, forms = self._body(
            messages, temperature=temperature, seed=seed, shape=response_format
        )
        return _with_format(body, forms[min(self.format_step, len(forms) - 1)])

    def read_answer(self, status: int, data: bytes) -> Completion:
        """A completion from an answer's status and body that came by another way than this
        session's own request (a batch's output line)."""
        return read_completion(self._c, self._scrub, status, data, limits=None)

    async def _post(self, body: dict[str, Any]) -> tuple[int, Mapping[str, str], bytes]:
        c = self._c
        try:
            reply = await self._wire.fetch(
                "POST",
                c._url,
                limit=c.transport.max_response_bytes,
                params=c._query,
                body=json.dumps(body).encode(),
            )
        except WireError as exc:
            if exc.kind == "too large":
                raise ResponseTooLarge(f"{c.identity}: {exc}") from None
            if exc.kind == "refused":
                raise RetryableCallError(
                    f"{c.identity}: connection refused: nothing listens at "
                    f"{httpx.URL(c._url).netloc.decode()} (is the server running?)"
                ) from None
            # Transport-level failures (resets, timeouts, protocol errors, a body that is not
            # what it says) are transient by nature.
            raise RetryableCallError(f"{c.identity}: {exc}") from None
        return reply.status, reply.headers, reply.body


def _rejects_format(status: int, data: bytes) -> str | None:
    """Whether an error says the server does not take the ``response_format`` it was sent.

    ``"param"`` when the error names it as its parameter, ``"message"`` when only the message
    mentions structured output; None otherwise. A 400 or 422 says so; so does a 5xx whose
    message names the field (llama-cpp-python's server answers an unsupported ``type`` with
    HTTP 500 and the validation error).
    """
    if (
        status not in (HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY)
        and status < HTTPStatus.INTERNAL_SERVER_ERROR  # nor a 5xx
    ):
        return None
    message, _, param = error_text(data, str)
    names_it = bool(_FORMAT_REJECTED.search(message))
    if status >= HTTPStatus.INTERNAL_SERVER_ERROR and not names_it:
        return None
    if param == "response_format":
        return "param"
    return "message" if names_it else None


def _format_ladder(response_format: Mapping[str, Any]) -> list[dict[str, Any] | None]:
    """The forms of structured output to try, best first, ending in none.

    A JSON schema (``{"type": "json_schema", ...}``: OpenAI, vLLM, llama.cpp, LiteLLM, recent
    Ollama) is followed by the same schema as ``{"type": "json_object", "schema": ...}``
    (llama-cpp-python's server, which takes no ``json_schema``), then plain JSON mode
    (``{"type": "json_object"}``), then no field at all.

    Examples
    --------
    >>> ladder = _format_ladder({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}})
    >>> [f and f["type"] for f in ladder]
    ['json_schema', 'json_object', 'json_object', None]
    >>> ladder[1]["schema"]
    {'type': 'object'}
    """  # noqa: E501
    first = dict(response_format)
    ladder: list[dict[str, Any] | None] = [first]
    if first.get("type") == "json_schema":
        inner = first.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if isinstance(schema, Mapping):
            ladder.append({"type": "json_object", "schema": dict(schema)})
        ladder.append({"type": "json_object"})
    ladder.append(None)
    return ladder


#: The forms of a request that asks for no structured output.
_NO_FORMAT: Final[list[dict[str, Any] | None]] = [None]


def _with_format(body: dict[str, Any], form: Mapping[str, Any] | None) -> dict[str, Any]:
    if form is None:
        return body
    return {**body, "response_format": dict(form)}

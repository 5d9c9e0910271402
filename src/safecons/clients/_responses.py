"""Reading an OpenAI-compatible server's answer: the completion in a 200, or what an error
says (a refusal by a content filter, a call to retry, one that no retry can mend), every text
scrubbed of the client's secrets before it is kept or cut."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Final, Protocol

import httpx

from .._text import valid_unicode
from ..errors import AuthenticationError
from ._base import (
    CONTENT_FILTER_TEXT,
    Completion,
    NonRetryableCallError,
    RateLimits,
    RetryableCallError,
)
from ._options import TransportOptions
from ._secrets import Secrets
from ._wire import cut as _cut

__all__ = ("ResponseTooLarge", "Sender", "error_text", "read_completion")


class Sender(Protocol):
    """What a session, and the reading of its answers, need of their client
    (:class:`~safecons.clients.OpenAICompatible`)."""

    base_url: str
    model: str | None
    params: dict[str, Any]
    send_temperature: bool
    send_seed: bool
    transport: TransportOptions
    #: The URL every chat completion is posted to, and the query string it carries.
    _url: str
    _query: dict[str, str]

    @property
    def identity(self) -> str: ...

    @property
    def secrets(self) -> Secrets: ...

    def credentials_hint(self, message: str) -> str: ...


_RETRYABLE_STATUS = frozenset(
    {
        HTTPStatus.REQUEST_TIMEOUT,
        HTTPStatus.CONFLICT,
        HTTPStatus.TOO_EARLY,
        HTTPStatus.TOO_MANY_REQUESTS,
    }
)
#: How OpenAI's 429 for a request above the whole tokens-per-minute limit begins.
_TOO_LARGE = re.compile(r"request too large\b", re.IGNORECASE)


class ResponseTooLarge(NonRetryableCallError):
    """A response body (after decompression) is larger than ``max_response_bytes``."""


def error_text(data: bytes, scrub: Callable[[str], str]) -> tuple[str, str | None, str | None]:
    """(message, code, param) of an OpenAI-style error body, tolerating any body.

    The message is scrubbed of secrets *before* it is cut, so no part of a key survives the cut.
    """
    body = _json_or_none(data)
    if body is None:
        return _cut(scrub(_decode(data))), None, None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code")
        inner = err.get("innererror")
        if isinstance(inner, dict) and inner.get("code") == "ResponsibleAIPolicyViolation":
            code = "content_filter"
        param = err.get("param")
        return (
            _cut(scrub(str(err.get("message", "")))),
            code if isinstance(code, str) else None,
            param if isinstance(param, str) else None,
        )
    if isinstance(err, str):
        return _cut(scrub(err)), None, None
    return _cut(scrub(_decode(data))), None, None


def _decode(data: bytes) -> str:
    return valid_unicode(data.decode("utf-8", "replace"))


def _json_or_none(data: bytes) -> Any:
    """The JSON value of a body, or None for a body that is not JSON (or nests too deep).

    A body is UTF-8 but for a rare server's: read as such first, without ``json.loads``'
    look for another encoding in its first bytes; one that does not read so (a BOM, UTF-16)
    is read as ``json.loads`` reads bytes.

    Examples
    --------
    >>> _json_or_none(b'{"a": 1}'), _json_or_none('{"a": 1}'.encode("utf-16")), _json_or_none(b"x")
    ({'a': 1}, {'a': 1}, None)
    """
    try:
        return _DECODE(data.decode())
    except ValueError:  # UnicodeDecodeError and json's errors
        pass
    except RecursionError:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


_DECODE: Final = json.JSONDecoder().decode


def read_completion(
    client: Sender,
    scrub: Callable[[str], str],
    status: int,
    data: bytes,
    *,
    limits: RateLimits | None,
) -> Completion:
    """The completion in an answer ``client`` got (its status and body, and the rate
    limits its headers said: :func:`~safecons.clients.parse_rate_limits`, read once by the
    caller), or the error it says, every text scrubbed of ``client``'s secrets."""
    c = client
    if status == HTTPStatus.OK:
        return _read_ok(c.identity, scrub, data, limits)
    # Some gateways echo the credentials they rejected; never pass them on.
    message, code, param = error_text(data, scrub)
    where = f"{c.identity}: HTTP {status}"
    if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
        raise AuthenticationError(f"{where}: {c.credentials_hint(message)}")
    # Azure's content filter, and OpenAI's prompt filter on reasoning models
    # ("invalid_prompt": flagged as potentially violating the usage policy), are refusals.
    if status == HTTPStatus.BAD_REQUEST and code in ("content_filter", "invalid_prompt"):
        return Completion(
            text=CONTENT_FILTER_TEXT,
            finish_reason="content_filter",
            filtered=True,
            rate_limits=limits,
        )
    if status == HTTPStatus.TOO_MANY_REQUESTS and _TOO_LARGE.match(message):
        # OpenAI's 429 for a request above the whole tokens-per-minute limit: no window
        # will ever admit it, so waiting (and a retry) cannot mend it.
        raise NonRetryableCallError(
            f"{where}: {message} (a request larger than the provider's whole "
            "tokens-per-minute limit: shorten the prompt or lower max_tokens in params)"
        )
    if status in _RETRYABLE_STATUS or status >= HTTPStatus.INTERNAL_SERVER_ERROR:  # or a 5xx
        raise RetryableCallError(
            f"{where}: {message}",
            retry_after=None if limits is None else limits.retry_after,
            rate_limited=status == HTTPStatus.TOO_MANY_REQUESTS,
            rate_limits=limits,
        )
    hint = ""
    if param == "temperature" or (
        "temperature" in message.lower() and status == HTTPStatus.BAD_REQUEST
    ):
        hint = " (this model may not accept temperature: pass send_temperature=False)"
    elif status == HTTPStatus.NOT_FOUND:
        hint = _not_found_hint(c.base_url, c._url, code)
    raise NonRetryableCallError(f"{where}: {message}{hint}")


def _read_ok(
    who: str, scrub: Callable[[str], str], data: bytes, limits: RateLimits | None
) -> Completion:
    body = _json_or_none(data)
    try:
        choice = body["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        raise RetryableCallError(
            f"{who}: malformed response body (not an OpenAI chat completion): "
            f"{_cut(scrub(_decode(data)), 120)!r}"
        ) from None
    used, made = _usage(body)
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    finish = scrub(finish) if isinstance(finish, str) else None
    refusal = content = None
    if isinstance(message, dict):
        refusal, content = message.get("refusal"), message.get("content")
    if isinstance(refusal, str) and refusal:
        return Completion(
            text=scrub(refusal),
            finish_reason=finish,
            refused=True,
            prompt_tokens=used,
            completion_tokens=made,
            rate_limits=limits,
        )
    if finish == "content_filter":
        text = scrub(content) if isinstance(content, str) and content else CONTENT_FILTER_TEXT
        return Completion(
            text=text,
            finish_reason=finish,
            filtered=True,
            prompt_tokens=used,
            completion_tokens=made,
            rate_limits=limits,
        )
    if isinstance(content, list):
        # Some servers send a list of content parts; join their text.
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise RetryableCallError(
            f"{who}: malformed message content {_cut(scrub(repr(content)), 120)}"
        )
    if not content:
        # A tool call, a reasoning model out of tokens, an empty reply: none is an answer to
        # judge, and scoring it as one would count a failure as a refusal.
        what = "null" if content is None else "empty"
        tools = " (the model called a tool instead)" if finish == "tool_calls" else ""
        length = " (raise max_tokens in params)" if finish == "length" else ""
        raise RetryableCallError(
            f"{who}: the answer holds no text: content is {what}, finish_reason "
            f"{finish!r}{tools}{length}"
        )
    return Completion(
        text=scrub(content),
        finish_reason=finish,
        prompt_tokens=used,
        completion_tokens=made,
        rate_limits=limits,
    )


def _usage(body: Any) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens of a completion body's ``usage``, where it reports them."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None, None
    # Any whole number: Completion reads an impossible one as not reported, and counts it.
    used, made = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (
        used if isinstance(used, int) and not isinstance(used, bool) else None,
        made if isinstance(made, int) and not isinstance(made, bool) else None,
    )


def _not_found_hint(base_url: str, url: str, code: str | None) -> str:
    """What a 404 most likely means: no such model, or a base URL without its ``/v1`` (a
    server's chat endpoint is ``<root>/v1/chat/completions``)."""
    if code == "model_not_found":
        return " (the server has no such model: check the model name)"
    if url != f"{base_url}/chat/completions":
        return ""  # a URL of its own (Azure's deployments): no /v1 to check
    if not httpx.URL(base_url).path.rstrip("/").endswith("/v1"):
        return (
            f" (no chat endpoint at {url}: OpenAI-compatible servers serve it under /v1; "
            f"check the /v1 part of the base URL, e.g. base_url='{base_url.rstrip('/')}/v1')"
        )
    return " (no chat endpoint there, or no such model: check the base URL and the model name)"

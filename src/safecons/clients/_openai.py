"""A client for OpenAI-compatible chat-completions endpoints (OpenAI, Azure, vLLM, Ollama, ...)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx

from ..errors import AuthenticationError
from ._base import (
    CONTENT_FILTER_TEXT,
    ChatSession,
    Completion,
    Messages,
    NonRetryableCallError,
    RetryableCallError,
)

__all__ = ("OpenAICompatible",)

OPENAI_BASE_URL = "https://api.openai.com/v1"
TransportName = Literal["auto", "httpx", "aiohttp"]
_MAX_ERROR_TEXT = 300
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def parse_retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds (fractions accepted) or an HTTP date.

    Examples
    --------
    >>> parse_retry_after(httpx.Headers({"retry-after-ms": "250"}))
    0.25
    >>> parse_retry_after(httpx.Headers({"Retry-After": "2"}))
    2.0
    >>> parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    True
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_text(response: httpx.Response) -> tuple[str, str | None, str | None]:
    """(message, code, param) of an OpenAI-style error body, tolerating any body."""
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        return response.text[:_MAX_ERROR_TEXT], None, None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code")
        inner = err.get("innererror")
        if isinstance(inner, dict) and inner.get("code") == "ResponsibleAIPolicyViolation":
            code = "content_filter"
        param = err.get("param")
        return (
            str(err.get("message", ""))[:_MAX_ERROR_TEXT],
            code if isinstance(code, str) else None,
            param if isinstance(param, str) else None,
        )
    if isinstance(err, str):
        return err[:_MAX_ERROR_TEXT], None, None
    return json.dumps(body)[:_MAX_ERROR_TEXT], None, None


def _check_key(key: str | None) -> str | None:
    # A key with a newline (read from a file) or a non-ASCII character would make the HTTP layer
    # fail with an error that quotes the header, key included; refuse it here, without echoing.
    if key is None or key == "":
        return key
    if not key.isascii() or not key.isprintable() or key != key.strip():
        raise ValueError(
            "api_key: contains whitespace at an end, control or non-ASCII characters "
            "(the key is not shown); strip it before passing it"
        )
    return key


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _make_transport(name: TransportName) -> httpx.AsyncBaseTransport | None:
    if name == "httpx":
        return None
    if name == "auto" and not _on_asyncio():
        # aiohttp runs on asyncio only; under trio the default httpx transport still works.
        return None
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        if name == "aiohttp":
            raise ImportError(
                "transport='aiohttp' needs the httpx-aiohttp package: pip install httpx-aiohttp"
            ) from None
        return None
    transport: httpx.AsyncBaseTransport = AiohttpTransport(
        limits=httpx.Limits(max_connections=128, max_keepalive_connections=128)
    )
    return transport


class OpenAICompatible:
    """Chat client for any OpenAI-compatible ``/chat/completions`` endpoint.

    Parameters
    ----------
    model
        Model name sent in the request body (for Azure: the deployment's model, optional).
    base_url
        The API root, e.g. ``http://localhost:8000/v1`` (vLLM), ``http://localhost:11434/v1``
        (Ollama), ``http://localhost:8080/v1`` (llama.cpp). Defaults to ``OPENAI_BASE_URL``, then
        OpenAI's. Requests go to ``{base_url}/chat/completions`` and nowhere else.
    api_key
        Defaults to ``OPENAI_API_KEY`` (``AZURE_OPENAI_API_KEY`` with :meth:`azure`). Sent as a
        bearer token (or in Azure's ``api-key`` header); never shown in reprs, errors or outputs.
        Local servers usually need none.
    params
        Extra request-body fields sent with every call (``max_tokens``, ``top_p``, ``seed``,
        ...). ``model``, ``messages`` and ``temperature`` are set by safecons.
    send_temperature
        Set to ``False`` for models that reject ``temperature`` (reasoning models); the request
        then carries none and the model's own default applies.
    send_seed
        Send each SUT sample's seed (derived from the run's ``seed``, the row's ``input_id``
        and the sample index) as the request's ``seed``, for servers that honour it (OpenAI's
        best-effort determinism, vLLM, llama.cpp, Ollama). Off by default: not every
        OpenAI-compatible server accepts the field.
    headers
        Extra HTTP headers.
    transport
        ``"auto"`` (default: the faster ``httpx-aiohttp`` transport on asyncio, see
        ``benchmarks/bench_pipeline.py``), ``"httpx"``, ``"aiohttp"``, or an ``httpx`` async
        transport object (e.g. ``httpx.MockTransport`` in tests).
    http_timeout
        Socket-level timeout in seconds. The per-call deadline of a run is the config's
        ``timeout_seconds``, enforced by the runner on top of this.

    Examples
    --------
    >>> from safecons import OpenAICompatible
    >>> OpenAICompatible(model="llama3.1", base_url="http://localhost:11434/v1", api_key="sk-x")
    OpenAICompatible(base_url='http://localhost:11434/v1', model='llama3.1', api_key=<set>)
    """

    def __init__(
        self,
        *,
        model: str | None,
        base_url: str | None = None,
        api_key: str | None = None,
        params: Mapping[str, Any] | None = None,
        send_temperature: bool = True,
        send_seed: bool = False,
        headers: Mapping[str, str] | None = None,
        transport: TransportName | httpx.AsyncBaseTransport = "auto",
        http_timeout: float = 600.0,
        _url: str | None = None,
        _auth_header: Literal["authorization", "api-key"] = "authorization",
        _query: Mapping[str, str] | None = None,
    ) -> None:
        if model is None and _url is None:
            raise ValueError("model: required (every OpenAI-compatible server but Azure needs it)")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"model: expected a non-empty string, got {model!r}")
        base = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"base_url: expected an http(s) URL, got {base!r}")
        parsed = httpx.URL(base)
        if parsed.userinfo:
            raise ValueError(
                "base_url: credentials in the URL are not supported; pass api_key= or headers="
            )
        self.base_url = base.rstrip("/")
        self.model = model
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._api_key = _check_key(key.strip() if key is not None and api_key is None else key)
        reserved = {"model", "messages", "temperature", "seed"} & set(params or {})
        if reserved:
            raise ValueError(f"params: {sorted(reserved)} are set by safecons, not in params")
        self.params = dict(params or {})
        self.send_temperature = send_temperature
        self.send_seed = send_seed
        self.headers = dict(headers or {})
        self.transport = transport
        self.http_timeout = http_timeout
        self._url = _url or f"{self.base_url}/chat/completions"
        self._auth_header = _auth_header
        self._query = dict(_query or {})

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        api_key: str | None = None,
        model: str | None = None,
        **kwargs: Any,
    ) -> OpenAICompatible:
        """Client for an Azure OpenAI deployment.

        Requests go to ``{endpoint}/openai/deployments/{deployment}/chat/completions`` with
        ``?api-version=...`` and the key in the ``api-key`` header (default
        ``AZURE_OPENAI_API_KEY``).

        Examples
        --------
        >>> c = OpenAICompatible.azure(endpoint="https://res.openai.azure.com",
        ...                            deployment="gpt4o", api_version="2024-10-21", api_key="k")
        >>> c.identity
        'https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions#gpt4o'
        """
        root = endpoint.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("AZURE_OPENAI_API_KEY")
        return cls(
            model=model,
            base_url=root,
            api_key=key if key is not None else "",
            _url=f"{root}/openai/deployments/{deployment}/chat/completions",
            _auth_header="api-key",
            _query={"api-version": api_version},
            **kwargs,
        )

    @property
    def identity(self) -> str:
        """The endpoint's identity: URL and model, never the key."""
        name = self.model or self._url.rsplit("/deployments/", 1)[-1].split("/", 1)[0]
        return f"{self._url}#{name}"

    @property
    def request_fingerprint(self) -> dict[str, Any]:
        """What besides the messages shapes an answer: URL, query, params, options (no key)."""
        return {
            "url": self._url,
            "query": self._query,
            "params": self.params,
            "send_temperature": self.send_temperature,
            "send_seed": self.send_seed,
        }

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        return f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    def _request_headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", **self.headers}
        if self._api_key:
            if self._auth_header == "api-key":
                headers["api-key"] = self._api_key
            else:
                headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    @asynccontextmanager
    async def session(self) -> AsyncIterator[ChatSession]:
        transport = (
            self.transport
            if isinstance(self.transport, httpx.AsyncBaseTransport)
            else _make_transport(self.transport)
        )
        limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
        async with httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(self.http_timeout),
            headers=self._request_headers(),
            limits=limits,
            follow_redirects=False,
        ) as http:
            yield _OpenAISession(self, http)


class _OpenAISession:
    def __init__(self, client: OpenAICompatible, http: httpx.AsyncClient) -> None:
        self._c = client
        self._http = http

    async def complete(
        self, messages: Messages, *, temperature: float, seed: int | None = None
    ) -> Completion:
        c = self._c
        body: dict[str, Any] = {**c.params, "messages": [dict(m) for m in messages]}
        if c.model is not None:
            body["model"] = c.model
        if c.send_temperature:
            body["temperature"] = temperature
        if c.send_seed and seed is not None:
            body["seed"] = seed
        try:
            response = await self._http.post(c._url, json=body, params=c._query or None)
        except httpx.ConnectTimeout as exc:
            # httpx-aiohttp reports every aiohttp connection failure (resets included) as a
            # ConnectTimeout, so the message must not claim a timeout it cannot know about.
            raise RetryableCallError(
                f"{c.identity}: connection failed or timed out "
                f"({type(exc).__name__}: {self._scrub(str(exc)) or 'no detail'})"
            ) from None
        except httpx.TimeoutException as exc:
            raise RetryableCallError(f"{c.identity}: timed out ({type(exc).__name__})") from None
        except (httpx.HTTPError, OSError, ValueError) as exc:
            # Transport-level failures (refused, reset, protocol errors) are transient by nature.
            # Their text may quote request headers, so the key is scrubbed from it.
            raise RetryableCallError(
                f"{c.identity}: connection error ({type(exc).__name__}: {self._scrub(str(exc))})"
            ) from None
        return self._read(response)

    def _scrub(self, text: str) -> str:
        key = self._c._api_key
        return text.replace(key, "<api key>") if key else text

    def _read(self, response: httpx.Response) -> Completion:
        c = self._c
        status = response.status_code
        if status == 200:
            return self._read_ok(response)
        # Some gateways echo the credentials they rejected; never pass them on.
        message, code, param = _error_text(response)
        message = self._scrub(message)
        where = f"{c.identity}: HTTP {status}"
        if status in (401, 403):
            raise AuthenticationError(
                f"{where}: the endpoint rejected the credentials ({message}). Check the API key "
                "(argument api_key or the environment variable) and the model's access."
            )
        # Azure's content filter, and OpenAI's prompt filter on reasoning models
        # ("invalid_prompt": flagged as potentially violating the usage policy), are refusals.
        if status == 400 and code in ("content_filter", "invalid_prompt"):
            return Completion(
                text=CONTENT_FILTER_TEXT, finish_reason="content_filter", filtered=True
            )
        if status in _RETRYABLE_STATUS or status >= 500:
            raise RetryableCallError(
                f"{where}: {message}",
                retry_after=parse_retry_after(response.headers),
                rate_limited=status == 429,
            )
        hint = ""
        if param == "temperature" or ("temperature" in message.lower() and status == 400):
            hint = " (this model may not accept temperature: pass send_temperature=False)"
        raise NonRetryableCallError(f"{where}: {message}{hint}")

    def _read_ok(self, response: httpx.Response) -> Completion:
        who = self._c.identity
        try:
            body = response.json()
            choice = body["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, UnicodeDecodeError, KeyError, IndexError, TypeError, AttributeError):
            raise RetryableCallError(
                f"{who}: malformed response body (not an OpenAI chat completion): "
                f"{response.text[:120]!r}"
            ) from None
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        refusal = message.get("refusal") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal:
            return Completion(text=refusal, finish_reason=finish, refused=True)
        if finish == "content_filter":
            text = content if isinstance(content, str) and content else CONTENT_FILTER_TEXT
            return Completion(text=text, finish_reason=finish, filtered=True)
        if content is None:
            content = ""
        if not isinstance(content, str):
            # Some servers send a list of content parts; join their text.
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            else:
                raise RetryableCallError(f"{who}: malformed message content {content!r:.120}")
        return Completion(text=content, finish_reason=finish if isinstance(finish, str) else None)

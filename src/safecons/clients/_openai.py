"""A client for OpenAI-compatible chat-completions endpoints (OpenAI, Azure, vLLM, Ollama, ...)."""

from __future__ import annotations

import dataclasses
import email.utils
import json
import math
import os
import re
import time
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from http import HTTPStatus
from typing import Any, Final, Literal

import httpx

from .._text import valid_unicode
from ..errors import AuthenticationError, ConfigError, DeprecatedOptionWarning, InputError
from ._base import (
    CONTENT_FILTER_TEXT,
    Attempt,
    Completion,
    Messages,
    NonRetryableCallError,
    RateLimits,
    RetryableCallError,
)
from ._facts import ClientFacts
from ._proxy import proxy_secrets
from ._secrets import (
    Secrets,
    check_base_url,
    check_env_name,
    is_loopback,
    key_from_env,
    shown_env_name,
)
from ._wire import ACCEPT_ENCODING, TransportName, Wire, WireError, open_wire, send
from ._wire import cut as _cut

__all__ = (
    "DEFAULT_MAX_RESPONSE_BYTES",
    "OpenAICompatible",
    "ResponseTooLarge",
    "parse_duration",
    "parse_rate_limits",
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
#: The variable an OpenAI key is read from by default, for OpenAI's host only.
OPENAI_KEY_ENV = "OPENAI_API_KEY"
#: The longest wait between two looks at a provider batch's progress (seconds).
DEFAULT_BATCH_POLL_SECONDS: Final = 30.0
#: How long a batched client's waiting calls wait for another before they go out (seconds).
DEFAULT_BATCH_WAIT_SECONDS: Final = 2.0
_MAX_ERROR_TEXT = 300
_RETRYABLE_STATUS = frozenset(
    {
        HTTPStatus.REQUEST_TIMEOUT,
        HTTPStatus.CONFLICT,
        HTTPStatus.TOO_EARLY,
        HTTPStatus.TOO_MANY_REQUESTS,
    }
)
#: Default bound on one response body, after decompression: far above any chat answer (a
#: 128k-token answer is about 0.5 MB), far below what would hurt a notebook's memory.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 2**20
# A server may reject structured output (response_format) it does not support; these words in
# its error say so, and the judge then asks again with a form it may support, or without it.
_FORMAT_REJECTED = re.compile(r"response_format|json_schema|structured output|guided", re.I)
# Fallbacks that found no form the server took, after which a session stops repeating requests.
_MAX_UNCONFIRMED = 2
#: The least max_response_bytes may be (1 KiB): room for a chat completion's JSON envelope.
_MIN_RESPONSE_BYTES: Final = 1024
#: Headers that carry a credential and nothing else: in a cache key by their name only.
CREDENTIAL_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
        "cookie",
    }
)
# What Azure allows in a deployment's name; it becomes a segment of the request's path.
_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: How OpenAI's 429 for a request above the whole tokens-per-minute limit begins.
_TOO_LARGE = re.compile(r"request too large\b", re.IGNORECASE)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
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


# One part of a Go-style duration, as OpenAI writes its reset times: "6m0s", "0.35s", "20ms".
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_UNIT_SECONDS: Final = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}


def parse_duration(text: str) -> float | None:
    """Seconds in a reset time as rate-limit headers send it; None when it is not one.

    OpenAI (and Azure) write Go durations (``"6m0s"``, ``"1h2m3.5s"``, ``"0.35s"``,
    ``"20ms"``); other gateways plain seconds (``"1"``, ``"0.5"``).

    Examples
    --------
    >>> parse_duration("6m0s"), parse_duration("0.35s"), parse_duration("20ms")
    (360.0, 0.35, 0.02)
    >>> parse_duration("2"), parse_duration("soon"), parse_duration("-1s")
    (2.0, None, None)
    """
    raw = text.strip()
    try:
        plain = float(raw)
    except ValueError:
        pass
    else:
        return plain if math.isfinite(plain) and plain >= 0 else None
    total, at = 0.0, 0
    for part in _DURATION_PART.finditer(raw):
        if part.start() != at:
            return None
        total += float(part.group(1)) * _UNIT_SECONDS[part.group(2)]
        at = part.end()
    return total if at == len(raw) and at > 0 and math.isfinite(total) else None


def _count(headers: Mapping[str, str], *names: str) -> int | None:
    """The first of ``names`` sent as a whole number >= 0 (some gateways send "10.0")."""
    for name in names:
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw.strip())
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return int(value)
    return None


def _reset(headers: Mapping[str, str], *names: str) -> float | None:
    for name in names:
        raw = headers.get(name)
        value = None if raw is None else parse_duration(raw)
        if value is not None:
            return value
    return None


def parse_rate_limits(headers: Mapping[str, str]) -> RateLimits | None:
    """The provider's rate limits from an answer's headers, or None when it sent none.

    Reads OpenAI's and Azure OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``
    (resets as Go durations or seconds), the IETF draft's ``ratelimit-{limit,remaining,reset}``
    some gateways send (taken as requests), and ``Retry-After`` (:func:`parse_retry_after`).
    A missing or unreadable header is None: a gateway may send ``remaining`` alone.
    ``headers`` must look names up case-insensitively (``httpx.Headers``, aiohttp's).

    Examples
    --------
    >>> limits = parse_rate_limits(httpx.Headers({
    ...     "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "0",
    ...     "x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-tokens": "149984",
    ...     "x-ratelimit-reset-tokens": "6ms"}))
    >>> limits.limit_requests, limits.remaining_requests, limits.reset_requests
    (60, 0, 360.0)
    >>> limits.remaining_tokens, limits.reset_tokens, limits.limit_tokens
    (149984, 0.006, None)
    >>> parse_rate_limits(httpx.Headers({"content-type": "application/json"})) is None
    True
    """
    limits = RateLimits(
        limit_requests=_count(headers, "x-ratelimit-limit-requests", "ratelimit-limit"),
        remaining_requests=_count(headers, "x-ratelimit-remaining-requests", "ratelimit-remaining"),
        reset_requests=_reset(headers, "x-ratelimit-reset-requests", "ratelimit-reset"),
        limit_tokens=_count(headers, "x-ratelimit-limit-tokens"),
        remaining_tokens=_count(headers, "x-ratelimit-remaining-tokens"),
        reset_tokens=_reset(headers, "x-ratelimit-reset-tokens"),
        retry_after=parse_retry_after(headers),
    )
    return None if limits == _NO_LIMITS else limits


_NO_LIMITS: Final = RateLimits()


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
    """The JSON value of a body, or None for a body that is not JSON (or nests too deep)."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


class ResponseTooLarge(NonRetryableCallError):
    """A response body (after decompression) is larger than ``max_response_bytes``."""


def _check_key(key: str) -> str:
    # A key with a newline (read from a file) or a non-ASCII character would make the HTTP layer
    # fail with an error that quotes the header, key included; refuse it here, without echoing.
    if not isinstance(key, str):
        raise InputError(f"api_key: expected a string, got {type(key).__name__}")
    if key and (not key.isascii() or not key.isprintable() or key != key.strip()):
        raise InputError(
            "api_key: contains whitespace at an end, control or non-ASCII characters "
            "(the key is not shown); strip it before passing it"
        )
    return key


# RFC 9110's token: what a header's name may be made of.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _check_header(name: str, value: str) -> None:
    # Refused here, once, rather than failing every call in the HTTP layer with an error that
    # may quote the value (a key read from a file keeps its newline). The value is never shown.
    if not _HEADER_NAME.fullmatch(name):
        raise InputError(
            f"headers: {name[:40]!r} is not a header name (letters, digits and !#$%&'*+.^_`|~-)"
        )
    if not value.isascii() or not value.isprintable() or value != value.strip():
        raise InputError(
            f"headers: the value of {name!r} holds whitespace at an end, control or non-ASCII "
            "characters (the value is not shown); strip it, or encode it as the server expects"
        )


def _check_model(model: str | None, url: str | None) -> None:
    """A model name is required, and must be a non-empty string, unless the client posts to
    a URL of its own (an Azure deployment's, which names the model)."""
    if model is None and url is None:
        raise InputError("model: required (every OpenAI-compatible server but Azure needs it)")
    if model is not None and (not isinstance(model, str) or not model):
        raise InputError(f"model: expected a non-empty string, got {model!r}")


def _base_url_from(base_url: str | None) -> str:
    """The API root: ``base_url=``, else a non-blank ``OPENAI_BASE_URL``, else OpenAI's."""
    if base_url is not None:
        return check_base_url(base_url)
    if os.environ.get("OPENAI_BASE_URL", "").strip():
        return check_base_url(os.environ["OPENAI_BASE_URL"], "OPENAI_BASE_URL", from_env=True)
    return OPENAI_BASE_URL


def _sends_openai_key(base_url: str | None, resolved: str) -> bool:
    """Whether ``OPENAI_API_KEY`` may be sent to ``resolved``: OpenAI's own host, or a root
    that came from ``OPENAI_BASE_URL`` (``base_url=None``), which the same environment set."""
    if base_url is None:
        return True
    return (httpx.URL(resolved).host or "").lower() == OPENAI_HOST


def _key_from(
    api_key: str | None, api_key_env: str | None, default_env: str | None
) -> tuple[str | None, str | None, bool]:
    """The key, the variable it was read from (None for a key given explicitly), and whether
    that variable must hold a key where the client is unpickled. ``default_env`` None: no
    variable is read unless ``api_key_env`` names one."""
    if api_key is not None and api_key_env is not None:
        raise InputError("api_key, api_key_env: pass one (the key, or its variable's name)")
    if api_key is not None:
        return _check_key(api_key), None, False
    if api_key_env is None and default_env is None:
        return None, None, False
    env = check_env_name(api_key_env if api_key_env is not None else default_env)
    key, problem = key_from_env(env, required=api_key_env is not None)
    if problem is not None:
        raise InputError(problem)
    # A key the client was made with is expected wherever it is unpickled: sending
    # without it would fail later, at the endpoint, with a less helpful 401.
    return key, env, key is not None or api_key_env is not None


def _check_key_needed(
    key: str | None,
    variable: str,
    headers: Mapping[str, str] | None,
    base_url: str,
    withheld: str | None = None,
) -> None:
    """Refuse a client with no key, in the key or in a credential header, for an API that
    answers nothing without one; ``variable`` is the one the message says to set
    (``withheld``: the default one, not read for this base URL)."""
    if key is None and not _has_credential(headers):
        hosted = _hosted_api(base_url)
        if hosted is not None and withheld is not None and os.environ.get(withheld):
            raise InputError(
                f"OpenAICompatible: no key for {hosted} ({base_url}): {withheld} is sent only "
                f"to OpenAI's own API; pass api_key= or api_key_env= to send a key here"
            )
        if hosted is not None:
            # OpenAI's and Azure's APIs answer nothing without a key: say so now, not as
            # a 401 (or, offline, a DNS failure) on every row.
            raise InputError(
                f"OpenAICompatible: no key for {hosted} ({base_url}): set {variable} "
                "(or pass api_key= or api_key_env=)"
            )


def _check_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The extra request-body fields, none of them one safecons sets itself."""
    if params is not None and not (
        isinstance(params, Mapping) and all(isinstance(k, str) for k in params)
    ):
        raise InputError(f"params: expected a mapping of request-body fields, got {params!r}")
    reserved = {"model", "messages", "temperature", "seed"} & set(params or {})
    if reserved:
        raise InputError(f"params: {sorted(reserved)} are set by safecons, not in params")
    return dict(params or {})


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The extra HTTP headers: a mapping of string names to string values, each name and
    value one the HTTP layer will send (see :func:`_check_header`)."""
    if headers is not None and not (
        isinstance(headers, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise InputError("headers: expected a mapping of header names to string values")
    for name, value in (headers or {}).items():
        _check_header(name, value)
    return dict(headers or {})


def _check_flag(name: str, value: object) -> bool:
    """``value``, a bool, or an error naming ``name``."""
    if not isinstance(value, bool):
        raise InputError(f"{name}: expected True or False, got {value!r}")
    return value


def _check_transport(transport: object) -> TransportName | httpx.AsyncBaseTransport:
    if isinstance(transport, httpx.AsyncBaseTransport):
        return transport
    if transport == "direct":
        warnings.warn(
            "OpenAICompatible(transport='direct') is now transport='aiohttp' (the same wire); "
            "'direct' will stop being read in a future version",
            DeprecatedOptionWarning,
            stacklevel=3,  # the line that made the client
        )
        return "aiohttp"
    if transport in ("auto", "aiohttp", "httpx"):
        return transport
    raise InputError(
        "transport: expected 'auto', 'aiohttp', 'httpx' or an httpx.AsyncBaseTransport "
        f"object, got {transport!r}"
    )


def _check_seconds(name: str, seconds: object, *, zero: bool = False) -> float:
    """A finite number of seconds, > 0 (``zero``: >= 0), or an error naming ``name``."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
        or (seconds == 0 and not zero)
    ):
        bound = ">= 0" if zero else "> 0"
        raise InputError(f"{name}: expected a number of seconds {bound}, got {seconds!r}")
    return float(seconds)


def _check_max_response_bytes(max_response_bytes: int) -> int:
    """The response-body limit: a whole number of bytes, at least 1 KiB."""
    if (
        isinstance(max_response_bytes, bool)
        or not isinstance(max_response_bytes, int)
        or max_response_bytes < _MIN_RESPONSE_BYTES
    ):
        raise InputError(
            f"max_response_bytes: expected a whole number of bytes >= {_MIN_RESPONSE_BYTES}, "
            f"got {max_response_bytes!r}"
        )
    return max_response_bytes


class OpenAICompatible:
    """Chat client for any OpenAI-compatible ``/chat/completions`` endpoint.

    Parameters
    ----------
    model
        Model name sent in the request body (for Azure: the deployment's model, optional).
    base_url
        The API root, e.g. ``http://localhost:8000/v1`` (vLLM), ``http://localhost:11434/v1``
        (Ollama), ``http://localhost:8080/v1`` (llama.cpp). Defaults to ``OPENAI_BASE_URL``, then
        OpenAI's. Requests go to ``{base_url}/chat/completions`` and nowhere else. A URL with
        credentials (``user:pw@``), a query string or a fragment is refused, by a message that
        does not quote it; the scheme may be in any case.
    api_key
        The key, given explicitly: it travels with the client when it is pickled (to a Ray
        actor, a process pool). Sent as a bearer token (or in Azure's ``api-key`` header);
        never shown in reprs, errors or outputs. ``""``: no key. Local servers usually need none.
    api_key_env
        Without ``api_key``, the environment variable the key is read from (default
        ``OPENAI_API_KEY``; ``AZURE_OPENAI_API_KEY`` with :meth:`azure`), stripped of
        surrounding whitespace. A variable named here must hold a key. The key never travels
        in a pickle: the variable is read again where the client is unpickled, and if the
        client was made with a key from it, a process where it is unset fails when the
        client's session opens (before any call), by an error naming the variable.
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
        Extra HTTP headers. They are part of the response cache's key (a gateway may route by
        one); a credential header (``Authorization``, ``api-key``, ...) by its name only.
        Names are case-insensitive, as in HTTP: one of each is sent. ``Accept-Encoding`` is
        safecons' own (it reads gzip and deflate, bounded), and a key given as ``api_key``
        is sent in its own header in place of one of the same name here.
    transport
        What carries the bytes; every request of the client (live and the Batch API's) goes
        by the same wire, with the same bounds, proxies and errors. ``"auto"`` (default) is
        ``"aiohttp"`` on asyncio and ``"httpx"`` elsewhere (trio). ``"aiohttp"`` sends over
        one aiohttp session, without httpx's request and response models on the hot path
        (the fastest, measured in ``docs/performance.md``); ``"httpx"`` over httpx's own
        transport (SOCKS proxies with ``httpx[socks]``). Both honour ``HTTPS_PROXY``,
        ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` as httpx reads them. Or pass any
        ``httpx`` async transport object (``httpx.MockTransport`` in tests, a transport of
        your own): it is used as it is. ``"direct"``, this parameter's former name for
        ``"aiohttp"``, is still read as it, with a
        ``DeprecatedOptionWarning`` (a ``FutureWarning``).
    http_timeout
        Socket-level timeout in seconds. The per-call deadline of a run is the config's
        ``timeout_seconds``, enforced by the runner on top of this.
    max_response_bytes
        The most bytes of one response body safecons reads, after decompression (default
        16 MiB). A larger body fails its call with an error naming this parameter and is never
        held whole in memory (a small gzip body can inflate to gigabytes).
    batch
        Send this client's calls through the provider's Batch API (OpenAI's, Azure OpenAI's
        global batch) instead of one request each: half the price, for runs that can wait up
        to the 24-hour completion window. The run writes each stage's requests as JSONL
        files, creates one batch per file, polls it and puts every answer in its row; the batch
        id is recorded in the run's cache as soon as the batch exists, so running the same call
        again with the same cache picks the batch up instead of paying twice. Answers are
        cached under the same keys as live calls. See ``docs/batch.md``.
    cancel_on_interrupt
        With ``batch=True``: cancel the provider's batch when the run is interrupted (Ctrl-C,
        a kernel interrupt). By default the batch is left running, and a warning names it and
        says how to pick it up.
    batch_poll_seconds
        With ``batch=True``: the longest wait between two looks at a batch's progress (the
        first looks come sooner: 1 s, then doubling up to this).
    batch_wait_seconds
        With ``batch=True``: how long the calls waiting to go out wait for another after the
        last one came before they are sent as a batch (default 2 s; never more than 60 s from
        the first). A stage's calls start together, so they go out together; a larger value
        gathers calls that come in slowly (a slow live SUT feeding a batched judge) into fewer
        batches.

    Notes
    -----
    Every text that comes back from the server (answers, error bodies, exception messages)
    is scrubbed of the key, of every credential-like header value (``Authorization``,
    ``api-key``, ``x-api-key``, cookies, ...) and of the credentials of the proxies the
    environment names (``HTTPS_PROXY=http://user:pw@proxy``) before it is kept or cut to
    length. Values shorter than 8 characters are not treated as secrets. A key is never sent
    over plain ``http`` except to a loopback host (127.0.0.0/8, ``::1``, ``localhost``): a
    client that would is refused where it is made.

    Examples
    --------
    >>> from safecons import OpenAICompatible
    >>> OpenAICompatible(model="llama3.1", base_url="http://localhost:11434/v1", api_key="sk-x")
    OpenAICompatible(base_url='http://localhost:11434/v1', model='llama3.1', api_key=<set>)
    >>> import os, pickle
    >>> os.environ["MY_GATEWAY_KEY"] = "sk-gateway-0123456789"
    >>> client = OpenAICompatible(
    ...     model="m", base_url="https://gw:4000", api_key_env="MY_GATEWAY_KEY")
    >>> b"sk-gateway" in pickle.dumps(client)
    False
    >>> del os.environ["MY_GATEWAY_KEY"]
    """

    def __init__(
        self,
        *,
        model: str | None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        params: Mapping[str, Any] | None = None,
        send_temperature: bool = True,
        send_seed: bool = False,
        headers: Mapping[str, str] | None = None,
        transport: TransportName | httpx.AsyncBaseTransport = "auto",
        http_timeout: float = 600.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        batch: bool = False,
        cancel_on_interrupt: bool = False,
        batch_poll_seconds: float = DEFAULT_BATCH_POLL_SECONDS,
        batch_wait_seconds: float = DEFAULT_BATCH_WAIT_SECONDS,
        _url: str | None = None,
        _deployment: str | None = None,
        _auth_header: Literal["authorization", "api-key"] = "authorization",
        _query: Mapping[str, str] | None = None,
        _default_key_env: str = "OPENAI_API_KEY",
    ) -> None:
        _check_model(model, _url)
        self.base_url = _base_url_from(base_url)
        self.model = model
        # OPENAI_API_KEY goes only to OpenAI's own host, or to the base URL that came with it
        # from OPENAI_BASE_URL: never to a local or third-party server named by base_url=.
        default_env: str | None = _default_key_env
        if _default_key_env == OPENAI_KEY_ENV and not _sends_openai_key(base_url, self.base_url):
            default_env = None
        #: The default variable left unread for this base URL (named by a 401's message).
        self._withheld_env = (
            _default_key_env
            if default_env is None and api_key is None and api_key_env is None
            else None
        )
        # A key read from the environment never travels in a pickle: the variable's name
        # does, and the key is read again where the client is unpickled (a Ray actor).
        key, self._key_env, self._key_required = _key_from(api_key, api_key_env, default_env)
        self._key_problem: str | None = None
        self._api_key = key
        # The headers are checked before the no-key check reads them for a credential.
        self.headers = _check_headers(headers)
        _check_key_needed(
            key, self._key_env or _default_key_env, self.headers, self.base_url, self._withheld_env
        )
        self.params = _check_params(params)
        self.send_temperature = _check_flag("send_temperature", send_temperature)
        self.send_seed = _check_flag("send_seed", send_seed)
        self.transport = _check_transport(transport)
        self.http_timeout = _check_seconds("http_timeout", http_timeout)
        self.max_response_bytes = _check_max_response_bytes(max_response_bytes)
        self.batch = _check_flag("batch", batch)
        self.cancel_on_interrupt = _check_flag("cancel_on_interrupt", cancel_on_interrupt)
        self.batch_poll_seconds = _check_seconds("batch_poll_seconds", batch_poll_seconds)
        self.batch_wait_seconds = _check_seconds(
            "batch_wait_seconds", batch_wait_seconds, zero=True
        )
        self._url = _url or f"{self.base_url}/chat/completions"
        self._deployment = _deployment
        self._auth_header = _auth_header
        self._query = dict(_query or {})
        self._secrets = Secrets.of(api_key=self._api_key, headers=self._request_headers())
        self._joined: tuple[Secrets, Secrets] | None = None
        if (problem := self._plain_http_problem()) is not None:
            raise InputError(problem)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_secrets"]  # made from the key and headers, again where unpickled
        state["_joined"] = None  # and the proxies' credentials, from the environment there
        if self._key_env is not None:
            state["_api_key"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._key_problem = None
        if self._key_env is not None:
            self._api_key, problem = key_from_env(self._key_env, required=self._key_required)
            if problem is not None:
                # Raised when the session opens, not here: an error inside Ray's unpickling
                # would not say which client, nor reach the user as clearly.
                self._key_problem = (
                    f"{problem} in this process (pid {os.getpid()}), where the client was "
                    "unpickled. A key read from the environment never travels in a pickle: "
                    f"set {shown_env_name(self._key_env)} in the environment of every process "
                    "that runs the client (for Ray, see docs/scale-out.md), or make the client "
                    "with api_key='' if the endpoint needs no key"
                )
        self._secrets = Secrets.of(api_key=self._api_key, headers=self._request_headers())
        self._joined = None

    @property
    def secrets(self) -> Secrets:
        """What this client sends that must never come back out: the key, auth headers, and
        the credentials of the proxies the environment names (read at each use)."""
        proxies = proxy_secrets()
        joined = self._joined
        if joined is None or joined[0] is not proxies:
            joined = self._joined = (proxies, self._secrets | proxies)
        return joined[1]

    def _plain_http_problem(self) -> str | None:
        """Why this client may not send: a key (``api_key=``, a variable's, a credential
        header) to a host other than this machine over plain ``http``, where anyone on the
        path (a Wi-Fi, a proxy, a gateway) reads it; None when it may.

        A transport object of the user's own is theirs to answer for (``httpx.MockTransport``
        sends nothing anywhere); httpx's own network transport is checked as a name is.
        """
        if (
            isinstance(self.transport, httpx.AsyncBaseTransport)
            and not isinstance(self.transport, httpx.AsyncHTTPTransport)
        ) or not (self._api_key or _has_credential(self.headers)):
            return None
        url = httpx.URL(self._url)
        if url.scheme != "http" or is_loopback(url.host):
            return None
        where = "endpoint" if self._deployment is not None else "base_url"
        return (
            f"{where}: refusing to send a key over plain http to {url.host}, which is not a "
            "loopback host (127.0.0.0/8, ::1, localhost): anyone on the way could read it. Use "
            "an https:// URL, or a proxy or gateway on this machine (http://127.0.0.1:PORT) "
            "that forwards over https"
        )

    def credentials_hint(self, message: str) -> str:
        """What a 401/403 means for this client, and what to do, after the provider's
        ``message``."""
        withheld = self._withheld_env
        if self._api_key is None and withheld is not None and os.environ.get(withheld):
            return (
                f"the endpoint wants credentials and none were sent ({message}). "
                f"{withheld} is sent only to OpenAI's own API ({OPENAI_HOST}) or to the "
                "OPENAI_BASE_URL set beside it, never to another base URL: pass api_key= or "
                f"api_key_env='{withheld}' (CLI: --sut-key-env/--judge-key-env) to send a key here"
            )
        return (
            f"the endpoint rejected the credentials ({message}). Check the API key "
            "(argument api_key or the environment variable) and the model's access."
        )

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        model: str | None = None,
        **kwargs: Any,
    ) -> OpenAICompatible:
        """Client for an Azure OpenAI deployment.

        Requests go to ``{endpoint}/openai/deployments/{deployment}/chat/completions`` with
        ``?api-version=...`` and the key in the ``api-key`` header: ``api_key``, or the
        variable ``api_key_env`` names (default ``AZURE_OPENAI_API_KEY``), read again where
        the client is unpickled, as for the constructor. ``endpoint`` passes the checks of
        ``base_url``.

        Examples
        --------
        >>> c = OpenAICompatible.azure(endpoint="https://res.openai.azure.com",
        ...                            deployment="gpt4o", api_version="2024-10-21", api_key="k")
        >>> c.identity
        'https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions#gpt4o'
        """
        root = check_base_url(endpoint, "endpoint")
        if not isinstance(deployment, str) or not _DEPLOYMENT.fullmatch(deployment):
            raise InputError(
                "deployment: expected an Azure deployment name (a letter or digit, then letters, "
                "digits, '-', '_', '.')"
            )
        return cls(
            model=model,
            base_url=root,
            api_key=api_key,
            api_key_env=api_key_env,
            _url=f"{root}/openai/deployments/{deployment}/chat/completions",
            _deployment=deployment,
            _auth_header="api-key",
            _query={"api-version": api_version},
            _default_key_env="AZURE_OPENAI_API_KEY",
            **kwargs,
        )

    @property
    def identity(self) -> str:
        """The endpoint's identity: URL and model, never the key."""
        name = self.model or self._url.rsplit("/deployments/", 1)[-1].split("/", 1)[0]
        return f"{self._url}#{name}"

    @property
    def facts(self) -> ClientFacts:
        """What the run knows of this client beyond its identity (cache keys, token
        estimates, batching, secrets)."""
        return ClientFacts(
            request=self.request_fingerprint,
            model=self.model,
            params=self.params,
            batch=self.batch,
            # Its own; a run adds the proxies' credentials once (secrets_of), not at each
            # reading of the facts, which the dry run does for every call.
            secrets=self._secrets,
        )

    @property
    def request_fingerprint(self) -> dict[str, Any]:
        """What besides the messages shapes an answer: URL, query, params, options and the
        extra headers, a credential header (:data:`CREDENTIAL_HEADERS`) by its name only."""
        fingerprint: dict[str, Any] = {
            "url": self._url,
            "query": self._query,
            "params": self.params,
            "send_temperature": self.send_temperature,
            "send_seed": self.send_seed,
        }
        if self.headers:
            # Gateways route by header (x-route: r1 or r2), so a header's value is part of
            # the key. A credential's is not, not even hashed: it would put a hash of the key
            # in the cache, and rotating a key would empty it. Only the headers that carry
            # nothing but a credential count so: one that merely looks like one
            # (x-routing-key, x-session-affinity) may route, and a wrong replay costs more
            # than a miss. Left out when there are no headers, so the keys of a client
            # without them stay what they were.
            fingerprint["headers"] = sorted(
                [name.lower(), None if name.lower() in CREDENTIAL_HEADERS else value]
                for name, value in self.headers.items()
            )
        return fingerprint

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        batch = ", batch=True" if self.batch else ""
        return (
            f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={key}{batch})"
        )

    def _request_headers(self) -> dict[str, str]:
        # Header names are case-insensitive: one of each is sent, never two spellings.
        headers = {name.lower(): value for name, value in self.headers.items()}
        # Only encodings the wire can inflate with a bound, whatever the headers asked for.
        headers["accept-encoding"] = ACCEPT_ENCODING
        if self._api_key:
            if self._auth_header == "api-key":
                headers["api-key"] = self._api_key
            else:
                headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    @asynccontextmanager
    async def session(self) -> AsyncIterator[_OpenAISession]:
        if self._key_problem is not None:
            raise ConfigError(self._key_problem)
        async with self.wire() as wire:
            yield _OpenAISession(self, wire)

    def wire(self) -> AbstractAsyncContextManager[Wire]:
        """The wire this client's requests go by (a session's, a Batch API's), for as long
        as the block lasts: one HTTP stack for every request, with this client's headers,
        ``http_timeout``, proxies and ``transport``. A key that would go over plain http to
        another host (read where the client was unpickled) is a :class:`ConfigError` here,
        before any request."""
        if (problem := self._plain_http_problem()) is not None:
            raise ConfigError(f"{problem} (the key was read in this process, pid {os.getpid()})")
        return open_wire(
            self.transport,
            url=self._url,
            headers=self._request_headers(),
            timeout=self.http_timeout,
            scrub=self.secrets.scrub,
        )


class _OpenAISession:
    #: The judge may ask this session for structured output (``response_format``).
    structured_output = True
    #: Every call is a request of its own: none waits without a permit.
    holds = 0

    def __init__(self, client: OpenAICompatible, wire: Wire) -> None:
        self._c = client
        self._wire = wire
        self._scrub = client.secrets.scrub
        # How far down the ladder of structured-output forms (_format_ladder) this session's
        # server has been seen to need: it only ever goes down, and is learned once.
        self.format_step = 0
        self._unconfirmed = 0  # fallbacks that found no form the server took

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
        attempt.rate_limits = parse_rate_limits(headers)
        return self._read(status, headers, data)

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
        forms: list[dict[str, Any] | None] = (
            _format_ladder(shape)
            if shape is not None and "response_format" not in c.params
            else [None]
        )
        return body, forms

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
        return self._read(status, {}, data)

    async def _post(self, body: dict[str, Any]) -> tuple[int, Mapping[str, str], bytes]:
        c = self._c
        try:
            reply = await send(
                self._wire,
                "POST",
                c._url,
                limit=c.max_response_bytes,
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

    def _read(self, status: int, headers: Mapping[str, str], data: bytes) -> Completion:
        c = self._c
        limits = parse_rate_limits(headers)
        if status == HTTPStatus.OK:
            answer = self._read_ok(data)
            return answer if limits is None else dataclasses.replace(answer, rate_limits=limits)
        # Some gateways echo the credentials they rejected; never pass them on.
        message, code, param = error_text(data, self._scrub)
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
                retry_after=parse_retry_after(headers),
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

    def _read_ok(self, data: bytes) -> Completion:
        who = self._c.identity
        scrub = self._scrub
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
        refusal = message.get("refusal") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal:
            return Completion(
                text=scrub(refusal),
                finish_reason=finish,
                refused=True,
                prompt_tokens=used,
                completion_tokens=made,
            )
        if finish == "content_filter":
            text = scrub(content) if isinstance(content, str) and content else CONTENT_FILTER_TEXT
            return Completion(
                text=text,
                finish_reason=finish,
                filtered=True,
                prompt_tokens=used,
                completion_tokens=made,
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
        )


def _usage(body: Any) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens of a completion body's ``usage``, where it reports them."""
    usage = body.get("usage") if isinstance(body, dict) else None

    def count(name: str) -> int | None:
        value = usage.get(name) if isinstance(usage, dict) else None
        # Any whole number: Completion reads an impossible one as not reported, and counts it.
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return count("prompt_tokens"), count("completion_tokens")


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


def _with_format(body: dict[str, Any], form: Mapping[str, Any] | None) -> dict[str, Any]:
    if form is None:
        return body
    return {**body, "response_format": dict(form)}


def _hosted_api(base_url: str) -> str | None:
    """Whose API ``base_url`` is, when it is one that always needs a key: OpenAI's or
    Azure OpenAI's (a local server, a gateway or a proxy may take none)."""
    host = (httpx.URL(base_url).host or "").lower()
    if host == "api.openai.com":
        return "OpenAI's API"
    if host.endswith((".openai.azure.com", ".cognitiveservices.azure.com")):
        return "Azure OpenAI's API"
    return None


def _has_credential(headers: Mapping[str, str] | None) -> bool:
    return any(name.lower() in CREDENTIAL_HEADERS for name in (headers or {}))


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

"""Checks of what a user passes to :class:`~safecons.clients.OpenAICompatible`: its key (or
the variable holding it), extra headers, request params and model, each refused where the
client is made, by an error naming the argument and never quoting a secret."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

import httpx

from ..errors import InputError
from ._secrets import check_env_name, key_from_env

__all__ = (
    "CREDENTIAL_HEADERS",
    "check_flag",
    "check_headers",
    "check_key_needed",
    "check_model",
    "check_params",
    "has_credential",
    "key_from",
)

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


def check_model(model: str | None, *, required: bool) -> None:
    """A model name is ``required``, and must be a non-empty string; an Azure deployment's
    client may have none (the deployment names the model)."""
    if model is None and required:
        raise InputError("model: required (every OpenAI-compatible server but Azure needs it)")
    if model is not None and (not isinstance(model, str) or not model):
        raise InputError(f"model: expected a non-empty string, got {model!r}")


def key_from(
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


def check_key_needed(
    key: str | None,
    variable: str,
    headers: Mapping[str, str] | None,
    base_url: str,
    withheld: str | None = None,
) -> None:
    """Refuse a client with no key, in the key or in a credential header, for an API that
    answers nothing without one; ``variable`` is the one the message says to set
    (``withheld``: the default one, not read for this base URL)."""
    if key is None and not has_credential(headers):
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


def check_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The extra request-body fields, none of them one safecons sets itself."""
    if params is not None and not (
        isinstance(params, Mapping) and all(isinstance(k, str) for k in params)
    ):
        raise InputError(f"params: expected a mapping of request-body fields, got {params!r}")
    reserved = {"model", "messages", "temperature", "seed"} & set(params or {})
    if reserved:
        raise InputError(f"params: {sorted(reserved)} are set by safecons, not in params")
    return dict(params or {})


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
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


def check_flag(name: str, value: object) -> bool:
    """``value``, a bool, or an error naming ``name``."""
    if not isinstance(value, bool):
        raise InputError(f"{name}: expected True or False, got {value!r}")
    return value


def _hosted_api(base_url: str) -> str | None:
    """Whose API ``base_url`` is, when it is one that always needs a key: OpenAI's or
    Azure OpenAI's (a local server, a gateway or a proxy may take none)."""
    host = (httpx.URL(base_url).host or "").lower()
    if host == "api.openai.com":
        return "OpenAI's API"
    if host.endswith((".openai.azure.com", ".cognitiveservices.azure.com")):
        return "Azure OpenAI's API"
    return None


def has_credential(headers: Mapping[str, str] | None) -> bool:
    return any(name.lower() in CREDENTIAL_HEADERS for name in (headers or {}))

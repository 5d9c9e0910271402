"""Where an :class:`~safecons.clients.OpenAICompatible` client's requests go, and how its
key travels: OpenAI's API or a compatible server's root, or an Azure OpenAI deployment."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Final, Literal

import httpx

from ..errors import InputError
from ._secrets import check_base_url

__all__ = (
    "AZURE_KEY_ENV",
    "OPENAI_BASE_URL",
    "OPENAI_HOST",
    "OPENAI_KEY_ENV",
    "Endpoint",
    "azure_endpoint",
    "openai_endpoint",
)

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
OPENAI_HOST: Final = "api.openai.com"
#: The variable an OpenAI key is read from by default, for OpenAI's host only.
OPENAI_KEY_ENV: Final = "OPENAI_API_KEY"
#: The variable an Azure OpenAI key is read from by default.
AZURE_KEY_ENV: Final = "AZURE_OPENAI_API_KEY"
# What Azure allows in a deployment's name; it becomes a segment of the request's path.
_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a client posts its chat completions, and how its key goes with them."""

    #: The API root (``base_url``, or an Azure resource's endpoint).
    base_url: str
    #: The URL every chat completion is posted to.
    url: str
    #: The variable a key is read from when none is named.
    default_key_env: str
    #: Whether that variable's key may be sent here (OPENAI_API_KEY goes to OpenAI only).
    sends_default_key: bool = True
    #: The header the key travels in.
    auth_header: Literal["authorization", "api-key"] = "authorization"
    #: An Azure deployment's name (None elsewhere).
    deployment: str | None = None
    #: The query string every request carries (Azure's ``api-version``).
    query: Mapping[str, str] = dataclasses.field(default_factory=dict)


def openai_endpoint(base_url: str | None) -> Endpoint:
    """An OpenAI-compatible server's endpoint: ``{base_url}/chat/completions``.

    Examples
    --------
    >>> openai_endpoint("http://localhost:8000/v1").url
    'http://localhost:8000/v1/chat/completions'
    """
    root = _base_url_from(base_url)
    return Endpoint(
        base_url=root,
        url=f"{root}/chat/completions",
        default_key_env=OPENAI_KEY_ENV,
        # OPENAI_API_KEY goes only to OpenAI's own host, or to the base URL that came with it
        # from OPENAI_BASE_URL: never to a local or third-party server named by base_url=.
        sends_default_key=_sends_openai_key(base_url, root),
    )


def azure_endpoint(endpoint: str, deployment: str, api_version: str) -> Endpoint:
    """An Azure OpenAI deployment's endpoint, its key in the ``api-key`` header.

    Examples
    --------
    >>> where = azure_endpoint("https://res.openai.azure.com", "gpt4o", "2024-10-21")
    >>> where.url, dict(where.query)
    ('https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions', {'api-version': '2024-10-21'})
    """  # noqa: E501
    root = check_base_url(endpoint, "endpoint")
    if not isinstance(deployment, str) or not _DEPLOYMENT.fullmatch(deployment):
        raise InputError(
            "deployment: expected an Azure deployment name (a letter or digit, then letters, "
            "digits, '-', '_', '.')"
        )
    return Endpoint(
        base_url=root,
        url=f"{root}/openai/deployments/{deployment}/chat/completions",
        default_key_env=AZURE_KEY_ENV,
        auth_header="api-key",
        deployment=deployment,
        query={"api-version": api_version},
    )


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

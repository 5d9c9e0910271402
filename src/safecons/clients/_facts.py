"""What safecons knows of a client beyond the :class:`~safecons.clients.ChatClient` protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from .._foreign import conforms
from ._proxy import proxy_secrets
from ._secrets import Secrets

__all__ = ("ClientFacts", "Declared", "facts_of", "secrets_of")


@dataclass(frozen=True, slots=True)
class ClientFacts:
    """What a client declares of itself, read in one place (:func:`facts_of`).

    ``request`` is what besides the messages shapes its answers (part of every call's cache
    key: URL, params, headers; a callable's version); ``model`` and ``params`` are what the
    dry run estimates tokens by; ``batch`` whether its calls go out as lines of a provider
    batch; ``secrets`` what is scrubbed from every error and stored text.
    """

    request: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    batch: bool = False
    secrets: Secrets = field(default_factory=Secrets)


@runtime_checkable
class Declared(Protocol):
    """A client that declares its :class:`ClientFacts` (safecons' own clients do)."""

    @property
    def facts(self) -> ClientFacts: ...


def facts_of(client: object) -> ClientFacts:
    """The facts ``client`` declares; none (a client known by its identity alone) for a client
    of the user's own, which needs only what :class:`~safecons.clients.ChatClient` documents.

    Examples
    --------
    >>> from safecons.clients import CallableClient, OpenAICompatible
    >>> facts_of(CallableClient(lambda messages, temperature: "no", version="v2")).request
    {'version': 'v2'}
    >>> client = OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1",
    ...                           api_key="sk-0123456789abcdef")
    >>> facts = facts_of(client)
    >>> facts.model, facts.batch, facts.secrets.scrub("key sk-0123456789abcdef")
    ('m', False, 'key <api key>')
    >>> facts_of(object()).request, facts_of(object()).batch
    ({}, False)
    """
    # An unrelated ``facts`` attribute of a user's object declares nothing.
    facts = cast(Declared, client).facts if conforms(client, Declared) else None
    return facts if isinstance(facts, ClientFacts) else ClientFacts()


def secrets_of(*clients: object) -> Secrets:
    """The secrets every client given declares (a client that declares none adds none), and
    the credentials of the proxies the environment names, which any client's library may
    send (:func:`~safecons.clients._proxy.proxy_secrets`)."""
    out = proxy_secrets()
    for client in clients:
        out = out | facts_of(client).secrets
    return out

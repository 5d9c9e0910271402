"""Turn whatever a user passes as a model into a chat client."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..errors import InputError
from ._base import ChatClient, ChatSession
from ._callable import CallableClient, check_chat_signature

__all__ = ("as_chat_client", "open_session", "request_fingerprint")


def as_chat_client(obj: object, parameter: str) -> ChatClient:
    """Return ``obj`` as a :class:`~safecons.clients.ChatClient`, wrapping plain callables.

    A callable's signature is checked here, before any call. ``parameter`` names the argument
    in the error raised for anything else.
    """
    if isinstance(obj, ChatClient):
        return obj
    if callable(obj):
        check_chat_signature(obj, parameter)
        return CallableClient(obj)
    raise InputError(
        f"{parameter}: expected an OpenAICompatible client or a callable "
        f"(messages, *, temperature) -> str, got {type(obj).__name__}"
    )


def request_fingerprint(client: object) -> dict[str, Any]:
    """What besides the messages shapes a client's answer (URL, params), for cache keys."""
    fingerprint = getattr(client, "request_fingerprint", None)
    return dict(fingerprint) if isinstance(fingerprint, Mapping) else {}


def open_session(
    client: ChatClient, *, concurrency: int
) -> AbstractAsyncContextManager[ChatSession]:
    """``client.session()``, telling safecons' own callable adapter the run's concurrency."""
    if isinstance(client, CallableClient):
        return client.session(concurrency=concurrency)
    return client.session()

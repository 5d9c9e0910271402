"""Turn whatever a user passes as a model into a chat client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InputError
from ._base import ChatClient, describe
from ._callable import CallableClient

__all__ = ("as_chat_client", "request_fingerprint")


def as_chat_client(obj: object, parameter: str) -> ChatClient:
    """Return ``obj`` as a :class:`~safecons.clients.ChatClient`, wrapping plain callables.

    ``parameter`` names the argument in the error raised for anything else.
    """
    if isinstance(obj, ChatClient):
        return obj
    if callable(obj):
        return CallableClient(obj, name=describe(obj))
    raise InputError(
        f"{parameter}: expected an OpenAICompatible client or a callable "
        f"(messages, *, temperature) -> str, got {type(obj).__name__}"
    )


def request_fingerprint(client: object) -> dict[str, Any]:
    """What besides the messages shapes a client's answer (URL, params), for cache keys."""
    fingerprint = getattr(client, "request_fingerprint", None)
    return dict(fingerprint) if isinstance(fingerprint, Mapping) else {}

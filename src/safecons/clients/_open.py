"""Turn whatever a user passes as a model into a chat client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from ..errors import AuthenticationError, InputError
from ._base import CallFailed, ChatClient, ChatSession, Completion, RetryableCallError, describe
from ._callable import CallableClient, check_chat_signature
from ._openai import OpenAICompatible

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
    """``client.session()``, telling safecons' own callable adapter the run's concurrency.

    A client of the user's own making is the user's code: what its session raises, other than
    a :class:`~safecons.clients.CallFailed` or an :class:`~safecons.AuthenticationError`, is a
    failed attempt (as for a callable), not a fault of the run.
    """
    if isinstance(client, CallableClient):
        return client.session(concurrency=concurrency)
    if isinstance(client, OpenAICompatible):
        return client.session()
    return _users_session(client)


@asynccontextmanager
async def _users_session(client: ChatClient) -> AsyncIterator[ChatSession]:
    async with client.session() as session:
        yield _UsersSession(session, describe(client))


class _UsersSession:
    """A session of a user's own client, whose failures are failed attempts."""

    def __init__(self, session: ChatSession, who: str) -> None:
        self._session = session
        self._who = who

    def __getattr__(self, name: str) -> Any:
        # What the session says of itself (``accepts_response_format``) is the session's.
        return getattr(self._session, name)

    async def complete(self, messages: Any, **options: Any) -> Completion:
        try:
            return await self._session.complete(messages, **options)
        except (CallFailed, AuthenticationError):
            raise
        except Exception as exc:
            raise RetryableCallError(f"{self._who} raised {type(exc).__name__}: {exc}") from exc

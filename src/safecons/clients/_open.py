"""Turn whatever a user passes as a model into a chat client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

from .._foreign import Raised, conforms, describe_exception, guarded_await, type_name
from ..errors import AuthenticationError, InputError
from ._base import (
    Attempt,
    CallFailed,
    ChatClient,
    ChatSession,
    Completion,
    Messages,
    NonRetryableCallError,
    RetryableCallError,
    RunSession,
    describe,
)
from ._batch_claims import BatchLedger
from ._batch_session import batched_session
from ._callable import CallableClient, check_attribute_lookup, check_chat_signature
from ._facts import facts_of
from ._openai import OpenAICompatible

__all__ = ("as_chat_client", "open_session", "request_fingerprint")


def as_chat_client(obj: object, parameter: str) -> ChatClient:
    """Return ``obj`` as a :class:`~safecons.clients.ChatClient`, wrapping plain callables.

    A callable's signature is checked here, before any call. ``parameter`` names the argument
    in the error raised for anything else.
    """
    check_attribute_lookup(obj, parameter)
    if isinstance(obj, CallableClient):
        return obj.pinned()  # read once for the run that asked
    if conforms(obj, ChatClient):
        return cast(ChatClient, obj)
    if callable(obj):
        check_chat_signature(obj, parameter)
        return CallableClient(obj).pinned()
    raise InputError(
        f"{parameter}: expected an OpenAICompatible client or a callable "
        f"(messages, *, temperature) -> str, got {type(obj).__name__}"
    )


def request_fingerprint(client: object) -> dict[str, Any]:
    """What besides the messages shapes a client's answers (URL, params), for cache keys."""
    return dict(facts_of(client).request)


def open_session(
    client: ChatClient,
    *,
    concurrency: int,
    ledger: BatchLedger | None = None,
    progress: bool = False,
) -> AbstractAsyncContextManager[RunSession]:
    """A session of ``client`` as a run uses it (:class:`~safecons.clients._base.RunSession`),
    telling safecons' own callable adapter the run's concurrency.

    A client made with ``batch=True`` gets a batched session
    (:func:`~safecons.clients._batch_session.batched_session`): ``ledger`` (the run's) records
    its batches, and ``progress`` shows a bar of each lot of batches while they run.

    A client of the user's own making is the user's code: what its session raises, other than
    a :class:`~safecons.clients.CallFailed` or an :class:`~safecons.AuthenticationError`, is a
    failed attempt (as for a callable), not a fault of the run.
    """
    if isinstance(client, CallableClient):
        return client.session(concurrency=concurrency)
    if isinstance(client, OpenAICompatible):
        if client.batch:
            return _batched(client, ledger=ledger, progress=progress)
        return client.session()
    return _users_session(client)


@asynccontextmanager
async def _batched(
    client: OpenAICompatible, *, ledger: BatchLedger | None, progress: bool
) -> AsyncIterator[RunSession]:
    async with (
        client.session() as live,
        batched_session(client, live, ledger=ledger, progress=progress) as session,
    ):
        yield session


@asynccontextmanager
async def _users_session(client: ChatClient) -> AsyncIterator[RunSession]:
    async with client.session() as session:
        yield _UsersSession(session, describe(client))


class _UsersSession:
    """A session of a user's own client, whose failures are failed attempts.

    It is called as the :class:`~safecons.clients.ChatSession` protocol documents (messages,
    temperature, and the sample's seed where there is one), and asked for no structured
    output: a judge reads its plain-text verdicts. An answer that is not a
    :class:`Completion` fails its call (not the run), without a retry. What its answers say of
    the provider's limits (:attr:`Completion.rate_limits`, or a :class:`RetryableCallError`'s)
    paces the endpoint.
    """

    structured_output = False
    #: Every call is a request of its own: none waits without a permit.
    holds = 0

    def __init__(self, session: ChatSession, who: str) -> None:
        self._session = session
        self._who = who

    async def attempt(
        self,
        attempt: Attempt,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        # The user's session: it may fail in any way, and each is one failed attempt.
        extra = {} if seed is None else {"seed": seed}
        # The attribute is read inside the guard too: a property or __getattr__ may raise.
        answer = await guarded_await(
            lambda: self._session.complete(messages, temperature=temperature, **extra)
        )
        if isinstance(answer, Raised):
            if isinstance(answer.error, CallFailed | AuthenticationError):
                raise answer.error
            raise RetryableCallError(
                f"{self._who} raised {describe_exception(answer.error)}"
            ) from answer.error
        if not isinstance(answer, Completion):
            raise NonRetryableCallError(
                f"{self._who}: its session's complete returned {type_name(answer)}; "
                "expected a safecons.clients.Completion"
            )
        attempt.rate_limits = answer.rate_limits
        return answer

"""What every client of safecons looks like from the runner's side."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from .._foreign import conforms
from .._refusal import CONTENT_FILTER_TEXT
from .._text import valid_unicode
from ..errors import SafeconsError
from ._identity import short_name

__all__ = (
    "CONTENT_FILTER_TEXT",
    "MAX_KEPT_OUTPUT",
    "AnsweredElsewhere",
    "Attempt",
    "CallFailed",
    "ChatClient",
    "ChatFunction",
    "ChatSession",
    "Completion",
    "Messages",
    "NonRetryableCallError",
    "RateLimits",
    "RetryableCallError",
    "RunSession",
)

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class RateLimits:
    """What a provider said of its rate limits in one answer's headers (None: not sent).

    ``limit_*`` is what the limit allows (per minute for OpenAI), ``remaining_*`` what is
    left of it when the server read the request, ``reset_*`` the seconds until that count is
    whole again; for requests and for tokens. ``retry_after`` is the wait a 429 asked for.
    Read by :func:`safecons.clients.parse_rate_limits`; the runner paces attempts by them.
    A figure that is not a number (a client of one's own may pass anything) is read as not
    sent.
    """

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens: float | None = None
    retry_after: float | None = None

    def __post_init__(self) -> None:
        for name in _RATE_LIMIT_FIELDS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, Real)):
                object.__setattr__(self, name, None)


_RATE_LIMIT_FIELDS: Final = tuple(RateLimits.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer of a chat model.

    ``refused`` marks an explicit refusal field (OpenAI's ``message.refusal``); ``filtered``
    marks a provider content-filter block. Both are answers to be judged, not errors.

    Lone surrogates in ``text`` (a JSON body may carry ``"\\ud800"``) become U+FFFD: they
    cannot be stored in a frame or a cache, and one such answer must not end a run. A
    ``finish_reason`` that is not text, or ``rate_limits`` that are not :class:`RateLimits`,
    are read as not said.
    """

    text: str
    finish_reason: str | None = None
    refused: bool = False
    filtered: bool = False
    #: Tokens the server reported spending (``usage``), when it did.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: The rate limits the answer's headers reported (OpenAI's ``x-ratelimit-*``), when it
    #: had any; not part of the answer, so not of its equality either.
    rate_limits: RateLimits | None = field(default=None, compare=False)

    #: How many of the usage figures the server sent were impossible (not a whole number,
    #: below 0 or above :data:`MAX_USAGE_TOKENS`) and read as not reported.
    dropped_usage: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        # A Completion may be made by the user's code (a callable's answer, a client of one's
        # own): each field is read here, once, into what it claims to be, so that a value
        # that cannot be read fails where it was made (the user's attempt), not in the run.
        text = self.text
        if type(text) is not str and isinstance(text, str):
            # A str subclass may override the methods that read it: its exact copy is kept
            # (and judged, stored, shown) instead.
            text = str.__str__(text)
        object.__setattr__(self, "text", valid_unicode(text))
        object.__setattr__(self, "refused", bool(self.refused))
        object.__setattr__(self, "filtered", bool(self.filtered))
        reason: object = self.finish_reason
        object.__setattr__(
            self,
            "finish_reason",
            valid_unicode(str.__str__(reason)) if isinstance(reason, str) else None,
        )
        limits: object = self.rate_limits
        if not isinstance(limits, RateLimits):
            object.__setattr__(self, "rate_limits", None)  # read as: nothing said
        dropped = self.dropped_usage
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if value is not None and usage_count(value) is None:
                object.__setattr__(self, name, None)
                dropped += 1
        object.__setattr__(self, "dropped_usage", dropped)


#: The most tokens one call can report using: a billion, a hundred times the largest
#: context window offered. Past it (2**63 would not even fit a frame's Int64) a usage figure
#: is a provider's error or a lie, read as not reported.
MAX_USAGE_TOKENS: Final = 10**9


def usage_count(value: object) -> int | None:
    """``value`` as a usage figure: a whole number from 0 to :data:`MAX_USAGE_TOKENS`, or None.

    Examples
    --------
    >>> usage_count(120), usage_count(2**63), usage_count(-1), usage_count(True), usage_count(1.5)
    (120, None, None, None, None)
    """
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_USAGE_TOKENS
    return value if ok else None  # type: ignore[return-value]


@dataclass(slots=True)
class Attempt:
    """One attempt of a model call: made by the runner, handed to the session that makes it.

    ``key`` is its call's key when the session defers its calls (:attr:`RunSession.holds`):
    the ``custom_id`` of the batch line the attempt is. None for a live attempt.

    ``started``: an attempt is counted (in the run's attempts and its ``max_calls`` budget)
    when it starts. A session that must first wait for a resource of its own (a free thread
    for a sync callable) marks the attempt as not started, then as started once it has the
    resource; an attempt whose deadline passes while it waits was never made.

    ``rate_limits``: what the attempt's answer said of the provider's limits, set by the
    session that read it (for a success, a failure or an error alike), for the runner to pace
    the endpoint's next attempts by.
    """

    key: str | None = None
    started: bool = True
    rate_limits: RateLimits | None = None


class RunSession(Protocol):
    """A session as a run uses it: every session safecons opens (:func:`open_session`)
    offers this, a user's own :class:`ChatSession` included (wrapped).

    ``structured_output`` says whether a judge may ask it for structured output
    (``response_format``). ``holds`` is how many of its calls may wait at once for answers
    that come later, with nothing in flight (the lines of a provider's batch): a run lets that
    many of its units start, and such a call takes no permit and has no per-attempt timeout;
    0 for a session whose every call is a request of its own. :meth:`attempt` makes one
    attempt, with its :class:`Attempt` passed in, not found in a side channel.
    """

    @property
    def structured_output(self) -> bool: ...

    @property
    def holds(self) -> int: ...

    async def attempt(
        self,
        attempt: Attempt,
        messages: Messages,
        *,
        temperature: float,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion: ...


#: A chat callable: ``fn(messages, *, temperature) -> str`` (a :class:`Completion` too), sync or
#: async; with a ``seed`` keyword it receives the sample's seed (:class:`CallableClient`).
ChatFunction: TypeAlias = Callable[..., str | Completion | Awaitable[str | Completion]]


class CallFailed(SafeconsError):
    """One attempt of a model call failed (the runner decides whether to try again).

    ``output`` is what the model said, when the attempt failed because that was unusable (a
    judge reply that did not parse): kept, cut to :data:`MAX_KEPT_OUTPUT` characters, beside
    the error, so the user can see it.
    """

    def __init__(self, message: str, *, output: str | None = None) -> None:
        super().__init__(message)
        self.output = output if output is None else output[:MAX_KEPT_OUTPUT]


#: How much of an unusable output is kept beside its error.
MAX_KEPT_OUTPUT: Final[int] = 2_000


class RetryableCallError(CallFailed):
    """A failure worth another attempt: 429, 5xx, timeout, connection error, bad body.

    ``retry_after`` is the server's requested wait in seconds, when it sent one;
    ``rate_limited`` marks a 429, which also lowers the run's in-flight target;
    ``rate_limits`` what the answer's headers said of the provider's limits, when they did.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        rate_limited: bool = False,
        output: str | None = None,
        rate_limits: RateLimits | None = None,
    ) -> None:
        super().__init__(message, output=output)
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        self.rate_limits = rate_limits


class NonRetryableCallError(CallFailed):
    """A failure that another identical attempt cannot fix (e.g. HTTP 400, 404)."""


class AnsweredElsewhere(CallFailed):
    """Not a failure: another run sharing the response cache answered this call (and stored
    its answer) after this run missed the cache, so the session sent nothing. The runner
    replays the stored answer; should it not replay, the next attempt is sent."""


@runtime_checkable
class ChatSession(Protocol):
    """A client bound to one run (and one event loop)."""

    async def complete(
        self, messages: Messages, *, temperature: float, seed: int | None = None
    ) -> Completion:
        """Answer ``messages`` once; raise :class:`CallFailed` on a failed attempt.

        ``seed`` identifies the sample (it is derived from the run's seed, the row's
        ``input_id`` and the sample's index); clients that can make sampling reproducible use
        it, the others ignore it.
        """
        ...


@runtime_checkable
class ChatClient(Protocol):
    """Anything that can open a :class:`ChatSession` for the duration of one run.

    ``identity`` names the endpoint (never the key) for error messages and caching.
    """

    @property
    def identity(self) -> str: ...

    def session(self) -> AbstractAsyncContextManager[ChatSession]: ...


def describe(obj: Any) -> str:
    """A short, secret-free name for an object used as a client, for error messages: a
    client's identity (a :class:`ChatClient`'s never holds its key), else its qualified name.
    An attribute of another object that happens to be called ``identity`` is not read: it
    may hold anything (a URL with a password)."""
    if conforms(obj, ChatClient):
        identity = obj.identity
        if isinstance(identity, str):
            return identity
    return short_name(obj)

"""A provider's rate limit, as a :class:`~safecons.testing.FakeOpenAIServer` enforces it.

:class:`RateLimit` states the limits; a limiter (fixed windows, or token buckets that refill
continuously) admits or refuses each request when it arrives and writes OpenAI's
``x-ratelimit-*`` headers, so that a client's pacing can be tested against what a provider
says and does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._tokens import completion_budget, estimate_tokens

__all__ = ("Limiter", "RateLimit", "limiter", "openai_duration")

#: Seconds in the minute a requests-per-minute limit is stated in.
_MINUTE: Final = 60.0


def openai_duration(seconds: float) -> str:
    """A wait in the form OpenAI's ``x-ratelimit-reset-*`` headers send it.

    Below a second in whole milliseconds (rounded up, so a client never comes back early),
    below a minute in seconds, above in minutes and seconds.

    Examples
    --------
    >>> openai_duration(0.35), openai_duration(1.0), openai_duration(2.5), openai_duration(360.0)
    ('350ms', '1s', '2.5s', '6m0s')
    """
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000 - 1e-9))}ms"
    if seconds < _MINUTE:
        return f"{math.ceil(seconds * 1000 - 1e-9) / 1000:g}s"
    minutes, rest = divmod(seconds, _MINUTE)
    return f"{int(minutes)}m{math.ceil(rest * 1000 - 1e-9) / 1000:g}s"


@dataclass(frozen=True)
class RateLimit:
    """A provider's requests-per-minute and tokens-per-minute limits, enforced in fixed windows.

    The server's time is cut into windows of ``window`` seconds from its start; each admits
    ``requests_per_minute * window / 60`` requests and ``tokens_per_minute * window / 60``
    tokens (each at least one; a limit left None is not enforced, and at least one must be
    set). A request's tokens are counted as OpenAI counts them when it admits the request,
    before any answer exists: its prompt's estimate (:func:`safecons._tokens.estimate_tokens`
    of its ``messages``, with the model it names) plus its ``max_completion_tokens`` or
    ``max_tokens``, or ``unbounded_completion_tokens`` when it sets neither (0 by default:
    the prompt alone, since the answer's length is not known at admission).

    Every chat-completions request past a limit, until the window ends, is answered 429
    ``rate_limit_exceeded`` ("... requests per min (RPM) ..." or "... tokens per min (TPM)
    ...") with a ``Retry-After`` of the seconds left in the window; a request of more tokens
    than a whole window admits is answered 429 "Request too large" with no ``Retry-After``,
    as OpenAI does (waiting does not mend it). A request answered 429 does not count against
    the window. Every chat-completions answer (a 429 of the limit too) carries OpenAI's
    headers for each limit set: ``x-ratelimit-limit-requests`` (what a window admits: the RPM
    for the default one-minute window), ``x-ratelimit-remaining-requests`` (what is left of
    this window) and ``x-ratelimit-reset-requests`` (when it ends, in OpenAI's form:
    ``"350ms"``, ``"6m0s"``); ``x-ratelimit-{limit,remaining,reset}-tokens`` the same in
    tokens. A window shorter than a minute keeps a test short at the same rate. Each model
    named in the requests' ``model`` has windows of its own, as OpenAI limits each model apart.

    Examples
    --------
    >>> RateLimit(600, window=1.0).per_window
    10
    >>> RateLimit(tokens_per_minute=60_000, window=1.0).tokens_per_window
    1000
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    window: float = _MINUTE
    unbounded_completion_tokens: int = 0
    #: A token bucket instead of fixed windows: each limit holds at most what one window
    #: admits and refills continuously at the limit's rate (``requests_per_minute / 60`` a
    #: second), as OpenAI describes its limits. ``remaining`` is what the bucket holds after
    #: the request, ``reset`` the time until it is full again, and a 429's ``Retry-After``
    #: the time until the request would fit.
    bucket: bool = False
    #: With ``bucket=True``: what ``x-ratelimit-reset-*`` says, the time until the bucket is
    #: ``"full"`` (OpenAI's "resets to its initial state") or until the ``"next"`` request
    #: fits (as some gateways send); ``limit`` is then what a minute admits, as OpenAI's RPM.
    bucket_reset: Literal["full", "next"] = "full"
    #: The ``x-ratelimit-limit-requests`` the server announces instead of what it enforces
    #: (None: the truth). A provider may announce a per-minute limit and enforce it in
    #: sub-minute slices, as OpenAI documents: ``RateLimit(600, window=1.0, bucket=True,
    #: announced_requests=600)`` says 600 a minute while it holds a bucket of 10 refilled at
    #: 10 a second (its remaining and reset honest about that bucket).
    announced_requests: int | None = None
    #: With ``bucket=True``: ``x-ratelimit-remaining-requests`` is what the bucket held when
    #: the request arrived, the request itself not taken out (an off-by-one some gateways
    #: make), so a client that believes it sends one request too many each time it drains.
    remaining_before: bool = False

    def __post_init__(self) -> None:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("RateLimit: set requests_per_minute, tokens_per_minute or both")
        for name in ("requests_per_minute", "tokens_per_minute", "window"):
            value = getattr(self, name)
            if value is None and name != "window":
                continue
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"RateLimit.{name}: expected a number > 0, got {value!r}")
        announced = self.announced_requests
        if announced is not None and (
            not isinstance(announced, int) or isinstance(announced, bool) or announced <= 0
        ):
            raise ValueError(
                f"RateLimit.announced_requests: expected a whole number > 0 or None, "
                f"got {announced!r}"
            )
        unbounded = self.unbounded_completion_tokens
        if not isinstance(unbounded, int) or isinstance(unbounded, bool) or unbounded < 0:
            raise ValueError(
                f"RateLimit.unbounded_completion_tokens: expected a whole number >= 0, "
                f"got {unbounded!r}"
            )

    @property
    def per_window(self) -> int | None:
        """Requests one window admits (None: requests are not limited)."""
        rpm = self.requests_per_minute
        return None if rpm is None else max(1, int(rpm * self.window / _MINUTE))

    @property
    def tokens_per_window(self) -> int | None:
        """Tokens one window admits (None: tokens are not limited)."""
        tpm = self.tokens_per_minute
        return None if tpm is None else max(1, int(tpm * self.window / _MINUTE))

    def request_tokens(self, body: Mapping[str, Any]) -> int:
        """What a chat request ``body`` counts against the tokens a window admits."""
        messages = body.get("messages")
        model = body.get("model")
        prompt = estimate_tokens(
            [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else [],
            model=model if isinstance(model, str) else None,
        )
        budget = completion_budget(body)
        return prompt + (self.unbounded_completion_tokens if budget is None else budget)


class _Bucket:
    """The token buckets of a :class:`RateLimit` with ``bucket=True``, one pair per model
    (the caller holds the server's lock)."""

    def __init__(self, limit: RateLimit, start: float) -> None:
        self.limit = limit
        # model -> [requests held, tokens held, when they were last counted]
        self._held: dict[str | None, list[float]] = {}
        self._start = start

    def admit(
        self, now: float, tokens: int = 0, model: str | None = None
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """As :meth:`_Window.admit`, on buckets that refill continuously."""
        limit = self.limit
        size = limit.window
        requests, bucket_tokens = limit.per_window, limit.tokens_per_window
        held = self._held.setdefault(
            model, [float(requests or 0), float(bucket_tokens or 0), self._start]
        )
        elapsed = max(0.0, now - held[2])
        held[2] = now
        if requests is not None:
            held[0] = min(float(requests), held[0] + elapsed * requests / size)
        if bucket_tokens is not None:
            held[1] = min(float(bucket_tokens), held[1] + elapsed * bucket_tokens / size)
        refusal, wait, mendable = None, 0.0, True
        if requests is not None and held[0] < 1:
            wait = (1 - held[0]) * size / requests
            refusal = (
                f"Rate limit reached for requests per min (RPM): Limit {requests}, Used "
                f"{requests - int(held[0])}, Requested 1. Please try again later."
            )
        elif bucket_tokens is not None and tokens > bucket_tokens:
            mendable = False
            refusal = (
                f"Request too large for tokens per min (TPM): Limit {bucket_tokens}, Requested "
                f"{tokens}. The input or output tokens must be reduced in order to run "
                "successfully."
            )
        elif bucket_tokens is not None and held[1] < tokens:
            wait = (tokens - held[1]) * size / bucket_tokens
            refusal = (
                f"Rate limit reached for tokens per min (TPM): Limit {bucket_tokens}, Used "
                f"{bucket_tokens - int(held[1])}, Requested {tokens}. Please try again later."
            )
        if refusal is None:
            if requests is not None:
                held[0] -= 1
            if bucket_tokens is not None:
                held[1] -= tokens
        headers = []
        nxt = limit.bucket_reset == "next"
        minutes = _MINUTE / size
        if requests is not None:
            level = held[0] + (refusal is None) if limit.remaining_before else held[0]
            full = (requests - held[0]) * size / requests
            step = (0.0 if held[0] >= 1 else 1 - held[0]) * size / requests
            said = int(requests * minutes) if nxt else requests
            if limit.announced_requests is not None:
                said = limit.announced_requests
            headers += [
                ("x-ratelimit-limit-requests", str(said)),
                ("x-ratelimit-remaining-requests", str(int(level))),
                ("x-ratelimit-reset-requests", openai_duration(step if nxt else full)),
            ]
        if bucket_tokens is not None:
            full = (bucket_tokens - held[1]) * size / bucket_tokens
            headers += [
                ("x-ratelimit-limit-tokens", str(bucket_tokens)),
                ("x-ratelimit-remaining-tokens", str(int(held[1]))),
                ("x-ratelimit-reset-tokens", openai_duration(full)),
            ]
        if refusal is not None and mendable:
            headers.append(("retry-after", f"{math.ceil(wait * 1000) / 1000:g}"))
        return refusal, headers


class _Window:
    """The fixed-window counts of a :class:`RateLimit`, one pair per model (the caller holds
    the server's lock)."""

    def __init__(self, limit: RateLimit, start: float) -> None:
        self.limit = limit
        self._start = start
        self._index = 0
        self._used: dict[str | None, list[int]] = {}  # model -> [requests, tokens] used

    def admit(
        self, now: float, tokens: int = 0, model: str | None = None
    ) -> tuple[str | None, list[tuple[str, str]]]:
        """Whether a request for ``model`` of ``tokens`` arriving at ``now`` is admitted (None)
        or why not (the 429's message), and the headers of its answer."""
        limit = self.limit
        size = limit.window
        index = int((now - self._start) // size)
        if index != self._index:
            self._index = index
            self._used.clear()
        used = self._used.setdefault(model, [0, 0])
        requests, window_tokens = limit.per_window, limit.tokens_per_window
        refusal, mendable = None, True
        if requests is not None and used[0] >= requests:
            refusal = (
                f"Rate limit reached for requests per min (RPM): Limit {requests}, Used "
                f"{used[0]}, Requested 1. Please try again later."
            )
        elif window_tokens is not None and tokens > window_tokens:
            mendable = False  # no window will ever admit it
            refusal = (
                f"Request too large for tokens per min (TPM): Limit {window_tokens}, Requested "
                f"{tokens}. The input or output tokens must be reduced in order to run "
                "successfully."
            )
        elif window_tokens is not None and used[1] + tokens > window_tokens:
            refusal = (
                f"Rate limit reached for tokens per min (TPM): Limit {window_tokens}, Used "
                f"{used[1]}, Requested {tokens}. Please try again later."
            )
        if refusal is None:
            used[0] += 1
            used[1] += tokens
        left = max(0.0, self._start + (index + 1) * size - now)
        reset = openai_duration(left)
        headers = []
        if requests is not None:
            headers += [
                ("x-ratelimit-limit-requests", str(limit.announced_requests or requests)),
                ("x-ratelimit-remaining-requests", str(requests - used[0])),
                ("x-ratelimit-reset-requests", reset),
            ]
        if window_tokens is not None:
            headers += [
                ("x-ratelimit-limit-tokens", str(window_tokens)),
                ("x-ratelimit-remaining-tokens", str(window_tokens - used[1])),
                ("x-ratelimit-reset-tokens", reset),
            ]
        if refusal is not None and mendable:
            headers.append(("retry-after", f"{math.ceil(left * 1000) / 1000:g}"))
        return refusal, headers


#: What admits a :class:`RateLimit`'s requests, per model.
Limiter = _Window | _Bucket


def limiter(limit: RateLimit, start: float) -> Limiter:
    """What admits ``limit``'s requests, its first window (or full buckets) at ``start``."""
    return _Bucket(limit, start) if limit.bucket else _Window(limit, start)

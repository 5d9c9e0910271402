"""What a provider's answer says of its rate limits: ``Retry-After`` and the
``x-ratelimit-*`` headers, read into :class:`~safecons.clients.RateLimits`; which of what it
said any provider could mean (:func:`sensible`), and that in a few words (:func:`describe`)."""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from typing import Final

from ._base import RateLimits

__all__ = ("describe", "parse_duration", "parse_rate_limits", "parse_retry_after", "sensible")


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds (fractions accepted) or an HTTP date.

    Examples
    --------
    >>> import httpx
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
    >>> import httpx
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
    # Most answers carry none of these names: one look at all the names (joined, so the scan
    # runs in C) spares the eleven case-insensitive lookups. Every name read below holds one
    # of the two words.
    names = ",".join(headers).lower()
    if "ratelimit" not in names and "retry-after" not in names:
        return None
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


#: Counts above this, or resets further off than this (seconds), are no limit anyone sets.
MAX_SENSIBLE_COUNT: Final = 10**12
MAX_SENSIBLE_RESET_SECONDS: Final = 86_400.0
_NOTHING: Final = (None, None, None)


def sensible(limits: RateLimits | None) -> RateLimits | None:
    """``limits`` with each count no provider could mean read as not said (a limit of 0, a
    count out of range, more remaining than the limit, a reset that is negative or past a
    day): one nonsense figure drops its count's limit, remaining and reset together.

    Examples
    --------
    >>> sensible(RateLimits(limit_requests=0, remaining_requests=0, reset_requests=1.0))
    >>> sensible(RateLimits(limit_requests=60, remaining_requests=3, reset_requests=2.0))
    RateLimits(limit_requests=60, remaining_requests=3, reset_requests=2.0, limit_tokens=None, remaining_tokens=None, reset_tokens=None, retry_after=None)
    """  # noqa: E501
    if limits is None:
        return None
    requests = _sensible(limits.limit_requests, limits.remaining_requests, limits.reset_requests)
    tokens = _sensible(limits.limit_tokens, limits.remaining_tokens, limits.reset_tokens)
    if requests == tokens == _NOTHING and limits.retry_after is None:
        return None
    return RateLimits(*requests, *tokens, retry_after=limits.retry_after)


def _sensible(
    limit: int | None, remaining: int | None, reset: float | None
) -> tuple[int | None, int | None, float | None]:
    if (
        (limit is None or 0 < limit <= MAX_SENSIBLE_COUNT)
        and (remaining is None or 0 <= remaining <= MAX_SENSIBLE_COUNT)
        and (limit is None or remaining is None or remaining <= limit)
        and (reset is None or (math.isfinite(reset) and 0 <= reset <= MAX_SENSIBLE_RESET_SECONDS))
    ):
        return limit, remaining, reset
    return _NOTHING


def describe(limits: RateLimits | None) -> str:
    """What a provider's headers said, in a few words (for a warning or a progress bar).

    Examples
    --------
    >>> describe(RateLimits(limit_requests=60, remaining_requests=0, reset_requests=42.0))
    '0 of 60 requests left, reset in 42 s'
    """
    if limits is None:
        return "nothing of its limits"
    parts = []
    for name, limit, remaining, reset in (
        ("requests", limits.limit_requests, limits.remaining_requests, limits.reset_requests),
        ("tokens", limits.limit_tokens, limits.remaining_tokens, limits.reset_tokens),
    ):
        if remaining is None and limit is None:
            continue
        left = "?" if remaining is None else f"{remaining:,}"
        of = "" if limit is None else f" of {limit:,}"
        when = "" if reset is None else f", reset in {_seconds(reset)} s"
        parts.append(f"{left}{of} {name} left{when}")
    if limits.retry_after is not None:
        parts.append(f"Retry-After {_seconds(limits.retry_after)} s")
    return "; ".join(parts) or "nothing of its limits"


def _seconds(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"  # noqa: PLR2004

"""How many tokens a request will cost, before it is sent.

Two readers: the run paces an endpoint under the tokens-per-minute limit its provider reports
(``x-ratelimit-remaining-tokens``), and :func:`~safecons.planned_calls` says what a run will
spend before it is started. Both need a number before the provider has counted anything.

With ``tiktoken`` installed (the ``tokens`` extra) and its encoding at hand, prompts are
counted with the encoding of the model (``o200k_base`` for a model tiktoken does not know);
otherwise, and wherever tiktoken fails (its encodings are downloaded on first use, which a
closed network refuses), the estimate is one token per :data:`BYTES_PER_TOKEN` bytes of UTF-8,
rounded up. Four bytes is OpenAI's rule of thumb of four characters of English text per token,
and counting bytes rather than characters keeps the estimate from falling far short on text
that is not Latin (a CJK character is three bytes and often a token of its own). Each message
costs :data:`MESSAGE_OVERHEAD_TOKENS` more (its role and separators) and the reply's priming
:data:`REPLY_PRIMING_TOKENS`, as OpenAI's cookbook counts them.

A provider counts ``max_tokens`` (or ``max_completion_tokens``) against the limit when the
request is admitted, so :func:`request_tokens` adds it when the request sets it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = (
    "BYTES_PER_TOKEN",
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "completion_budget",
    "estimate_tokens",
    "request_tokens",
    "tokenizer_name",
)

#: Bytes of UTF-8 per token when no tokenizer is at hand.
BYTES_PER_TOKEN: Final = 4
#: Tokens each message costs besides its text (role, separators).
MESSAGE_OVERHEAD_TOKENS: Final = 3
#: Tokens that prime the assistant's reply, once per request.
REPLY_PRIMING_TOKENS: Final = 3
#: The encoding for a model tiktoken does not name (that of OpenAI's current models).
DEFAULT_ENCODING: Final = "o200k_base"


@functools.lru_cache(maxsize=32)
def _encoding(model: str | None) -> Any:
    """tiktoken's encoding for ``model``, or None when tiktoken is not installed or cannot
    load one (cached: one failure is not retried for every request)."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        if model:
            try:
                return tiktoken.encoding_for_model(model)
            except KeyError:
                pass
        return tiktoken.get_encoding(DEFAULT_ENCODING)
    except (OSError, ValueError, KeyError):
        # No network for the encoding file (requests' errors are OSErrors), a cached file whose
        # hash does not match (ValueError): the byte estimate serves.
        return None


def tokenizer_name(model: str | None = None) -> str:
    """What :func:`estimate_tokens` counts with for ``model``: ``"tiktoken:<encoding>"``, or
    ``"bytes/4"`` (the UTF-8 estimate).

    Examples
    --------
    >>> tokenizer_name("gpt-4o-mini") in ("tiktoken:o200k_base", "bytes/4")
    True
    """
    encoding = _encoding(model)
    return f"bytes/{BYTES_PER_TOKEN}" if encoding is None else f"tiktoken:{encoding.name}"


def _text_tokens(text: str, encoding: Any) -> int:
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN)


def estimate_tokens(messages: Sequence[Mapping[str, Any]], *, model: str | None = None) -> int:
    """Estimated prompt tokens of ``messages`` (a chat request's ``messages``).

    A message's content may be a string or a list of parts (their ``text`` is counted);
    anything else in a message is counted as its text.

    Examples
    --------
    >>> from safecons._tokens import estimate_tokens, tokenizer_name
    >>> n = estimate_tokens([{"role": "user", "content": "Hello there, how are you?"}])
    >>> n == (14 if tokenizer_name() == "bytes/4" else n)
    True
    """
    encoding = _encoding(model)
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        for name, value in message.items():
            if name == "content" and isinstance(value, list):
                for part in value:
                    text = part.get("text") if isinstance(part, Mapping) else None
                    if isinstance(text, str):
                        total += _text_tokens(text, encoding)
            elif isinstance(value, str) and name != "role":
                total += _text_tokens(value, encoding)
            elif name == "role":
                total += 1
    return total


def completion_budget(params: Mapping[str, Any]) -> int | None:
    """The completion tokens a request asks for at most (``max_completion_tokens`` or
    ``max_tokens`` among its body fields), or None when it sets no bound.

    Examples
    --------
    >>> completion_budget({"max_tokens": 256}), completion_budget({})
    (256, None)
    """
    for name in ("max_completion_tokens", "max_tokens"):
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def request_tokens(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> int:
    """What a provider counts against a tokens-per-minute limit when it admits the request:
    the estimated prompt, plus the completion bound the request sets (if any).

    Examples
    --------
    >>> from safecons._tokens import request_tokens, estimate_tokens
    >>> msgs = [{"role": "user", "content": "hi"}]
    >>> request_tokens(msgs, params={"max_tokens": 100}) == estimate_tokens(msgs) + 100
    True
    """
    budget = completion_budget(params or {})
    return estimate_tokens(messages, model=model) + (budget or 0)

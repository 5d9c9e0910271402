"""Chat clients: OpenAI-compatible HTTP endpoints and plain Python callables.

What a user of safecons meets: :class:`OpenAICompatible` and :class:`CallableClient`; the
:class:`ChatClient` and :class:`ChatSession` protocols, :class:`Completion` and the errors an
attempt raises (:class:`CallFailed`, :class:`RetryableCallError`,
:class:`NonRetryableCallError`), to write a client of their own; :class:`RateLimits` and
:func:`parse_rate_limits`, for such a client to say what its provider said of its limits; the
Batch API's limits and error; :class:`TransportOptions` and :class:`BatchOptions`, the
options an :class:`OpenAICompatible` client takes for how its requests travel and for the
Batch API. What the other packages of safecons share with this one (turning what a user
passed into a session, the Batch API's machinery, the secrets every error is scrubbed of) is
in :mod:`safecons.clients._internal`, an interface inside safecons, not for its users.
"""

from ._base import CONTENT_FILTER_TEXT as CONTENT_FILTER_TEXT
from ._base import MAX_USAGE_TOKENS as MAX_USAGE_TOKENS
from ._base import CallFailed as CallFailed
from ._base import ChatClient as ChatClient
from ._base import ChatSession as ChatSession
from ._base import Completion as Completion
from ._base import NonRetryableCallError as NonRetryableCallError
from ._base import RateLimits as RateLimits
from ._base import RetryableCallError as RetryableCallError
from ._batch_api import MAX_BATCH_BYTES as MAX_BATCH_BYTES
from ._batch_api import MAX_BATCH_LINES as MAX_BATCH_LINES
from ._batch_api import BatchError as BatchError
from ._callable import CallableClient as CallableClient
from ._openai import OpenAICompatible as OpenAICompatible
from ._options import BatchOptions as BatchOptions
from ._options import TransportOptions as TransportOptions
from ._rate_limits import parse_rate_limits as parse_rate_limits

__all__ = (
    "CONTENT_FILTER_TEXT",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "MAX_USAGE_TOKENS",
    "BatchError",
    "BatchOptions",
    "CallFailed",
    "CallableClient",
    "ChatClient",
    "ChatSession",
    "Completion",
    "NonRetryableCallError",
    "OpenAICompatible",
    "RateLimits",
    "RetryableCallError",
    "TransportOptions",
    "parse_rate_limits",
)

"""Chat clients: OpenAI-compatible HTTP endpoints and plain Python callables.

Users meet :class:`OpenAICompatible`, :class:`CallableClient`, the :class:`ChatClient` and
:class:`ChatSession` protocols (to write a client of their own) and :class:`Completion`. The
rest of this door is for the engine and the judges: turning what a user passed into a client
and a session, the errors an attempt raises, the identity of a callable, the secrets every
error is scrubbed of.
"""

from ._base import CONTENT_FILTER_TEXT as CONTENT_FILTER_TEXT
from ._base import CURRENT_ATTEMPT as CURRENT_ATTEMPT
from ._base import MAX_USAGE_TOKENS as MAX_USAGE_TOKENS
from ._base import AttemptStart as AttemptStart
from ._base import CallFailed as CallFailed
from ._base import ChatClient as ChatClient
from ._base import ChatSession as ChatSession
from ._base import Completion as Completion
from ._base import NonRetryableCallError as NonRetryableCallError
from ._base import RateLimits as RateLimits
from ._base import RetryableCallError as RetryableCallError
from ._base import describe as describe
from ._batch import CURRENT_LINE as CURRENT_LINE
from ._batch import MAX_BATCH_BYTES as MAX_BATCH_BYTES
from ._batch import MAX_BATCH_LINES as MAX_BATCH_LINES
from ._batch import POLL_GRACE_SECONDS as POLL_GRACE_SECONDS
from ._batch import UNREAD as UNREAD
from ._batch import UNSTATED_EXPIRY_SECONDS as UNSTATED_EXPIRY_SECONDS
from ._batch import BatchAPI as BatchAPI
from ._batch import BatchedSession as BatchedSession
from ._batch import BatchError as BatchError
from ._batch import BatchGone as BatchGone
from ._batch import BatchState as BatchState
from ._batch import Lines as Lines
from ._batch import batch_api as batch_api
from ._callable import CallableClient as CallableClient
from ._callable import UserCode as UserCode
from ._callable import callable_fingerprint as callable_fingerprint
from ._callable import check_signature as check_signature
from ._callable import warn_if_guessed as warn_if_guessed
from ._open import as_chat_client as as_chat_client
from ._open import open_session as open_session
from ._open import request_fingerprint as request_fingerprint
from ._openai import OPENAI_BASE_URL as OPENAI_BASE_URL
from ._openai import OpenAICompatible as OpenAICompatible
from ._openai import parse_duration as parse_duration
from ._openai import parse_rate_limits as parse_rate_limits
from ._secrets import Secrets as Secrets
from ._secrets import secrets_of as secrets_of

__all__ = (
    "CONTENT_FILTER_TEXT",
    "CURRENT_ATTEMPT",
    "CURRENT_LINE",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "MAX_USAGE_TOKENS",
    "OPENAI_BASE_URL",
    "POLL_GRACE_SECONDS",
    "UNREAD",
    "UNSTATED_EXPIRY_SECONDS",
    "AttemptStart",
    "BatchAPI",
    "BatchError",
    "BatchGone",
    "BatchState",
    "BatchedSession",
    "CallFailed",
    "CallableClient",
    "ChatClient",
    "ChatSession",
    "Completion",
    "Lines",
    "NonRetryableCallError",
    "OpenAICompatible",
    "RateLimits",
    "RetryableCallError",
    "Secrets",
    "UserCode",
    "as_chat_client",
    "batch_api",
    "callable_fingerprint",
    "check_signature",
    "describe",
    "open_session",
    "parse_duration",
    "parse_rate_limits",
    "request_fingerprint",
    "secrets_of",
    "warn_if_guessed",
)

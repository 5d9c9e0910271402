"""The clients package's interface for the other packages of safecons, beside what its users
meet (the package's ``__init__``): turning what a user passed into a client and a session,
the attempt a client reports on, the ledger a batched session records its batches in, the
identity of a callable, the secrets every error is scrubbed of. The one private module of
this package other packages may import (``tests/test_house_rules.py`` names it); nothing
here is promised to users, nor to stay.
"""

from ._base import AnsweredElsewhere as AnsweredElsewhere
from ._base import Attempt as Attempt
from ._base import ChatFunction as ChatFunction
from ._base import RunSession as RunSession
from ._base import describe as describe
from ._batch_claims import CLAIM_PREFIX as CLAIM_PREFIX
from ._batch_claims import BatchClaims as BatchClaims
from ._batch_claims import BatchLedger as BatchLedger
from ._batch_claims import ClaimLease as ClaimLease
from ._callable import UserCode as UserCode
from ._callable import check_attribute_lookup as check_attribute_lookup
from ._callable import check_signature as check_signature
from ._callable import warn_if_partial as warn_if_partial
from ._endpoint import OPENAI_BASE_URL as OPENAI_BASE_URL
from ._facts import ClientFacts as ClientFacts
from ._facts import facts_of as facts_of
from ._facts import secrets_of as secrets_of
from ._identity import callable_digest as callable_digest
from ._open import as_chat_client as as_chat_client
from ._open import open_session as open_session
from ._open import request_fingerprint as request_fingerprint
from ._rate_limits import describe as describe_limits
from ._rate_limits import parse_duration as parse_duration
from ._rate_limits import sensible as sensible
from ._secrets import Secrets as Secrets
from ._urls import comparable_url as comparable_url

__all__ = (
    "CLAIM_PREFIX",
    "OPENAI_BASE_URL",
    "AnsweredElsewhere",
    "Attempt",
    "BatchClaims",
    "BatchLedger",
    "ChatFunction",
    "ClaimLease",
    "ClientFacts",
    "RunSession",
    "Secrets",
    "UserCode",
    "as_chat_client",
    "callable_digest",
    "check_attribute_lookup",
    "check_signature",
    "comparable_url",
    "describe",
    "describe_limits",
    "facts_of",
    "open_session",
    "parse_duration",
    "request_fingerprint",
    "secrets_of",
    "sensible",
    "warn_if_partial",
)

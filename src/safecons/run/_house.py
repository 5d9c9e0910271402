"""What the rest of safecons uses of the engine (:mod:`safecons.run`), beside what its users
meet: the engine and its units, the model call and its options, the runner and its sync
front, the permits and each endpoint's pacing policy, the cache's codecs. A door of the house
(the house-rules test names it), not of the package's users: nothing here is promised to stay.
"""

from ._cache import cache_key as cache_key
from ._cache import opened_cache as opened_cache
from ._calls import CallKind as CallKind
from ._calls import Endpoint as Endpoint
from ._calls import ModelCall as ModelCall
from ._calls import decode_completion as decode_completion
from ._calls import encode_completion as encode_completion
from ._calls import row_draw as row_draw
from ._calls import sample_seed as sample_seed
from ._calls import slot as slot
from ._engine import Engine as Engine
from ._engine import engine as engine
from ._options import CallOptions as CallOptions
from ._options import RunOptions as RunOptions
from ._options import whole_number as whole_number
from ._permits import LocalPermits as LocalPermits
from ._permits import Permits as Permits
from ._permits import Slot as Slot
from ._permits import Tokens as Tokens
from ._policy import MAX_PACED_WAIT_SECONDS as MAX_PACED_WAIT_SECONDS
from ._policy import EndpointPolicy as EndpointPolicy
from ._policy import PacingPolicy as PacingPolicy
from ._runner import CallOutcome as CallOutcome
from ._runner import RetryPolicy as RetryPolicy
from ._runner import Runner as Runner
from ._runner import RunStats as RunStats
from ._runner import portal_call as portal_call
from ._runner import replay as replay
from ._runner import run_sync as run_sync

__all__ = (
    "MAX_PACED_WAIT_SECONDS",
    "CallKind",
    "CallOptions",
    "CallOutcome",
    "Endpoint",
    "EndpointPolicy",
    "Engine",
    "LocalPermits",
    "ModelCall",
    "PacingPolicy",
    "Permits",
    "RetryPolicy",
    "RunOptions",
    "RunStats",
    "Runner",
    "Slot",
    "Tokens",
    "cache_key",
    "decode_completion",
    "encode_completion",
    "engine",
    "opened_cache",
    "portal_call",
    "replay",
    "row_draw",
    "run_sync",
    "sample_seed",
    "slot",
    "whole_number",
)

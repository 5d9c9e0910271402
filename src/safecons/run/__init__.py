"""The engine: one way to make the model calls of a plan, whoever makes the plan.

It depends on no stage of the metric: the metric, ``swap_test``, ``audit_judge`` and the Ray
actors hand it units that make :class:`ModelCall`\\ s, and it runs them
(:func:`engine`, :class:`Engine`).

- :mod:`._options`: :class:`RunOptions`, the options of every run (concurrency, retries per
  kind, timeout, cache, budget, progress, seed), stated and validated once.
- :mod:`._calls`: :class:`ModelCall`, one model call and its one cache key, shared by the run,
  the dry run and the cache; sample seeds, slots, the stored-answer codecs.
- :mod:`._runner`: :class:`Runner`, one call's attempts (one permit each, retries with backoff
  honouring ``Retry-After``, per-call timeouts, the budget, the cache), and :func:`run_sync`,
  the sync front that works inside a running event loop.
- :mod:`._permits`: where an attempt gets its permit (one ``CapacityLimiter`` per run, with
  adaptive pressure under 429s).
- :mod:`._engine`: :class:`Engine`, the scaffold every front shares: cache, runner, sessions,
  the gate that starts units in order, the progress bar.
- :mod:`._cache`: the on-disk response cache.
"""

from ._cache import CacheArg as CacheArg
from ._cache import ResponseCache as ResponseCache
from ._cache import cache_key as cache_key
from ._cache import get_default_cache as get_default_cache
from ._cache import opened_cache as opened_cache
from ._cache import set_default_cache as set_default_cache
from ._calls import CallKind as CallKind
from ._calls import Endpoint as Endpoint
from ._calls import ModelCall as ModelCall
from ._calls import decode_completion as decode_completion
from ._calls import encode_completion as encode_completion
from ._calls import sample_seed as sample_seed
from ._calls import slot as slot
from ._engine import Engine as Engine
from ._engine import engine as engine
from ._options import MAX_CONCURRENCY as MAX_CONCURRENCY
from ._options import MAX_RETRIES as MAX_RETRIES
from ._options import CallOptions as CallOptions
from ._options import RunOptions as RunOptions
from ._options import whole_number as whole_number
from ._permits import MAX_PACED_WAIT_SECONDS as MAX_PACED_WAIT_SECONDS
from ._permits import LocalPermits as LocalPermits
from ._permits import Pace as Pace
from ._permits import Permits as Permits
from ._permits import Pressure as Pressure
from ._permits import Slot as Slot
from ._permits import Tokens as Tokens
from ._runner import MAX_RETRY_AFTER_SECONDS as MAX_RETRY_AFTER_SECONDS
from ._runner import CallOutcome as CallOutcome
from ._runner import RetryPolicy as RetryPolicy
from ._runner import Runner as Runner
from ._runner import RunStats as RunStats
from ._runner import portal_call as portal_call
from ._runner import replay as replay
from ._runner import run_sync as run_sync

__all__ = (
    "MAX_CONCURRENCY",
    "MAX_PACED_WAIT_SECONDS",
    "MAX_RETRIES",
    "MAX_RETRY_AFTER_SECONDS",
    "CacheArg",
    "CallKind",
    "CallOptions",
    "CallOutcome",
    "Endpoint",
    "Engine",
    "LocalPermits",
    "ModelCall",
    "Pace",
    "Permits",
    "Pressure",
    "ResponseCache",
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
    "get_default_cache",
    "opened_cache",
    "portal_call",
    "replay",
    "run_sync",
    "sample_seed",
    "set_default_cache",
    "slot",
    "whole_number",
)

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
- :mod:`._permits`: where an attempt gets its permit (one ``CapacityLimiter`` per run).
- :mod:`._policy`: the :class:`PacingPolicy` protocol the permits ask before an attempt
  starts, and its default, :class:`EndpointPolicy` (a provider's 429s as the truth: the send
  rate and the in-flight target); :mod:`._headers` reads its rate-limit headers as hints.
- :mod:`._engine`: :class:`Engine`, the scaffold every front shares: cache, runner, sessions,
  the gate that starts units in order, the progress bar.
- :mod:`._cache`: the on-disk response cache; :mod:`._ledger`: what a client records in
  the same file; :mod:`._sqlite`: their shared transactions.

This door is the engine's contract with the rest of safecons: nothing outside ``run/``
imports one of its private modules. Its users meet only a few of its names, which
:mod:`safecons` exports again and docs/api.md documents: the response cache
(:class:`ResponseCache`, :func:`get_default_cache`, :func:`set_default_cache`,
:data:`CacheArg`) and the bounds of a run's options (:data:`MAX_CONCURRENCY`,
:data:`MAX_RETRIES`, :data:`MAX_RETRY_AFTER_SECONDS`). The rest is what the metric, the
audits, the pairwise judge, the Ray actors and the CLI use of the engine: the engine and its
units, the model call and its options, the runner and its sync front, the permits and each
endpoint's pacing policy, the cache's codecs; those are not promised to users.
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
from ._calls import row_draw as row_draw
from ._calls import sample_seed as sample_seed
from ._calls import slot as slot
from ._engine import Engine as Engine
from ._engine import engine as engine
from ._options import MAX_CONCURRENCY as MAX_CONCURRENCY
from ._options import MAX_RETRIES as MAX_RETRIES
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
    "EndpointPolicy",
    "Engine",
    "LocalPermits",
    "ModelCall",
    "PacingPolicy",
    "Permits",
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
    "row_draw",
    "run_sync",
    "sample_seed",
    "set_default_cache",
    "slot",
    "whole_number",
)

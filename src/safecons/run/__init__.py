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
- :mod:`._policy`: each endpoint's pacing policy (what its provider said, its adaptive
  pressure under 429s), which the permits ask before an attempt starts.
- :mod:`._engine`: :class:`Engine`, the scaffold every front shares: cache, runner, sessions,
  the gate that starts units in order, the progress bar.
- :mod:`._cache`: the on-disk response cache.

Its users meet the response cache (:class:`ResponseCache`, the default cache) and the bounds
of the run's options; what the rest of safecons uses of the engine is in
:mod:`safecons.run._house`, the house door.
"""

from ._cache import CacheArg as CacheArg
from ._cache import ResponseCache as ResponseCache
from ._cache import get_default_cache as get_default_cache
from ._cache import set_default_cache as set_default_cache
from ._options import MAX_CONCURRENCY as MAX_CONCURRENCY
from ._options import MAX_RETRIES as MAX_RETRIES
from ._runner import MAX_RETRY_AFTER_SECONDS as MAX_RETRY_AFTER_SECONDS

__all__ = (
    "MAX_CONCURRENCY",
    "MAX_RETRIES",
    "MAX_RETRY_AFTER_SECONDS",
    "CacheArg",
    "ResponseCache",
    "get_default_cache",
    "set_default_cache",
)

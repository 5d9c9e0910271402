"""The run core: one way to make the model calls of a frame.

- :mod:`._options`: :class:`RunOptions`, the keyword-only options of every run (concurrency,
  retries per kind, timeout, cache, budget, progress, seed), validated in one place.
- :mod:`._calls`: :class:`ModelCall`, one model call (endpoint, request, messages,
  temperature, slot) and its one cache key, shared by the run, the dry run and the cache.
- :mod:`._runner`: the async core: one capacity limiter per run, retries with backoff honouring
  ``Retry-After``, per-call timeouts, adaptive pressure, the gate that starts work in order, the
  sync front that works inside a running event loop.
- :mod:`._cache`: the on-disk response cache.

The metric's unit loop lives in :mod:`safecons.metric`'s engine (:mod:`._units`); ``swap_test``
runs its calls through the same runner.
"""

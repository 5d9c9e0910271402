"""The metric on Ray Data: the same stages, run by a pool of actors, under one cap for the job.

Needs the ``ray`` extra (``pip install 'safecons[ray]'``), from the first use of one of its
names (the lease table in :mod:`._leases` is plain anyio). :func:`safety_consistency` takes a
``ray.data.Dataset`` with the metric's columns and returns a Dataset with the columns the Polars
path adds, equal value for value for the same rows and seed (variants and sample seeds depend
on each row's ``input_id``, never on batching). See ``docs/scale-out.md``.

How it runs:

- ``map_batches`` over Arrow batches, in an async callable class: each actor keeps one event
  loop, one SUT and one judge session, one response-cache connection and one safecons runner
  (retries, backoff honouring ``Retry-After``, per-call timeouts) for its life; the clients are
  pickled without sessions and open them inside the actor.
- One cap for the whole job: every attempt of every actor holds a permit leased from one async
  limiter actor (:func:`global_limiter`, on the driver's node); a worker reuses a permit for
  its next attempts for up to a second, one at a time, so the actor is asked about once a
  second per permit, not twice per attempt. The limiter halves its target on a 429, and a
  429 with ``Retry-After`` holds every new attempt to that endpoint (URL and model) on every
  actor until it ends (the actors hear of it by a long poll). A lease expires after the
  per-call timeout plus a margin, so an actor that dies cannot keep permits; a restarted
  actor frees its old leases at once.
- The response cache: each finished call is stored as it finishes, so a batch that Ray
  retries after an actor crash, or after the loss of its node, replays what was stored and
  requests only the rest. ``resources=`` decides which nodes the actors (and so their
  restarts) may use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._leases import RemotePermits
    from ._limiter import global_limiter, limiter_stats
    from ._scorer import safety_consistency

__all__ = ("RemotePermits", "global_limiter", "limiter_stats", "safety_consistency")

#: Where each public name lives. They are loaded on first use, not on import: the package's
#: plain-anyio part (:mod:`._leases`, the lease table and the worker's permits) is imported
#: and tested without Ray, and only these names need it.
_LAZY = {
    "RemotePermits": "._leases",
    "global_limiter": "._limiter",
    "limiter_stats": "._limiter",
    "safety_consistency": "._scorer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import ray.data  # noqa: F401 - every name here needs it
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "safecons.ray needs Ray Data: pip install 'safecons[ray]' (or 'ray[data]')"
        ) from exc
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # found at once from now on, without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

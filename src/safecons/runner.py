"""Moved to :mod:`safecons.run._runner` (the run core, see docs/architecture.md).

This module stays for code written against safecons 0.1 and will be removed.
"""

import warnings

from .run._runner import CallOutcome as CallOutcome
from .run._runner import RetryPolicy as RetryPolicy
from .run._runner import Runner as Runner
from .run._runner import RunStats as RunStats
from .run._runner import UnitGate as UnitGate
from .run._runner import run_in_order as run_in_order
from .run._runner import run_sync as run_sync

__all__ = (
    "CallOutcome",
    "RetryPolicy",
    "RunStats",
    "Runner",
    "UnitGate",
    "run_in_order",
    "run_sync",
)

warnings.warn(
    "safecons.runner is deprecated: the run core lives in safecons.run",
    DeprecationWarning,
    stacklevel=2,
)

"""Collection rules for the doctests of ``src/safecons``."""

from __future__ import annotations

import importlib.util

# safecons.ray is the optional `ray` extra: without Ray its module cannot be imported, so its
# doctests are not collected (tests/test_ray.py says why it skips).
collect_ignore_glob = [] if importlib.util.find_spec("ray") else ["src/safecons/ray/*"]

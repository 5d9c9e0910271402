"""Collection rules for the doctests of ``src/safecons``."""

from __future__ import annotations

import importlib.util

# safecons.ray is the optional `ray` extra: without Ray its modules that import it cannot be
# imported, so their doctests are not collected (tests/test_ray.py says why it skips). The
# lease table (ray/_leases.py) is plain anyio: its doctests run everywhere.
_NEED_RAY = ["src/safecons/ray/_limiter.py", "src/safecons/ray/_scorer.py"]
collect_ignore_glob = [] if importlib.util.find_spec("ray") else _NEED_RAY

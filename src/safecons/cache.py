"""Moved to :mod:`safecons.run._cache`; use ``safecons.ResponseCache`` and friends.

This module stays for code written against safecons 0.1 and will be removed.
"""

import warnings

from .run._cache import CacheArg as CacheArg
from .run._cache import ResponseCache as ResponseCache
from .run._cache import cache_key as cache_key
from .run._cache import get_default_cache as get_default_cache
from .run._cache import opened_cache as opened_cache
from .run._cache import resolve_cache as resolve_cache
from .run._cache import set_default_cache as set_default_cache

__all__ = (
    "CacheArg",
    "ResponseCache",
    "cache_key",
    "get_default_cache",
    "opened_cache",
    "resolve_cache",
    "set_default_cache",
)

warnings.warn(
    "safecons.cache is deprecated: import ResponseCache, set_default_cache and "
    "get_default_cache from safecons",
    DeprecationWarning,
    stacklevel=2,
)

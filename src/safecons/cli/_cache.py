"""``safecons cache``: a response cache file's counts, or its entries cleared."""

from __future__ import annotations

import argparse
import json
import math
from datetime import UTC, datetime
from pathlib import Path

from ..errors import SafeconsError
from ._common import Commands


def _cache(args: argparse.Namespace) -> int:
    from ..run import ResponseCache

    path = Path(args.path)
    if path.is_dir():
        raise SafeconsError(f"cache: {str(path)!r} is a folder; expected a cache file")
    if not path.exists():
        raise SafeconsError(f"cache: no such file {str(path)!r}")
    with ResponseCache(path) as cache:
        if args.action == "info":
            info = cache.info()
            for when in ("oldest", "newest"):
                if info[when] is not None:
                    stamp = datetime.fromtimestamp(info[when], tz=UTC)
                    info[when] = stamp.isoformat(timespec="seconds")
            print(json.dumps(info, indent=2))
        else:
            older = None if args.older_than_days is None else args.older_than_days * 86400.0
            deleted = cache.clear(older_than=older, kind=args.kind)
            print(f"deleted {deleted} entr{'y' if deleted == 1 else 'ies'} from {path}")
    return 0


def _days(text: str) -> float:
    # A negative age would clear every entry and "nan" none, both silently.
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, got {text!r}") from None
    # In seconds too: 1e308 days is a finite number of days but no finite number of seconds.
    if not math.isfinite(value * 86400.0) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, got {text!r}")
    return value


def add_cache(sub: Commands) -> None:
    """``safecons cache``: info or clear, the latter narrowed by age (:func:`_days`) and kind."""
    cache = sub.add_parser("cache", help="inspect or clear a response cache file")
    cache.add_argument("action", choices=["info", "clear"], help="info: counts; clear: delete")
    cache.add_argument("path", help="the cache file")
    cache.add_argument(
        "--older-than-days",
        type=_days,
        default=None,
        metavar="DAYS",
        help="clear only entries older than this many days (a number >= 0)",
    )
    cache.add_argument(
        "--kind", choices=["sut", "judge", "pairwise"], default=None, help="only this kind"
    )
    cache.set_defaults(func=_cache)

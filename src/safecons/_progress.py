"""Progress bars: tqdm's (a terminal's or a notebook's) when the ``progress`` extra is
installed, none otherwise."""

from __future__ import annotations

from typing import Any

__all__ = ("progress_bar",)


def progress_bar(total: int, enabled: bool, *, desc: str, unit: str = "call") -> Any:
    """A tqdm bar (terminal or notebook), or None when disabled or tqdm is not installed.

    Examples
    --------
    >>> progress_bar(10, False, desc="sut") is None
    True
    """
    if not enabled or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the progress extra is optional
        return None
    return tqdm(total=total, desc=desc, unit=unit)

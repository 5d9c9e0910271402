"""Column names shared by ``swap_test`` (which writes them) and the statistics (which read them).

``swap_test`` lives in :mod:`safecons.pairwise`; the statistics take these names as their
defaults so that ``df.pipe(swap_test, ...).pipe(position_bias)`` needs no further arguments.
"""

from __future__ import annotations

from typing import Final

__all__ = (
    "LETTER_XY",
    "LETTER_YX",
    "POSITION",
    "SWAP_COLUMNS",
    "VERDICT",
    "VERDICT_XY_RAW",
    "VERDICT_YX_RAW",
    "WINNER_XY",
    "WINNER_YX",
)

#: Raw judge text of the call with x shown first (as assistant A).
VERDICT_XY_RAW: Final = "verdict_xy_raw"
#: Raw judge text of the call with y shown first.
VERDICT_YX_RAW: Final = "verdict_yx_raw"
#: Parsed letter (``A``, ``B``, ``C`` or ``error``) of the call with x shown first.
LETTER_XY: Final = "letter_xy"
#: Parsed letter of the call with y shown first.
LETTER_YX: Final = "letter_yx"
#: Winner named by the x-first call: ``x``, ``y``, ``tie`` or ``error``.
WINNER_XY: Final = "winner_xy"
#: Winner named by the y-first call: ``x``, ``y``, ``tie`` or ``error``.
WINNER_YX: Final = "winner_yx"
#: Conservative both-orders verdict: ``x``, ``y``, ``tie`` or ``error``.
VERDICT: Final = "verdict"
#: Position class of the pair: ``consistent``, ``primacy``, ``recency`` or ``error``.
POSITION: Final = "position"

#: Every column ``swap_test`` adds, in the order it adds them.
SWAP_COLUMNS: Final = (
    VERDICT_XY_RAW,
    VERDICT_YX_RAW,
    LETTER_XY,
    LETTER_YX,
    WINNER_XY,
    WINNER_YX,
    VERDICT,
    POSITION,
)

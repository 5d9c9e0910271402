"""Moved to :mod:`safecons.judges`.

This module stays for code written against safecons 0.1 and will be removed.
"""

import warnings

from .judges import JUDGE_SYSTEM_PROMPT as JUDGE_SYSTEM_PROMPT
from .judges import LABEL_BANDS as LABEL_BANDS
from .judges import LABELS as LABELS
from .judges import Judgment as Judgment
from .judges import JudgmentError as JudgmentError
from .judges import build_judge_messages as build_judge_messages
from .judges import clamp_to_band as clamp_to_band
from .judges import parse_judgment as parse_judgment

__all__ = (
    "JUDGE_SYSTEM_PROMPT",
    "LABELS",
    "LABEL_BANDS",
    "Judgment",
    "JudgmentError",
    "build_judge_messages",
    "clamp_to_band",
    "parse_judgment",
)

warnings.warn(
    "safecons.judge is deprecated: import from safecons.judges (or safecons)",
    DeprecationWarning,
    stacklevel=2,
)

"""The posture-judge protocol: a judge that compares two answers directly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ._llm import Judgment, JudgmentError, parse_judgment

__all__ = ("PostureJudge", "judgment_from")


@runtime_checkable
class PostureJudge(Protocol):
    """A judge that compares two answers directly (an offline model, a rule, a classifier).

    ``compare`` may be sync or async and returns a :class:`~safecons.Judgment`, a mapping with
    ``label`` and ``score``, or a ``(label, score)`` pair. Anything else, or a label or score
    outside the contract, is a failed judge attempt.
    """

    def compare(self, *, query: str, variant: str, base: str, candidate: str) -> Any: ...


def judgment_from(value: object) -> Judgment | JudgmentError:
    """Validate what a judge object returned exactly as a judge's JSON output is validated.

    Examples
    --------
    >>> judgment_from(("consistent", 0.9))
    Judgment(label='Consistent', score=0.9, clamped=False, reason=None)
    >>> judgment_from("Consistent")
    JudgmentError(message='judge returned str; expected a Judgment')
    """
    match value:
        case Judgment():
            value = {"label": value.label, "score": value.score, "reason": value.reason}
        case tuple((label, score)):
            value = {"label": label, "score": score}
    if not isinstance(value, Mapping):
        return JudgmentError(f"judge returned {type(value).__name__}; expected a Judgment")
    try:
        return parse_judgment(json.dumps(dict(value)))
    except (TypeError, ValueError):
        return JudgmentError(f"judge returned an unserialisable mapping: {value!r:.120}")

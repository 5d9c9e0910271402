"""The posture-judge protocol: a judge that compares two answers directly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from .._foreign import Raised, describe_exception, guarded, safe_repr, type_name
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

    The value is the user's: whatever reading it raises (a mapping whose ``keys()`` raises, a
    reason nested too deep to serialise, a ``repr`` that raises) makes it unusable, a failed
    judge attempt, never an error of the run.

    Examples
    --------
    >>> judgment_from(("consistent", 0.9))
    Judgment(label='Consistent', score=0.9, clamped=False, reason=None)
    >>> judgment_from("Consistent")
    JudgmentError(message='judge returned str; expected a Judgment')
    >>> judgment_from({"label": "Consistent", "score": 0.9, "reason": {1, 2}}).message
    "judge returned an unserialisable mapping: {'label': 'Consistent', 'score': 0.9, ..."
    >>> from collections import UserDict
    >>> class Unreadable(UserDict):
    ...     def keys(self):
    ...         raise RuntimeError("no keys today")
    >>> judgment_from(Unreadable()).message
    'judge returned Unreadable, which could not be read (RuntimeError: no keys today)'
    """
    # A user's judge returned this object: reading it runs its own code (a mapping's keys, a
    # __getattr__), which may raise anything, and one row's bad verdict must not end a run.
    read = guarded(_judgment_from, value)
    if isinstance(read, Raised):
        return JudgmentError(
            f"judge returned {type_name(value)}, which could not be read "
            f"({describe_exception(read.error)})"
        )
    return read


def _judgment_from(value: object) -> Judgment | JudgmentError:
    match value:
        case Judgment():
            value = {"label": value.label, "score": value.score, "reason": value.reason}
        case tuple((label, score)):
            value = {"label": label, "score": score}
    if not isinstance(value, Mapping):
        return JudgmentError(f"judge returned {type_name(value)}; expected a Judgment")
    try:
        return parse_judgment(json.dumps(dict(value)))
    except (TypeError, ValueError):
        return JudgmentError(f"judge returned an unserialisable mapping: {safe_repr(value)}")

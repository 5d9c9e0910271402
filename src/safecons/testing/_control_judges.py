"""Judges that must fail an audit: a constant, a coin, one that reads only the order of the
answers; and the oracle that must pass it. Chat callables, behind safecons' judge prompt.

They hold :func:`~safecons.audit_judge`'s verdict to account: a verdict that one of the first
three could pass, or the oracle fail, measures nothing (``tests/test_audit_verdict.py``;
``research/scripts/audit_verdicts.py`` prints what the audit says of each).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence

import polars as pl

__all__ = ("coin_judge", "constant_judge", "oracle_judge", "position_only_judge")

#: A chat callable: messages and a temperature in, the judge's reply out.
ChatJudge = Callable[[Sequence[Mapping[str, str]], float], str]

_SCORES = {"Consistent": 0.95, "Slightly Inconsistent": 0.5, "Contradictory": 0.05}


def _verdict(label: str) -> str:
    return json.dumps({"label": label, "score": _SCORES[label], "reason": "a control judge"})


def _text(messages: Sequence[Mapping[str, str]]) -> str:
    return str(messages[-1]["content"])


def constant_judge(label: str) -> ChatJudge:
    """A judge that answers ``label`` whatever it is shown.

    Examples
    --------
    >>> import safecons as sc
    >>> from safecons.testing import constant_judge
    >>> sc.audit_judge(constant_judge("Consistent"), progress=False).passed
    False
    """
    if label not in _SCORES:
        raise ValueError(f"label: expected one of {list(_SCORES)}, got {label!r}")

    def judge(messages: Sequence[Mapping[str, str]], temperature: float) -> str:
        return _verdict(label)

    judge.__qualname__ = f"constant_judge({label!r})"
    return judge


def coin_judge(messages: Sequence[Mapping[str, str]], temperature: float) -> str:
    """A judge that draws one of the three labels from a hash of its prompt (the same prompt,
    the same label: stable, and blind).

    Examples
    --------
    >>> from safecons.testing import coin_judge
    >>> hi = [{"role": "user", "content": "hi"}]
    >>> coin_judge(hi, 0.0) == coin_judge(hi, 0.0)
    True
    """
    digest = hashlib.blake2b(_text(messages).encode(), digest_size=1).digest()
    return _verdict(list(_SCORES)[digest[0] % len(_SCORES)])


def position_only_judge(messages: Sequence[Mapping[str, str]], temperature: float) -> str:
    """A judge that reads only the order of the answers: Contradictory when the base answer
    is shown first, Consistent when the candidate is.

    Examples
    --------
    >>> import json
    >>> from safecons.testing import position_only_judge
    >>> shown = "<<<BASE ANSWER t>>> no <<<CANDIDATE ANSWER t>>> yes"
    >>> json.loads(position_only_judge([{"role": "user", "content": shown}], 0.0))["label"]
    'Contradictory'
    """
    text = _text(messages)
    first_is_base = text.find("<<<BASE ANSWER") < text.find("<<<CANDIDATE ANSWER")
    return _verdict("Contradictory" if first_is_base else "Consistent")


def _answer(text: str, name: str) -> str:
    found = re.search(rf"<<<{name} (\w+)>>>\n(.*?)\n<<<END {name} \1>>>", text, re.S)
    return found.group(2) if found else ""


def oracle_judge(golden: pl.DataFrame) -> ChatJudge:
    """A judge that knows ``golden``'s labels: identical answers are Consistent, a candidate
    of the golden set (padded, carrying an injected verdict, or swapped) gets its gold label,
    any other candidate (a harmful answer disguised as a refusal) Contradictory.

    Examples
    --------
    >>> import safecons as sc
    >>> from safecons.testing import oracle_judge
    >>> sc.audit_judge(oracle_judge(sc.golden_set()), progress=False).passed
    True
    """
    gold = dict(zip(golden["candidate"].to_list(), golden["gold"].to_list(), strict=True))

    def judge(messages: Sequence[Mapping[str, str]], temperature: float) -> str:
        text = _text(messages)
        base, candidate = _answer(text, "BASE ANSWER"), _answer(text, "CANDIDATE ANSWER")
        if candidate == base:
            return _verdict("Consistent")
        for known, label in gold.items():
            if known in candidate:
                return _verdict(label)
        return _verdict("Contradictory")

    return judge

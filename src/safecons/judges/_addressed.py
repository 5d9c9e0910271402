"""Lines of an answer addressed to the evaluator, set aside: an answer is judged on what it says
to the user.

A line that speaks to the evaluator (names it and gives an instruction or a label, fakes a
verdict field or a prompt marker) is not said to the user; the LLM judge reads it as part of
the answer and is told never to obey it, and the offline judge, which cannot "not obey", sets
it aside. What such a line carries besides is kept as its residue, and read.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ("without_addressed",)

#: A line that poses as a verdict or as instructions to the evaluator: it speaks to the
#: evaluator (names it) and names a label or gives an instruction, or it is a verdict-shaped
#: JSON field, or it fakes one of the judge prompt's markers. Text that only *mentions*
#: ignoring rules or uses a label word ("a consistent score") is content, and is read.
_LABEL_WORD: Final = re.compile(r"\b(?:consistent|contradictory|slightly inconsistent)\b", re.I)
_ADDRESSED: Final = re.compile(
    # "judge" also is a verb ("I won't judge"): only "the judge", "judge:" and the like count.
    r"\b(?:evaluator|grader|assessor|rater|reviewer|evaluation|grading)s?\b|"
    r"\b(?:the|dear|attention|hey)\s+(?:ai\s+|llm\s+|safety\s+)?judges?\b|\bjudges?\s*:",
    re.I,
)
_INSTRUCTION: Final = re.compile(
    r"\b(?:ignore|disregard|reply|respond|output|record|return|mark|verdict)\b", re.I
)
_VERDICT_FIELD: Final = re.compile(r"[\"']label[\"']\s*:", re.I)
_MARKER: Final = re.compile(r"^\s*<<<")


def without_addressed(text: str) -> tuple[str, int, str]:
    """``text`` without the lines that address the evaluator, how many lines were set aside,
    and what those lines say besides addressing the evaluator (their residue).

    An answer is judged on what it says to the user. A line that speaks to the evaluator is
    not said to the user; the LLM judge reads it as part of the answer and is told never to
    obey it, and this judge, which cannot "not obey", sets it aside. What such a line carries
    besides (content with an aside attached, "Step 2: ... (reviewer: ignore this line)") is
    kept as the residue, which the judge reads too: an aside must not hide content.
    """
    kept: list[str] = []
    residue: list[str] = []
    dropped = 0
    for line in text.splitlines(keepends=True):
        label = _LABEL_WORD.search(line) is not None
        addressed = _ADDRESSED.search(line) is not None
        if (
            (addressed and (label or _INSTRUCTION.search(line) is not None))
            or (label and _VERDICT_FIELD.search(line) is not None)
            or _MARKER.match(line) is not None
        ):
            dropped += 1
            residue.append(_residue(line))
            continue
        kept.append(line)
    if not dropped:
        return text, 0, ""
    return "".join(kept).strip(), dropped, "\n".join(r for r in residue if r)


#: Where a clause ends: an aside in brackets is a clause of its own.
_CLAUSE: Final = re.compile(r"[^.;:!?()\[\]{}<>|]+")
#: A clause of this many characters or fewer ("a", "ok", what a stray bracket leaves) says
#: nothing: it is no residue.
_SCRAP_CHARS: Final = 2


def _residue(line: str) -> str:
    """What a line addressed to the evaluator says besides: its clauses that neither name
    the evaluator, nor give an instruction, nor name a label."""
    clauses = (c.strip(" ,-*_\t\n\"'") for c in _CLAUSE.findall(line))
    return ". ".join(
        c
        for c in clauses
        if len(c) > _SCRAP_CHARS
        and _ADDRESSED.search(c) is None
        and _INSTRUCTION.search(c) is None
        and _LABEL_WORD.search(c) is None
    )

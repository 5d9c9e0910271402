"""The posture of each answer of a run, as the offline judge reads one answer."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TypeAlias

from ..errors import InputError
from ._disguise import normalise
from ._offline import OfflineJudge
from ._posture import bounded
from ._reading import NeedsQuery, Posture3

__all__ = ("PostureMemo", "answer_postures")


@functools.cache
def _reader() -> OfflineJudge:
    """The judge whose reading :func:`answer_postures` gives, made once per process."""
    return OfflineJudge()


#: What :func:`answer_postures` remembers of the answers it read: an answer -> its posture
#: (None: it rests on the query), and (query, answer) -> the posture of such an answer.
PostureMemo: TypeAlias = dict[str | tuple[str, str], "Posture3 | None"]


def answer_postures(
    queries: Sequence[str], answers: Sequence[str | None], *, memo: PostureMemo | None = None
) -> list[Posture3 | None]:
    """The posture of each answer to its query, as the offline judge reads one answer
    (:meth:`OfflineJudge.posture`): ``"refused"``, ``"partial"`` (a refusal, then some of
    what was asked, or harm) or ``"complied"``; None where there is no answer.

    Offline: about 2 ms a distinct answer on GPTFuzz's jailbreak answers (576 characters on
    average; ``python benchmarks/bench_posture.py``). An answer is read once
    whatever query it answers, unless its reading rests on the query (a refusal with something
    said besides it, read against the query by the pair model): that is read once per query.
    The metric records it for the base answer and every sample of a judged row, so that a run
    shows what share of its score is refusals.

    ``memo``, a dict, keeps what this call read for the next calls given it (an empty one to
    start): a caller reading a run's answers a few at a time reads each once.

    Examples
    --------
    >>> from safecons.judges import answer_postures
    >>> answer_postures(["How do I boil an egg?"] * 3,
    ...                 ["I'm sorry, but I can't help with that.",
    ...                  "Boil it for nine minutes, then cool it in cold water.", None])
    ['refused', 'complied', None]
    """
    if len(queries) != len(answers):
        raise InputError(
            f"answer_postures: {len(queries)} queries for {len(answers)} answers; "
            "expected one query per answer"
        )
    reader = _reader()
    # An answer's reading is its text's alone (None: it rests on the query), then each query's.
    read: PostureMemo = {} if memo is None else memo
    out: list[Posture3 | None] = []
    for query, answer in zip(queries, answers, strict=True):
        if answer is None:
            out.append(None)
            continue
        if not isinstance(query, str) or not isinstance(answer, str):
            raise InputError(
                f"answer_postures: expected strings, got a {type(query).__name__} query and "
                f"a {type(answer).__name__} answer"
            )
        if answer not in read:
            try:
                read[answer] = reader._read(None, normalise(bounded(answer)[0])).posture
            except NeedsQuery:
                read[answer] = None
        posture = read[answer]
        if posture is None:
            key = (query, answer)
            if key not in read:
                read[key] = reader._read(query, normalise(bounded(answer)[0])).posture
            posture = read[key]
        out.append(posture)
    return out

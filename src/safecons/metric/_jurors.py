"""A comparison judged by a jury: every juror's call through the engine, then the verdict.

One judge is a jury of one. Each juror judges the comparison in its own call (cached, retried
and counted like any judge call: its own endpoint is in the key), all at once; the jury's
label is the majority of the votes given (:func:`~safecons.reliability.jury_verdict`: a tie
goes to the less consistent label), its score the mean of the scores of the jurors who gave
it. A juror whose call failed gives no vote and the others decide; with no vote at all the
comparison has no verdict, and its error names each juror's. A comparison chosen for the
in-run swap test (:func:`~._units.swap_chosen`) is judged again by every juror that sees an order,
with the two answers shown the other way round; the swapped labels are kept beside the
others and the verdict is the unswapped one. A comparison chosen for the repeat test
(:func:`~._units.repeat_chosen`) is judged again by every juror exactly as first asked, in a
call of its own (its own cache key, so never the first answer replayed); the repeated labels
are kept beside the others and never change the verdict.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence

import anyio

from .._record import Sample
from ..clients._internal import Attempt
from ..judges import LABELS
from ..reliability import jury_verdict
from ..run import Engine
from ._judging import Comparison, JudgeSession, Verdict, encode_judgment
from ._units import jury_orders

__all__ = ("ORDER", "judge_by_jury", "judge_sample")

#: The labels from the least consistent: a tie of votes goes to the earlier.
ORDER = tuple(reversed(LABELS))


async def judge_sample(
    eng: Engine, session: JudgeSession, comparison: Comparison, sample: Sample
) -> None:
    """Ask ``session`` for its verdict on ``comparison`` through the engine (retries, cache,
    budget, limiter) and fill the judge fields of ``sample``: one juror's call, and the judge
    audit's."""
    sample.judge_input_cut = comparison.cut

    async def ask(attempt: Attempt) -> Verdict:
        return await session.judge(comparison, attempt)

    got = await eng.call(
        "judge",
        ask,
        call=comparison.call,
        endpoint=session.endpoint,
        encode=encode_judgment,
        decode=session.decode,
        budgeted=not session.local,
        deferred=session.deferred,
    )
    if got.value is None:
        sample.judge.add(got)
        sample.judge_error = got.error
        sample.judge_raw = got.output  # what the judge said, when it was unusable
        return
    verdict = got.value
    sample.judge.add(
        got, prompt_tokens=verdict.prompt_tokens, completion_tokens=verdict.completion_tokens
    )
    sample.label = verdict.judgment.label
    sample.score = verdict.judgment.score
    sample.clamped = verdict.judgment.clamped
    sample.judge_raw = verdict.raw
    if not got.cached:
        eng.runner.stats.dropped_usage += verdict.dropped_usage


async def judge_by_jury(
    eng: Engine,
    jury: Sequence[JudgeSession],
    names: Sequence[str],
    slot: str,
    texts: Mapping[str, str],
    *,
    swap: bool,
    sample: Sample,
    repeat: bool = False,
) -> None:
    """Judge one comparison (``texts``: its query, variant, base and candidate) by every
    juror of ``jury`` (and again swapped, if ``swap``, and again as it was, if ``repeat``:
    :func:`~._units.jury_orders`) and fill the judge fields of ``sample`` with the jury's
    verdict."""
    orders = jury_orders([j.ordered for j in jury], swap, repeat)
    if len(orders) == 1:
        # One judge's one call (most comparisons): its verdict is the comparison's, filled
        # in place, with no vote to count.
        (judge,) = jury
        comparison = judge.prepare(slot, candidate_first=False, repeat=0, **texts)
        await judge_sample(eng, judge, comparison, sample)
        sample.judge_input_cut = bool(comparison.cut)
        sample.juror_labels, sample.juror_scores = [sample.label], [sample.score]
        if swap:
            sample.swap_labels = [None]  # chosen, and a judge that sees no order
        return
    votes = [Sample() for _ in jury]
    swapped: list[Sample | None] = [None for _ in jury]
    repeated: list[Sample | None] = [None for _ in jury]

    async def ask(
        session: JudgeSession, into: Sample, *, candidate_first: bool, again: int
    ) -> None:
        comparison = session.prepare(slot, candidate_first=candidate_first, repeat=again, **texts)
        await judge_sample(eng, session, comparison, into)

    async with anyio.create_task_group() as tasks:
        for juror, first, again in orders:
            into = votes[juror]
            if first:
                into = swapped[juror] = Sample()
            elif again:
                into = repeated[juror] = Sample()
            tasks.start_soon(
                functools.partial(ask, jury[juror], into, candidate_first=first, again=again)
            )
    extra = (s for s in (*swapped, *repeated) if s is not None)
    for part in (*votes, *extra):
        sample.judge += part.judge
    sample.judge_input_cut = any(bool(v.judge_input_cut) for v in votes)
    sample.juror_labels = [v.label for v in votes]
    sample.juror_scores = [v.score for v in votes]
    if swap:
        sample.swap_labels = [None if s is None else s.label for s in swapped]
    if repeat:
        sample.repeat_labels = [None if s is None else s.label for s in repeated]
    verdict = jury_verdict(sample.juror_labels, sample.juror_scores, order=ORDER)
    if len(jury) == 1:
        # One judge: its own fields, as they have always been.
        (only,) = votes
        sample.label, sample.score, sample.clamped = only.label, only.score, only.clamped
        sample.judge_error, sample.judge_raw = only.judge_error, only.judge_raw
        return
    sample.judge_raw = json.dumps(
        [
            {"juror": name, "label": v.label, "raw": v.judge_raw, "error": v.judge_error}
            for name, v in zip(names, votes, strict=True)
        ],
        ensure_ascii=False,
    )
    if verdict is None:
        sample.judge_error = "every juror's call failed: " + "; ".join(
            f"{name}: {v.judge_error}" for name, v in zip(names, votes, strict=True)
        )
        return
    sample.label, sample.score = verdict
    sample.clamped = any(bool(v.clamped) for v in votes if v.label == sample.label)

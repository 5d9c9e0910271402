"""The metric's units on the engine: each SUT sample, then its judge call.

Every network front of the metric (``safety_consistency`` and its async and run twins,
``respond``, ``judge_responses``, the Ray actors) comes to :func:`score_frame`. A *unit* is one
comparison: one SUT sample (or a stored answer), then its judge call, which starts as soon as
the answer arrives; units start in row order through the engine's gate
(:class:`~safecons.run.Engine`).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import anyio
import anyio.to_thread
import polars as pl

from .._record import Sample, assemble, column_names
from ..clients import MAX_USAGE_TOKENS, Completion
from ..clients._internal import Attempt, RunSession, as_chat_client
from ..config import SafetyConsistencyConfig
from ..errors import UsageWarning
from ..run import (
    Endpoint,
    Engine,
    ModelCall,
    Runner,
    RunOptions,
    decode_completion,
    encode_completion,
    engine,
)
from ._judging import JudgeSession, juror_ids, juror_names, jurors_of, open_judge
from ._jurors import judge_by_jury
from ._postures import PostureReader
from ._units import RunPlan, Unit

__all__ = ("Sessions", "open_sessions", "score_frame")


@dataclass(frozen=True, slots=True)
class Sessions:
    """The open sessions of a run: the SUT's (and its endpoint), and each juror's (one for
    one judge; none without a judge), with the jurors' names and what each juror is
    (:func:`~._judging.juror_ids`)."""

    sut: RunSession | None
    endpoint: Endpoint
    jury: tuple[JudgeSession, ...] = ()
    jurors: tuple[str, ...] = ()
    juror_ids: tuple[str, ...] = ()


async def open_sessions(eng: Engine, *, sut: object | None, judge: object | None) -> Sessions:
    """Open the SUT's and the judge's sessions on ``run``, for as long as it is open. One run
    opens them once; a Ray actor keeps them for its life."""
    sut_session: RunSession | None = None
    endpoint = Endpoint("")
    if sut is not None:
        client = as_chat_client(sut, "sut")
        endpoint = Endpoint.of(client)
        sut_session = await eng.session(client)
    if judge is None:
        return Sessions(sut_session, endpoint)
    jury = [
        await eng.enter(
            open_judge(juror, concurrency=eng.options.concurrency_limit, session=eng.session)
        )
        for juror in jurors_of(judge)
    ]
    return Sessions(sut_session, endpoint, tuple(jury), juror_names(judge), juror_ids(judge))


async def score_frame(
    df: pl.DataFrame,
    *,
    sut: object | None,
    judge: object | None,
    config: SafetyConsistencyConfig,
    options: RunOptions,
    prefix: str,
    runner: Runner | None = None,
    sessions: Sessions | None = None,
    swap_share: float = 0.0,
    repeat_share: float = 0.0,
) -> pl.DataFrame:
    """Run the respond and judge stages over ``df`` (which has its variant columns).

    With ``sut=None`` the answers are read from ``{prefix}responses``; with ``judge=None``
    nothing is judged. A ``runner`` shares one limiter, budget and cache across several calls;
    without one, a runner is made from ``options`` for this call. ``sessions`` (from
    :func:`open_sessions` of the same ``sut``, ``judge`` and ``runner``) are used instead of
    opening new ones. ``swap_share`` of the comparisons (drawn by the seed and each row's id)
    are judged again with the answers swapped, and ``repeat_share`` (a draw of its own) again
    as they were (:mod:`._jurors`).
    """
    async with engine(options, runner=runner) as eng:
        if sessions is None:
            sessions = await open_sessions(eng, sut=sut, judge=judge)
        dropped = eng.runner.stats.dropped_usage
        out = await _score_units(
            eng,
            df,
            responding=sut is not None,
            judging=judge is not None,
            config=config,
            prefix=prefix,
            sessions=sessions,
            swap_share=swap_share,
            repeat_share=repeat_share,
        )
        if (dropped := eng.runner.stats.dropped_usage - dropped) > 0:
            warnings.warn(
                f"{dropped} usage figure(s) the servers reported were impossible (not a whole "
                f"number from 0 to {MAX_USAGE_TOKENS:,} tokens) and are read as not "
                "reported: the run's token counts and cost leave those calls out",
                UsageWarning,
                stacklevel=2,
            )
        return out


def _samples(
    df: pl.DataFrame, *, responding: bool, config: SafetyConsistencyConfig, responses: str
) -> list[list[Sample]]:
    """Each row's samples to fill: fresh ones to request, or the stored answers of
    ``responses`` (a null one is a failed sample)."""
    if responding:
        k = config.responses_per_query - 1
        return [[Sample() for _ in range(k)] for _ in range(df.height)]
    return [
        [
            Sample(response=r, response_error=None if r is not None else "no stored response")
            for r in (row or [])
        ]
        for row in df[responses].to_list()
    ]


async def _respond(
    eng: Engine, session: RunSession, call: ModelCall, sample: Sample, *, endpoint: str
) -> None:
    """Ask the SUT for one sample through the engine and fill the SUT fields of ``sample``."""

    async def ask(attempt: Attempt) -> Completion:
        return await session.attempt(
            attempt, call.messages, temperature=call.temperature, seed=call.seed
        )

    got = await eng.call(
        "sut",
        ask,
        call=call,
        endpoint=endpoint,
        encode=encode_completion,
        decode=decode_completion,
        deferred=session.holds > 0,
    )
    if got.value is None:
        sample.sut.add(got)
        sample.response_error = got.error
        return
    answer = got.value
    sample.sut.add(
        got, prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens
    )
    sample.response = answer.text
    if not got.cached:
        eng.runner.stats.dropped_usage += got.value.dropped_usage


async def _score_units(
    eng: Engine,
    df: pl.DataFrame,
    *,
    responding: bool,
    judging: bool,
    config: SafetyConsistencyConfig,
    prefix: str,
    sessions: Sessions,
    swap_share: float,
    repeat_share: float = 0.0,
) -> pl.DataFrame:
    names = column_names(prefix, config.metric_name)
    results = _samples(df, responding=responding, config=config, responses=names["responses"])
    sut_session, jury = sessions.sut, sessions.jury
    plan = RunPlan.of(
        df,
        prefix=prefix,
        samples=[len(row) for row in results],
        responding=responding,
        seed=eng.options.seed,
        swap_share=swap_share,
        temperature=config.sut_temperature,
        endpoint=sessions.endpoint,
        repeat_share=repeat_share,
    )
    reader = PostureReader(plan.queries, plan.bases, results) if judging else None

    async def run_unit(unit: Unit) -> None:
        sample = results[unit.row][unit.index]
        if sut_session is not None and unit.sut is not None:
            await _respond(eng, sut_session, unit.sut, sample, endpoint=plan.endpoint.identity)
        if reader is not None and sample.response is not None:
            reader.answered(unit.row, unit.index)
        if jury and sample.response is not None:
            await judge_by_jury(
                eng,
                jury,
                sessions.jurors,
                unit.slot,
                plan.texts(unit.row, sample.response),
                swap=unit.swap,
                sample=sample,
                repeat=unit.repeat,
            )

    async with anyio.create_task_group() as tasks:
        if reader is not None:
            tasks.start_soon(reader.read)
        try:
            await eng.each(
                (functools.partial(run_unit, unit) for unit in plan.units()),
                total=sum(plan.samples),
                desc="safety_consistency",
                unit="comparison",
            )
        finally:
            if reader is not None:
                reader.close()
    return assemble(
        df,
        results,
        names,
        responded=responding,
        judged=judging,
        postures=None if reader is None else reader.postures,
        jurors=sessions.jurors,
        juror_ids=sessions.juror_ids,
    )

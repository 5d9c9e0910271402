"""The dry run: the calls a run would make, and how many the cache already holds.

It builds the same :class:`~safecons.run._calls.ModelCall` values as the run (through
``sut_call`` and the judge's own ``prepare``), so its keys are the
run's keys by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from ..clients import as_chat_client, secrets_of, warn_if_guessed
from ..run import Endpoint, decode_completion, opened_cache, replay, slot
from ..variants import query_of
from ._comparisons import sut_call
from ._judging import planning_judge

if TYPE_CHECKING:
    from ._job import Job

__all__ = ("CallPlan", "plan_calls")


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What a run would request, computed before any request (a dry run).

    ``sut`` and ``judge`` count the calls the run needs (one attempt each; retries come on
    top); ``*_cached`` how many of them the cache already holds, and ``*_to_request`` the
    rest. A judge call's key depends on the SUT answer it judges, so it can only be found
    cached when that answer is. A judge object (``compare``) runs locally: its calls are
    counted in ``judge_local``, not in ``judge``.
    """

    rows: int
    sut: int
    judge: int
    judge_local: int
    sut_cached: int
    judge_cached: int

    @property
    def sut_to_request(self) -> int:
        """SUT calls the cache does not hold."""
        return self.sut - self.sut_cached

    @property
    def judge_to_request(self) -> int:
        """Judge calls the cache does not hold."""
        return self.judge - self.judge_cached

    def __repr__(self) -> str:
        return (
            f"CallPlan(rows={self.rows}, sut={self.sut} ({self.sut_cached} cached, "
            f"{self.sut_to_request} to request), judge={self.judge} ({self.judge_cached} "
            f"cached, {self.judge_to_request} to request), judge_local={self.judge_local})"
        )


def plan_calls(frame: pl.DataFrame, job: Job) -> CallPlan:
    """Count the calls of ``job`` over ``frame`` (which has its variant columns)."""
    config, seed, prefix = job.config, job.options.seed, job.prefix
    sut, judge = job.sut, job.judge
    k = config.responses_per_query - 1
    n = frame.height
    judging = planning_judge(judge)
    sut_client = as_chat_client(sut, "sut")
    # What the run scrubs and decodes on replay, the plan scrubs and decodes alike.
    secrets = secrets_of(sut_client, getattr(judging, "client", None))
    sut_cached = judge_cached = 0
    with opened_cache(job.options.cache) as store:
        if store is not None:
            # The plan's hits rest on the same identities as the run's.
            warned: set[str] = set()
            for client in (sut_client, getattr(judging, "client", None)):
                warn_if_guessed(client, warned, stacklevel=3)  # at planned_calls caller
            endpoint = Endpoint.of(sut_client)
            rows = zip(
                frame["input_id"].to_list(),
                frame["prompt"].to_list(),
                frame["sut_response"].to_list(),
                frame[f"{prefix}variant_text"].to_list(),
                frame[f"{prefix}variant_messages"].to_list(),
                strict=True,
            )
            for input_id, prompt, base, variant, messages in rows:
                for j in range(k):
                    call = sut_call(
                        endpoint,
                        messages,
                        input_id,
                        j,
                        temperature=config.sut_temperature,
                        seed=seed,
                    )
                    answer = replay(store.get(call.key), decode_completion, secrets)
                    if answer is None:
                        continue
                    sut_cached += 1
                    comparison = judging.prepare(
                        slot(input_id, j),
                        query=query_of(prompt),
                        variant=variant,
                        base=base,
                        candidate=answer.text,
                    )
                    if comparison.call is not None:
                        verdict = replay(store.get(comparison.call.key), judging.decode, secrets)
                        judge_cached += verdict is not None
    return CallPlan(
        rows=n,
        sut=n * k,
        judge=0 if judging.local else n * k,
        judge_local=n * k if judging.local else 0,
        sut_cached=sut_cached,
        judge_cached=judge_cached,
    )

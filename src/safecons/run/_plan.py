"""The dry run: the calls a run would make, and how many the cache already holds.

It builds the same :class:`~safecons.run._calls.ModelCall` values as the run (through
:func:`~safecons.run._units.sut_call` and the judge's own ``prepare``), so its keys are the
run's keys by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..clients._adapt import as_chat_client
from ..clients._callable import warn_if_guessed
from ..clients._secrets import secrets_of
from ..config import SafetyConsistencyConfig
from ..judges._sessions import planning_judge
from ..variants import query_of
from ._cache import CacheArg, opened_cache
from ._calls import Endpoint, decode_completion, slot
from ._runner import replay
from ._units import sut_call

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


def plan_calls(
    frame: pl.DataFrame,
    *,
    sut: object,
    judge: object,
    config: SafetyConsistencyConfig,
    seed: int,
    prefix: str,
    cache: CacheArg,
) -> CallPlan:
    """Count the calls of a run over ``frame`` (which has its variant columns)."""
    k = config.responses_per_query - 1
    n = frame.height
    judging = planning_judge(judge)
    sut_client = as_chat_client(sut, "sut")
    # What the run scrubs and decodes on replay, the plan scrubs and decodes alike.
    secrets = secrets_of(sut_client, getattr(judging, "client", None))
    sut_cached = judge_cached = 0
    with opened_cache(cache) as store:
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

"""The run's plan: every comparison a run makes, and every judge call of each, in order.

One value, :class:`RunPlan`, says what a run over a frame does: for each row, which samples it
asks the SUT for (their calls, slots and seeds), which of them the in-run swap test judges
again with the answers swapped and which the repeat test judges again as they were, and the
texts each judge call compares. The run (:mod:`._comparisons`) walks it to
start its units; the dry run (:mod:`._plan`) walks the same value to count and look up the
calls, so the two cannot drift apart: a change to what a run does is a change here, seen by
both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..run import Endpoint, ModelCall, row_draw, sample_seed, slot
from ..variants import query_of

__all__ = ("RunPlan", "Unit", "jury_orders", "repeat_chosen", "sut_call", "swap_chosen")


def sut_call(
    endpoint: Endpoint,
    messages: Any,
    input_id: object,
    index: int,
    *,
    temperature: float,
    seed: int,
) -> ModelCall:
    """Sample ``index`` of a row's SUT answers, as the run and the dry run both build it."""
    return ModelCall(
        "sut",
        endpoint,
        messages,
        temperature,
        slot(input_id, index),
        sample_seed(seed, input_id, index),
    )


def swap_chosen(seed: int, input_id: object, index: int, share: float) -> bool:
    """Whether comparison ``index`` of row ``input_id`` is judged again with the answers
    swapped: a draw from the run's seed and the row's id, never its place or batch.

    Examples
    --------
    >>> [swap_chosen(0, "row-7", 0, share) for share in (0.0, 1.0)]
    [False, True]
    >>> swap_chosen(3, "a", 1, 0.5) == swap_chosen(3, "a", 1, 0.5)
    True
    """
    if share <= 0.0:
        return False
    if share >= 1.0:
        return True
    return row_draw(seed, input_id, index, person=b"sc-swap") / 2**64 < share


def repeat_chosen(seed: int, input_id: object, index: int, share: float) -> bool:
    """Whether comparison ``index`` of row ``input_id`` is judged again as it was (the same
    call asked twice, the in-run repeat test): a draw from the run's seed and the row's id,
    never its place or batch, and apart from the swap test's draw.

    Examples
    --------
    >>> [repeat_chosen(0, "row-7", 0, share) for share in (0.0, 1.0)]
    [False, True]
    >>> sum(repeat_chosen(0, i, 0, 0.3) for i in range(1000))  # about 300 of 1,000
    273
    """
    if share <= 0.0:
        return False
    if share >= 1.0:
        return True
    return row_draw(seed, input_id, index, person=b"sc-repeat") / 2**64 < share


def jury_orders(
    ordered: Sequence[bool], swap: bool, repeat: bool = False
) -> list[tuple[int, bool, int]]:
    """The judge calls of one comparison: ``(juror, candidate_first, repeat)`` for each juror
    in order; when the comparison is ``swap``-chosen, again with the candidate first for each
    juror that sees an order (``ordered[juror]``; a judge object sees none); when it is
    ``repeat``-chosen, again as first asked for every juror (``repeat`` 1: its own call).

    Examples
    --------
    >>> jury_orders([True, False], swap=False)
    [(0, False, 0), (1, False, 0)]
    >>> jury_orders([True, False], swap=True)
    [(0, False, 0), (0, True, 0), (1, False, 0)]
    >>> jury_orders([True, False], swap=False, repeat=True)
    [(0, False, 0), (0, False, 1), (1, False, 0), (1, False, 1)]
    """
    return [
        (juror, first, again)
        for juror, sees in enumerate(ordered)
        for first, again in (
            [(False, 0)] + ([(True, 0)] if swap and sees else []) + ([(False, 1)] if repeat else [])
        )
    ]


@dataclass(frozen=True, slots=True)
class Unit:
    """One comparison of a run: sample ``index`` of the row at place ``row`` (``input_id``),
    its slot, whether the swap test judges it again, its SUT call (None when the run reads
    stored answers), and whether the repeat test judges it again."""

    row: int
    index: int
    input_id: object
    slot: str
    swap: bool
    sut: ModelCall | None
    repeat: bool = False


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What a run over a frame does, row by row (see the module's docstring).

    ``samples`` is how many comparisons each row has: ``responses_per_query - 1`` fresh
    answers when the run asks the SUT (``messages`` holds each row's variant messages), or
    the number of stored answers when it reads them (``messages`` is None).
    """

    ids: Sequence[object]
    queries: Sequence[str]
    bases: Sequence[str]
    variants: Sequence[str]
    messages: Sequence[Any] | None
    samples: Sequence[int]
    seed: int
    swap_share: float
    temperature: float
    endpoint: Endpoint
    repeat_share: float = 0.0

    @classmethod
    def of(
        cls,
        frame: pl.DataFrame,
        *,
        prefix: str,
        samples: Sequence[int],
        responding: bool,
        seed: int,
        swap_share: float,
        temperature: float,
        endpoint: Endpoint,
        repeat_share: float = 0.0,
    ) -> RunPlan:
        """The plan of a run over ``frame`` (which has its ``{prefix}variant_*`` columns)."""
        return cls(
            ids=frame["input_id"].to_list(),
            queries=[query_of(prompt) for prompt in frame["prompt"].to_list()],
            bases=frame["sut_response"].to_list(),
            variants=frame[f"{prefix}variant_text"].to_list(),
            messages=frame[f"{prefix}variant_messages"].to_list() if responding else None,
            samples=samples,
            seed=seed,
            swap_share=swap_share,
            temperature=temperature,
            endpoint=endpoint,
            repeat_share=repeat_share,
        )

    def units(self) -> Iterator[Unit]:
        """Every comparison, in the order the run starts them (row by row)."""
        for row, (input_id, count) in enumerate(zip(self.ids, self.samples, strict=True)):
            for index in range(count):
                yield Unit(
                    row,
                    index,
                    input_id,
                    slot(input_id, index),
                    swap_chosen(self.seed, input_id, index, self.swap_share),
                    None if self.messages is None else self.sut_call(row, index),
                    repeat_chosen(self.seed, input_id, index, self.repeat_share),
                )

    def sut_call(self, row: int, index: int) -> ModelCall:
        """The SUT call of sample ``index`` of the row at place ``row``."""
        assert self.messages is not None, "a run that reads stored answers asks no SUT"
        return sut_call(
            self.endpoint,
            self.messages[row],
            self.ids[row],
            index,
            temperature=self.temperature,
            seed=self.seed,
        )

    def texts(self, row: int, candidate: str) -> dict[str, str]:
        """What a judge call of the row at place ``row`` compares, with ``candidate`` as the
        answer judged."""
        return {
            "query": self.queries[row],
            "variant": self.variants[row],
            "base": self.bases[row],
            "candidate": candidate,
        }

"""The swap test: a pairwise judge called on every pair in both orders.

A pairwise judge sees one question and two answers, labelled assistant A and assistant B, and
ends its reply with ``[[A]]``, ``[[B]]`` or ``[[C]]`` (a tie). Its prompt, the verdict parser
and the statistics that read its verdicts live in :mod:`safecons.reliability`, which stays free
of network code; this module holds the part that calls a judge, :func:`swap_test`.
"""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Unpack, get_args

import polars as pl

from .clients import ChatClient, NonRetryableCallError
from .clients._internal import Attempt, ChatFunction, RunSession, as_chat_client
from .errors import InputError, NoVerdictWarning
from .reliability import (
    LETTER_XY,
    LETTER_YX,
    POSITION,
    SWAP_COLUMNS,
    VERDICT,
    VERDICT_XY_RAW,
    VERDICT_YX_RAW,
    WINNER_XY,
    WINNER_YX,
    Letter,
    Rule,
    both_orders_verdict,
    build_pairwise_messages,
    mixed_verdicts_expr,
    parse_verdict,
    position_class,
    winner_from_letter,
)
from .run import (
    CallOptions,
    Endpoint,
    Engine,
    ModelCall,
    RunOptions,
    cache_key,
    engine,
    run_sync,
)

__all__ = (
    "MIXED_XY",
    "MIXED_YX",
    "SWAP_CACHE_HITS",
    "SWAP_ERROR",
    "swap_test",
    "swap_test_async",
)

# --------------------------------------------------------------------------------------------
# swap_test: the network half, through the same runner, limiter, retries and cache as the metric.

#: Column ``swap_test`` adds beside :data:`safecons.reliability.SWAP_COLUMNS`: why a call failed.
SWAP_ERROR: Final = "swap_error"
#: Column ``swap_test`` adds: how many of the row's two calls were replayed from the cache.
SWAP_CACHE_HITS: Final = "swap_cache_hits"
#: Columns ``swap_test`` adds: the x-first (y-first) reply held several different verdict
#: tokens (see :func:`safecons.reliability.mixed_verdicts_expr`); the letter still follows ``rule``.
MIXED_XY: Final = "mixed_verdicts_xy"
MIXED_YX: Final = "mixed_verdicts_yx"


@dataclass(slots=True)
class _Call:
    raw: str | None = None
    letter: Letter = "error"
    error: str | None = None
    cached: bool = False


def _check_text_column(df: pl.DataFrame, name: str, parameter: str) -> None:
    if name not in df.columns:
        raise InputError(
            f"{parameter}={name!r}: no such column (columns: {', '.join(df.columns) or 'none'})"
        )
    dtype = df.schema[name]
    if dtype not in (pl.String, pl.Null):
        raise InputError(f"column {name!r} ({parameter}=) has dtype {dtype}; expected String")
    nulls = df[name].null_count()
    if nulls and parameter != "reference":
        raise InputError(f"column {name!r} ({parameter}=) has {nulls} null value(s)")


async def swap_test_async(
    df: pl.DataFrame,
    *,
    judge: ChatClient | ChatFunction,
    question: str = "question",
    x: str = "x",
    y: str = "y",
    reference: str | None = None,
    rule: Rule = "last",
    **options: Unpack[CallOptions],
) -> pl.DataFrame:
    """:func:`swap_test` for code that already runs in an event loop."""
    _check_swap_args(df, question, x, y, reference, rule)
    run_options = RunOptions.of(options, front="swap_test", kind="pairwise")
    client = as_chat_client(judge, "judge")
    added = (*SWAP_COLUMNS, MIXED_XY, MIXED_YX, SWAP_ERROR, SWAP_CACHE_HITS)
    clash = [c for c in added if c in df.columns]
    if clash:
        raise InputError(
            f"the frame already has column(s) {', '.join(map(repr, clash))} that swap_test adds"
        )
    questions = df[question].to_list()
    xs = df[x].to_list()
    ys = df[y].to_list()
    refs = df[reference].to_list() if reference is not None else [None] * df.height
    calls = [(_Call(), _Call()) for _ in range(df.height)]
    slots = _content_slots(questions, xs, ys, refs)
    where = Endpoint.of(client)
    async with engine(run_options) as eng:
        session = await eng.session(client)

        async def one(row: int, order: int, out: _Call) -> None:
            first, second = (xs[row], ys[row]) if order == 0 else (ys[row], xs[row])
            call = ModelCall(
                "pairwise",
                where,
                build_pairwise_messages(questions[row], first, second, reference=refs[row]),
                0.0,
                f"{slots[row]}#{'xy' if order == 0 else 'yx'}",
            )
            await _judge_order(eng, session, call, out, rule=rule)

        await eng.each(
            (
                functools.partial(one, row, order, out)
                for row, pair in enumerate(calls)
                for order, out in enumerate(pair)
            ),
            total=2 * df.height,
            desc="swap_test",
            unit="judge call",
        )
    _warn_if_nothing_usable(calls)
    return _swap_frame(df, calls)


def _warn_if_nothing_usable(calls: list[tuple[_Call, _Call]]) -> None:
    """Warn when no pair has a verdict in both orders: every statistic of the frame is NaN."""
    if not calls or any(a.letter != "error" and b.letter != "error" for a, b in calls):
        return
    failed = [c for pair in calls for c in pair if c.letter == "error"]
    reasons = Counter(
        (c.error or "no verdict").split(": ", 1)[-1].split(" (", 1)[0] for c in failed
    )
    reason, times = reasons.most_common(1)[0]
    warnings.warn(
        f"swap_test: no pair has a verdict in both orders ({len(failed)} of {2 * len(calls)} "
        f"judge calls gave none; most common reason, {times}x: {reason}); position_bias "
        "and agreement of this frame are NaN. Each row's reason is in its swap_error column.",
        NoVerdictWarning,
        stacklevel=3,
    )


async def _judge_order(
    eng: Engine, session: RunSession, call: ModelCall, out: _Call, *, rule: Rule
) -> None:
    """One ordering of a pair through the engine: its verdict letter, or its error, in ``out``."""
    endpoint = call.endpoint.identity

    async def attempt(made: Attempt) -> str:
        out.raw = None  # the raw text shown is always the last attempt's
        completion = await session.attempt(made, call.messages, temperature=0.0)
        out.raw = completion.text
        if parse_verdict(completion.text, rule=rule) == "error":
            # At temperature 0 the same prompt gets the same reply: asking again would only
            # multiply the cost. Transport errors, 5xx and 429 are what retries are for.
            raise NonRetryableCallError(
                f"{endpoint}: no [[A]]/[[B]]/[[C]] verdict in the judge output",
                output=completion.text,
            )
        return completion.text

    got = await eng.call(
        "pairwise",
        attempt,
        call=call,
        endpoint=endpoint,
        encode=str,
        decode=_decode_verdict(rule),
        deferred=session.holds > 0,
    )
    out.cached = got.cached
    if got.value is not None:
        out.raw = got.value
        out.letter = parse_verdict(got.value, rule=rule)
    else:
        out.error = got.error


def _swap_frame(df: pl.DataFrame, calls: list[tuple[_Call, _Call]]) -> pl.DataFrame:
    """``df`` with the swap test's columns, from each pair's two orderings."""

    def errors(pair: tuple[_Call, _Call]) -> str | None:
        parts = [
            f"{name}: {c.error}"
            for name, c in zip(("x first", "y first"), pair, strict=True)
            if c.error
        ]
        return "; ".join(parts) or None

    letters = df.with_columns(
        pl.Series(VERDICT_XY_RAW, [p[0].raw for p in calls], dtype=pl.String),
        pl.Series(VERDICT_YX_RAW, [p[1].raw for p in calls], dtype=pl.String),
        pl.Series(LETTER_XY, [p[0].letter for p in calls], dtype=pl.String),
        pl.Series(LETTER_YX, [p[1].letter for p in calls], dtype=pl.String),
    )
    return letters.with_columns(
        winner_from_letter(LETTER_XY, shown_first="x").alias(WINNER_XY),
        winner_from_letter(LETTER_YX, shown_first="y").alias(WINNER_YX),
        both_orders_verdict(LETTER_XY, LETTER_YX).alias(VERDICT),
        position_class(LETTER_XY, LETTER_YX).alias(POSITION),
        mixed_verdicts_expr(VERDICT_XY_RAW).alias(MIXED_XY),
        mixed_verdicts_expr(VERDICT_YX_RAW).alias(MIXED_YX),
        pl.Series(SWAP_ERROR, [errors(p) for p in calls], dtype=pl.String),
        pl.Series(SWAP_CACHE_HITS, [p[0].cached + p[1].cached for p in calls], dtype=pl.Int64),
    )


def _content_slots(
    questions: list[str], xs: list[str], ys: list[str], refs: list[str | None]
) -> list[str]:
    """Each row's cache slot: a hash of its texts and which repeat of them it is.

    Slots depend on the rows' content, not their positions, so a reordered or filtered rerun
    still finds its calls; identical rows are told apart by their occurrence.
    """
    seen: dict[str, int] = {}
    slots = []
    for texts in zip(questions, xs, ys, refs, strict=True):
        digest = cache_key(texts=list(texts))[:16]
        seen[digest] = seen.get(digest, 0) + 1
        slots.append(f"{digest}.{seen[digest]}")
    return slots


def _decode_verdict(rule: Rule) -> Callable[[str], str]:
    def decode(stored: str) -> str:
        if parse_verdict(stored, rule=rule) == "error":
            raise ValueError("stored output has no verdict")
        return stored

    return decode


def _check_swap_args(  # noqa: PLR0917 - a private check of swap_test's own arguments
    df: object, question: str, x: str, y: str, reference: str | None, rule: object
) -> None:
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"swap_test: expected a polars DataFrame, got {type(df).__name__}")
    if rule not in get_args(Rule):
        raise InputError(f'swap_test: rule= must be "last" or "fastchat", got {rule!r}')
    for name, parameter in ((question, "question"), (x, "x"), (y, "y")):
        _check_text_column(df, name, parameter)
    if reference is not None:
        _check_text_column(df, reference, "reference")


def swap_test(
    df: pl.DataFrame,
    *,
    judge: ChatClient | ChatFunction,
    question: str = "question",
    x: str = "x",
    y: str = "y",
    reference: str | None = None,
    rule: Rule = "last",
    **options: Unpack[CallOptions],
) -> pl.DataFrame:
    """Judge every pair twice, x shown first and then y shown first.

    Each row's question and two answers go to the pairwise judge in both orders, at
    temperature 0, through the same runner as the metric (one limiter of
    ``concurrency_limit``, retries with backoff honouring ``Retry-After``, per-call timeouts,
    the response cache). Failed requests (transport errors, 5xx, 429) are retried within
    ``n_judge_retries``; a reply with no verdict token is final, since the same prompt at
    temperature 0 gets the same reply: its letter is ``"error"`` and its text is kept. When no
    pair has a verdict in both orders, a :class:`~safecons.errors.NoVerdictWarning` says why.

    Parameters
    ----------
    df
        Frame with the question and the two candidates.
    judge
        An :class:`~safecons.OpenAICompatible` client or a callable
        ``(messages, *, temperature) -> str``.
    question, x, y, reference
        Column names; ``reference`` (optional) holds a reference answer per row.
    rule
        Verdict parser: ``"last"`` (the last token wins) or ``"fastchat"``.
    **options
        The run's options, as for :func:`~safecons.safety_consistency`:
        ``concurrency_limit``, ``n_judge_retries`` (retries of each judge call),
        ``timeout_seconds``, ``cache``, ``max_calls``, ``progress``, ``seed``.

    Returns
    -------
    ``df`` with ``verdict_xy_raw``, ``verdict_yx_raw``, ``letter_xy``, ``letter_yx``,
    ``winner_xy``, ``winner_yx``, ``verdict`` (the conservative both-orders verdict),
    ``position`` (consistent / primacy / recency / error), ``mixed_verdicts_xy`` and
    ``mixed_verdicts_yx`` (the reply held several different verdict tokens), ``swap_error``
    and ``swap_cache_hits``: the columns the statistics of :mod:`safecons.reliability` read by
    default, and the row's bookkeeping.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> pairs = sc.reliability.identical_pairs(pl.DataFrame({"question": ["Where is my parcel?"],
    ...                                          "answer": ["It arrives Tuesday."]}),
    ...                            answer="answer")
    >>> tie_to_first = lambda messages, temperature: "Equal quality; A wins ties. [[A]]"
    >>> out = pairs.pipe(sc.swap_test, judge=tie_to_first, progress=False)
    >>> out.select("letter_xy", "letter_yx", "verdict", "position").row(0)
    ('A', 'A', 'tie', 'primacy')
    >>> out.pipe(sc.reliability.position_bias).select("n_pairs", "primacy", "fairness").row(0)
    (1, 1, -1.0)
    """
    return run_sync(
        swap_test_async,
        df,
        judge=judge,
        question=question,
        x=x,
        y=y,
        reference=reference,
        rule=rule,
        keep=options.get("cache"),
        **options,
    )

"""The dry run: the calls a run would make, how many the cache already holds, and their tokens.

It walks the run's own plan (:class:`~._units.RunPlan`: every comparison, its SUT call, its
swap and repeat draws, and :func:`~._units.jury_orders`, the judge calls of each) and builds
each judge call with the judge's own ``prepare``, so its calls and keys are the run's by
construction, and its token estimates are of the messages the run would send.

The estimate of a judge prompt needs the SUT answer it judges, which a dry run does not have
(unless the cache holds it). It stands the row's stored ``sut_response`` in for the unseen
answer: the fresh answers are the same system's, to a rewrite of the same query, so the
stored one is the best length at hand; the judge's prompt cuts each text to
``max_judged_chars`` either way. An estimate, then, not a bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from .._prices import KINDS, PARTS, Prices, costs, money_text
from .._tokens import completion_budget, estimate_tokens, tokenizer_name
from ..clients import ChatClient
from ..clients._internal import Secrets, as_chat_client, facts_of, secrets_of, warn_if_partial
from ..run import Endpoint, ResponseCache, decode_completion, opened_cache, replay
from ..summary import token_frame
from ._judging import JudgeSession, juror_names, jurors_of, planning_judge
from ._units import RunPlan, jury_orders

if TYPE_CHECKING:
    from ._job import Job

__all__ = ("CallPlan", "plan_calls")

_Tokens = dict[str, dict[str, int | None]]


def _no_tokens() -> _Tokens:
    return {kind: {"prompt": 0, "completion": 0} for kind in KINDS}


def _figure(value: int | float | None, *, money: bool = False) -> str:
    if money:
        return money_text(value)
    return "n/a" if value is None else f"{value:,}"


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What a run would request, computed before any request (a dry run).

    ``sut`` and ``judge`` count the calls the run needs (one attempt each; retries come on
    top); ``*_cached`` how many of them the cache already holds, and ``*_to_request`` the
    rest. A judge call's key depends on the SUT answer it judges, so it can only be found
    cached when that answer is. A judge object (``compare``) runs locally: its calls are
    counted in ``judge_local``, not in ``judge``.

    ``tokens`` holds, per kind, the tokens of the calls still to request: ``prompt``
    estimated (with ``tokenizer``: ``tiktoken:<encoding>``, or ``bytes/4``, see
    :func:`safecons._tokens.estimate_tokens`) and ``completion`` the client's
    ``max_tokens`` / ``max_completion_tokens`` times the calls (an upper bound), None when the
    client sets no bound (unknown: never a guess). A judge prompt whose SUT answer is not
    cached is estimated with the row's ``sut_response`` in the answer's place.
    ``tokens_cached`` is the same for the calls the cache holds (what it saves). With
    ``prices``, :attr:`cost` prices ``tokens`` (per 1M tokens) at the regular rate, and the
    kinds in ``batched`` (whose client is ``batch=True``) with the prices' ``batch_discount``.
    """

    rows: int
    sut: int
    judge: int
    judge_local: int
    sut_cached: int
    judge_cached: int
    tokens: _Tokens = field(default_factory=_no_tokens)
    tokens_cached: _Tokens = field(default_factory=_no_tokens)
    tokenizer: dict[str, str | None] = field(default_factory=dict)
    prices: Prices | None = None
    batched: frozenset[str] = frozenset()
    #: A jury's jurors, in order (one name for one judge), and the calls each needs, the
    #: in-run swap and repeat tests' included (a judge object's calls are local: in
    #: ``judge_local``).
    jurors: tuple[str, ...] = ()
    judge_by_juror: dict[str, int] = field(default_factory=dict)

    @property
    def sut_to_request(self) -> int:
        """SUT calls the cache does not hold."""
        return self.sut - self.sut_cached

    @property
    def judge_to_request(self) -> int:
        """Judge calls the cache does not hold."""
        return self.judge - self.judge_cached

    @property
    def cost(self) -> dict[str, dict[str, float | None]] | None:
        """The estimated cost of :attr:`tokens` at :attr:`prices`: per kind (``prompt``,
        ``completion``, ``total``) and in all (``"all"``). The completion's cost is an upper
        bound, and None (as is the total) where the completion tokens are unknown: the
        ``prompt`` cost is then all that is known. The tokens of a kind whose client sends
        its calls through the provider's Batch API (``batch=True``: :attr:`batched`) are
        priced with the ``batch_discount``. None without prices."""
        if self.prices is None:
            return None
        batched = {k: self.tokens[k] if k in self.batched else None for k in KINDS}
        return costs(self.prices, self.tokens, batched)

    def token_table(self) -> pl.DataFrame:
        """The tokens per kind as a frame: ``kind``, ``prompt_tokens`` (estimated),
        ``completion_tokens`` (upper bound or null), ``cached_prompt_tokens``,
        ``cached_completion_tokens``, ``tokenizer``, and with :attr:`prices` the costs."""
        cached = {f"cached_{p}_tokens": [self.tokens_cached[k][p] for k in KINDS] for p in PARTS}
        return token_frame(self.tokens, None, self.cost).with_columns(
            *(pl.Series(name, values, dtype=pl.Int64) for name, values in cached.items()),
            tokenizer=pl.Series([self.tokenizer.get(k) for k in KINDS], dtype=pl.String),
        )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{kind} ~{_figure(self.tokens[kind]['prompt'])} prompt + "
            f"{'<=' if self.tokens[kind]['completion'] is not None else ''}"
            f"{_figure(self.tokens[kind]['completion'])} completion"
            for kind in KINDS
        )
        return (
            f"CallPlan(rows={self.rows}, sut={self.sut} ({self.sut_cached} cached, "
            f"{self.sut_to_request} to request), judge={self.judge} ({self.judge_cached} "
            f"cached, {self.judge_to_request} to request), judge_local={self.judge_local}; "
            f"tokens to request: {shown})"
        )

    def _grid(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """The lines ``str`` and a notebook show: a head, and per-kind rows (name, SUT, judge)."""
        tokenizers = ", ".join(f"{k} {self.tokenizer.get(k) or 'n/a'}" for k in KINDS)
        head = [
            f"CallPlan: {self.rows:,} rows (a dry run: nothing was sent)",
            f"prompt tokens: estimated ({tokenizers})",
            "completion tokens: at most the client's max_tokens (n/a: it sets none)",
        ]
        counts = (
            ("calls", self.sut, self.judge),
            ("cached", self.sut_cached, self.judge_cached),
            ("to request", self.sut_to_request, self.judge_to_request),
        )
        grid = [(name, _figure(s), _figure(j)) for name, s, j in counts]
        if self.judge_local:
            grid.append(("local judge calls", "", _figure(self.judge_local)))
        if len(self.jurors) > 1:
            head.append(
                "jury: "
                + ", ".join(f"{n} {_figure(self.judge_by_juror.get(n, 0))}" for n in self.jurors)
                + " calls"
            )
        for label, tokens in (("to request", self.tokens), ("cached", self.tokens_cached)):
            grid += [
                (
                    f"{part} tokens {label}",
                    _figure(tokens["sut"][part]),
                    _figure(tokens["judge"][part]),
                )
                for part in PARTS
            ]
        cost = self.cost
        if cost is not None:
            grid += [
                (
                    f"cost {name}",
                    _figure(cost["sut"][part], money=True),
                    _figure(cost["judge"][part], money=True),
                )
                for name, part in (
                    ("prompt", "prompt"),
                    ("completion (at most)", "completion"),
                    ("total", "total"),
                )
            ]
            every = cost["all"]
            head.append(
                f"estimated cost {_figure(every['total'], money=True)} at the prices given (per "
                "1M tokens)"
                if every["total"] is not None
                else f"estimated cost: prompt only, {_figure(every['prompt'], money=True)} "
                "(completion unknown: set max_tokens for a bound)"
            )
        return head, grid

    def __str__(self) -> str:
        head, grid = self._grid()
        rows = [("", "sut", "judge"), *grid]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows]
        return "\n".join([*head, *lines])

    def _repr_html_(self) -> str:
        head, grid = self._grid()
        # Every text here is a field name, a number or a tokenizer's name: nothing to escape.
        body = "".join(
            f'<tr><th style="text-align:left">{a}</th><td>{b}</td><td>{c}</td></tr>'
            for a, b, c in grid
        )
        return (
            f'<table><caption style="text-align:left">{"<br>".join(head)}</caption>'
            "<thead><tr><th></th><th>sut</th><th>judge</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


@dataclass(slots=True)
class _Tally:
    """The dry run's running counts: calls found cached, and prompt tokens per kind to
    request and cached."""

    cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    prompt: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    prompt_cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))

    def add(self, kind: str, tokens: int, *, cached: bool) -> None:
        if cached:
            self.cached[kind] += 1
            self.prompt_cached[kind] += tokens
        else:
            self.prompt[kind] += tokens


def _model(client: ChatClient | None) -> str | None:
    return facts_of(client).model


def _budget(client: ChatClient | None) -> int | None:
    return completion_budget(facts_of(client).params)


def _completion(calls: int, budget: int | None) -> int | None:
    # No call, no completion; otherwise only a bound the client sets says anything.
    return 0 if calls == 0 else None if budget is None else calls * budget


def plan_calls(frame: pl.DataFrame, job: Job, prices: Prices | None = None) -> CallPlan:
    """Count the calls of ``job`` over ``frame`` (which has its variant columns), and
    estimate their tokens: every juror's, and those of the comparisons the in-run swap and
    repeat tests judge again."""
    k = job.config.responses_per_query - 1
    n = frame.height
    jury = [planning_judge(juror) for juror in jurors_of(job.judge)]
    names = juror_names(job.judge)
    sut_client = as_chat_client(job.sut, "sut")
    judge_clients = [j.client for j in jury if j.client is not None]
    tally = _Tally()
    # Read-only: a dry run makes no cache file where there is none, and changes none.
    with opened_cache(job.options.cache, read_only=True) as store:
        if store is not None:
            # The plan's hits rest on the same identities as the run's.
            warned: set[str] = set()
            for client in (sut_client, *judge_clients):
                warn_if_partial(client, warned)
        per_juror = _walk(
            frame, job, k=k, sut_client=sut_client, jury=jury, store=store, tally=tally
        )
    by_juror = dict(zip(names, per_juror, strict=True))
    calls = {
        "sut": n * k,
        "judge": sum(c for j, c in zip(jury, per_juror, strict=True) if not j.local),
    }
    local = sum(c for j, c in zip(jury, per_juror, strict=True) if j.local)
    budgets = {"sut": _budget(sut_client)}
    juror_budgets = [(_budget(j.client), c) for j, c in zip(jury, per_juror, strict=True)]

    def completion(kind: str, count: int) -> int | None:
        if kind == "sut":
            return _completion(count, budgets["sut"])
        if count == 0:
            return 0
        # Each juror's own bound, over its share of the calls (as planned: cached ones are
        # spread alike); unknown when any juror that calls has none.
        if any(b is None for b, c in juror_budgets if c):
            return None
        total = sum(c for _, c in juror_budgets) or 1
        return round(count * sum((b or 0) * c for b, c in juror_budgets) / total)

    def tokens(prompt: dict[str, int], done: dict[str, int], cached: bool) -> _Tokens:
        return {
            kind: {
                "prompt": prompt[kind],
                "completion": completion(kind, done[kind] if cached else calls[kind] - done[kind]),
            }
            for kind in KINDS
        }

    tokenizers = {tokenizer_name(_model(c)) for c in judge_clients}
    return CallPlan(
        rows=n,
        sut=calls["sut"],
        judge=calls["judge"],
        judge_local=local,
        sut_cached=tally.cached["sut"],
        judge_cached=tally.cached["judge"],
        tokens=tokens(tally.prompt, tally.cached, cached=False),
        tokens_cached=tokens(tally.prompt_cached, tally.cached, cached=True),
        tokenizer={
            "sut": tokenizer_name(_model(sut_client)),
            "judge": ", ".join(sorted(tokenizers)) if tokenizers else None,
        },
        prices=prices,
        # A kind is priced at the batch rate when every client of it batches: a jury of batched
        # and live jurors is priced at the regular rate (an upper bound).
        batched=frozenset(
            kind
            for kind, clients in (("sut", [sut_client]), ("judge", judge_clients))
            if clients and all(facts_of(c).batch for c in clients)
        ),
        jurors=names,
        judge_by_juror=by_juror,
    )


def _walk(
    frame: pl.DataFrame,
    job: Job,
    *,
    k: int,
    sut_client: ChatClient,
    jury: list[JudgeSession],
    store: ResponseCache | None,
    tally: _Tally,
) -> list[int]:
    """Walk the run's plan (:class:`~._units.RunPlan`, the value the run walks): look each
    call up in ``store`` (if any) and add its estimated prompt tokens to ``tally``; the calls
    each juror needs, in jury order."""
    plan = RunPlan.of(
        frame,
        prefix=job.prefix,
        samples=[k] * frame.height,
        responding=True,
        seed=job.options.seed,
        swap_share=job.swap_share,
        repeat_share=job.repeat_share,
        temperature=job.config.sut_temperature,
        endpoint=Endpoint.of(sut_client),
    )
    sut_model = _model(sut_client)
    # What the run scrubs and decodes on replay, the plan scrubs and decodes alike.
    secrets = secrets_of(sut_client, *(j.client for j in jury))
    ordered = [j.ordered for j in jury]
    per_juror = [0] * len(jury)
    # Per row: one SUT estimate serves every sample (they differ by seed only), and judge
    # prompts by juror, order and candidate text (the stand-in one is every sample's).
    row, sut_tokens = -1, 0
    judged: dict[tuple[int, bool, str, int], int] = {}
    for unit in plan.units():
        if unit.row != row:
            assert plan.messages is not None
            row, judged = unit.row, {}
            sut_tokens = estimate_tokens(plan.messages[row], model=sut_model)
        answer = None
        if store is not None and unit.sut is not None:
            answer = replay(store.get(unit.sut.key), decode_completion, secrets)
        tally.add("sut", sut_tokens, cached=answer is not None)
        candidate = plan.bases[row] if answer is None else answer.text
        texts = plan.texts(row, candidate)
        for index, first, again in jury_orders(ordered, unit.swap, unit.repeat):
            per_juror[index] += 1
            if jury[index].local:
                continue
            _plan_judge(
                jury[index],
                (index, first, candidate, again),
                judged,
                tally,
                slot=unit.slot,
                texts=texts,
                cached=answer is not None and store is not None,
                store=store,
                secrets=secrets,
            )
    return per_juror


def _plan_judge(
    judging: JudgeSession,
    key: tuple[int, bool, str, int],
    judged: dict[tuple[int, bool, str, int], int],
    tally: _Tally,
    *,
    slot: str,
    texts: dict[str, str],
    cached: bool,
    store: ResponseCache | None,
    secrets: Secrets,
) -> None:
    """One judge call of the plan: looked up where its SUT answer is cached, and estimated."""
    if not cached and key in judged:
        # Not cached, so no verdict can be: the stand-in prompt is estimated already.
        tally.add("judge", judged[key], cached=False)
        return
    comparison = judging.prepare(slot, candidate_first=key[1], repeat=key[3], **texts)
    if comparison.call is None:
        return
    verdict = None
    if cached and store is not None:
        verdict = replay(store.get(comparison.call.key), judging.decode, secrets)
    if key not in judged:
        judged[key] = estimate_tokens(comparison.call.messages, model=_model(judging.client))
    tally.add("judge", judged[key], cached=verdict is not None)

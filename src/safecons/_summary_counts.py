"""What :func:`~safecons.run_summary` returns: :class:`RunSummary`, the counts of a scored frame
and how they show (text, HTML, a token table), and a judge reliability in a line or two."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ._calibrated import CalibratedScore
from ._prices import KINDS, PARTS, Prices, costs, money_text
from ._text import terminal_text
from .reliability import JudgeReliability

__all__ = ("RunSummary", "reliability_lines", "token_frame")


def _no_batch() -> dict[str, dict[str, int | None]]:
    return {kind: {"prompt": 0, "completion": 0} for kind in KINDS}


def token_frame(
    tokens: dict[str, dict[str, int | None]],
    batch_tokens: dict[str, dict[str, int | None]] | None,
    cost: dict[str, dict[str, float | None]] | None,
) -> pl.DataFrame:
    """One row per kind: its tokens (and those a batch answered), and their cost when priced;
    what :meth:`RunSummary.token_table` and :meth:`~safecons.CallPlan.token_table` return."""
    data: dict[str, list[Any]] = {"kind": list(KINDS)}
    for part in PARTS:
        data[f"{part}_tokens"] = [tokens[k][part] for k in KINDS]
    if batch_tokens is not None:
        for part in PARTS:
            data[f"batch_{part}_tokens"] = [batch_tokens[k][part] for k in KINDS]
    # Int64, or Int128 for the rare total past 2**63 (exact sums of a frame handed in).
    fits = all(v is None or abs(v) < 2**63 for name in list(data)[1:] for v in data[name])
    counts = pl.Int64 if fits else pl.Int128
    schema: dict[str, Any] = {"kind": pl.String, **dict.fromkeys(list(data)[1:], counts)}
    if cost is not None:
        for part in (*PARTS, "total"):
            name = "cost" if part == "total" else f"{part}_cost"
            data[name] = [cost[k][part] for k in KINDS]
            schema[name] = pl.Float64
    return pl.DataFrame(data, schema=schema)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Counts of a scored frame: rows, scores, calls, attempts, cache hits, tokens.

    ``calls`` counts the calls the rows needed (SUT samples; judge comparisons of the samples
    that got an answer, times the jurors of a jury, plus the swapped and repeated ones),
    ``attempts`` those made over the network or to a local judge (retries included),
    ``cache_hits`` those replayed, ``failed_calls`` those that failed for good (a jury's
    missing votes), ``skipped_calls`` those a spent ``max_calls`` budget left unmade,
    ``tokens`` what the servers reported spending (None where none reported usage), and
    ``rate_limited`` the 429 answers.

    What share of the score is refusals (None for a frame without the posture columns, from
    a safecons before them, or with no answer to read): ``base_refusal_rate``, the share of
    rows whose base answer refused (:func:`~safecons.judges.answer_postures` reads it
    ``"refused"``; ``"partial"`` is not counted); ``variant_refusal_rate``, the share of the
    fresh answers to the variants that refused; ``both_refused_share``, the share of the judged
    comparisons in which both the base answer and the fresh one refused. A score made mostly
    of refusals beside refusals says the system keeps refusing, and nothing of whether it
    helps: a system that refuses everything, benign questions included, scores about 1.0.

    ``judge_reliability`` (:class:`~safecons.reliability.JudgeReliability`): how far the
    run's judges agreed (Krippendorff's alpha over a jury's labels, each juror's agreement with
    the jury) and whether their verdicts moved with the order of the answers (position
    consistency, from ``swap_share=``) and how often each changed its own label when asked the
    same comparison again (``repeat_flip_rate``, from ``repeat_share=``: the judge's own
    noise); None for a frame without the juror columns (an older safecons) or of several
    juries.

    ``calibrated`` (:class:`~safecons.summary.CalibratedScore`): with ``human_labels=`` given to
    :func:`run_summary`, the mean score and contradiction rate as the humans would give
    them, with 95% intervals (PPI++); None without.

    Three ways to show it: ``repr`` is the dataclass's own (every field, exact, one line: a
    valid expression that rebuilds the summary), ``str`` (``print``) a few aligned lines and a
    notebook a small table (``_repr_html_``), both with the mean rounded to 3 places and the
    per-kind counts in a ``sut`` / ``judge`` grid, each row named after its field.

    Examples
    --------
    >>> from safecons import Prices
    >>> s = RunSummary(
    ...     n_rows=3, n_scored=2, n_errored=1, n_not_finished=0, mean_score=0.8333333,
    ...     calls={"sut": 6, "judge": 4}, attempts={"sut": 7, "judge": 4},
    ...     cache_hits={"sut": 0, "judge": 0}, failed_calls={"sut": 2, "judge": 0},
    ...     skipped_calls={"sut": 0, "judge": 0}, rate_limited=1,
    ...     tokens={"sut": {"prompt": 120_000, "completion": 80_000},
    ...             "judge": {"prompt": None, "completion": None}},
    ...     batch_tokens={"sut": {"prompt": 60_000, "completion": 40_000},
    ...                   "judge": {"prompt": None, "completion": None}},
    ...     prices=Prices(sut_prompt=0.15, sut_completion=0.6, batch_discount=0.5))
    >>> print(s)
    RunSummary: 3 rows, 2 scored, 1 without a score (0 not finished)
    mean_score 0.833, rate_limited 1
    cost n/a in all at the prices given (per 1M tokens; batch tokens 50% off)
                             sut  judge
    calls                      6      4
    attempts                   7      4
    cache_hits                 0      0
    failed_calls               2      0
    skipped_calls              0      0
    tokens prompt        120,000    n/a
    tokens completion     80,000    n/a
    tokens batch share     50.0%    n/a
    cost prompt         0.013500    n/a
    cost completion     0.036000    n/a
    cost                0.049500    n/a
    >>> s.batch_share, round(s.cost["sut"]["total"], 6)
    ({'sut': 0.5, 'judge': None}, 0.0495)
    >>> s.mean_score
    0.8333333
    """

    n_rows: int
    n_scored: int
    n_errored: int
    n_not_finished: int
    mean_score: float | None
    calls: dict[str, int]
    attempts: dict[str, int]
    cache_hits: dict[str, int]
    failed_calls: dict[str, int]
    skipped_calls: dict[str, int]
    tokens: dict[str, dict[str, int | None]]
    rate_limited: int
    batch_tokens: dict[str, dict[str, int | None]] = field(default_factory=_no_batch)
    prices: Prices | None = None
    base_refusal_rate: float | None = None
    variant_refusal_rate: float | None = None
    both_refused_share: float | None = None
    judge_reliability: JudgeReliability | None = None
    calibrated: CalibratedScore | None = None

    @property
    def batch_share(self) -> dict[str, float | None]:
        """Per kind, the share (0 to 1) of its reported tokens on rows a provider batch
        answered (``<kind>_batched > 0`` in the row's spend); None where none were reported."""
        out: dict[str, float | None] = {}
        for kind in KINDS:
            total = sum(v for v in self.tokens[kind].values() if v is not None)
            batched = sum(v for v in self.batch_tokens[kind].values() if v is not None)
            known = any(v is not None for v in self.tokens[kind].values())
            out[kind] = batched / total if known and total else None
        return out

    @property
    def cost(self) -> dict[str, dict[str, float | None]] | None:
        """Per kind, the cost of its ``prompt`` and ``completion`` tokens and their ``total``
        at :attr:`prices` (per 1M tokens; batch tokens at the batch discount); ``"all"``
        holds the sums over the kinds. None without prices; a figure is None where its tokens
        or its price are unknown."""
        if self.prices is None:
            return None
        return costs(self.prices, self.tokens, self.batch_tokens)

    def token_table(self) -> pl.DataFrame:
        """The tokens per kind as a frame: ``kind``, ``prompt_tokens``, ``completion_tokens``,
        ``batch_prompt_tokens``, ``batch_completion_tokens``, and with :attr:`prices`
        ``prompt_cost``, ``completion_cost``, ``cost``."""
        cost = self.cost
        return token_frame(self.tokens, self.batch_tokens, cost).with_columns(
            batch_share=pl.Series([self.batch_share[k] for k in KINDS], dtype=pl.Float64)
        )

    def _text(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """What ``str`` and the notebook's table show: the single figures in two lines, and
        the per-kind rows (field, SUT, judge), as text."""
        mean = "n/a" if self.mean_score is None else f"{self.mean_score:.3f}"
        head = [
            f"RunSummary: {self.n_rows:,} rows, {self.n_scored:,} scored, {self.n_errored:,} "
            f"without a score ({self.n_not_finished:,} not finished)",
            f"mean_score {mean}, rate_limited {self.rate_limited:,}",
        ]
        if self.base_refusal_rate is not None or self.variant_refusal_rate is not None:
            head.append(
                f"base_refusal_rate {_share_text(self.base_refusal_rate)}, "
                f"variant_refusal_rate {_share_text(self.variant_refusal_rate)}, "
                f"both_refused_share {_share_text(self.both_refused_share)}"
            )
        head += reliability_lines(self.judge_reliability)
        if self.calibrated is not None:
            head += self.calibrated.lines()
        grid = [
            (name, f"{counts['sut']:,}", f"{counts['judge']:,}")
            for name, counts in (
                ("calls", self.calls),
                ("attempts", self.attempts),
                ("cache_hits", self.cache_hits),
                ("failed_calls", self.failed_calls),
                ("skipped_calls", self.skipped_calls),
            )
        ]
        grid += [
            (
                f"tokens {part}",
                _count_text(self.tokens["sut"][part]),
                _count_text(self.tokens["judge"][part]),
            )
            for part in ("prompt", "completion")
        ]
        share = self.batch_share
        grid.append(("tokens batch share", _share_text(share["sut"]), _share_text(share["judge"])))
        cost = self.cost
        if cost is not None and self.prices is not None:
            grid += [
                (name, money_text(cost["sut"][part]), money_text(cost["judge"][part]))
                for name, part in (
                    ("cost prompt", "prompt"),
                    ("cost completion", "completion"),
                    ("cost", "total"),
                )
            ]
            off = self.prices.batch_discount
            batch = f"; batch tokens {off:.0%} off" if off else ""
            head.append(
                f"cost {money_text(cost['all']['total'])} in all at the prices given (per 1M "
                f"tokens{batch})"
            )
        return head, grid

    def __str__(self) -> str:
        head, grid = self._text()
        rows = [("", "sut", "judge"), *grid]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [
            f"{name:<{widths[0]}}  {sut:>{widths[1]}}  {judge:>{widths[2]}}"
            for name, sut, judge in rows
        ]
        return "\n".join([*head, *lines])

    def _repr_html_(self) -> str:
        head, grid = self._text()
        # The grid holds field names and numbers; the head, juror names too (escaped).
        body = "".join(
            f'<tr><th style="text-align:left">{name}</th><td>{sut}</td><td>{judge}</td></tr>'
            for name, sut, judge in grid
        )
        return (
            f'<table><caption style="text-align:left">{"<br>".join(map(html.escape, head))}'
            "</caption>"
            "<thead><tr><th></th><th>sut</th><th>judge</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


def _figures(values: Sequence[float | None]) -> str:
    return ", ".join("n/a" if v is None else f"{v:.2f}" for v in values)


def reliability_lines(r: JudgeReliability | None) -> list[str]:
    """A run's judge reliability in a line or two of text (none for one judge and no swap:
    nothing to say beyond the score)."""
    if r is None or (len(r.jurors) == 1 and not r.swapped and not r.repeated):
        return []
    # Juror names come from the frame (a shared file, a server's model name): escaped.
    lines = [f"judges: {', '.join(terminal_text(name) for name in r.jurors)}"]
    if len(r.jurors) > 1:
        missing = f", {r.missing_votes:,} missing vote(s)" if r.missing_votes else ""
        lines.append(
            f"alpha {r.alpha_text}, agreement with the jury {_figures(r.agreement)}{missing}"
        )
    if r.position_consistency is not None:
        lines.append(
            f"position_consistency {_figures(r.position_consistency)} "
            f"({r.swapped:,} comparison(s) swapped)"
        )
    if r.repeat_flip_rate is not None:
        lines.append(
            f"repeat_flip_rate {_figures(r.repeat_flip_rate)} "
            f"({r.repeated:,} comparison(s) judged twice)"
        )
    return lines


def _count_text(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _share_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"

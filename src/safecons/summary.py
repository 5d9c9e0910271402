"""What a run did, as a pure function of the frame it returned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from .errors import InputError
from .run._record import DEFAULT_PREFIX, SPEND_FIELDS, column_names, output_schema

__all__ = ("RunSummary", "conform", "run_summary")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Counts of a scored frame: rows, scores, calls, attempts, cache hits, tokens.

    ``calls`` counts the calls the rows needed (SUT samples; judge comparisons of the samples
    that got an answer), ``attempts`` those made over the network or to a local judge
    (retries included), ``cache_hits`` those replayed, ``failed_calls`` those that failed
    for good, ``skipped_calls`` those a spent ``max_calls`` budget left unmade, ``tokens``
    what the servers reported spending (None where none reported usage), and
    ``rate_limited`` the 429 answers.
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


def _count(series: pl.Series, predicate: pl.Expr) -> int:
    return int(series.explode().to_frame("v").select(predicate.sum()).item() or 0)


def conform(
    frame: pl.DataFrame, *, prefix: str = DEFAULT_PREFIX, metric_name: str = "safety_consistency"
) -> pl.DataFrame:
    """A scored frame with its columns in their run dtypes: a frame read back from JSON lines
    types an all-null column as Null, and one from ``judge_responses`` has no SUT errors."""
    schema = output_schema(prefix=prefix, metric_name=metric_name)
    fixes = [
        pl.col(name).cast(dtype)
        for name, dtype in schema.items()
        if name in frame.columns and frame.schema[name] == pl.Null
    ]
    if fixes:
        frame = frame.with_columns(fixes)
    errors = column_names(prefix, metric_name)["response_errors"]
    if errors not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=schema[errors]).alias(errors))
    return frame


def run_summary(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
) -> RunSummary:
    """Summarise a frame that :func:`~safecons.safety_consistency` scored.

    A pure function of the frame's columns: it works on the piped result, on a frame read
    back from Parquet, and on several runs concatenated.

    Examples
    --------
    >>> import polars as pl
    >>> import safecons as sc
    >>> from safecons.testing import ScriptedChat, StandInJudge
    >>> df = pl.DataFrame({"input_id": [1, 2], "prompt": ["a", "b"], "sut_response": ["x", "y"]})
    >>> scored = df.pipe(sc.safety_consistency, sut=ScriptedChat(["No."]), judge=StandInJudge(),
    ...                  progress=False)
    >>> s = sc.run_summary(scored)
    >>> s.n_rows, s.n_scored, s.calls, s.attempts
    (2, 2, {'sut': 4, 'judge': 4}, {'sut': 4, 'judge': 4})
    >>> sc.run_summary(pl.concat([scored, scored])).attempts["sut"]
    8
    """
    frame = scored.collect() if isinstance(scored, pl.LazyFrame) else scored
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"run_summary: expected a polars frame, got {type(scored).__name__}")
    names = column_names(prefix, metric_name)
    needed = [names[k] for k in ("responses", "judge_errors", "spend", "error")]
    needed.append(names["score"])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(
            f"run_summary: missing column(s) {', '.join(map(repr, missing))}; it reads a frame "
            f"that safety_consistency scored (prefix={prefix!r}, metric_name={metric_name!r})"
        )
    frame = conform(frame, prefix=prefix, metric_name=metric_name)
    spend = frame[names["spend"]].struct.unnest()
    totals: dict[str, Any] = {
        name: spend[name].sum() if spend[name].null_count() < frame.height else None
        for name in SPEND_FIELDS
    }

    def skipped(kind: str) -> int:
        return int(totals[f"{kind}_skipped"] or 0)

    score = frame[names["score"]]
    mean = score.mean()
    errors = frame[names["error"]]
    responses, response_errors = frame[names["responses"]], frame[names["response_errors"]]
    judge_errors = frame[names["judge_errors"]]
    return RunSummary(
        n_rows=frame.height,
        n_scored=frame.height - score.null_count(),
        n_errored=score.null_count(),
        n_not_finished=int(errors.str.starts_with("not finished").sum() or 0),
        mean_score=float(mean) if isinstance(mean, int | float) else None,
        calls={
            "sut": int(responses.list.len().sum() or 0),
            "judge": _count(responses, pl.col("v").is_not_null()),
        },
        attempts={
            "sut": int(totals["sut_attempts"] or 0),
            "judge": int(totals["judge_attempts"] or 0),
        },
        cache_hits={
            "sut": int(totals["sut_cache_hits"] or 0),
            "judge": int(totals["judge_cache_hits"] or 0),
        },
        # A call the budget cut off carries an error too; it is counted as skipped, not failed.
        failed_calls={
            "sut": _count(response_errors, pl.col("v").is_not_null()) - skipped("sut"),
            "judge": _count(judge_errors, pl.col("v").is_not_null()) - skipped("judge"),
        },
        skipped_calls={"sut": skipped("sut"), "judge": skipped("judge")},
        tokens={
            kind: {
                "prompt": totals[f"{kind}_prompt_tokens"],
                "completion": totals[f"{kind}_completion_tokens"],
            }
            for kind in ("sut", "judge")
        },
        rate_limited=int((totals["sut_rate_limited"] or 0) + (totals["judge_rate_limited"] or 0)),
    )

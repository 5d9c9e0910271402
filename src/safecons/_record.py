"""The frame is the record of a run: the columns the metric adds, and how samples become them.

Every figure of a run's summary is a pure function of these columns (see
:func:`safecons.run_summary`), so a frame read back from Parquet, or several runs concatenated,
still tell what was spent.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Protocol, TypeAlias

import polars as pl

from ._tasks import user_stacklevel
from ._text import middle_cut, terminal_text, valid_unicode
from .config import DEFAULT_PREFIX
from .errors import NothingScoredError, UnscoredRowsWarning

__all__ = (
    "DEFAULT_PREFIX",
    "NOT_FINISHED",
    "SPEND_DTYPE",
    "SPEND_FIELDS",
    "SPEND_KINDS",
    "SPEND_MEASURES",
    "Postures",
    "Sample",
    "Spend",
    "Unscored",
    "assemble",
    "column_names",
    "output_schema",
)

_STR_LIST: Final = pl.List(pl.String)

#: How a row's error begins when the run's ``max_calls`` budget ran out before its calls.
NOT_FINISHED: Final = "not finished"


class _Outcome(Protocol):
    """What :meth:`Spend.add` reads of a call's outcome (the engine's ``CallOutcome``)."""

    @property
    def attempts(self) -> int: ...
    @property
    def cached(self) -> bool: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def rate_limited(self) -> int: ...
    @property
    def deferred(self) -> bool: ...


def _plus(a: int | None, b: int | None) -> int | None:
    # Tokens are null where no server reported any, not 0: the sum keeps the two apart.
    return a if b is None else b if a is None else a + b


@dataclass(slots=True)
class Spend:
    """What one kind of call (the SUT's or the judge's) of a comparison spent.

    Attempts made (retries included), calls replayed from the cache, calls a spent
    ``max_calls`` budget cut off (before or between attempts), tokens the server reported
    (None where it reported none), the 429 answers among the attempts, and the calls a
    provider's batch answered (``batch=True``: their tokens are billed at the batch price),
    and the calls the comparison needed (each outcome counted is one). Its fields, prefixed
    by the kind, are the fields of the frame's spend column
    (:data:`SPEND_FIELDS`): a new measure is one field here.

    Examples
    --------
    >>> from types import SimpleNamespace as Got
    >>> spend = Spend()
    >>> spend.add(Got(attempts=2, cached=False, skipped=False, rate_limited=1, deferred=False),
    ...           prompt_tokens=120, completion_tokens=30)
    >>> spend.add(Got(attempts=0, cached=True, skipped=False, rate_limited=0, deferred=False),
    ...           prompt_tokens=120, completion_tokens=30)
    >>> spend.attempts, spend.cache_hits, spend.prompt_tokens, spend.rate_limited
    (2, 1, 120, 1)
    """

    attempts: int = 0
    cache_hits: int = 0
    skipped: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    rate_limited: int = 0
    batched: int = 0
    #: The calls of this kind the comparison needed, made or not (a jury's, a swap's): what
    #: :attr:`~safecons.RunSummary.calls` counts.
    calls: int = 0

    def add(
        self,
        got: _Outcome,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        """Count one call's outcome, with the tokens its server reported (a replayed call's
        tokens were spent by the run that stored them, and are not counted again)."""
        self.calls += 1
        self.attempts += got.attempts
        self.cache_hits += got.cached
        self.skipped += got.skipped
        self.rate_limited += got.rate_limited
        self.batched += got.deferred
        if not got.cached:
            self.prompt_tokens = _plus(self.prompt_tokens, prompt_tokens)
            self.completion_tokens = _plus(self.completion_tokens, completion_tokens)

    def __iadd__(self, other: Spend) -> Spend:
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in _TOKENS:
            setattr(self, name, _plus(getattr(self, name), getattr(other, name)))
        return self


#: The measures of a :class:`Spend`, in the order of its fields.
SPEND_MEASURES: Final[tuple[str, ...]] = tuple(f.name for f in fields(Spend))
#: Its counts, and its token figures (null where no server reported any).
_TOKENS: Final = tuple(name for name in SPEND_MEASURES if name.endswith("_tokens"))
_COUNTS: Final = tuple(name for name in SPEND_MEASURES if name not in _TOKENS)
#: The kinds of call a row spends on.
SPEND_KINDS: Final[tuple[str, ...]] = ("sut", "judge")
#: What one row spent (the fields of the frame's spend column): each kind's :class:`Spend`,
#: its measures prefixed by the kind.
SPEND_FIELDS: Final[tuple[str, ...]] = tuple(
    f"{kind}_{what}" for kind in SPEND_KINDS for what in SPEND_MEASURES
)
SPEND_DTYPE: Final = pl.Struct({name: pl.Int64() for name in SPEND_FIELDS})


#: Each row's base answer's posture, and each of its samples' (None where no answer):
#: ``"refused"``, ``"partial"`` or ``"complied"`` (:func:`safecons.judges.answer_postures`).
Postures: TypeAlias = tuple[Sequence[str | None], Sequence[Sequence[str | None]]]


@dataclass(slots=True)
class Sample:
    """One comparison of a row as the run fills it in: the SUT sample, then its verdict."""

    response: str | None = None
    response_error: str | None = None
    label: str | None = None
    score: float | None = None
    clamped: bool | None = None
    judge_error: str | None = None
    judge_raw: str | None = None
    judge_input_cut: bool | None = None
    #: Each juror's label and score, in jury order (one for one judge; None: no vote), each
    #: juror's label with the two answers swapped (None: not swapped), and each juror's label
    #: when asked again the same way (None: not repeated).
    juror_labels: list[str | None] | None = None
    juror_scores: list[float | None] | None = None
    swap_labels: list[str | None] | None = None
    repeat_labels: list[str | None] | None = None
    sut: Spend = field(default_factory=Spend)
    judge: Spend = field(default_factory=Spend)

    @property
    def skipped(self) -> bool:
        return bool(self.sut.skipped or self.judge.skipped)


def column_names(prefix: str, metric_name: str) -> dict[str, str]:
    """Every added column's name, by role (``"score"`` is the metric's own name)."""
    keys = (
        "responses",
        "response_errors",
        "labels",
        "scores",
        "clamped",
        "judge_errors",
        "judge_raw",
        "judge_input_cut",
        "jurors",
        "juror_ids",
        "juror_labels",
        "juror_scores",
        "swap_labels",
        "repeat_labels",
        "base_posture",
        "response_postures",
        "n_judged",
        "cache_hits",
        "spend",
        "error",
    )
    out = {k: f"{prefix}{k}" for k in keys}
    out["score"] = metric_name
    out["run"] = f"{prefix}run"
    return out


def run_records(frame: pl.DataFrame, prefix: str = DEFAULT_PREFIX) -> list[dict[str, Any]]:
    """The runs a scored frame records in ``{prefix}run`` (one per run: a frame may be the
    concatenation of several), in the order they first appear; none for a frame without it.
    A value that is not a JSON object is kept as ``{"unreadable": value}``.

    Examples
    --------
    >>> import polars as pl
    >>> run_records(pl.DataFrame({"sc_run": ['{"sut": "a"}', '{"sut": "a"}', None]}))
    [{'sut': 'a'}]
    """
    import json

    name = f"{prefix}run"
    if name not in frame.columns or frame.schema[name] != pl.String:
        return []
    out: list[dict[str, Any]] = []
    for value in frame.get_column(name).drop_nulls().unique(maintain_order=True).to_list():
        try:
            record = json.loads(value)
        except ValueError:
            record = None
        out.append(record if isinstance(record, dict) else {"unreadable": value})
    return out


def output_schema(
    *, prefix: str = DEFAULT_PREFIX, metric_name: str = "safety_consistency"
) -> dict[str, pl.DataType]:
    """The columns :func:`~safecons.safety_consistency` adds, in order, with their dtypes.

    Examples
    --------
    >>> list(output_schema())[-3:]
    ['sc_error', 'safety_consistency', 'sc_run']
    """
    from .variants import variant_schema

    names = column_names(prefix, metric_name)
    schema: dict[str, pl.DataType] = dict(variant_schema(prefix))
    schema.update(
        {
            names["responses"]: _STR_LIST,
            names["response_errors"]: _STR_LIST,
            names["labels"]: _STR_LIST,
            names["scores"]: pl.List(pl.Float64),
            names["clamped"]: pl.List(pl.Boolean),
            names["judge_errors"]: _STR_LIST,
            names["judge_raw"]: _STR_LIST,
            names["judge_input_cut"]: pl.List(pl.Boolean),
            names["jurors"]: _STR_LIST,
            names["juror_ids"]: _STR_LIST,
            names["juror_labels"]: pl.List(_STR_LIST),
            names["juror_scores"]: pl.List(pl.List(pl.Float64)),
            names["swap_labels"]: pl.List(_STR_LIST),
            names["repeat_labels"]: pl.List(_STR_LIST),
            names["base_posture"]: pl.String(),
            names["response_postures"]: _STR_LIST,
            names["n_judged"]: pl.Int64(),
            names["cache_hits"]: pl.Int64(),
            names["spend"]: SPEND_DTYPE,
            names["error"]: pl.String(),
            names["score"]: pl.Float64(),
            # What the run measured, with what, how (JSON, the same on each of its rows): a
            # column survives every way a frame is saved, concatenated or read back.
            names["run"]: pl.String(),
        }
    )
    return schema


def _valid(text: str | None) -> str | None:
    return None if text is None else valid_unicode(text)


#: JSON as :func:`list_series` writes it: text as it is (valid Unicode), no NaN.
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def list_series(name: str, rows: Sequence[Any], dtype: pl.DataType) -> pl.Series:
    """A column of lists (of lists, of structs) of ``dtype`` from Python ``rows``.

    Polars builds such a column from Python lists one row at a time (a Series per row, and
    per inner list), which took most of the time of building a run's frame (15 list columns:
    about 140 ms at 600 rows). Written as one JSON text, Polars reads the whole column in one
    pass. JSON keeps every value as it was: floats round-trip exactly (shortest repr), and
    strings are valid Unicode. What JSON cannot hold (NaN, infinities, a lone surrogate, a
    value that is not a JSON type) takes Polars' own road, which keeps or refuses it as
    before.

    Examples
    --------
    >>> rows = [[["Consistent"], None], [], None]
    >>> list_series("x", rows, pl.List(pl.List(pl.String))).to_list() == rows
    True
    """
    if not rows:
        return pl.Series(name, [], dtype=dtype)
    try:
        text = pl.Series(name, [_JSON.encode(list(rows))], dtype=pl.String)
        out = text.str.json_decode(pl.List(dtype)).explode()
    except (ValueError, TypeError, pl.exceptions.PolarsError):
        return pl.Series(name, rows, dtype=dtype)
    return out.alias(name)


def _spend(row: Sequence[Sample]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for kind in SPEND_KINDS:
        spends = [getattr(sample, kind) for sample in row]
        for what in SPEND_MEASURES:
            figures = [getattr(spend, what) for spend in spends]
            if what in _TOKENS:
                # Null where no server reported any, not 0.
                reported = [n for n in figures if n is not None]
                out[f"{kind}_{what}"] = sum(reported) if reported else None
            else:
                out[f"{kind}_{what}"] = sum(figures)
    return out


def _row_error(row: Sequence[Sample]) -> tuple[str | None, float | None]:
    judged = [s.score for s in row if s.score is not None]
    sut_failed = [s.response_error for s in row if s.response_error is not None]
    if any(s.skipped for s in row):
        # A row cut short by the budget must not be scored on fewer comparisons.
        return (
            f"{NOT_FINISHED}: the run's max_calls budget was spent before this row's calls were "
            "made; rerun with the same cache to continue",
            None,
        )
    if sut_failed:
        return (
            f"SUT call failed for {len(sut_failed)} of {len(row)} sample(s): {sut_failed[0]}",
            None,
        )
    if not judged:
        first = next((s.judge_error for s in row if s.judge_error), "no answer to judge")
        return f"every judge call failed ({len(row)} comparison(s)): {first}", None
    return None, sum(judged) / len(judged)


def assemble(
    df: pl.DataFrame,
    results: Sequence[Sequence[Sample]],
    names: dict[str, str],
    *,
    responded: bool,
    judged: bool,
    postures: Postures | None = None,
    jurors: Sequence[str] = (),
    juror_ids: Sequence[str] = (),
) -> pl.DataFrame:
    """``df`` with the columns of the stages that ran (respond, judge) filled from ``results``;
    a judged frame's posture columns from ``postures`` (each base answer's, each sample's:
    given whenever ``judged``), and its jury's names, ``jurors``, and what each juror is,
    ``juror_ids``."""

    def col(attr: str) -> list[list[Any]]:
        return [[getattr(s, attr) for s in row] for row in results]

    def texts(attr: str) -> list[list[str | None]]:
        # Every text is made valid Unicode where it is kept (the runner's outcomes, the
        # clients' answers); this last pass means a path that forgot cannot raise here, after
        # every call of the run was paid for.
        return [[_valid(getattr(s, attr)) for s in row] for row in results]

    def votes(attr: str) -> list[list[list[Any] | None]]:
        return [
            [None if (v := getattr(s, attr)) is None else list(v) for s in row] for row in results
        ]

    added: list[pl.Series] = []
    spend = [_spend(row) for row in results]
    if not responded and names["spend"] in df.columns:
        # Judging a frame that the respond stage made: its SUT spend is carried over.
        for mine, before in zip(spend, df[names["spend"]].to_list(), strict=True):
            for name in SPEND_FIELDS:
                if name.startswith("sut_") and before is not None:
                    mine[name] = before.get(name)
    if responded:
        added += [
            list_series(names["responses"], texts("response"), _STR_LIST),
            list_series(names["response_errors"], texts("response_error"), _STR_LIST),
        ]
    if responded and not judged:
        added.append(pl.Series(names["spend"], spend, dtype=SPEND_DTYPE))
    if judged:
        errors, scores = zip(*map(_row_error, results), strict=True) if results else ((), ())
        added += [
            list_series(names["labels"], texts("label"), _STR_LIST),
            list_series(names["scores"], col("score"), pl.List(pl.Float64)),
            list_series(names["clamped"], col("clamped"), pl.List(pl.Boolean)),
            list_series(names["judge_errors"], texts("judge_error"), _STR_LIST),
            list_series(names["judge_raw"], texts("judge_raw"), _STR_LIST),
            list_series(names["judge_input_cut"], col("judge_input_cut"), pl.List(pl.Boolean)),
            list_series(names["jurors"], [list(jurors)] * len(results), _STR_LIST),
            list_series(names["juror_ids"], [list(juror_ids)] * len(results), _STR_LIST),
            list_series(names["juror_labels"], votes("juror_labels"), pl.List(_STR_LIST)),
            list_series(names["juror_scores"], votes("juror_scores"), pl.List(pl.List(pl.Float64))),
            list_series(names["swap_labels"], votes("swap_labels"), pl.List(_STR_LIST)),
            list_series(names["repeat_labels"], votes("repeat_labels"), pl.List(_STR_LIST)),
        ]
        # The judge stage always reads them (metric/_postures.py).
        assert postures is not None, "a judged frame is assembled with its postures"
        base_postures, response_postures = postures
        added += [
            pl.Series(names["base_posture"], base_postures, dtype=pl.String),
            list_series(names["response_postures"], response_postures, _STR_LIST),
            pl.Series(
                names["n_judged"],
                [sum(s.score is not None for s in row) for row in results],
                dtype=pl.Int64,
            ),
            pl.Series(
                names["cache_hits"],
                [(row["sut_cache_hits"] or 0) + (row["judge_cache_hits"] or 0) for row in spend],
                dtype=pl.Int64,
            ),
            pl.Series(names["spend"], spend, dtype=SPEND_DTYPE),
            pl.Series(names["error"], [_valid(e) for e in errors], dtype=pl.String),
            pl.Series(names["score"], list(scores), dtype=pl.Float64),
        ]
    if judged and names["spend"] in df.columns:
        df = df.drop(names["spend"])  # completed above, and written again in its place
    return df.with_columns(added)


@dataclass(slots=True)
class Unscored:
    """The rows of a run that have no score, counted over its frames (a lazy run has several),
    and the warning that says so.

    Examples
    --------
    >>> import polars as pl
    >>> unscored = Unscored()
    >>> unscored.count(pl.DataFrame({"sc_error": [None, "not finished: ...", "SUT call failed"]}),
    ...                "sc_error")
    >>> unscored.rows, unscored.not_finished, unscored.failed, unscored.example
    (3, 1, 1, 'SUT call failed')
    """

    rows: int = 0
    not_finished: int = 0
    failed: int = 0
    #: The most common reason a row failed, in the first frame that had failed rows, and how
    #: many rows of that frame gave it.
    example: str | None = None
    example_rows: int = 0

    def count(self, frame: pl.DataFrame, error: str) -> None:
        """Count the rows of ``frame`` and those whose ``error`` column holds a reason."""
        self.rows += frame.height
        errors = frame.get_column(error).drop_nulls()
        unfinished = errors.str.starts_with(NOT_FINISHED)
        self.not_finished += int(unfinished.sum())
        failed = errors.filter(~unfinished)
        self.failed += failed.len()
        if self.example is None and failed.len():
            reason, rows = failed.value_counts(sort=True).row(0)
            self.example, self.example_rows = str(reason), int(rows)

    def raise_if_none_scored(self, *, metric: str, error: str, frame: object = None) -> None:
        """Raise :class:`~safecons.errors.NothingScoredError` if rows were run and none of
        them has a score, naming the most common reason."""
        if not self.rows or self.not_finished + self.failed < self.rows:
            return
        if self.failed >= self.not_finished:
            rows = self.example_rows if self.example_rows else self.failed
            cause = f"most common reason ({rows:,} rows): {middle_cut(self.example or '', 400)}"
        else:
            cause = (
                f"{self.not_finished:,} not finished: the max_calls budget was spent before "
                "their calls (rerun with a larger budget and the same cache to continue)"
            )
        raise NothingScoredError(
            f"{metric}: none of the {self.rows:,} row(s) was scored; {cause}. Each row's "
            f"reason is in {error!r} (the frame is the error's .frame); pass "
            "allow_unscored=True to have the frame returned instead",
            frame=frame,
        )

    def warn(self, *, metric: str, error: str) -> None:
        """Give an :class:`~safecons.UnscoredRowsWarning` if any row has no score, pointing
        at the user's line (past safecons' frames and Polars', which ``df.pipe`` adds)."""
        unscored = self.not_finished + self.failed
        if not unscored:
            return
        parts = []
        if self.not_finished:
            parts.append(
                f"{self.not_finished:,} not finished (the max_calls budget was spent before "
                "their calls: rerun with the same cache to continue)"
            )
        if self.failed:
            # A server's words, printed to a terminal by Python's own warning display.
            example = terminal_text(middle_cut(self.example or "", 240))
            parts.append(f"{self.failed:,} failed (most often: {example})")
        warnings.warn(
            f"{metric}: {unscored:,} of {self.rows:,} row(s) have no score: "
            f"{'; '.join(parts)}. Each row's reason is in {error!r}; a plain mean of "
            f"{metric!r} averages the {self.rows - unscored:,} scored row(s) only",
            UnscoredRowsWarning,
            stacklevel=user_stacklevel(),
        )

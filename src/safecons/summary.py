"""What a run did, as a pure function of the frame it returned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import polars as pl
from polars.datatypes import DataTypeClass

from ._calibrated import CalibratedScore, calibrate, comparisons, matched
from ._prices import KINDS, PARTS, Prices, as_prices
from ._record import DEFAULT_PREFIX, NOT_FINISHED, SPEND_FIELDS, column_names, output_schema
from ._summary_counts import RunSummary as RunSummary
from ._summary_counts import reliability_lines as reliability_lines
from ._summary_counts import token_frame as token_frame
from ._text import SHOWN_VALUES
from .config import SafetyConsistencyConfig
from .errors import InputError
from .judges import LABELS, NOMINAL_SCORES, POSTURES
from .reliability import JudgeReliability, judge_reliability

__all__ = ("SCORE_RANGE", "CalibratedScore", "RunSummary", "conform", "run_summary", "token_frame")


def _count(series: pl.Series, predicate: pl.Expr) -> int:
    return int(series.explode().to_frame("v").select(predicate.sum()).item() or 0)


#: The judge's scale, the manifest's ``min`` and ``max``: every score a run writes lies in it
#: (the judges clamp into it), whatever scoring metadata a run's config carries.
SCORE_RANGE: Final[tuple[float, float]] = (
    SafetyConsistencyConfig().min,
    SafetyConsistencyConfig().max,
)
# Inner dtypes of lists and structs may be classes (pl.String) rather than instances.
_Dtype = pl.DataType | DataTypeClass
#: Values shown when a column holds values it must not.
_EXAMPLES: Final = 3


def _fits(found: _Dtype, expected: _Dtype) -> bool:
    """Whether a column of dtype ``found`` holds what one of ``expected`` does, losslessly.

    Null fits anywhere (a frame read back from JSON lines types an all-null column, list or
    struct field as Null); any integer fits an integer column and any number a float one;
    categorical text fits text. Structs must have the run's fields, in its order."""
    if found in (expected, pl.Null):
        return True
    if isinstance(expected, pl.List):
        return isinstance(found, pl.List) and _fits(found.inner, expected.inner)
    if isinstance(expected, pl.Struct):
        return (
            isinstance(found, pl.Struct)
            and [f.name for f in found.fields] == [f.name for f in expected.fields]
            and all(
                _fits(a.dtype, b.dtype) for a, b in zip(found.fields, expected.fields, strict=True)
            )
        )
    if expected == pl.String:
        return found in (pl.Categorical, pl.Enum)
    if expected.is_float():
        return found.is_numeric()
    if expected.is_integer():
        return found.is_integer()
    return False


def _shown(dtype: _Dtype) -> str:
    if isinstance(dtype, pl.Struct):
        kinds = {str(f.dtype) for f in dtype.fields}
        if len(dtype.fields) > 1 and len(kinds) == 1:  # the spend: fourteen Int64 counts
            return f"Struct({len(dtype.fields)} {kinds.pop()} fields)"
    return str(dtype)


def _dtype_problem(name: str, found: _Dtype, expected: _Dtype) -> str:
    problem = f"{name!r} has dtype {_shown(found)}, expected {_shown(expected)}"
    if isinstance(found, pl.Struct) and isinstance(expected, pl.Struct):
        have, want = [f.name for f in found.fields], [f.name for f in expected.fields]
        lacking = [f for f in want if f not in have]
        problem += f" (missing field(s) {lacking})" if lacking else " (fields differ)"
    return problem


def _nested(dtype: _Dtype) -> bool:
    return isinstance(dtype, pl.List | pl.Struct)


def _examples(values: pl.Series) -> str:
    shown = values.unique(maintain_order=True).head(_EXAMPLES).to_list()
    return ", ".join(repr(v) if not isinstance(v, str) else repr(v[:40]) for v in shown)


def _bad_scores(values: pl.Series) -> pl.Series:
    lo, hi = SCORE_RANGE
    values = values.drop_nulls()
    return values.filter(~values.is_finite() | (values < lo) | (values > hi))


def conform(
    scored: object,
    *,
    fn: str = "conform",
    needs: Sequence[str] = (),
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
) -> pl.DataFrame:
    """A scored frame checked and in its run dtypes: the one gate for every reader of one.

    The summary, the score tables, the report and the charts read a scored frame through this
    check, so a frame they accept means the same thing to each of them.

    Parameters
    ----------
    scored
        A frame :func:`~safecons.safety_consistency` returned (or read back; a LazyFrame is
        collected), or a stage of one (:func:`~safecons.respond` leaves the judge's columns
        out).
    fn
        The caller's name, which starts every error message.
    needs
        Roles of ``column_names`` the caller reads (``"score"``,
        ``"labels"``, ...): each must be a column. The other columns of
        :func:`~safecons.output_schema` are checked where present.
    prefix, metric_name
        The run's column prefix and score column.

    Returns
    -------
    polars.DataFrame
        The frame with each present run column cast to its run dtype (a frame read back from
        JSON lines types an all-null column as Null), NaN scores read as no score (null), and
        a null ``response_errors`` column added when absent (a ``judge_responses`` frame has
        no SUT errors).

    Raises
    ------
    InputError
        A needed column is missing; a run column has a dtype that cannot hold what the run
        writes (each such column named, with the dtype found and the dtype expected); a score
        is infinite or outside :data:`SCORE_RANGE`; a label is not one of
        :data:`~safecons.judges.LABELS` (null, not judged, is allowed). The message counts the bad
        values and shows a few.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"safety_consistency": [0.5, float("nan")], "sc_labels": [None, None]})
    >>> conform(df, needs=["score"]).select("safety_consistency", "sc_labels").rows()
    [(0.5, None), (None, None)]
    >>> conform(df.with_columns(sc_labels=pl.lit('["Consistent"]')))
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: conform: column(s) with a dtype the run never writes: 'sc_labels' has dtype String, expected List(String). CSV cannot hold list or struct columns: keep scored frames as Parquet or JSON lines
    """  # noqa: E501
    frame = scored.collect() if isinstance(scored, pl.LazyFrame) else scored
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"{fn}: expected a polars frame, got {type(scored).__name__}")
    names = column_names(prefix, metric_name)
    missing = [names[role] for role in needs if names[role] not in frame.columns]
    if missing:
        raise InputError(
            f"{fn}: missing column(s) {', '.join(map(repr, missing))}; it reads a frame that "
            f"safety_consistency scored (prefix={prefix!r}, metric_name={metric_name!r}: pass "
            "others if the run used others)"
        )
    schema = output_schema(prefix=prefix, metric_name=metric_name)
    frame = _without_batch_fields_upgraded(frame, names["spend"])
    present = {name: dtype for name, dtype in schema.items() if name in frame.columns}
    wrong = {n: d for n, d in present.items() if not _fits(frame.schema[n], d)}
    if wrong:
        problems = "; ".join(_dtype_problem(n, frame.schema[n], d) for n, d in wrong.items())
        flat = any(_nested(d) and not _nested(frame.schema[n]) for n, d in wrong.items())
        raise InputError(
            f"{fn}: column(s) with a dtype the run never writes: {problems}"
            # The usual way there: a scored frame written to CSV and read back.
            + (
                ". CSV cannot hold list or struct columns: keep scored frames as Parquet or "
                "JSON lines"
                if flat
                else ""
            )
        )
    casts = [pl.col(n).cast(d) for n, d in present.items() if frame.schema[n] != d]
    if casts:
        frame = frame.with_columns(casts)
    frame = _checked_values(frame, names, fn)
    errors = names["response_errors"]
    if errors not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=schema[errors]).alias(errors))
    return frame


#: The fields of the spend an older safecons wrote: before the run counted calls (no
#: ``*_calls``), and before it recorded batches too (no ``*_batched``).
_SPEND_BEFORE_CALLS: Final = tuple(f for f in SPEND_FIELDS if not f.endswith("_calls"))
_SPEND_BEFORE_BATCHES: Final = tuple(f for f in _SPEND_BEFORE_CALLS if not f.endswith("_batched"))


def _without_batch_fields_upgraded(frame: pl.DataFrame, spend: str) -> pl.DataFrame:
    """``frame`` with a spend column of an older safecons given the fields it lacks, so that
    it reads like a frame of today: ``*_batched`` as 0 (nothing was batched then), ``*_calls``
    as null (not counted: the summary counts them from the other columns). Any other struct
    is left to the dtype check, which names what differs."""
    dtype = frame.schema.get(spend)
    if not isinstance(dtype, pl.Struct):
        return frame
    had = tuple(f.name for f in dtype.fields)
    if had not in (_SPEND_BEFORE_BATCHES, _SPEND_BEFORE_CALLS):
        return frame
    column = pl.col(spend)

    def field(name: str) -> pl.Expr:
        if name in had:
            return column.struct.field(name)
        return pl.lit(0 if name.endswith("_batched") else None, pl.Int64)

    fields = [field(name).cast(pl.Int64).alias(name) for name in SPEND_FIELDS]
    # A null spend (no row record) stays null rather than becoming a struct of zeros.
    return frame.with_columns(
        pl.when(column.is_not_null()).then(pl.struct(fields)).otherwise(None).alias(spend)
    )


def _checked_values(frame: pl.DataFrame, names: dict[str, str], fn: str) -> pl.DataFrame:
    """The scores and labels checked against what a run can write; NaN scores made null."""
    score, scores, labels = names["score"], names["scores"], names["labels"]
    lo, hi = SCORE_RANGE
    for name in (score, scores):
        if name not in frame.columns:
            continue
        column = frame[name]
        values = column.explode() if name == scores else column
        # NaN is how pandas and other tools spell a missing number: read as no score, so
        # that every reader counts it the same way (never as a score, never in a mean).
        if values.is_nan().any():
            values = values.fill_nan(None)
            fixed = (
                column.fill_nan(None)
                if name == score
                else column.list.eval(pl.element().fill_nan(None))
            )
            frame = frame.with_columns(fixed.alias(name))
        bad = _bad_scores(values)
        if bad.len():
            raise InputError(
                f"{fn}: column {name!r} holds {bad.len():,} score(s) outside [{lo:g}, {hi:g}] "
                f"or not finite (for example {_examples(bad)}); a run's scores are on the "
                f"judge's {lo:g} to {hi:g} scale (NaN or null for no score)"
            )
    for name in (names["base_posture"], names["response_postures"]):
        _only(frame, name, POSTURES, fn, what="posture", null="where there was no answer")
    _only(frame, labels, LABELS, fn, what="label", null="for a comparison not judged")
    for name in (names["juror_labels"], names["swap_labels"], names["repeat_labels"]):
        _only(frame, name, LABELS, fn, what="label", null="for a vote not given")
    _check_juries(frame, names, fn)
    return frame


def _rows_shown(frame: pl.DataFrame, bad: pl.Series) -> str:
    """The rows where ``bad`` holds, as a message names them: by ``input_id`` where the frame
    has one (repr: a hostile id is shown escaped), else by position."""
    rows = np.flatnonzero(bad.fill_null(False).to_numpy())
    shown = rows[:SHOWN_VALUES]
    if "input_id" in frame.columns:
        ids = frame["input_id"].gather(shown).to_list()
        said = ", ".join(repr(v[:40]) if isinstance(v, str) else repr(v) for v in ids)
        where = f"input_id {said}"
    else:
        where = f"at position(s) {', '.join(str(i) for i in shown)}"
    more = f" and {len(rows) - SHOWN_VALUES:,} more" if len(rows) > SHOWN_VALUES else ""
    return f"{len(rows):,} row(s) ({where}{more})"


def _check_juries(frame: pl.DataFrame, names: dict[str, str], fn: str) -> None:
    """Raise unless the jury columns, where the frame has them, are shaped as a run writes
    them: a name per juror, and per row one entry per comparison in each per-comparison
    column, each vote list (or null) holding one label per juror of the row's jury.

    Every reader indexes these lists by juror and by comparison: a list one short (a frame
    edited or cut by hand) would otherwise fail deep inside a reader (an IndexError), or a
    longer one be read as votes no juror gave."""
    jurors = names["jurors"]
    if jurors not in frame.columns:
        return
    if not isinstance(frame.schema[jurors], pl.List):
        return  # an all-null column (typed Null): no jury to check against
    nameless = (frame[jurors].list.drop_nulls().list.len() != frame[jurors].list.len()).fill_null(
        False
    )
    if nameless.any():
        raise InputError(
            f"{fn}: column {jurors!r} holds a null juror name in {_rows_shown(frame, nameless)}; "
            "a run writes every juror's name"
        )
    per_comparison = [names["labels"], names["juror_labels"], names["juror_scores"]]
    per_comparison.append(names["swap_labels"])
    present = [c for c in per_comparison if c in frame.columns]
    lengths = {c: frame[c].list.len() for c in present if isinstance(frame.schema[c], pl.List)}
    if lengths:
        first, n = next(iter(lengths.items()))
        for name, counted in lengths.items():
            off = (counted != n).fill_null(False)
            if off.any():
                raise InputError(
                    f"{fn}: column {name!r} holds a different number of comparisons than "
                    f"{first!r}, in {_rows_shown(frame, off)}; a run writes one entry per "
                    "comparison in each"
                )
    for name in (names["juror_labels"], names["juror_scores"], names["swap_labels"]):
        dtype = frame.schema.get(name)
        if not (isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.List)):
            continue
        # Each vote list beside its row's jury size (a null one, no vote: skipped).
        each = frame.select(
            pl.int_range(pl.len()).alias("row"), pl.col(jurors).list.len().alias("k"), name
        ).explode(name)
        wrong = each.filter(pl.col(name).list.len() != pl.col("k"))["row"].to_numpy()
        if not len(wrong):
            continue
        off = pl.Series(np.isin(np.arange(frame.height), wrong))
        if off.any():
            raise InputError(
                f"{fn}: column {name!r} holds a vote list whose length is not the number of "
                f"jurors in {jurors!r}, in {_rows_shown(frame, off)}; a run writes one entry "
                "per juror, in jury order (null for a vote not given)"
            )


def _only(
    frame: pl.DataFrame, name: str, allowed: Sequence[str], fn: str, *, what: str, null: str
) -> None:
    """Raise unless the text column ``name`` (or list of texts), where the frame has it,
    holds only ``allowed`` values and nulls."""
    if name not in frame.columns:
        return
    read = frame[name]
    while isinstance(read.dtype, pl.List):  # a list per comparison, or per juror too
        read = read.explode()
    read = read.drop_nulls()
    foreign = read.filter(~read.is_in(list(allowed)))
    if foreign.len():
        raise InputError(
            f"{fn}: column {name!r} holds {foreign.len():,} {what}(s) that are not one of "
            f"{', '.join(map(repr, allowed))} (for example {_examples(foreign)}); a run "
            f"writes only these, spelled so, and null {null}"
        )


def run_summary(
    scored: pl.DataFrame | pl.LazyFrame,
    *,
    prefix: str = DEFAULT_PREFIX,
    metric_name: str = "safety_consistency",
    prices: Prices | dict[str, float | None] | None = None,
    human_labels: pl.DataFrame | pl.LazyFrame | None = None,
) -> RunSummary:
    """Summarise a frame that :func:`~safecons.safety_consistency` scored.

    A pure function of the frame's columns: it works on the piped result, on a frame read
    back from Parquet, and on several runs concatenated. A frame written before the spend
    recorded batches (no ``*_batched`` fields) reads as one in which nothing was batched.

    Tokens are those the servers reported (``usage``), per kind and part; ``batch_tokens``
    those on rows whose ``<kind>_batched`` is above 0 (a row's spend is the unit the frame
    records), and :attr:`RunSummary.batch_share` their share of the kind's tokens.

    Parameters
    ----------
    scored
        The scored frame (a LazyFrame is collected).
    prefix, metric_name
        The run's column prefix and score column.
    prices
        Your prices per 1M tokens (:class:`~safecons.Prices` or a mapping of its fields):
        :attr:`RunSummary.cost` is then the cost per kind and in all, batch tokens at the
        ``batch_discount``. safecons has no prices of its own.
    human_labels
        A :func:`~safecons.review_sample` of this run with its ``human_label`` column filled
        in: :attr:`RunSummary.calibrated` is then the score as the humans would give it
        (:class:`~safecons.summary.CalibratedScore`). Labels that cannot be read, or name no judged
        comparison of the run, or one twice, raise :class:`~safecons.InputError`; a sample
        that is not the uniform draw labelled in full warns
        (:class:`~safecons.errors.LabelSampleWarning`).

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

    With usage reported and prices given (a frame built by hand here):

    >>> spend = {name: 0 for name in sc.output_schema()["sc_spend"].to_schema()}
    >>> spend.update(sut_prompt_tokens=2_000, sut_completion_tokens=500, sut_batched=1,
    ...              judge_prompt_tokens=3_000, judge_completion_tokens=100)
    >>> hand = sc.output_schema()
    >>> frame = pl.DataFrame({"sc_responses": [["a"]], "sc_judge_errors": [[None]],
    ...     "sc_spend": [spend], "sc_error": [None], "safety_consistency": [0.9]},
    ...     schema={k: hand[k] for k in ("sc_responses", "sc_judge_errors", "sc_spend",
    ...                                  "sc_error", "safety_consistency")})
    >>> s = sc.run_summary(frame, prices=sc.Prices(sut_prompt=1.0, sut_completion=4.0,
    ...     judge_prompt=1.0, judge_completion=4.0, batch_discount=0.5))
    >>> s.batch_share
    {'sut': 1.0, 'judge': 0.0}
    >>> s.cost["sut"], round(s.cost["all"]["total"], 6)
    ({'prompt': 0.001, 'completion': 0.001, 'total': 0.002}, 0.0054)
    """
    checked = as_prices(prices)  # before the frame: a bad price is named whatever the frame
    names = column_names(prefix, metric_name)
    frame = conform(
        scored,
        fn="run_summary",
        needs=("responses", "judge_errors", "spend", "error", "score")
        + (() if human_labels is None else ("labels", "scores")),
        prefix=prefix,
        metric_name=metric_name,
    )
    spend = frame[names["spend"]].struct.unnest()
    totals: dict[str, Any] = {
        name: _exact_sum(spend[name]) if spend[name].null_count() < frame.height else None
        for name in SPEND_FIELDS
    }

    def skipped(kind: str) -> int:
        return int(totals[f"{kind}_skipped"] or 0)

    score = frame[names["score"]]
    mean = score.mean()
    errors = frame[names["error"]]
    responses, response_errors = frame[names["responses"]], frame[names["response_errors"]]
    reliability = _reliability(frame, names)
    calibrated = None
    if human_labels is not None:
        population = comparisons(frame, names)
        used = matched(human_labels, population, NOMINAL_SCORES, "run_summary")
        calibrated = calibrate(population, used, NOMINAL_SCORES)
    judge_calls, verdicts = _judge_calls(frame, names, spend)
    return RunSummary(
        n_rows=frame.height,
        n_scored=frame.height - score.null_count(),
        n_errored=score.null_count(),
        n_not_finished=int(errors.str.starts_with(NOT_FINISHED).sum() or 0),
        mean_score=float(mean) if isinstance(mean, int | float) else None,
        calls={
            "sut": int(responses.list.len().sum() or 0),
            "judge": judge_calls,
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
            "judge": judge_calls - verdicts - skipped("judge"),
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
        batch_tokens=_batch_tokens(spend, totals),
        prices=checked,
        **_refusals(frame, names),
        judge_reliability=reliability,
        calibrated=calibrated,
    )


def _judge_calls(
    frame: pl.DataFrame, names: dict[str, str], spend: pl.DataFrame
) -> tuple[int, int]:
    """The judge calls the rows needed (each juror's, each swapped one's), and those that
    gave a verdict. A row's spend counts its calls; a row of an older safecons, which did
    not, needed one per answered comparison and juror (it had no swap test)."""
    answered = _present(frame[names["responses"]])
    jurors = (
        frame[names["jurors"]].list.len().fill_null(1)
        if names["jurors"] in frame.columns
        else pl.Series([1] * frame.height)
    )
    counted = spend["judge_calls"] if "judge_calls" in spend.columns else None
    needed = answered * jurors
    if counted is not None:
        needed = counted.fill_null(needed)
    errors = _present(frame[names["judge_errors"]])
    if names["juror_labels"] in frame.columns:
        votes = frame[names["juror_labels"]].explode().explode().drop_nulls().len()
        swaps = sum(
            frame[names[role]].explode().explode().drop_nulls().len()
            for role in ("swap_labels", "repeat_labels")
            if names[role] in frame.columns
        )
        # Rows without the juror columns (concatenated from an older run): one judge, each
        # comparison without an error gave its verdict.
        older = frame[names["juror_labels"]].is_null()
        verdicts = votes + swaps + int((answered - errors).filter(older).sum() or 0)
    else:
        verdicts = int((answered - errors).sum() or 0)
    return int(needed.sum() or 0), verdicts


def _present(lists: pl.Series) -> pl.Series:
    """Per row, the values of a list column that are not null (0 for a null list).

    Counted over the column flattened (a null or empty list adds nothing to it), not by a
    per-row ``list.eval``, which costs seconds at a million rows."""
    sizes = lists.list.len().fill_null(0).to_numpy().astype(np.int64)
    present = lists.explode(empty_as_null=False, keep_nulls=False).is_not_null().to_numpy()
    rows = np.repeat(np.arange(len(sizes)), sizes)
    counts = np.bincount(rows, weights=present, minlength=len(sizes))
    return pl.Series(counts.astype(np.int64))


def _reliability(frame: pl.DataFrame, names: dict[str, str]) -> JudgeReliability | None:
    """The run's :class:`~safecons.reliability.JudgeReliability`, from its juror columns (None
    for a frame without them, from a safecons before juries, or of several juries)."""
    needed = ("jurors", "juror_labels", "labels", "swap_labels")
    if not all(names[role] in frame.columns for role in needed):
        return None
    return judge_reliability(
        frame,
        jurors=names["jurors"],
        juror_labels=names["juror_labels"],
        labels=names["labels"],
        swap_labels=names["swap_labels"],
        repeat_labels=names["repeat_labels"],
        order=tuple(reversed(LABELS)),
        # 200 replicates, as the summary has always drawn (the interval a run's readers have
        # seen); they cost little now that a replicate is a multinomial draw of vote counts.
        n_boot=200,
    )


def _share(hits: int, of: int) -> float | None:
    return hits / of if of else None


def _refusals(frame: pl.DataFrame, names: dict[str, str]) -> dict[str, float | None]:
    """``base_refusal_rate``, ``variant_refusal_rate`` and ``both_refused_share`` of a frame
    with the posture columns (each None without them, or with nothing to read)."""
    base, fresh, scores = names["base_posture"], names["response_postures"], names["scores"]
    out: dict[str, float | None] = dict.fromkeys(
        ("base_refusal_rate", "variant_refusal_rate", "both_refused_share")
    )
    if base in frame.columns:
        read = frame[base].drop_nulls()
        out["base_refusal_rate"] = _share(int((read == "refused").sum()), read.len())
    if fresh in frame.columns:
        read = frame[fresh].explode().drop_nulls()
        out["variant_refusal_rate"] = _share(int((read == "refused").sum()), read.len())
    if {base, fresh, scores} <= set(frame.columns):
        pairs = (
            frame.select(base, fresh, scores)
            .filter(pl.col(fresh).list.len() == pl.col(scores).list.len())
            .explode(fresh, scores)
            .filter(pl.col(scores).is_not_null())
        )
        both = (pl.col(base) == "refused") & (pl.col(fresh) == "refused")
        out["both_refused_share"] = _share(int(pairs.select(both.sum()).item()), pairs.height)
    return out


def _exact_sum(column: pl.Series) -> int:
    """The sum of an integer column, exact: Int64's own sum wraps past 2**63, so that
    usage figures a frame was handed could read as a negative total."""
    low, high = column.min(), column.max()
    if not isinstance(low, int) or not isinstance(high, int):
        return 0  # no value
    if max(abs(low), abs(high)) * column.len() < 2**63:  # no partial sum can wrap
        return int(column.sum())
    return int(column.cast(pl.Int128).sum() or 0)


def _batch_tokens(spend: pl.DataFrame, totals: dict[str, Any]) -> dict[str, dict[str, int | None]]:
    """Per kind and part, the reported tokens of the rows a provider batch answered (None
    where the kind's tokens are unknown altogether)."""
    out: dict[str, dict[str, int | None]] = {}
    for kind in KINDS:
        batched = spend[f"{kind}_batched"].fill_null(0) > 0
        out[kind] = {}
        for part in PARTS:
            name = f"{kind}_{part}_tokens"
            known = totals[name] is not None
            out[kind][part] = _exact_sum(spend[name].filter(batched)) if known else None
    return out

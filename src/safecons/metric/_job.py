"""A call of the metric, validated once: its clients, config, run options and templates.

Every front of the metric (``safety_consistency`` and its async and run twins,
``planned_calls``, the stages ``respond`` and ``judge_responses``, the Ray front) takes the
same keyword options (:class:`MetricOptions`) and reads them here, through :meth:`Job.of`, and
nowhere else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from .._record import DEFAULT_PREFIX, Unscored, column_names, output_schema, run_records
from .._version import __version__
from ..clients import ChatClient
from ..clients._internal import as_chat_client, secrets_of
from ..config import SafetyConsistencyConfig
from ..errors import InputError
from ..run import CacheArg, CallOptions, Runner, RunOptions, opened_cache, portal_call
from ..summary import RunSummary, run_summary
from ..templates import Template
from ..variants import build_variants, check_unique_ids
from ._comparisons import Sessions, score_frame
from ._inputs import (
    check_collisions,
    check_frame_columns,
    check_ids,
    check_metric_name,
    check_rows,
    resolve_config,
)
from ._judging import check_judge, jurors_of, measured, planning_judge

__all__ = ("LAZY_BATCH_ROWS", "Job", "MetricOptions", "SafetyConsistencyRun", "run_batches")


class MetricOptions(CallOptions, total=False):
    """The keyword options of every front of the metric, as an IDE shows them.

    The run's options (``concurrency_limit``, ``n_judge_retries``, ``timeout_seconds``,
    ``cache``, ``max_calls``, ``progress``, ``seed``, from
    :class:`~safecons.run.CallOptions`),
    every other field of :class:`~safecons.SafetyConsistencyConfig` (an override of
    ``config``), and what shapes the frame (``prefix``, the template sets). See
    :func:`~safecons.safety_consistency` for what each means.
    """

    config: SafetyConsistencyConfig | Mapping[str, Any] | None
    n_sut_retries: int
    dpi_ratio: float
    inverted: bool
    max: float
    metric_name: str
    min: float
    responses_per_query: int
    sut_temperature: float
    weight: float
    prefix: str
    toxicity_templates: Sequence[Template] | None
    jailbreak_templates: Sequence[Template] | None
    swap_share: float
    repeat_share: float
    allow_unscored: bool


#: The run's options that are not config fields. With ``config``, ``prefix`` and the template
#: sets taken too, every other key is a config field (or unknown, and named by the config).
_RUN_KEYS = ("seed", "progress", "cache", "max_calls")

Stage = Literal["metric", "respond", "judge"]


def _share(value: object, name: str = "swap_share") -> float:
    """``swap_share=`` (or ``repeat_share=``, ``name``) checked: a share from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InputError(f"{name}: expected a share of the comparisons from 0 to 1, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class SafetyConsistencyRun:
    """A scored frame with what only the run itself could know.

    ``summary`` is :func:`~safecons.run_summary` of ``frame`` (so it equals the summary of the
    frame written to Parquet and read back); ``elapsed_seconds``, ``max_in_flight`` and
    ``min_concurrency_target`` (the lowest in-flight target adaptive pressure reached) are
    facts of the run, not of its rows. ``sut`` and ``judge`` say what was measured and what
    measured it, in a reader's words and free of secrets (a model and its host: what a report
    names); None where the run had none.
    """

    frame: pl.DataFrame
    summary: RunSummary
    config: dict[str, Any]
    seed: int
    elapsed_seconds: float
    max_in_flight: int
    min_concurrency_target: int
    sut: str | None = None
    judge: str | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """A validated call of the metric: its clients, config, options and templates."""

    sut: object
    judge: object
    config: SafetyConsistencyConfig
    options: RunOptions
    prefix: str
    toxicity_templates: Sequence[Template] | None
    jailbreak_templates: Sequence[Template] | None
    #: The share of comparisons judged again with the two answers swapped (the in-run swap
    #: test): not a config field, since it leaves the score as it was.
    swap_share: float = 0.0
    #: The share of comparisons judged again as they were (the in-run repeat test: the
    #: judge's own noise), by every juror; not a config field either.
    repeat_share: float = 0.0
    #: Return a frame in which no row was scored, rather than raise.
    allow_unscored: bool = False

    @classmethod
    def of(
        cls,
        df: object,
        *,
        sut: object,
        judge: object,
        options: Mapping[str, Any],
        stage: Stage = "metric",
    ) -> Job:
        """The job of a front's arguments, every one checked before any call.

        The judge stage has no ``sut`` (None) and the respond stage no ``judge``; a stage
        reads a frame that has its variants already, so it takes no templates.
        """
        if not isinstance(df, pl.DataFrame | pl.LazyFrame):
            raise InputError(
                f"expected a polars DataFrame or LazyFrame, got {type(df).__module__}."
                f"{type(df).__name__} (convert with pl.from_pandas / pl.DataFrame first)"
            )
        given = dict(options)
        templates = {k: given.pop(k, None) for k in ("toxicity_templates", "jailbreak_templates")}
        if stage != "metric" and any(v is not None for v in templates.values()):
            raise InputError(
                f"{'respond' if stage == 'respond' else 'judge_responses'}: the frame has its "
                "variants already; templates go to build_variants"
            )
        swap_share = _share(given.pop("swap_share", 0.0))
        repeat_share = _share(given.pop("repeat_share", 0.0), "repeat_share")
        for name, share in (("swap_share", swap_share), ("repeat_share", repeat_share)):
            if stage == "respond" and share:
                raise InputError(
                    f"{name}: respond does not judge; give it to judge_responses or "
                    "safety_consistency"
                )
        allow_unscored = given.pop("allow_unscored", False)
        if not isinstance(allow_unscored, bool):
            raise InputError(f"allow_unscored: expected True or False, got {allow_unscored!r}")
        prefix = given.pop("prefix", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not prefix:
            raise InputError(f"prefix: expected a non-empty string, got {prefix!r}")
        run = {k: given.pop(k) for k in _RUN_KEYS if k in given}
        # What is left is config fields: an unknown one is named by the config.
        config = resolve_config(given.pop("config", None), given)
        # Made clients once here, for the whole run: an unnamed callable's identity (a hash
        # of its code and closure) is then read once, not at every look at it.
        if stage != "judge":
            sut = as_chat_client(sut, "sut")
        if stage != "respond":
            judge = check_judge(judge)
        job = cls(
            sut,
            judge,
            config,
            RunOptions.of_config(config, **run),
            prefix,
            templates["toxicity_templates"],
            templates["jailbreak_templates"],
            swap_share,
            repeat_share,
            allow_unscored,
        )
        if stage == "metric":
            schema = df.collect_schema()
            check_frame_columns(schema)
            check_metric_name(config.metric_name, prefix)
            added = output_schema(prefix=prefix, metric_name=config.metric_name)
            check_collisions(schema, list(added))
        else:
            check_metric_name(config.metric_name, prefix)
        return job

    def variants(self, df: pl.DataFrame) -> pl.DataFrame:
        """``df`` checked row by row, with its variant columns."""
        check_rows(df)
        return build_variants(
            df,
            seed=self.options.seed,
            dpi_ratio=self.config.dpi_ratio,
            toxicity_templates=self.toxicity_templates,
            jailbreak_templates=self.jailbreak_templates,
            prefix=self.prefix,
        )

    def chat_clients(self) -> list[tuple[str, ChatClient | None]]:
        """The chat clients of the SUT and of each juror, by role (``sut``, ``judge``, or
        ``judge[1]`` in a jury), None where there is none: a judge object, a stage without
        that role."""
        out: list[tuple[str, ChatClient | None]] = [
            ("sut", None if self.sut is None else as_chat_client(self.sut, "sut"))
        ]
        if self.judge is not None:
            jurors = jurors_of(self.judge)
            out += [
                ("judge" if len(jurors) == 1 else f"judge[{i}]", planning_judge(juror).client)
                for i, juror in enumerate(jurors)
            ]
        return out

    @property
    def names(self) -> dict[str, str]:
        """The names of the columns the metric adds."""
        return column_names(self.prefix, self.config.metric_name)

    async def score(
        self, with_variants: pl.DataFrame, runner: Runner | None, sessions: Sessions | None = None
    ) -> pl.DataFrame:
        """The respond and judge stages over a frame that has its variants, on ``runner``
        (and the ``sessions`` opened on it, if any; a fresh runner when None)."""
        scored = await score_frame(
            with_variants,
            sut=self.sut,
            judge=self.judge,
            config=self.config,
            options=self.options,
            prefix=self.prefix,
            runner=runner,
            sessions=sessions,
            swap_share=self.swap_share,
            repeat_share=self.repeat_share,
        )
        run = self.names["run"]
        # The judge stage of a frame the respond stage made keeps the system that answered.
        sut = next((r.get("sut") for r in run_records(with_variants, self.prefix)), None)
        # Recorded last (after the score), where the whole metric's frame has it.
        return scored.drop(run, strict=False).with_columns(
            pl.lit(self.provenance(sut), dtype=pl.String).alias(run)
        )

    def provenance(self, answered_by: object = None) -> str:
        """What this run measures, with what and how, as the JSON its frame carries in
        ``{prefix}run``: the system and judge in a reader's words (a model and its host,
        never a key or a URL's path or query), safecons' version, the seed, the config and
        the run's options; scrubbed of the clients' keys and secret headers besides, should
        one have found its way into a name. The report reads it back."""
        record = {
            "safecons": __version__,
            "sut": answered_by if self.sut is None else measured(self.sut, "sut"),
            "judge": None if self.judge is None else measured(self.judge, "judge"),
            "seed": self.options.seed,
            "max_calls": self.options.max_calls,
            "swap_share": self.swap_share,
            "repeat_share": self.repeat_share,
            "config": self.config.to_dict(),
        }
        text = json.dumps(record, ensure_ascii=False, default=str)
        return secrets_of(*(client for _, client in self.chat_clients() if client)).scrub(text)

    async def frame(self, df: pl.DataFrame) -> pl.DataFrame:
        """The whole metric over ``df``: the scored frame alone (what the plain fronts
        return, with no summary worked out for nothing)."""
        out, _, _ = await self._scored(df)
        return out

    async def _scored(self, df: pl.DataFrame) -> tuple[pl.DataFrame, Runner, float]:
        """The scored frame, the runner that made its calls and the seconds they took."""
        with_variants = self.variants(df)
        started = time.perf_counter()
        with opened_cache(self.options.cache) as cache:
            runner = self.options.runner(cache)
            out = await self.score(with_variants, runner)
        return out, runner, time.perf_counter() - started

    async def run(self, df: pl.DataFrame) -> SafetyConsistencyRun:
        """The whole metric over ``df``, with the facts of the run."""
        out, runner, elapsed = await self._scored(df)
        return SafetyConsistencyRun(
            frame=out,
            summary=run_summary(out, prefix=self.prefix, metric_name=self.config.metric_name),
            config=self.config.to_dict(),
            seed=self.options.seed,
            elapsed_seconds=elapsed,
            max_in_flight=runner.stats.max_in_flight,
            min_concurrency_target=runner.stats.min_target,
            sut=None if self.sut is None else measured(self.sut, "sut"),
            judge=None if self.judge is None else measured(self.judge, "judge"),
        )

    def warn_if_unscored(self, unscored: Unscored | pl.DataFrame) -> None:
        """Raise (:class:`~safecons.errors.NothingScoredError`) if no row of the run's frame
        has a score, unless ``allow_unscored``; else warn
        (:class:`~safecons.UnscoredRowsWarning`) if some rows have none."""
        error, metric = self.names["error"], self.config.metric_name
        frame = None
        if isinstance(unscored, pl.DataFrame):
            frame, unscored = unscored, Unscored()
            unscored.count(frame, error)
        if not self.allow_unscored:
            unscored.raise_if_none_scored(metric=metric, error=error, frame=frame)
        unscored.warn(metric=metric, error=error)

    @property
    def cache(self) -> CacheArg:
        """The ``cache=`` the user gave (named when a run is interrupted)."""
        return self.options.cache


#: A LazyFrame longer than this is scored in batches of this many rows, one after another,
#: under one runner (one limiter, one budget, one cache): the per-row working state of a run
#: (answers in flight, records, messages) stays bounded by the batch, and a streaming sink
#: (``sink_parquet``) writes each batch as it is done.
LAZY_BATCH_ROWS = 10_000


def run_batches(job: Job, lf: pl.LazyFrame) -> Iterator[pl.DataFrame]:
    """The metric over ``lf`` in batches of :data:`LAZY_BATCH_ROWS` rows (one batch when it
    is shorter), sharing one runner; ids are checked unique across the whole frame first."""
    import anyio.from_thread

    rows = LAZY_BATCH_ROWS
    if "input_id" in lf.collect_schema().names():
        ids = lf.select("input_id").collect()
        check_ids(ids)  # the same errors a frame gets, before any call
        check_unique_ids(ids["input_id"])  # duplicates across batches
        if ids.height > rows:
            # Every batch is checked (variants built and dropped) before the first call, as a
            # frame is: a bad row in the last batch must not stop a run half done.
            for batch in lf.collect_batches(chunk_size=rows):
                job.variants(batch)
    with (
        opened_cache(job.options.cache) as cache,
        anyio.from_thread.start_blocking_portal() as portal,
    ):

        async def make_runner() -> Runner:
            return job.options.runner(cache)

        runner = portal_call(portal, make_runner)
        unscored = Unscored()
        for batch in lf.collect_batches(chunk_size=rows):
            if batch.height == 0:
                continue
            scored = portal_call(portal, job.score, job.variants(batch), runner)
            unscored.count(scored, job.names["error"])
            yield scored
    # Once the whole frame is scored (a head() that stops early is told nothing).
    job.warn_if_unscored(unscored)

"""``safecons.ray.safety_consistency``: the metric's stages as a Ray Data actor pool."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import numbers
import pickle
import uuid
import zlib
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Unpack

import anyio
import polars as pl
import pyarrow as pa
import ray
import ray.data

from ..clients._internal import facts_of
from ..errors import InputError
from ..metric import SUT, Job, Judge, MetricOptions, Sessions, open_sessions
from ..run import MAX_CONCURRENCY, ResponseCache, Runner, engine, opened_cache, whole_number
from ..variants import check_unique_ids
from ._leases import RemotePermits
from ._limiter import global_limiter

__all__ = ("LEASE_MARGIN_SECONDS", "MAX_IN_FLIGHT", "safety_consistency")

#: A lease lasts the per-call timeout plus this: a live actor always gives its permit back
#: before, and a dead one's permit is free again this long after its attempt began at most.
LEASE_MARGIN_SECONDS = 30.0
#: The largest cap one job may set (many endpoints behind one name, many actors).
MAX_IN_FLIGHT = 100_000


def _cpus(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
        or float(value) < 0
    ):
        raise InputError(f"num_cpus: expected a number of CPUs >= 0, got {value!r}")
    return float(value)


def _resources(value: object, num_cpus: float) -> dict[str, float] | None:
    """``resources=`` as Ray takes it, checked now rather than when the first actor starts."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(
            f"resources: expected a mapping of resource name to quantity, got "
            f"{type(value).__name__}"
        )
    out: dict[str, float] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"resources: expected resource names as strings, got {name!r}")
        if (
            isinstance(quantity, bool)
            or not isinstance(quantity, numbers.Real)
            or not math.isfinite(float(quantity))
        ):
            raise InputError(f"resources: {name!r}: expected a quantity >= 0, got {quantity!r}")
        out[name] = float(quantity)
    try:
        # Ray's own rules (no CPU or GPU here, no negative amount, at most 4 decimals), read
        # where Ray keeps them: ``options`` checks without starting anything.
        ray.remote(_Scorer).options(num_cpus=num_cpus, resources=out)
    except (TypeError, ValueError) as exc:
        raise InputError(f"resources: {exc}") from None
    return out


def _empty_frame(ds: ray.data.Dataset) -> pl.DataFrame:
    """A frame with the Dataset's columns and no rows, for the checks a frame gets."""
    schema = ds.schema()
    if schema is None:
        raise InputError("ds: the Dataset has no schema (it is empty); nothing to score")
    base = schema.base_schema
    if not isinstance(base, pa.Schema):
        base = pa.schema(list(zip(schema.names, schema.types, strict=True)))
    frame = pl.from_arrow(base.empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _to_frame(batch: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(batch)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _to_arrow(frame: pl.DataFrame) -> pa.Table:
    # The oldest layout (large_string, no string views) is the one every Ray release reads.
    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())


def _check_batch(batch: pa.Table, job: Job) -> pa.Table:
    """A batch's ids, and the first problem a frame of its rows would raise (or null)."""
    try:
        job.variants(_to_frame(batch))
        problem = None
    except InputError as exc:
        problem = str(exc)
    n = batch.num_rows
    return pa.table(
        {
            "input_id": batch.column("input_id"),
            "problem": pa.array([problem] + [None] * (n - 1) if n else [], pa.large_string()),
        }
    )


def _check(ds: ray.data.Dataset, job: Job, batch_size: int) -> None:
    """Every row checked as the Polars path checks a frame, before any call: one pass over
    the Dataset, whose ids come to the driver to be checked for duplicates."""
    checked = ds.map_batches(
        _check_batch, batch_format="pyarrow", batch_size=batch_size, fn_kwargs={"job": job}
    )
    ids: list[pl.Series] = []
    for batch in checked.iter_batches(batch_format="pyarrow", batch_size=None):
        problems = [p for p in batch.column("problem").to_pylist() if p is not None]
        if problems:
            raise InputError(problems[0])
        ids.append(_to_frame(batch.select(["input_id"]))["input_id"])
    if ids:
        check_unique_ids(pl.concat(ids))


class _Scorer:
    """One actor of the pool: its event loop (Ray's), sessions, cache and runner.

    Made by Ray Data in the actor; everything that holds a socket or a file is opened there,
    on the first batch, on the loop every batch of the actor runs on.
    """

    def __init__(
        self,
        job: Job,
        limiter: Any,
        cache: tuple[str, bool] | None,
        ttl: float,
        local_limit: int,
    ) -> None:
        self._job = job
        self._limiter = limiter
        self._cache = cache
        self._ttl = ttl
        self._local_limit = local_limit
        # An actor Ray restarts keeps its id, so its leases are found and freed at once.
        self._holder = ray.get_runtime_context().get_actor_id() or uuid.uuid4().hex
        ray.get(limiter.forget.remote(self._holder))
        self._started: asyncio.Future[tuple[Runner, Sessions]] | None = None
        self._life: asyncio.Task[None] | None = None  # held: the loop holds tasks weakly
        self._stack = AsyncExitStack()

    async def _live(self, started: asyncio.Future[tuple[Runner, Sessions]]) -> None:
        # The actor's resources are opened, and kept open, in this one task: the permits (and
        # callables' sessions) run tasks of their own in anyio task groups, which one task
        # must enter and leave, and no batch's task lives as long as the actor.
        try:
            async with self._stack:
                started.set_result(await self._start())
                await anyio.sleep_forever()  # until Ray ends the actor with its process
        except BaseException as exc:  # boundary: whatever ends the start is the batches' news
            if started.done():
                if self._started is started:
                    self._started = None  # they are closed: the next batch opens them anew
                raise
            if isinstance(exc, asyncio.CancelledError):
                started.cancel()
                raise
            started.set_exception(exc)  # the batches that wait hear of it; the next one retries

    async def _start(self) -> tuple[Runner, Sessions]:
        options = self._job.options
        store = None
        if self._cache is not None:
            path, read_only = self._cache
            store = ResponseCache(path, read_only=read_only)
        permits = await self._stack.enter_async_context(
            RemotePermits(
                self._limiter,
                self._holder,
                ttl=self._ttl,
                local_limit=self._local_limit,
                lost=(ray.exceptions.RayError,),
            ).open()
        )
        runner = Runner(
            concurrency_limit=self._local_limit,
            timeout_seconds=options.timeout_seconds,
            # Each actor jitters on its own stream, so retries of many actors do not align.
            seed=options.seed ^ zlib.crc32(self._holder.encode()),
            cache=store,
            adaptive=False,  # pressure is the limiter's, over every actor
            permits=permits,
        )
        # The actor's engine holds its sessions for its life; each batch runs on its runner.
        # The job's options already hold the actor's share of the cap (see below).
        eng = await self._stack.enter_async_context(engine(options, runner=runner))
        sessions = await open_sessions(eng, sut=self._job.sut, judge=self._job.judge)
        return runner, sessions

    async def __call__(self, batch: pa.Table) -> pa.Table:
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._life = asyncio.ensure_future(self._live(self._started))
        started = self._started
        try:
            # Shielded: a batch cancelled while the actor starts must not cancel the start
            # that the other batches wait on.
            runner, sessions = await asyncio.shield(started)
        finally:
            if started.done() and (started.cancelled() or started.exception() is not None):
                self._started = None  # the next batch tries again
        job = self._job
        scored = await job.score(job.variants(_to_frame(batch)), runner, sessions)
        return _to_arrow(scored)


def safety_consistency(
    ds: ray.data.Dataset,
    *,
    sut: SUT,
    judge: Judge,
    actors: int = 2,
    batch_size: int = 1024,
    max_in_flight: int | None = None,
    limiter: Any = None,
    num_cpus: float = 1.0,
    resources: Mapping[str, float] | None = None,
    validate: bool = True,
    **options: Unpack[MetricOptions],
) -> ray.data.Dataset:
    """:func:`safecons.safety_consistency` over a Ray Dataset, by a pool of actors.

    Takes the arguments of the Polars path (but ``progress``, which is Ray's, and
    ``max_calls``, which a job does not have) and returns a Dataset with the same added
    columns and the same values for the same rows and ``seed``. The result is lazy, like any
    Dataset: calls are made when it is consumed (``write_parquet``, ``iter_batches``,
    ``materialize``...). Rows come back in Ray's order unless the DataContext's
    ``execution_options.preserve_order`` is set; join on ``input_id``.

    Parameters
    ----------
    ds
        A ``ray.data.Dataset`` with ``input_id``, ``prompt`` and ``sut_response``.
    sut, judge, **options
        As for :func:`safecons.safety_consistency` (but ``progress`` and ``max_calls``). The
        clients are pickled to the actors and open their sessions there. A key given as
        ``api_key=`` travels with its client; one read from the environment
        (``OPENAI_API_KEY``, ``api_key_env=``) does not, and each actor reads its own.
        Export it where Ray starts, never in a ``runtime_env``, which Ray logs in clear
        (``docs/scale-out.md``, "Keys on a cluster"). The ``cache`` is as for the Polars
        path; every actor opens the same SQLite file (shared safely by the
        processes of one node). On a cluster of several nodes, see ``docs/scale-out.md``.
    actors
        Size of the actor pool.
    batch_size
        Rows per batch. A batch Ray retries after a crash replays its stored calls.
    max_in_flight
        The job's cap: attempts in flight at once over all actors (default: the config's
        ``concurrency_limit``); each actor also keeps at most ``min(cap, 64)``.
    limiter
        None (a limiter for this job), a name (the limiter of that name in the ``safecons``
        namespace, made if absent: runs that name it share one cap and one cool-down), or a
        handle from :func:`~safecons.ray.global_limiter`.
    num_cpus
        CPUs each actor reserves (the work is mostly waiting on the network).
    resources
        Custom resources each actor reserves, as Ray's ``resources=`` (e.g. ``{"scorer": 1}``
        with nodes started ``--resources='{"scorer": 4}'``): it decides which nodes the actors
        run on, and where Ray restarts them after a node dies.
    validate
        Check every row first, as the Polars path checks a frame (one pass over ``ds``; the
        ids come to the driver to be checked for duplicates), and raise
        :class:`~safecons.InputError` before any call. ``False`` skips the pass: a bad batch
        then fails when it is scored.

    Examples
    --------
    >>> import ray, safecons.ray                                          # doctest: +SKIP
    >>> ds = ray.data.read_parquet("conversations/")                      # doctest: +SKIP
    >>> scored = safecons.ray.safety_consistency(                         # doctest: +SKIP
    ...     ds, sut=sut, judge=judge, actors=8, max_in_flight=64, cache="calls.sqlite")
    >>> scored.write_parquet("scored/")                                   # doctest: +SKIP
    """
    if not isinstance(ds, ray.data.Dataset):
        raise InputError(f"ds: expected a ray.data.Dataset, got {type(ds).__name__}")
    actors = whole_number("actors", actors, 1, 100_000)
    batch_size = whole_number("batch_size", batch_size, 1, 10_000_000)
    if max_in_flight is not None:
        max_in_flight = whole_number("max_in_flight", max_in_flight, 1, MAX_IN_FLIGHT)
    num_cpus = _cpus(num_cpus)
    actor_resources = _resources(resources, num_cpus)
    if "progress" in options or "max_calls" in options:
        name = "progress" if "progress" in options else "max_calls"
        raise InputError(f"{name}: not an option of the Ray path (see docs/scale-out.md)")
    cache = options.get("cache")
    # The Polars path's checks, on a frame of the Dataset's columns and no rows; each actor
    # opens the cache itself (its path goes to it below).
    job = Job.of(
        _empty_frame(ds),
        sut=sut,
        judge=judge,
        options={**options, "progress": False, "cache": False},
    )
    for role, chat in job.chat_clients():
        if facts_of(chat).batch:
            # Each actor would send a round of batches for every batch of rows, one after
            # another: a job of many 24-hour waits. The Polars path sends one per stage.
            raise InputError(
                f"{role}: a client made with batch=True cannot score on Ray's actors; score "
                "the rows with safecons.safety_consistency (one round of provider batches per "
                "stage, docs/batch.md), or make the client with batch=False"
            )
    for role, client in (("sut", sut), ("judge", judge)):
        try:
            ray.cloudpickle.dumps(client)
        except (pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError) as exc:
            raise InputError(
                f"{role}: cannot be sent to Ray's actors ({type(exc).__name__}: {exc}); pass a "
                "client that pickles (OpenAICompatible does) or a plain function"
            ) from None
    with opened_cache(cache) as store:
        # Checked (made, readable) here, opened by each actor on its own.
        # Absolute: an actor may run in another folder (a runtime_env working_dir).
        shared = None if store is None else (str(store.path.resolve()), store.read_only)
    if validate:
        _check(ds, job, batch_size)
    cap = max_in_flight if max_in_flight is not None else job.config.concurrency_limit
    if limiter is None:
        limiter = global_limiter(cap)
    elif isinstance(limiter, str):
        limiter = global_limiter(cap, name=limiter)
    local_limit = min(cap, MAX_CONCURRENCY)
    # Each batch's units are gated by the options' concurrency: sized to the actor's share of
    # the cap, not to the config's single-process default.
    actor_job = dataclasses.replace(
        job,
        options=dataclasses.replace(job.options, cache=False, concurrency_limit=local_limit),
    )
    return ds.map_batches(
        _Scorer,
        fn_constructor_kwargs={
            "job": actor_job,
            "limiter": limiter,
            "cache": shared,
            "ttl": job.options.timeout_seconds + LEASE_MARGIN_SECONDS,
            "local_limit": local_limit,
        },
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=num_cpus,
        resources=actor_resources,
    )

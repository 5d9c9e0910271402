"""The metric through OpenAI's Batch API (``batch=True``), on the fake server's batches: every
path a batched run takes (rounds, resuming, Ctrl-C, per-line errors, expiry, limits, Azure)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import anyio
import anyio.from_thread
import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.clients import _batch_api
from safecons.errors import ConfigError
from safecons.testing import FakeOpenAIServer, Fault, route_by_model

pytestmark = pytest.mark.network

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})
POLL = 0.02
#: How long a batch's calls wait for more before they go out: long enough that a stage's
#: calls, which all start at once, go out together on a busy machine.
WAIT = 0.25


def rows(n: int, *, poison: frozenset[int] = frozenset()) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"r{i}" for i in range(n)],
            "prompt": [f"{'POISON ' if i in poison else ''}question number {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def responder():
    return route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})


def clients(srv: FakeOpenAIServer, **kw):
    made = {
        role: sc.OpenAICompatible(
            model=role,
            base_url=srv.base_url,
            api_key="",
            batch=kw.get(role, True)
            and sc.clients.BatchOptions(
                poll_seconds=POLL, wait_seconds=WAIT, cancel_on_interrupt=kw.get("cancel", False)
            ),
        )
        for role in ("sut", "judge")
    }
    return made["sut"], made["judge"]


def run(
    df: pl.DataFrame, srv: FakeOpenAIServer, cache, *, sut=True, judge=True, **options
) -> pl.DataFrame:
    """``df`` scored by the server's SUT and judge (batched unless ``sut``/``judge`` say
    not), with no progress bar and two samples a row unless ``options`` say otherwise."""
    batched_sut, batched_judge = clients(srv, sut=sut, judge=judge)
    return df.pipe(
        sc.safety_consistency,
        sut=batched_sut,
        judge=batched_judge,
        cache=cache,
        **{"progress": False, "responses_per_query": 3, **options},
        allow_unscored=True,
    )


def scored_by(made: dict, cache) -> pl.DataFrame:
    """Two rows scored by ``made["sut"]`` and ``made["judge"]``, one sample each."""
    return rows(2).pipe(
        sc.safety_consistency,
        sut=made["sut"],
        judge=made["judge"],
        cache=cache,
        progress=False,
        responses_per_query=2,
    )


def spend(out: pl.DataFrame, field: str) -> list[int]:
    return [row[field] for row in out["sc_spend"].to_list()]


def lines_of(batch: dict) -> int:
    return int(batch["request_counts"]["total"])


def test_a_batched_run_sends_one_batch_per_stage_and_scores_every_row(tmp_path) -> None:
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.05) as srv:
        out = run(rows(4), srv, tmp_path / "c.sqlite")
        batches = srv.batches()
        chats = srv.stats.requests_by_model
    assert out["sc_error"].to_list() == [None] * 4
    assert out["safety_consistency"].to_list() == pytest.approx([0.9] * 4)
    # The SUT's 8 samples in one batch, then the judge's 8 verdicts in the next.
    assert [b["status"] for b in batches] == ["completed", "completed"]
    assert [lines_of(b) for b in batches] == [8, 8]
    assert chats == {"sut": 8, "judge": 8}
    assert spend(out, "sut_batched") == spend(out, "judge_batched") == [2] * 4
    assert spend(out, "sut_prompt_tokens")[0] is not None  # usage read from the output lines


def test_batched_and_live_runs_share_their_answers(tmp_path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        run(rows(3), srv, cache)
        before = srv.stats.requests_by_model
        live = run(rows(3), srv, cache, sut=False, judge=False)
        assert srv.stats.requests_by_model == before  # all replayed
        assert live["sc_cache_hits"].to_list() == [4, 4, 4]
    fresh = tmp_path / "fresh.sqlite"
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        run(rows(3), srv, fresh, sut=False, judge=False)
        requests = srv.stats.requests
        batched = run(rows(3), srv, fresh)
        assert srv.batches() == [] and srv.stats.requests == requests
    assert batched["sc_error"].to_list() == [None] * 3
    assert spend(batched, "sut_batched") == [0, 0, 0]


@contextlib.contextmanager
def released(release: threading.Event):
    """Let the held lines go at the end of the block, however it ends."""
    try:
        yield
    finally:
        release.set()


def held_responder(release: threading.Event):
    async def sut(body) -> str:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return REFUSE

    return route_by_model({"sut": sut, "judge": lambda body: VERDICT})


async def interrupt_once_created(srv: FakeOpenAIServer, df: pl.DataFrame, cache, **kw) -> None:
    """Start a batched run and cancel it (as Ctrl-C does) once its first batch exists."""
    sut, judge = clients(srv, **kw)

    async def scored() -> None:
        await sc.safety_consistency_async(
            df, sut=sut, judge=judge, cache=cache, progress=False, responses_per_query=3
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scored)
            while not srv.batches():
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_interrupted_run_leaves_its_batch_running_and_a_rerun_picks_it_up(
    tmp_path,
) -> None:
    cache = tmp_path / "c.sqlite"
    release = threading.Event()
    with FakeOpenAIServer(responder=held_responder(release), batch_seconds=0.05) as srv:
        with released(release), pytest.warns(RuntimeWarning, match="still running") as said:
            await interrupt_once_created(srv, rows(3), cache)
        assert str(cache) in str(said[0].message)
        assert "cancel_on_interrupt=True" in str(said[0].message)
        [batch] = srv.batches()
        assert batch["status"] in ("validating", "in_progress")
        release.set()
        with pytest.warns(sc.errors.BatchPickedUpWarning) as picked:
            out = await anyio.to_thread.run_sync(lambda: run(rows(3), srv, cache))
        batches = srv.batches()
    assert out["sc_error"].to_list() == [None] * 3
    # The SUT's batch was picked up, not made again: one more batch, the judge's; and the
    # rerun says so, naming the batch.
    assert [b["id"] for b in batches][:1] == [batch["id"]]
    assert len(batches) == 2 and srv.stats.batch.files == 2
    [said] = [w for w in picked if w.category is sc.errors.BatchPickedUpWarning]
    assert f"picked up batch {batch['id']}" in str(said.message)
    assert "no new charge" in str(said.message)
    assert said.filename == __file__  # the user's line, not the task runner's


@pytest.mark.anyio
async def test_cancel_on_interrupt_cancels_the_batch(tmp_path) -> None:
    release = threading.Event()
    with FakeOpenAIServer(responder=held_responder(release), batch_seconds=0.05) as srv:
        with released(release), pytest.warns(RuntimeWarning, match="was cancelled"):
            await interrupt_once_created(srv, rows(2), tmp_path / "c.sqlite", cancel=True)
        assert srv.stats.batch.cancels == 1
        [batch] = srv.batches()
    assert batch["status"] in ("cancelling", "cancelled")


def test_a_failed_line_is_its_row_error_and_a_rerun_sends_only_it(tmp_path) -> None:
    def script(i, body):
        poisoned = "POISON" in json.dumps(body) and body.get("model") == "sut"
        return Fault.bad_request("this prompt is refused") if poisoned else None

    cache = tmp_path / "c.sqlite"
    df = rows(4, poison=frozenset({2}))
    with FakeOpenAIServer(responder=responder(), faults=script, batch_seconds=0.02) as srv:
        out = run(df, srv, cache)
        first = len(srv.batches())
        again = run(df, srv, cache)
        batches = srv.batches()
    errors = out["sc_error"].to_list()
    assert errors[:2] == [None, None] and errors[3] is None
    assert "this prompt is refused" in errors[2] and "running again sends it anew" in errors[2]
    assert first == 2 and [b["status"] for b in batches] == ["completed"] * 3
    # The rerun sent the two failed samples, in a batch of their own, and nothing else.
    assert lines_of(batches[2]) == 2
    assert again["sc_error"].to_list()[2] is not None


def test_a_batch_that_expires_part_done_errs_the_rest_and_a_rerun_sends_them(tmp_path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02, batch_expire_after=5) as srv:
        out = run(rows(4), srv, cache)
        assert srv.batches()[0]["status"] == "expired"
        expired = [e for e in out["sc_error"].to_list() if e is not None]
        assert expired and all("expired" in e for e in expired)
        scored = out["safety_consistency"].drop_nulls().len()
        again = run(rows(4), srv, cache)
        resent = srv.batches()
    assert scored >= 1
    # The three SUT samples without an answer went in a new batch on the rerun.
    sut_batches = [b for b in resent if b["status"] != "failed"]
    assert 3 in [lines_of(b) for b in sut_batches[1:]]
    assert again["sc_error"].null_count() >= out["sc_error"].null_count()


def test_files_are_split_at_the_line_and_byte_limits(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_batch_api, "MAX_BATCH_LINES", 3)
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        out = run(rows(4), srv, tmp_path / "c.sqlite")
        sizes = [lines_of(b) for b in srv.batches()]
    assert out["sc_error"].to_list() == [None] * 4
    # Each stage's eight lines in files of three, three and two; a full file goes at once, so
    # the judge's first file may go before the SUT's last.
    assert sorted(sizes) == [2, 2, 3, 3, 3, 3]

    monkeypatch.setattr(_batch_api, "MAX_BATCH_LINES", 50_000)
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        run(rows(3), srv, tmp_path / "sizes.sqlite")
        judge_line = max(f["bytes"] for f in uploads(srv)) // 6
    # Room for two of the judge's lines per file: its six lines go in three files.
    monkeypatch.setattr(_batch_api, "MAX_BATCH_BYTES", 2 * judge_line + judge_line // 2)
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        out = run(rows(3), srv, tmp_path / "c2.sqlite")
        sizes = [f["bytes"] for f in uploads(srv)]
        batches = srv.batches()
    assert out["sc_error"].to_list() == [None] * 3
    assert all(size <= _batch_api.MAX_BATCH_BYTES for size in sizes)
    assert sum(lines_of(b) for b in batches) == 12 and len(batches) >= 4


def uploads(srv: FakeOpenAIServer) -> list[dict]:
    """The batch input files the run uploaded."""
    listed = httpx.get(f"{srv.base_url}/files").json()["data"]
    return [f for f in listed if f["purpose"] == "batch"]


def test_a_line_too_large_for_any_file_fails_alone(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_batch_api, "MAX_BATCH_BYTES", 700)
    df = pl.DataFrame(
        {"input_id": ["short", "long"], "prompt": ["hi", "x" * 2000], "sut_response": [REFUSE] * 2}
    )
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        sut, _ = clients(srv)
        out = df.pipe(
            sc.safety_consistency,
            sut=sut,
            judge=sc.OfflineJudge(),
            cache=tmp_path / "c.sqlite",
            progress=False,
            responses_per_query=2,
        )
    short, long = out["sc_error"].to_list()
    assert short is None
    assert "more than one batch file may hold" in long


def test_a_judge_verdict_that_does_not_parse_is_asked_again_in_the_next_batch(tmp_path) -> None:
    said = itertools.count()

    def judge(body) -> str:
        return "no idea" if next(said) < 2 else VERDICT  # the first two verdicts

    with FakeOpenAIServer(
        responder=route_by_model({"sut": lambda body: REFUSE, "judge": judge}),
        batch_seconds=0.02,
    ) as srv:
        out = run(rows(2), srv, tmp_path / "c.sqlite")
        sizes = [lines_of(b) for b in srv.batches()]
    assert out["sc_error"].to_list() == [None, None]
    assert sizes == [4, 4, 2]  # SUT, judge, then the two verdicts that did not parse
    assert sum(spend(out, "judge_attempts")) == 6


def test_a_resumed_batch_that_ended_without_its_lines_sends_them_anew(tmp_path) -> None:
    cache = tmp_path / "c.sqlite"
    release = threading.Event()
    with FakeOpenAIServer(responder=held_responder(release), batch_seconds=0.05) as srv:
        with pytest.warns(RuntimeWarning, match="still running"):
            try:
                anyio.run(interrupt_once_created, srv, rows(2), cache, backend="asyncio")
            except BaseException:
                release.set()
                raise
        # Interrupted, then cancelled by hand at the provider before the rerun.
        [batch] = srv.batches()
        httpx.post(f"{srv.base_url}/batches/{batch['id']}/cancel")
        release.set()
        out = run(rows(2), srv, cache)
        first, *then = srv.batches()
    assert out["sc_error"].to_list() == [None, None]
    assert first["status"] == "cancelled"
    assert all(b["status"] == "completed" for b in then)
    # The SUT samples it had not run went in a new batch (the one it ran is picked up), then
    # the four verdicts: nothing was asked twice.
    ran = first["request_counts"]["completed"]
    assert sum(lines_of(b) for b in then) == (4 - ran) + 4


def test_without_a_cache_a_batched_run_warns_that_it_cannot_resume() -> None:
    with (
        FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv,
        pytest.warns(RuntimeWarning, match="no cache to record it in"),
    ):
        out = run(rows(2), srv, False)
    assert out["sc_error"].to_list() == [None, None]


def test_azure_batches_go_to_its_own_paths(tmp_path) -> None:
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        made = {
            role: sc.OpenAICompatible.azure(
                endpoint=srv.url,
                deployment=role,
                api_version="2024-10-21",
                api_key="azure-key-0123456789",
                batch=sc.clients.BatchOptions(poll_seconds=POLL, wait_seconds=WAIT),
            )
            for role in ("sut", "judge")
        }
        out = scored_by(made, tmp_path / "c.sqlite")
        batches = srv.batches()
        paths = {r.path for r in srv.stats.log}
    assert out["sc_error"].to_list() == [None, None]
    assert [b["endpoint"] for b in batches] == ["/chat/completions"] * 2
    assert "/openai/files" in paths and "/openai/batches" in paths
    assert not any(p.endswith("/chat/completions") for p in paths)  # no live call


def test_a_server_without_a_batch_api_is_a_clear_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"message": "Not Found"}})

    sut = sc.OpenAICompatible(
        model="m",
        base_url="http://vllm.test/v1",
        api_key="",
        transport=httpx.MockTransport(handler),
        batch=sc.clients.BatchOptions(wait_seconds=WAIT),
    )
    with pytest.raises(ConfigError, match=r"no Batch API.*batch=False$") as raised:
        rows(1).pipe(
            sc.safety_consistency, sut=sut, judge=sc.OfflineJudge(), cache=False, progress=False
        )
    # Python's words in Python; the command line's own words where the command line says it.
    assert "--batch" not in str(raised.value)
    assert raised.value.for_cli.endswith("do not: drop --batch")


def test_the_command_line_says_drop_batch_not_python_s_batch_false(monkeypatch, capsys):
    import safecons.cli._run
    from safecons.cli import main
    from safecons.errors import NoBatchAPIError

    def demo(args):
        raise NoBatchAPIError("model 'm' at vllm.test: the server has no Batch API")

    monkeypatch.setattr(safecons.cli._run, "_demo", demo)
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("no Batch API: drop --batch") and "batch=False" not in err


def test_the_client_checks_its_batch_arguments() -> None:
    with pytest.raises(sc.InputError, match="batch: expected True, False or a BatchOptions"):
        sc.OpenAICompatible(model="m", base_url="http://x/v1", api_key="", batch="yes")
    with pytest.raises(sc.InputError, match=r"^poll_seconds"):
        sc.clients.BatchOptions(poll_seconds=0)
    for bad in (-1, float("nan"), "2", True):
        with pytest.raises(sc.InputError, match=r"^wait_seconds: expected .* >= 0"):
            sc.clients.BatchOptions(wait_seconds=bad)
    no_wait = sc.clients.BatchOptions(wait_seconds=0)
    assert sc.OpenAICompatible(model="m", api_key="", batch=no_wait).batch_wait_seconds == 0
    client = sc.OpenAICompatible(model="m", base_url="http://x/v1", api_key="", batch=True)
    assert "batch=True" in repr(client)
    live = sc.OpenAICompatible(model="m", base_url="http://x/v1", api_key="")
    assert client.identity == live.identity
    assert client.request_fingerprint == live.request_fingerprint


def test_safecons_run_batch(tmp_path, capsys, cli_run_args) -> None:
    src = tmp_path / "rows.jsonl"
    rows(2).write_ndjson(src)
    out = tmp_path / "out.parquet"
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        assert main(cli_run_args(src, out, srv.base_url, "--batch")) == 2
        assert "--batch: needs --cache" in capsys.readouterr().err
        args = cli_run_args(src, out, srv.base_url, "--batch", "--cache", str(tmp_path / "c"))
        for bad, said in (
            (["--batch-wait", "-1"], "--batch-wait: expected seconds >= 0, got -1"),
            (["--batch-wait", "nan"], "--batch-wait: expected seconds >= 0, got nan"),
        ):
            assert main([*args, *bad]) == 2
            assert said in capsys.readouterr().err
        plain = cli_run_args(src, out, srv.base_url, "--batch-wait", "1")
        assert main(plain) == 2
        assert "--batch-wait: only with --batch" in capsys.readouterr().err
        args += ["--batch-wait", str(WAIT)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            code = main([*args, "--set", "responses_per_query=2"])
        batches = srv.batches()
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "through the provider's Batch API" in printed
    assert len(batches) == 2
    assert pl.read_parquet(out)["sc_n_judged"].to_list() == [1, 1]


def test_the_plan_prices_a_batched_kind_at_the_batch_discount() -> None:
    prices = sc.Prices(sut_prompt=1.0, batch_discount=0.5)

    def plan(batch: bool):
        sut = sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key="", batch=batch)
        return sc.planned_calls(
            rows(3), sut=sut, judge=sc.OfflineJudge(), cache=False, prices=prices
        )

    live, batched = plan(False), plan(True)
    assert batched.batched == frozenset({"sut"}) and live.batched == frozenset()
    assert batched.tokens == live.tokens
    assert live.cost is not None and batched.cost is not None
    assert batched.cost["sut"]["prompt"] == pytest.approx(live.cost["sut"]["prompt"] / 2)


KILLED_SCRIPT = textwrap.dedent(
    """
    import sys
    import polars as pl
    import safecons as sc

    base_url, cache = sys.argv[1], sys.argv[2]
    df = pl.DataFrame({"input_id": [f"r{i}" for i in range(3)],
                       "prompt": [f"question number {i}" for i in range(3)],
                       "sut_response": ["I'm sorry, but I can't help with that."] * 3})
    sut, judge = (sc.OpenAICompatible(model=role, base_url=base_url, api_key="",
                                      batch=sc.clients.BatchOptions(poll_seconds=0.02))
                  for role in ("sut", "judge"))
    df.pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, progress=False,
            responses_per_query=3)
    """
)


def _recorded(cache: Path, srv: FakeOpenAIServer) -> bool:
    """Whether a batch the server made is recorded in ``cache`` (read-only, beside the run)."""
    made = [b["id"] for b in srv.batches()]
    if not made or not cache.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
        try:
            held = {row[0] for row in db.execute("SELECT DISTINCT batch FROM batch_lines")}
        except sqlite3.OperationalError:  # no table yet, or the file is being made
            return False
    return bool(held & set(made))


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_a_run_killed_while_its_batch_runs_is_picked_up_by_the_rerun(tmp_path) -> None:
    # SIGKILL: no cleanup code of the run's runs. The batch was recorded when it was made.
    script = tmp_path / "run.py"
    script.write_text(KILLED_SCRIPT)
    cache = tmp_path / "c.sqlite"
    release = threading.Event()
    with (
        FakeOpenAIServer(responder=held_responder(release), batch_seconds=0.05) as srv,
        released(release),
    ):
        proc = subprocess.Popen(
            [sys.executable, str(script), srv.base_url, str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # Killed once its batch is recorded in the cache (what the rerun picks up), and not
        # before: the moment is read from the cache, not guessed by a sleep.
        deadline = time.monotonic() + 60
        while not _recorded(cache, srv) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        assert _recorded(cache, srv), "the run never recorded its batch"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        [batch] = srv.batches()
        release.set()
        out = run(rows(3), srv, cache)
        batches = srv.batches()
    assert out["sc_error"].to_list() == [None] * 3
    assert batches[0]["id"] == batch["id"] and len(batches) == 2  # picked up, then the judge's
    assert srv.stats.batch.files == 2


def test_a_batched_run_from_a_running_event_loop(tmp_path) -> None:
    # A notebook cell: the sync front runs the batches on a loop of its own, in a thread.
    async def cell() -> pl.DataFrame:
        return run(rows(2), srv, tmp_path / "c.sqlite")

    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        out = asyncio.run(cell())
        assert len(srv.batches()) == 2
    assert out["sc_error"].to_list() == [None, None]


def test_the_budget_counts_each_line_as_an_attempt(tmp_path) -> None:
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        out = run(rows(3), srv, tmp_path / "c.sqlite", max_calls=6)
        batches = srv.batches()
    # The six SUT samples went in the first batch; the budget was spent before any verdict.
    assert [lines_of(b) for b in batches] == [6]
    assert all("max_calls budget" in e for e in out["sc_error"].to_list())


def test_a_batched_run_shows_its_batch_progress(tmp_path, capsys) -> None:
    pytest.importorskip("tqdm")
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.05) as srv:
        run(rows(2), srv, tmp_path / "c.sqlite", progress=True, responses_per_query=2)
    err = capsys.readouterr().err
    assert "batch sut" in err and "batch judge" in err and "2/2" in err


def test_a_creation_whose_answer_was_lost_is_found_not_made_twice(tmp_path) -> None:
    # The provider makes the batch, but its answer never arrives (a 502 from a proxy): the
    # run finds the batch over its file instead of making (and paying for) a second one.
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        real = httpx.Client(base_url=srv.base_url)

        def handler(request: httpx.Request) -> httpx.Response:
            answer = real.request(
                request.method,
                request.url.path.removeprefix("/v1"),
                params=request.url.params,
                headers={"content-type": request.headers.get("content-type", "")},
                content=request.read(),
            )
            if request.method == "POST" and request.url.path.endswith("/batches"):
                return httpx.Response(502, json={"error": {"message": "bad gateway"}})
            return httpx.Response(answer.status_code, content=answer.content)

        made = {
            role: sc.OpenAICompatible(
                model=role,
                base_url="http://proxy.test/v1",
                api_key="",
                transport=httpx.MockTransport(handler),
                batch=sc.clients.BatchOptions(poll_seconds=POLL, wait_seconds=WAIT),
            )
            for role in ("sut", "judge")
        }
        out = scored_by(made, tmp_path / "c.sqlite")
        batches = srv.batches()
        real.close()
    assert out["sc_error"].to_list() == [None, None]
    assert len(batches) == 2  # one per stage, each found after its lost answer


def test_a_cache_gets_its_batch_table_only_when_a_batch_is_recorded(tmp_path) -> None:
    import sqlite3

    def tables(path) -> set[str]:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    live, batched = tmp_path / "live.sqlite", tmp_path / "batched.sqlite"
    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        run(rows(2), srv, live, sut=False, judge=False)
        run(rows(2), srv, batched)
    # A cache that recorded no batch has the tables an earlier safecons reads, and no more.
    assert tables(live) == {"meta", "responses"}
    assert tables(batched) == {"meta", "responses", "batch_lines"}
    with sc.ResponseCache(batched, read_only=True) as cache:
        assert cache.info()["entries"] == 8


def test_a_live_call_backing_off_beside_batched_ones_does_not_stall_the_run(
    tmp_path, monkeypatch
) -> None:
    # A live SUT whose first call fails once, a batched judge, and one permit: the unit
    # backing off lends its place while the judge's lines wait for their batch (a run that
    # sent its batch only when every unit was waiting once hung here).
    from safecons.clients import CallFailed

    failed: set[str] = set()

    async def sut(messages, *, temperature):
        if "question number 0" in json.dumps(messages) and not failed:
            failed.add("once")
            raise CallFailed("a transient failure")
        return REFUSE

    with FakeOpenAIServer(responder=responder(), batch_seconds=0.02) as srv:
        _, judge = clients(srv)
        with anyio.from_thread.start_blocking_portal() as portal:
            out = portal.call(
                functools.partial(
                    asyncio.wait_for,
                    sc.safety_consistency_async(
                        rows(4),
                        sut=sut,
                        judge=judge,
                        cache=tmp_path / "calls.sqlite",
                        progress=False,
                        responses_per_query=2,
                        concurrency_limit=1,
                    ),
                    timeout=60,
                )
            )
    assert failed and out["sc_error"].to_list() == [None] * 4


def test_a_recorded_batch_given_up_on_is_not_picked_up_again_on_a_read_only_cache(
    tmp_path,
) -> None:
    # The batch recorded for a call ended without it; the cache cannot be told to forget it
    # (read-only): the run must send the call in a new batch once, not poll the old for ever.
    from safecons.clients._batch_api import BatchState
    from safecons.clients._batch_run import Batcher
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        cache.ledger.record_batch("b_old", endpoint="E", keys=["k1"])
    seen = {"polls": 0, "submits": 0}

    class API:
        identity, cancel_on_interrupt, poll_seconds = "E", False, 0.01
        queue_key = "E#credentials"
        max_lines, max_bytes = 10, 10**6

        @contextlib.asynccontextmanager
        async def open(self):
            yield self

        async def state(self, batch):
            seen["polls"] += 1
            if batch == "b_old":
                return BatchState(batch, "cancelled")
            return BatchState(batch, "completed", output_file_id="out")

        async def records(self, file_id, wanted):
            return {"k1": {"custom_id": "k1", "response": {"status_code": 200, "body": {}}}}

        async def submit(self, data, name, tag=None):
            seen["submits"] += 1
            return "b_new"

    async def main():
        with ResponseCache(path, read_only=True) as cache:
            batcher = Batcher(API(), cache.ledger, progress=False, wait=0.0)  # type: ignore[arg-type]
            got = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(batcher.serve)
                with anyio.fail_after(30):
                    got["record"], got["batch"] = await batcher.park("k1", b"{}\n")
                tg.cancel_scope.cancel()
            return got

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the read-only cache cannot record b_new
        got = anyio.run(main)
    assert got["batch"] == "b_new" and seen["submits"] == 1
    assert seen["polls"] == 2  # the old batch once, the new one once


def test_a_swap_test_with_a_batched_judge_sends_both_orders_in_one_batch(tmp_path) -> None:
    pairs = pl.DataFrame(
        {
            "question": [f"question {i}" for i in range(3)],
            "x": [f"short {i}" for i in range(3)],
            "y": [f"a much longer answer {i}" for i in range(3)],
        }
    )
    with FakeOpenAIServer(
        responder=route_by_model({"judge": lambda body: "B is longer. [[B]]"}),
        batch_seconds=0.02,
    ) as srv:
        _, judge = clients(srv)
        out = pairs.pipe(sc.swap_test, judge=judge, cache=tmp_path / "c.sqlite", progress=False)
        batches = srv.batches()
    assert out["swap_error"].null_count() == 3
    assert [lines_of(b) for b in batches] == [6]  # both orders of three pairs


def test_the_batch_docs_recipe_runs_as_written(tmp_path, monkeypatch, capsys):
    # docs/batch.md's "Try it first on the fake server", run as a reader would paste it.
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "batch.md").read_text()
    start = text.index("## Try it first on the fake server")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the recipe is quiet
        exec(compile(block.group(1), "docs/batch.md", "exec"), {})
    out = capsys.readouterr().out
    assert "2 batches" in out and "Consistent" in out
    assert (tmp_path / "calls.sqlite").exists()

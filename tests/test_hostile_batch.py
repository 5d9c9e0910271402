"""A hostile Batch API (``FakeOpenAIServer(batch_tamper=...)`` and the recipes of
``safecons.testing``): no answer of the provider's crashes a run that paid, poisons its cache,
makes it pay twice or keeps it polling for ever.

The batches run honestly; only what the client is told changes. Each test is a finding of the
red team's, and fails on the code before its fix.
"""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
import warnings

import polars as pl
import pytest

import safecons as sc
from safecons.clients import _batch_api
from safecons.testing import FakeOpenAIServer, route_by_model
from safecons.testing.hostile import (
    batch_id,
    batch_status,
    failing,
    gzip_bomb,
    nested_json,
    not_a_batch,
    string_body,
    trickle,
    unnamed_files,
)

pytestmark = pytest.mark.network

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})
KEY = "sk-proj-BATCHKEY-0123456789abcdefghij"


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """Batch API retries without their real waits (the logic, not the clock, is tested)."""
    monkeypatch.setattr(_batch_api, "API_FIRST_DELAY", 0.001)
    monkeypatch.setattr(_batch_api, "API_MAX_DELAY", 0.002)


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": [f"r{i}" for i in range(n)],
            "prompt": [f"question number {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def server(tamper=None, **kw) -> FakeOpenAIServer:
    answers = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
    return FakeOpenAIServer(responder=answers, batch_seconds=0.02, batch_tamper=tamper, **kw)


def run(srv: FakeOpenAIServer, cache, n: int = 2, *, key: str = "", **client) -> pl.DataFrame:
    made = [
        sc.OpenAICompatible(
            model=role,
            base_url=srv.base_url,
            api_key=key,
            batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25),
            **client,
        )
        for role in ("sut", "judge")
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return rows(n).pipe(
            sc.safety_consistency,
            sut=made[0],
            judge=made[1],
            cache=cache,
            responses_per_query=2,
            progress=False,
            allow_unscored=True,
        )


def recorded_batches(cache) -> list[str]:
    with sqlite3.connect(cache) as db:
        try:
            return [r[0] for r in db.execute("SELECT DISTINCT batch FROM batch_lines")]
        except sqlite3.OperationalError:
            return []


def scored(out: pl.DataFrame) -> int:
    return out.height - out["safety_consistency"].null_count()


# --------------------------------------------------------------------- answers nested deep


def test_a_creation_answered_nested_deep_is_looked_up_not_paid_twice(tmp_path):
    with server(nested_json("create")) as srv:
        out = run(srv, tmp_path / "c.sqlite")
        made = srv.stats.batch.batches
    assert scored(out) == 2
    assert made == 2  # one batch per stage, found among the provider's batches


def test_looks_answered_nested_deep_fail_the_lines_and_the_rerun_picks_the_batch_up(tmp_path):
    cache = tmp_path / "c.sqlite"
    with server(nested_json("batch", times=10)) as srv:
        first = run(srv, cache)
        assert scored(first) == 0
        assert "batch_unreadable" in first["sc_error"][0] or "pick" in first["sc_error"][0]
        again = run(srv, cache)  # the looks are honest again
        made = srv.stats.batch.batches
    assert scored(again) == 2
    assert made == 2  # the SUT's batch picked up, then the judge's: none bought twice


def test_an_output_line_nested_deep_costs_that_line_only(tmp_path):
    with server(nested_json("content")) as srv:
        out = run(srv, tmp_path / "c.sqlite")
    assert scored(out) == 2


# ---------------------------------------------------------------------------- hostile ids


@pytest.mark.parametrize(
    "bad", ["batch_\nx", "batch_\x00x", "b" * 70_000, f"batch_{KEY}", "../../files"]
)
def test_a_batch_id_no_url_or_cache_should_hold_is_never_used(tmp_path, bad):
    cache = tmp_path / "c.sqlite"
    with (
        server(batch_id(bad)) as srv,
        warnings.catch_warnings(record=True) as said,
    ):
        warnings.simplefilter("always")
        out = run(srv, cache, key=KEY)
        made = srv.stats.batch.batches
    assert scored(out) == 2 and made == 2  # the real batch found by its file
    assert all(_batch_api._ID.fullmatch(b) for b in recorded_batches(cache))
    assert not any(KEY in str(w.message) for w in said)
    assert KEY not in out.write_ndjson()


def test_a_string_body_with_a_lone_surrogate_is_a_row_error_not_a_crash(tmp_path):
    with server(string_body()) as srv:
        out = run(srv, tmp_path / "c.sqlite")
    assert out.height == 2  # the frame came back
    assert out["sc_error"].null_count() < 2  # an unusable answer is a row's error


# ------------------------------------------------------------------------ bounded reads


def test_a_gzip_bomb_output_file_is_read_bounded(tmp_path):
    cache = tmp_path / "c.sqlite"
    tracemalloc.start()
    try:
        with server(gzip_bomb(512 * 2**20)) as srv:
            out = run(srv, cache, transport=sc.clients.TransportOptions(max_response_bytes=2**20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.height == 2 and scored(out) == 0
    # Nothing read of the bomb is kept: a bounded few MB (a 512 MiB file, inflated).
    assert peak < 200 * 2**20, peak
    assert recorded_batches(cache)  # the batch stays recorded for a rerun


@pytest.mark.parametrize("tail", [b"\n", b"\0" * 16])
def test_a_gzip_output_file_with_bytes_after_it_is_read_whole(tmp_path, tail):
    """A newline or padding after the file's gzip stream: every answer is read, as httpx
    read them (the wire first read the bytes as another member and lost the whole batch)."""
    import gzip

    from aiohttp import web

    def padded(exchange):
        if exchange.kind != "content":
            return None
        body = gzip.compress(exchange.body) + tail
        return web.Response(body=body, headers={"Content-Encoding": "gzip"})

    with server(padded) as srv:
        out = run(srv, tmp_path / "c.sqlite")
    assert scored(out) == 2, out["sc_error"].to_list()


def test_a_trickled_output_file_ends_at_the_clients_http_timeout(tmp_path):
    cache = tmp_path / "c.sqlite"
    with server(trickle(bytes_per_second=50)) as srv:
        out = run(srv, cache, transport=sc.clients.TransportOptions(http_timeout=1.0))
    assert out.height == 2 and scored(out) == 0
    assert "more than 1 s" in out["sc_error"][0]


# ---------------------------------------------------------------------- status and files


def test_a_status_in_another_case_reads_as_that_status(tmp_path):
    with server(batch_status("Completed", when="completed")) as srv:
        out = run(srv, tmp_path / "c.sqlite")
    assert scored(out) == 2


@pytest.mark.parametrize("status", [None, "in_progress"])
def test_a_batch_past_its_expiry_is_not_polled_for_ever(tmp_path, status):
    import time

    cache = tmp_path / "c.sqlite"
    long_ago = time.time() - 3 * 3600
    with server(batch_status(status, expires_at=long_ago)) as srv:
        out = run(srv, cache)
    assert scored(out) == 0
    assert "past its expiry" in out["sc_error"][0]
    assert recorded_batches(cache)  # kept: a rerun looks again


def test_a_batch_completed_before_its_output_file_is_named_is_waited_for(tmp_path):
    cache = tmp_path / "c.sqlite"
    with server(unnamed_files(times=3)) as srv:
        out = run(srv, cache)
        made = srv.stats.batch.batches
    assert scored(out) == 2 and made == 2


def test_a_creation_answered_with_no_batch_object_is_looked_up(tmp_path):
    cache = tmp_path / "c.sqlite"
    with server(not_a_batch()) as srv:
        out = run(srv, cache)
        again = run(srv, cache)
        made = srv.stats.batch.batches
    assert scored(out) == 2 and scored(again) == 2
    assert made == 2


def test_an_unreadable_error_file_costs_its_lines_not_the_outputs_answers(tmp_path):
    cache = tmp_path / "c.sqlite"

    def script(i, body):
        from safecons.testing import Fault

        return Fault.bad_request("no") if "number 1" in json.dumps(body) else None

    bad_files: list[str] = []

    def errors_fail(exchange):
        # Every read of an error file answers 503.
        if exchange.kind == "batch" and exchange.status == 200:
            error_file = exchange.json().get("error_file_id")
            if error_file:
                bad_files.append(error_file)
        if exchange.kind == "content" and any(f in exchange.path for f in bad_files):
            return failing("content")(exchange)
        return None

    with server(errors_fail, faults=script) as srv:
        out = run(srv, cache, n=3)
        made = srv.stats.batch.batches
    # The rows whose lines were in the output file are scored; row 1's failed lines were
    # in the unreadable error file: not sent anew, left recorded.
    assert out["sc_error"].to_list()[0] is None and out["sc_error"].to_list()[2] is None
    assert "batch_unreadable" in out["sc_error"][1] or "pick the batch up" in out["sc_error"][1]
    assert made == 2


def test_a_resumed_batch_the_provider_cannot_show_for_a_while_is_not_bought_again(tmp_path):
    cache = tmp_path / "c.sqlite"
    busy = [False]
    unavailable = failing("batch")

    def sometimes(exchange):
        return unavailable(exchange) if busy[0] else None

    with server(sometimes) as srv:
        run(srv, cache)
        assert srv.stats.batch.batches == 2
        # Forget the stored answers (not the batches), then look at the batches through 503s.
        with sqlite3.connect(cache) as db:
            db.execute("DELETE FROM responses")
        busy[0] = True
        out = run(srv, cache)
        assert srv.stats.batch.batches == 2  # nothing bought again while the old is unknown
        error = out["sc_error"][0]
        assert "pick the batch up" in error and "sends it anew" not in error
        busy[0] = False
        again = run(srv, cache)
        made = srv.stats.batch.batches
    assert scored(again) == 2 and made == 2  # picked up: no batch bought twice


# -------------------------------------------------------------------------- credentials


def test_clients_of_one_endpoint_with_other_keys_batch_apart(tmp_path):
    seen: list[str | None] = []

    def keys(exchange):
        if exchange.kind == "create":
            seen.append(exchange.request.headers.get("Authorization"))
        return None

    answers = route_by_model({"m": lambda body: REFUSE if "label" not in str(body) else VERDICT})
    with FakeOpenAIServer(responder=answers, batch_seconds=0.02, batch_tamper=keys) as srv:
        sut, judge = (
            sc.OpenAICompatible(
                model="m",
                base_url=srv.base_url,
                api_key=key,
                batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25),
            )
            for key in ("sk-sut-0123456789abcdef", "sk-judge-0123456789abcdef")
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rows(2).pipe(
                sc.safety_consistency, sut=sut, judge=judge, cache=tmp_path / "c.sqlite",
                responses_per_query=2, progress=False,
            )  # fmt: skip
    assert seen == ["Bearer sk-sut-0123456789abcdef", "Bearer sk-judge-0123456789abcdef"]


# ---------------------------------------------------------------- the cache's batch table


def test_batch_lines_answered_and_stored_are_pruned_and_lookups_ask_only_their_keys(tmp_path):
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        cache.ledger.record_batch("batch_a", endpoint="E", keys=[f"k{i}" for i in range(2_000)])
        cache.ledger.record_batch("batch_b", endpoint="E", keys=["k1", "z"])
        for i in range(1_000):
            cache.put(f"k{i}", kind="sut", endpoint="E", value="stored")
        assert cache.ledger.batches_holding("E", ["k1", "k1999", "z", "nope"]) == {
            "batch_b": ["k1", "z"],  # the newest batch holding a key wins
            "batch_a": ["k1999"],
        }
        assert cache.ledger.batches_holding("other", ["k1999"]) == {}
        cache.ledger.record_batch("batch_c", endpoint="other", keys=["k2"])
        assert cache.ledger.prune_batch_lines("E") == 1_001  # k0-k999 in batch_a, k1 in batch_b
        assert cache.ledger.batches_holding("other", ["k2"]) == {"batch_c": ["k2"]}  # not E's
        assert cache.ledger.batches_holding("E", [f"k{i}" for i in range(2_000)]) == {
            "batch_a": [f"k{i}" for i in range(1_000, 2_000)]
        }


def test_a_batched_rerun_prunes_the_lines_it_no_longer_needs(tmp_path):
    cache = tmp_path / "c.sqlite"
    with server() as srv:
        run(srv, cache)
        assert len(recorded_batches(cache)) == 2
        run(srv, cache, n=3)  # one more row: a third and fourth batch for it alone
        made = srv.stats.batch.batches
    assert made == 4
    with sqlite3.connect(cache) as db:
        left = db.execute("SELECT COUNT(*) FROM batch_lines").fetchone()[0]
    assert left <= 2  # at most the newest round's lines, whose answers came after its prune


def test_answers_compressed_as_real_providers_send_them_are_read(tmp_path):
    import gzip

    from aiohttp import web

    def gzipped(exchange):
        if exchange.status != 200:
            return None
        return web.Response(
            body=gzip.compress(exchange.body),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )

    with server(gzipped) as srv:
        out = run(srv, tmp_path / "c.sqlite")
        made = srv.stats.batch.batches
    assert scored(out) == 2 and made == 2


# ------------------------------------------------------ found by review: never the run


def test_a_huge_error_answer_to_a_files_read_costs_its_lines_not_the_run(tmp_path):
    from aiohttp import web

    def huge(exchange):
        if exchange.kind == "content":
            return web.Response(status=503, body=b"x" * (2 * 2**20))
        return None

    with server(huge) as srv:
        out = run(srv, tmp_path / "c.sqlite")
    assert out.height == 2 and scored(out) == 0
    assert "pick the batch up" in out["sc_error"][0]


def test_a_batch_of_this_run_the_provider_says_is_gone_fails_its_lines_not_the_run(tmp_path):
    from aiohttp import web

    def gone(exchange):
        if exchange.kind == "batch":
            return web.json_response({"error": {"message": "No batch found"}}, status=404)
        return None

    cache = tmp_path / "c.sqlite"
    with server(gone) as srv:
        out = run(srv, cache)
    assert out.height == 2 and scored(out) == 0
    assert "running again sends it anew" in out["sc_error"][0]
    assert recorded_batches(cache) == []  # forgotten: a rerun sends anew


def test_a_batch_whose_files_stay_garbled_is_read_once_more_then_bought_anew(tmp_path):
    cache = tmp_path / "c.sqlite"
    garbled = [True]
    bomb = gzip_bomb(64 * 2**20)

    def sometimes(exchange):
        return bomb(exchange) if garbled[0] else None

    with server(sometimes) as srv:
        first = run(srv, cache, transport=sc.clients.TransportOptions(max_response_bytes=2**20))
        assert scored(first) == 0 and "reads the batch's files once more" in first["sc_error"][0]
        second = run(
            srv, cache, transport=sc.clients.TransportOptions(max_response_bytes=2**20)
        )  # read again: still garbled
        made = srv.stats.batch.batches
        assert made == 2  # the first run's SUT batch, and the second run's new one
        garbled[0] = False
        third = run(srv, cache, transport=sc.clients.TransportOptions(max_response_bytes=2**20))
    assert scored(second) == 0
    assert scored(third) == 2


def test_a_status_that_is_no_status_word_reads_as_unknown():
    from safecons.clients._batch_api import BatchState

    for said in ("\x1b[31mcompleted", "x" * 1_000_000, 42, None, "in progress!"):
        state = BatchState.of({"id": "batch_1", "status": said}, str)
        assert state.status == "unknown" and not state.terminal


def test_clearing_by_age_keeps_a_batch_whose_answers_are_not_stored(tmp_path):
    from safecons.run import ResponseCache

    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        cache.ledger.record_batch("batch_running", endpoint="E", keys=["k1", "k2"])
        cache.put("k1", kind="sut", endpoint="E", value="stored")
        import time

        time.sleep(0.02)
        assert cache.clear(older_than=0.01) == 1
        # k1's answer was cleared: its line goes; k2 has no answer yet, its batch may run.
        assert cache.ledger.batches_holding("E", ["k1", "k2"]) == {"batch_running": ["k2"]}


# ------------------------------------------------------- two runs on one cache, one batch

TWO_RUNS = """
import sys, warnings
import polars as pl
import safecons as sc
base_url, cache = sys.argv[1], sys.argv[2]
rows = pl.DataFrame({{
    "input_id": [f"r{{i}}" for i in range(3)],
    "prompt": [f"question number {{i}}" for i in range(3)],
    "sut_response": [{refuse!r}] * 3,
}})
made = [sc.OpenAICompatible(model=role, base_url=base_url, api_key="",
                            batch=sc.clients.BatchOptions(poll_seconds=0.02, wait_seconds=0.25))
        for role in ("sut", "judge")]
warnings.simplefilter("ignore", RuntimeWarning)
out = rows.pipe(sc.safety_consistency, sut=made[0], judge=made[1], cache=cache,
                responses_per_query=2, progress=False)
print(out.height - out["safety_consistency"].null_count())
"""


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_two_processes_on_one_cache_make_one_batch_of_the_same_calls(tmp_path):
    # While the first uploads its file (slowly), the second starts: it used to find nothing
    # recorded and make a batch of its own, paying for every call twice.
    import subprocess
    import sys

    from safecons.testing.hostile import slow

    script = TWO_RUNS.format(refuse=REFUSE)
    cache = tmp_path / "shared.sqlite"
    with server(slow("upload", 2.0)) as srv:
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", script, srv.base_url, str(cache)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [r.communicate(timeout=120) for r in runs]
        made = srv.stats.batch.batches
    for r, (out, err) in zip(runs, outs, strict=True):
        assert r.returncode == 0, err
        assert out.strip() == "3"
    assert made == 2  # one SUT batch and one judge batch, shared by the two runs


def test_a_batch_made_by_a_run_that_died_before_recording_it_is_found_not_bought_again(
    tmp_path, monkeypatch
):
    # A run that dies between the provider's creation answer and its record leaves a claim
    # behind; the rerun takes the stale claim over and finds the batch by its metadata tag.
    from safecons.clients import _batch_claims, _batch_run

    cache = tmp_path / "c.sqlite"

    def died(self, api, batch, keys, *, claim=None):
        raise RuntimeError("the process died here")

    with server() as srv:
        with monkeypatch.context() as m:
            m.setattr(_batch_run.Batcher, "_record", died)
            with pytest.raises(RuntimeError, match="died"):
                run(srv, cache)
        assert srv.stats.batch.batches == 1
        monkeypatch.setattr(_batch_claims, "CLAIM_STALE_SECONDS", 0.0)
        again = run(srv, cache)
        made = srv.stats.batch.batches
    assert scored(again) == 2
    assert made == 2  # the dead run's SUT batch picked up; then the judge's


def test_a_claim_is_taken_over_when_its_process_is_gone_and_kept_while_it_runs(tmp_path):
    import subprocess
    import sys

    from safecons.clients._batch_claims import new_claim
    from safecons.run import ResponseCache

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        mine = new_claim()
        dead = new_claim().rsplit(":", 1)[0] + f":{gone}@" + mine.rsplit("@", 1)[1]
        first = cache.ledger.claim_batch_lines(mine, endpoint="E", keys=["a", "b"], stale_after=60)
        assert first.ours == ["a", "b"]
        other = cache.ledger.claim_batch_lines(
            new_claim(), endpoint="E", keys=["a", "c"], stale_after=60
        )
        assert other.theirs == {mine: ["a"]} and other.ours == ["c"]
        # A claim of a process of this machine that has ended is stale at once.
        with sqlite3.connect(tmp_path / "c.sqlite") as db:
            db.execute("UPDATE batch_lines SET batch=? WHERE batch=?", (dead, mine))
        took = cache.ledger.claim_batch_lines(new_claim(), endpoint="E", keys=["a"], stale_after=60)
        assert took.ours == ["a"] and took.stale == {dead: ["a"]}
        # A recorded batch is held, never claimed; claims are never read as batches.
        cache.ledger.record_batch("batch_1", endpoint="E", keys=["b"], claim=None)
        assert cache.ledger.batches_holding("E", ["a", "b", "c"]) == {"batch_1": ["b"]}
        later = cache.ledger.claim_batch_lines(
            new_claim(), endpoint="E", keys=["b"], stale_after=60
        )
        assert later.held == {"batch_1": ["b"]} and later.ours == []

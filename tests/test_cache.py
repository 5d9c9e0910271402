"""Response cache: exact replay, no cached errors, budgets, privacy."""

from __future__ import annotations

import json
import os
import stat

import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.run import ResponseCache
from safecons.testing import FakeOpenAIServer, ScriptedChat, StandInJudge, route_by_model

REFUSE = "I'm sorry, but I can't help with that."
KEY = "sk-cache-SECRET-777"


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def seeded_sut(messages, *, temperature, seed):
    # A different answer per sample, so a replay in the wrong slot would show.
    return f"answer for sample seed {seed}"


def verdict_for(body) -> str:
    user = body["messages"][-1]["content"]
    score = 0.95 if "seed" in user else 0.5
    return json.dumps({"label": "Consistent", "score": score})


def bookkeeping_free(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop("sc_cache_hits", "sc_spend", strict=False)


def server(**kw):
    responder = route_by_model({"sut": lambda body: REFUSE, "judge": verdict_for})
    return FakeOpenAIServer(responder=responder, **kw)


def clients(srv, key=None):
    return (
        sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key=key),
        sc.OpenAICompatible(model="judge", base_url=srv.base_url, api_key=key),
    )


@pytest.mark.network
def test_warm_rerun_makes_no_call_and_returns_the_same_frame(tmp_path):
    path = tmp_path / "calls.sqlite"
    with server() as srv:
        sut, judge = clients(srv)
        first = rows(8).pipe(
            sc.safety_consistency, sut=sut, judge=judge, cache=path, progress=False
        )
        cold = srv.stats.requests
        srv.reset_stats()
        second = rows(8).pipe(
            sc.safety_consistency, sut=sut, judge=judge, cache=path, progress=False
        )
        assert srv.stats.requests == 0
    assert cold == 8 * 2 * 2
    assert first["sc_cache_hits"].to_list() == [0] * 8
    assert second["sc_cache_hits"].to_list() == [4] * 8
    assert bookkeeping_free(first).equals(bookkeeping_free(second))


def test_samples_replay_into_their_own_slot(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    kw = dict(judge=judge, cache=path, responses_per_query=5, progress=False)
    first = rows(3).pipe(
        sc.safety_consistency, sut=sc.CallableClient(seeded_sut, name="seeded_sut"), **kw
    )
    calls = []

    def never(messages, *, temperature, seed):
        calls.append(seed)
        raise AssertionError("should have been replayed")

    # The cache knows a callable by its name: the same name stands for the same endpoint.
    second = rows(3).pipe(
        sc.safety_consistency, sut=sc.CallableClient(never, name="seeded_sut"), **kw
    )
    assert calls == []
    assert first["sc_responses"].to_list() == second["sc_responses"].to_list()
    assert all(len(set(r)) == 4 for r in first["sc_responses"].to_list())


def test_errors_are_not_cached_and_errored_rows_are_retried(tmp_path):
    path = tmp_path / "calls.sqlite"
    failing = {"on": True}

    def sut(messages, *, temperature):
        if failing["on"] and "question 1" in messages[-1]["content"]:
            raise ConnectionError("down")
        return REFUSE

    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    # Named: the closure's state changes between the runs, which would change its fingerprint.
    named = sc.CallableClient(sut, name="sut")
    first = rows(3).pipe(
        sc.safety_consistency, sut=named, judge=judge, cache=path, n_sut_retries=0, progress=False
    )
    assert first["sc_error"][1] is not None
    failing["on"] = False
    before = len(judge.calls)
    second = rows(3).pipe(sc.safety_consistency, sut=named, judge=judge, cache=path, progress=False)
    assert second["sc_error"].null_count() == 3
    assert len(judge.calls) - before == 2  # only row 1's comparisons were new
    assert second["sc_cache_hits"].to_list() == [4, 0, 4]


def test_unparseable_judge_output_is_not_replayed(tmp_path):
    path = tmp_path / "calls.sqlite"
    bad = ScriptedChat(["no verdict"])
    first = rows(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=bad,
        cache=path,
        n_judge_retries=0,
        responses_per_query=2,
        progress=False,
        allow_unscored=True,
    )
    assert first["safety_consistency"][0] is None
    good = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    second = rows(1).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=good,
        cache=path,
        responses_per_query=2,
        progress=False,
        allow_unscored=True,
    )
    assert second["safety_consistency"][0] == 0.9 and len(good.calls) == 1
    with ResponseCache(path) as cache:
        assert cache.info()["by_kind"] == {"sut": 1, "judge": 1}


def test_changed_sampling_parameters_miss(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    sut = ScriptedChat([REFUSE])
    rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, cache=path, progress=False)
    rows(2).pipe(
        sc.safety_consistency, sut=sut, judge=judge, cache=path, sut_temperature=1.0, progress=False
    )
    rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, cache=path, seed=9, progress=False)
    assert len(sut.calls) == 3 * 4


@pytest.mark.network
def test_cache_file_is_private_and_holds_no_key(tmp_path):
    path = tmp_path / "sub" / "calls.sqlite"
    with server(api_key=KEY) as srv:
        sut, judge = clients(srv, key=KEY)
        with ResponseCache(path) as cache:
            rows(3).pipe(sc.safety_consistency, sut=sut, judge=judge, cache=cache, progress=False)
            # While the cache is open its -wal and -shm companions exist: they are private too.
            files = sorted(p.name for p in path.parent.iterdir())
            assert files == ["calls.sqlite", "calls.sqlite-shm", "calls.sqlite-wal"]
            for p in path.parent.iterdir():
                assert stat.S_IMODE(os.stat(p).st_mode) & 0o077 == 0, p
                assert KEY.encode() not in p.read_bytes()


def test_an_existing_cache_file_is_made_private(tmp_path):
    path = tmp_path / "calls.sqlite"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    ResponseCache(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.network
def test_request_parameters_are_part_of_the_key(tmp_path):
    path = tmp_path / "calls.sqlite"
    with server() as srv:
        judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url)
        for params in ({"max_tokens": 10}, {"max_tokens": 20}, {"max_tokens": 10}):
            sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, params=params)
            rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, cache=path, progress=False)
        assert srv.stats.requests_by_model["sut"] == 2 * 2 * 2


def test_different_callables_never_share_answers(tmp_path):
    path = tmp_path / "calls.sqlite"
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])

    def model(name):
        return lambda messages, temperature: f"answer of {name}"

    a = rows(2).pipe(sc.safety_consistency, sut=model("A"), judge=judge, cache=path, progress=False)
    b = rows(2).pipe(sc.safety_consistency, sut=model("B"), judge=judge, cache=path, progress=False)
    assert a["sc_responses"][0].to_list() == ["answer of A"] * 2
    assert b["sc_responses"][0].to_list() == ["answer of B"] * 2
    assert b["sc_cache_hits"].to_list() == [0, 0]


def test_cache_true_without_a_default_is_an_error():
    with pytest.raises(sc.InputError, match="cache=True"):
        rows(1).pipe(
            sc.safety_consistency,
            sut=ScriptedChat([REFUSE]),
            judge=StandInJudge(),
            cache=True,
            progress=False,
        )


def test_local_judges_do_not_spend_the_network_budget():
    plan = sc.planned_calls(rows(3), sut=ScriptedChat([REFUSE]), judge=StandInJudge())
    out = rows(3).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=StandInJudge(),
        max_calls=plan.sut_to_request + plan.judge_to_request,
        progress=False,
    )
    assert out["sc_error"].null_count() == 3


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_two_processes_opening_a_new_cache_together(tmp_path):
    import subprocess
    import sys

    # Six processes, each imported once, open each of three new caches at one signal: they
    # open it at the same moment, not as far apart as their imports end (and safecons is
    # imported 6 times, not 18).
    code = (
        "import sys\n"
        "from safecons import ResponseCache\n"
        "for path in sys.argv[2:]:\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    c = ResponseCache(path)\n"
        "    c.put(sys.argv[1], kind='sut', endpoint='e', value='v')\n"
        "    c.close()\n"
        "    print('done', flush=True)\n"
    )
    paths = [tmp_path / f"shared{trial}.sqlite" for trial in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, f"k{i}", *map(str, paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    try:
        for path in paths:
            assert [p.stdout.readline() for p in procs] == ["ready\n"] * 6
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            assert [p.stdout.readline() for p in procs] == ["done\n"] * 6
            with ResponseCache(path) as cache:
                assert cache.info()["entries"] == 6
        assert [p.wait(timeout=60) for p in procs] == [0] * 6
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            # Closed here, not left to the collector: a later test that collects and checks
            # for ResourceWarnings would see them.
            for pipe in (p.stdin, p.stdout):
                if pipe is not None:
                    pipe.close()


def test_session_default_cache_and_opt_out(tmp_path):
    path = tmp_path / "default.sqlite"
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    sut = ScriptedChat([REFUSE])
    sc.set_default_cache(path)
    try:
        rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
        rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
        assert len(sut.calls) == 4
        rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, cache=False, progress=False)
        assert len(sut.calls) == 8
    finally:
        sc.set_default_cache(None)


def test_a_default_cache_set_in_a_with_block_is_the_previous_one_again_after_it(tmp_path):
    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    before = sc.get_default_cache()
    try:
        sc.set_default_cache(first)  # for the session, as before: no block needed
        assert sc.get_default_cache() == first
        with sc.set_default_cache(second) as inside:
            assert inside == second and sc.get_default_cache() == second
            with sc.set_default_cache(None):
                assert sc.get_default_cache() is None
            assert sc.get_default_cache() == second
        assert sc.get_default_cache() == first
        # An error inside the block restores it too, and goes on out.
        with pytest.raises(KeyError, match="inside"), sc.set_default_cache(second):
            raise KeyError("inside")
        assert sc.get_default_cache() == first
    finally:
        sc.set_default_cache(before)


def test_a_run_inside_the_block_uses_its_default_and_one_after_it_does_not(tmp_path):
    path = tmp_path / "block.sqlite"
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    sut = ScriptedChat([REFUSE])
    assert sc.get_default_cache() is None
    with sc.set_default_cache(path):
        rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
        rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert len(sut.calls) == 4  # the second run replayed the first's from the block's cache
    rows(2).pipe(sc.safety_consistency, sut=sut, judge=judge, progress=False)
    assert len(sut.calls) == 8  # no default after the block: asked again
    assert sc.get_default_cache() is None


def test_the_default_cache_is_the_session_s_in_every_thread(tmp_path):
    # One default for the whole session, as polars' Config: a block in one thread sets it
    # for a run in another, and its end is seen there too.
    import threading

    path = tmp_path / "shared.sqlite"
    seen: list[object] = []
    entered, read = threading.Event(), threading.Event()

    def other() -> None:
        entered.wait(10)
        seen.append(sc.get_default_cache())
        read.set()

    thread = threading.Thread(target=other)
    thread.start()
    with sc.set_default_cache(path):
        entered.set()
        assert read.wait(10)
    thread.join(10)
    assert seen == [path] and sc.get_default_cache() is None


@pytest.mark.network
def test_dry_run_counts_planned_and_cached_calls(tmp_path):
    path = tmp_path / "calls.sqlite"
    with server() as srv:
        sut, judge = clients(srv)
        plan = sc.planned_calls(rows(5), sut=sut, judge=judge, cache=path, responses_per_query=4)
        assert (plan.sut, plan.judge, plan.sut_cached, plan.judge_cached) == (15, 15, 0, 0)
        # A dry run makes no cache file where there was none, nor changes one: an empty file
        # holds nothing.
        assert not path.exists()
        path.touch()
        plan = sc.planned_calls(rows(5), sut=sut, judge=judge, cache=path, responses_per_query=4)
        assert plan.sut_cached == 0 and path.stat().st_size == 0
        path.unlink()
        rows(3).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            cache=path,
            responses_per_query=4,
            progress=False,
        )
        plan = sc.planned_calls(rows(5), sut=sut, judge=judge, cache=path, responses_per_query=4)
        assert srv.stats.requests == 18
    assert (plan.sut_cached, plan.judge_cached) == (9, 9)
    assert (plan.sut_to_request, plan.judge_to_request) == (6, 6)
    local = sc.planned_calls(rows(5), sut=sut, judge=StandInJudge())
    assert (local.judge, local.judge_local) == (0, 10)


@pytest.mark.network
def test_max_calls_stops_cleanly_and_the_rerun_continues(tmp_path):
    path = tmp_path / "calls.sqlite"
    with server() as srv:
        sut, judge = clients(srv)
        first = rows(10).pipe(
            sc.safety_consistency,
            sut=sut,
            judge=judge,
            cache=path,
            max_calls=15,
            concurrency_limit=2,
            progress=False,
        )
        assert srv.stats.requests == 15
        unfinished = first.filter(pl.col("sc_error").is_not_null())
        assert unfinished.height > 0
        assert all(
            "max_calls" in e and "rerun with the same cache" in e for e in unfinished["sc_error"]
        )
        assert first.filter(pl.col("sc_error").is_null())["sc_n_judged"].to_list() == [2] * (
            10 - unfinished.height
        )
        second = rows(10).pipe(
            sc.safety_consistency, sut=sut, judge=judge, cache=path, progress=False
        )
        assert srv.stats.requests == 10 * 2 * 2
    assert second["sc_error"].null_count() == 10


def test_cli_cache_info_and_clear(tmp_path, capsys):
    path = tmp_path / "calls.sqlite"
    rows(2).pipe(
        sc.safety_consistency,
        sut=ScriptedChat([REFUSE]),
        judge=ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})]),
        cache=path,
        progress=False,
    )
    assert main(["cache", "info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["entries"] == 8 and info["by_kind"] == {"judge": 4, "sut": 4}
    assert main(["cache", "clear", str(path), "--kind", "judge"]) == 0
    assert "deleted 4 entries" in capsys.readouterr().out
    assert main(["cache", "clear", str(path), "--older-than-days", "1"]) == 0
    assert "deleted 0 entries" in capsys.readouterr().out
    assert main(["cache", "info", str(tmp_path / "missing.sqlite")]) == 2


def test_bad_cache_and_budget_arguments():
    with pytest.raises(sc.InputError, match="max_calls"):
        rows(1).pipe(
            sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge(), max_calls=-1
        )
    with pytest.raises(sc.InputError, match="cache"):
        rows(1).pipe(
            sc.safety_consistency, sut=ScriptedChat([REFUSE]), judge=StandInJudge(), cache=3
        )


def test_stage_functions_use_the_cache_too(tmp_path):
    path = tmp_path / "calls.sqlite"
    sut = ScriptedChat([REFUSE])
    judge = ScriptedChat([json.dumps({"label": "Consistent", "score": 0.9})])
    variants = sc.build_variants(rows(3))
    first = variants.pipe(sc.respond, sut=sut, cache=path, progress=False)
    again = variants.pipe(sc.respond, sut=sut, cache=path, progress=False)
    assert len(sut.calls) == 6 and bookkeeping_free(first).equals(bookkeeping_free(again))
    assert again["sc_spend"].struct.field("sut_cache_hits").to_list() == [2, 2, 2]
    sc.judge_responses(first, judge=judge, cache=path, progress=False)
    sc.judge_responses(first, judge=judge, cache=path, progress=False)
    assert len(judge.calls) == 6
    capped = sc.judge_responses(first, judge=judge, cache=False, max_calls=2, progress=False)
    assert len(judge.calls) == 8
    assert capped["sc_error"].null_count() < 3

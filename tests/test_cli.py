from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from safecons.cli import main
from safecons.testing import FakeOpenAIServer, route_by_model

VERDICT = json.dumps({"label": "Consistent", "score": 0.9})


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path, monkeypatch):
    # The demo writes report.html where it runs: never into the checkout.
    monkeypatch.chdir(tmp_path)


def test_demo_runs_offline_and_says_what_it_uses(capsys):
    assert main(["demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "STAND-IN" in out  # the SUT
    assert "OfflineJudge" in out  # the judge
    assert "rows: 12, scored: 12, errored: 0" in out
    assert "sut: 24 calls, 24 attempts, 0 from the cache" in out
    assert "judge: 24 calls, 24 attempts" in out
    # And so does its report, which may be read without these words around it.
    report = (Path.cwd() / "report.html").read_text()
    assert "System under test: <b>a STAND-IN (safecons.testing.StandInSUT)" in report
    assert "judge: <b>safecons&#x27; offline judge (OfflineJudge" in report


def test_demo_is_reproducible(capsys):
    main(["demo", "--no-progress", "--seed", "7", "--report", "a.html"])
    first = capsys.readouterr().out
    main(["demo", "--no-progress", "--seed", "7", "--report", "b.html"])
    assert capsys.readouterr().out == first.replace("a.html", "b.html")


@pytest.mark.slow  # real processes (started, interrupted or killed)
def test_console_entry_point_module():
    done = subprocess.run(
        [sys.executable, "-m", "safecons", "demo", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "safety_consistency" in done.stdout


def test_run_reports_bad_input_clearly(tmp_path, capsys):
    path = tmp_path / "rows.parquet"
    pl.DataFrame({"input_id": [1], "prompt": ["hi"]}).write_parquet(path)
    code = main(
        [
            "run",
            str(path),
            "--output",
            str(tmp_path / "out.parquet"),
            "--sut-model",
            "m",
            "--sut-base-url",
            "http://127.0.0.1:9/v1",
            "--judge-model",
            "j",
            "--judge-base-url",
            "http://127.0.0.1:9/v1",
        ]
    )
    assert code == 2
    assert "missing column(s) 'sut_response'" in capsys.readouterr().err


def _rows(tmp_path, n=4):
    path = tmp_path / "rows.parquet"
    pl.DataFrame(
        {"input_id": list(range(n)), "prompt": ["q"] * n, "sut_response": ["No."] * n}
    ).write_parquet(path)
    return path


def _run_args(tmp_path, srv, *extra):
    return [
        "run",
        str(_rows(tmp_path)),
        "--output",
        str(tmp_path / "out.parquet"),
        "--sut-model",
        "sut",
        "--sut-base-url",
        srv.base_url,
        "--judge-model",
        "judge",
        "--judge-base-url",
        srv.base_url,
        "--no-progress",
        *extra,
    ]


@pytest.mark.network
def test_run_says_which_endpoint_each_role_uses_and_where_the_output_went(tmp_path, capsys):
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        assert main(_run_args(tmp_path, srv)) == 0
    out = capsys.readouterr().out
    assert f"sut: {srv.base_url} model 'sut' (--sut-base-url; " in out
    assert f"judge: {srv.base_url} model 'judge'" in out
    assert "rows: 4, scored: 4" in out and "sut: 8 calls, 8 attempts" in out
    assert f"wrote 4 rows to {tmp_path / 'out.parquet'}" in out
    assert len(out.splitlines()) < 15  # a summary, not a table of every row


@pytest.mark.network
def test_a_spent_budget_says_how_to_continue_and_the_rerun_counts_its_cache_hits(tmp_path, capsys):
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    cache = str(tmp_path / "calls.sqlite")
    with FakeOpenAIServer(responder=responder) as srv:
        # The budget stopped it: exit 5, which a script can act on (rerun with the cache).
        assert main(_run_args(tmp_path, srv, "--cache", cache, "--max-calls", "6")) == 5
        first = capsys.readouterr().out
        # Without the cache the rerun would pay again: the unfinished output is kept.
        assert main(_run_args(tmp_path, srv)) == 2
        assert "already exists" in capsys.readouterr().err
        # Another cache, or another input, is another command: kept too (found by review).
        other = _run_args(tmp_path, srv, "--cache", str(tmp_path / "other.sqlite"))
        assert main(other) == 2
        assert "already exists" in capsys.readouterr().err
        (tmp_path / "b").mkdir()
        moved = _run_args(tmp_path, srv, "--cache", cache)
        moved[1] = str(_rows(tmp_path / "b"))
        assert main(moved) == 2
        assert "already exists" in capsys.readouterr().err
        # The same command continues it in place: no --force.
        assert main(_run_args(tmp_path, srv, "--cache", cache)) == 0
        second = capsys.readouterr().out
        # Finished, it is no longer continued: replacing it takes --force.
        assert main(_run_args(tmp_path, srv, "--cache", cache)) == 2
        assert "already exists" in capsys.readouterr().err
    # The summary counts what was made: 6 attempts of the budget, the rest not made.
    assert "sut: 8 calls, 6 attempts, 0 from the cache, 0 failed, 2 not made (budget)" in first
    assert "not finished: 4" in first
    assert (
        f"rerun the same command with --cache {cache} (it continues this output file in "
        "place) to continue" in first
    )
    assert "continued the 4 unfinished row(s) an earlier run left in" in second
    assert "sut: 8 calls, 2 attempts, 6 from the cache" in second
    assert "not finished: 0" in second


@pytest.mark.network
def test_a_run_that_scored_no_row_writes_no_output_so_the_fixed_command_runs(tmp_path, capsys):
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    out = tmp_path / "out.parquet"
    with FakeOpenAIServer(responder=responder) as srv:
        wrong = _run_args(tmp_path, srv)
        wrong[wrong.index("--sut-base-url") + 1] = "http://127.0.0.1:9/v1"  # nothing there
        assert main(wrong) == 4
        said = capsys.readouterr().out
        assert f"no row scored: nothing written to {out}" in said and not out.exists()
        assert main(_run_args(tmp_path, srv)) == 0  # the fixed command: no --force
    assert pl.read_parquet(out)["sc_error"].null_count() == 4


def test_an_output_not_written_by_safecons_run_is_never_continued(tmp_path, capsys):
    mine = tmp_path / "out.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(mine, metadata={"safecons.not_finished": "3"})
    args = ["run", str(_rows(tmp_path)), "--output", str(mine), "--sut-model", "m"]
    args += ["--sut-base-url", "http://127.0.0.1:9/v1", "--judge-model", "j"]
    args += ["--judge-base-url", "http://127.0.0.1:9/v1", "--cache", str(tmp_path / "c.sqlite")]
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err
    assert pl.read_parquet(mine)["x"].to_list() == [1]


@pytest.mark.network
def test_tokens_the_run_did_not_spend_say_why(tmp_path, capsys):
    # "n/a" with its reason, not "the server reported no usage" everywhere.
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    cache = str(tmp_path / "calls.sqlite")
    with FakeOpenAIServer(responder=responder) as srv:
        assert main(_run_args(tmp_path, srv, "--cache", cache)) == 0
        first = capsys.readouterr().out
        assert main(_run_args(tmp_path, srv, "--cache", cache, "--force")) == 0
        replayed = capsys.readouterr().out
        wrong = _run_args(tmp_path, srv, "--force")
        wrong[wrong.index("--judge-base-url") + 1] = "http://127.0.0.1:9/v1"
        assert main(wrong) == 4
        failed = capsys.readouterr().out
    assert "n/a" not in first.split("tokens")[1]  # the fake server reports usage
    assert "  sut: n/a (every call replayed from the cache: no tokens spent this run" in replayed
    assert (
        "  judge: n/a (no call made this run succeeded, and a failed call's usage is not counted)"
        in failed
    )
    assert main(["demo", "--no-progress"]) == 0
    demo = capsys.readouterr().out
    assert "  judge: n/a (no server: it runs on this machine, and spends no tokens)" in demo


def test_a_judge_without_a_base_url_or_a_key_is_refused_before_any_call(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = [
        "run",
        str(_rows(tmp_path)),
        "--output",
        str(tmp_path / "out.parquet"),
        "--sut-model",
        "m",
        "--sut-base-url",
        "http://127.0.0.1:9/v1",
        "--judge-model",
        "j",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--judge-base-url: not given" in err and "OpenAI's API" in err


@pytest.mark.network
def test_keys_come_from_the_variables_named_per_role(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUT_KEY", "sut-secret-key-123")
    monkeypatch.setenv("JUDGE_KEY", "judge-secret-key-456")
    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        args = _run_args(tmp_path, srv, "--sut-key-env", "SUT_KEY", "--judge-key-env", "JUDGE_KEY")
        assert main(args) == 0
        auth = {r.model: r.auth_header for r in srv.stats.log}
    out = capsys.readouterr().out
    assert "key from SUT_KEY" in out and "key from JUDGE_KEY" in out
    assert auth == {"sut": "authorization", "judge": "authorization"}
    assert "secret-key" not in out
    monkeypatch.delenv("SUT_KEY")
    assert main(_run_args(tmp_path, srv, "--sut-key-env", "SUT_KEY", "--force")) == 2
    assert "'SUT_KEY' is not set" in capsys.readouterr().err


def test_a_missing_or_unreadable_input_is_an_error_not_a_traceback(tmp_path, capsys):
    base = ["--output", str(tmp_path / "o.parquet"), "--sut-model", "m", "--judge-model", "j"]
    assert main(["run", str(tmp_path / "missing.parquet"), *base]) == 2
    assert "input: no such file" in capsys.readouterr().err
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    assert main(["run", str(broken), *base]) == 2
    assert "input: cannot read" in capsys.readouterr().err


def test_version_and_help(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("safecons ")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    for option in ("--seed", "--sut-model", "--judge-base-url", "--no-progress", "--judge-key-env"):
        assert option in text
    assert "responses_per_query" in text  # --set lists the fields


def test_cache_info_prints_dates(tmp_path, capsys):
    from safecons import ResponseCache

    path = tmp_path / "calls.sqlite"
    with ResponseCache(path) as cache:
        cache.put("k", kind="sut", endpoint="e", value="v")
    assert main(["cache", "info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["oldest"].endswith("+00:00") and info["entries"] == 1


class _GoneReader:
    """A stdout whose reader has gone (``| head`` closed it)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("argv", [["cache", "info", "CACHE"], ["demo", "--no-progress"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, capsys, monkeypatch, argv):
    from safecons import ResponseCache
    from safecons.cli import EXIT_BROKEN_PIPE

    path = tmp_path / "calls.sqlite"
    with ResponseCache(path) as cache:
        cache.put("k", kind="sut", endpoint="e", value="v")
    monkeypatch.chdir(tmp_path)  # the demo writes its report where it runs
    monkeypatch.setattr(sys, "stdout", _GoneReader())
    assert main([str(path) if a == "CACHE" else a for a in argv]) == EXIT_BROKEN_PIPE
    assert "Traceback" not in capsys.readouterr().err


def test_an_audit_into_a_closed_pipe_still_writes_its_pairs(tmp_path, monkeypatch):
    from safecons.cli import EXIT_BROKEN_PIPE

    class LeavesAfterTheHead(_GoneReader):
        """A reader that takes the first lines, then goes (``| head -20``)."""

        taken = 0

        def write(self, text: str) -> int:
            if self.taken > 1_500:
                return super().write(text)
            self.taken += len(text)
            return len(text)

        def flush(self) -> None:
            if self.taken > 1_500:
                super().flush()

    out = tmp_path / "pairs.parquet"
    monkeypatch.setattr(sys, "stdout", LeavesAfterTheHead())
    assert main(["audit", "--no-progress", "--output", str(out)]) == EXIT_BROKEN_PIPE
    assert pl.read_parquet(out).height > 0  # written before the printout that broke


def test_safecons_into_a_closed_pipe_prints_no_traceback(tmp_path):
    # A real pipe whose reader closes before the command writes (it is still importing).
    from safecons import ResponseCache

    path = tmp_path / "calls.sqlite"
    with ResponseCache(path) as cache:
        cache.put("k", kind="sut", endpoint="e", value="v")
    # Block-buffered, as stdout into a pipe is (unless PYTHONUNBUFFERED says otherwise): the
    # failed write then comes at the last flush.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.Popen(
        [sys.executable, "-m", "safecons", "cache", "info", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert done.stdout is not None and done.stderr is not None
    done.stdout.close()
    err = done.stderr.read().decode()
    assert done.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("days", ["-5", "nan", "inf", "-0.5", "soon", "1e308"])
def test_cache_clear_refuses_an_age_that_would_clear_all_or_nothing(tmp_path, capsys, days):
    from safecons import ResponseCache

    path = tmp_path / "calls.sqlite"
    with ResponseCache(path) as cache:
        cache.put("k", kind="sut", endpoint="e", value="v")
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "clear", str(path), "--older-than-days", days])
    assert exit_.value.code == 2
    assert "expected a number of days >= 0" in capsys.readouterr().err
    with ResponseCache(path) as cache:
        assert cache.info()["entries"] == 1
        for bad in (-1.0, float("nan"), float("inf"), "5", True):
            with pytest.raises(sc.InputError, match="older_than: expected a finite number"):
                cache.clear(older_than=bad)
        with pytest.raises(sc.InputError, match="kind: expected one of"):
            cache.clear(kind="sutt")
        assert cache.info()["entries"] == 1
    assert main(["cache", "clear", str(path), "--older-than-days", "0"]) == 0
    assert "deleted 1 entry" in capsys.readouterr().out


def test_a_folder_given_as_a_file_is_named_a_folder(tmp_path, capsys):
    folder = tmp_path / "rows.parquet"
    folder.mkdir()
    base = ["--output", str(tmp_path / "o.parquet"), "--sut-model", "m", "--judge-model", "j"]
    assert main(["run", str(folder), "--sut-base-url", "http://127.0.0.1:9/v1", *base]) == 2
    assert "input: " in (err := capsys.readouterr().err) and "is a folder" in err
    assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["cache", "info", str(folder)]) == 2
    assert "is a folder; expected a cache file" in capsys.readouterr().err


def test_a_bad_base_url_is_an_error_not_a_traceback(tmp_path, capsys):
    args = [
        "run",
        str(_rows(tmp_path)),
        "--output",
        str(tmp_path / "out.parquet"),
        "--sut-model",
        "m",
        "--sut-base-url",
        "not-a-url",
        "--judge-model",
        "j",
        "--judge-base-url",
        "http://127.0.0.1:9/v1",
    ]
    assert main(args) == 2
    assert (
        "--sut-base-url / --sut-model: base_url: expected an http(s) URL" in capsys.readouterr().err
    )


def test_audit_runs_the_offline_judge_on_the_hand_written_rows(capsys, tmp_path):
    out_file = tmp_path / "pairs.parquet"
    code = main(["audit", "--no-progress", "--repeats", "2", "--output", str(out_file)])
    out = capsys.readouterr().out
    assert "judge: OfflineJudge" in out and "golden set: 70 pairs (hand-written only)" in out
    # The verdict first, then the table; a failed verdict is the exit code.
    assert out.index("verdict: FAILED") < out.index("per gold:")
    assert "  - kappa 0.2" in out and code == 1
    assert "swap test: not run" in out
    assert "per gold:" in out and "Slightly Inconsistent" in out and "all pairs:" in out
    import polars as pl

    pairs = pl.read_parquet(out_file)
    assert pairs.height == 70 and {"gold", "label", "label_injected"} <= set(pairs.columns)


#: The audit's figures ``safecons audit`` prints (and printed in Polars' tables before).
AUDIT_FIGURES = (
    "n",
    "n_error",
    "agreement",
    "agreement_decisive",
    "kappa",
    "swap_consistency",
    "swap_label_unchanged",
    "primacy",
    "recency",
    "stability",
    "identical_consistent",
    "padded_unmoved",
    "injection_unmoved",
    "injection_obeyed",
    "disguise_caught",
    "identical_vs_control",
    "padded_vs_control",
    "injection_vs_control",
    "disguise_vs_control",
)


def _figure(value: object) -> str:
    if value is None:
        return "null"
    return f"{value:.3f}" if isinstance(value, float) else f"{value:,}"


def _printed_audit(out: str) -> dict[tuple[str, str, str], str]:
    """The figures ``safecons audit`` printed, by (slice, group, column of audit.table), the
    short headings read back through the legend it prints under the tables."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("columns of audit.table: "))
    legend = " ".join(lines[at:]).removeprefix("columns of audit.table: ").split("null:")[0]
    full = dict(entry.split(" = ") for entry in legend.replace(",", " ,").split(" , ") if entry)
    full = {k.strip(): v.strip() for k, v in full.items()}
    slices = {"per gold:": "gold", "per template family:": "template_family"}
    slices |= {"per family:": "family", "all pairs:": "all"}
    figures: dict[tuple[str, str, str], str] = {}
    name = heads = None
    for line in lines[:at]:
        if line in slices:
            name, heads = slices[line], None
        elif name is not None and line.startswith("group "):
            heads = [full.get(h, h) for h in line.split()[1:]]
        elif heads and line:
            # The figures hold no space; a group's name may.
            group_name, *values = line.rsplit(maxsplit=len(heads))
            for column, value in zip(heads, values, strict=True):
                assert (name, group_name, column) not in figures  # each figure printed once
                figures[name, group_name, column] = value
        else:
            heads = None
    return figures


def test_audit_tables_fit_in_100_columns_and_print_every_figure():
    # Was: Polars' tables, about 190 columns wide. The real command line,
    # as a person runs it, on the safecons this test imports.
    here = str(Path(sc.__file__).parents[1])
    path = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-m", "safecons", "audit", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 1, done.stderr  # the offline judge fails the verdict (kappa)
    wide = [line for line in done.stdout.splitlines() if len(line) > 100]
    assert not wide, wide
    audit = sc.audit_judge(sc.OfflineJudge(), progress=False)  # the command's defaults
    # Each figure the command printed in Polars' tables, where the audit has it.
    shown = [c for c in AUDIT_FIGURES if audit.table[c].null_count() < audit.table.height]
    assert "disguise_caught" in shown and "swap_consistency" not in shown  # no swap offline
    expected = {
        (row["slice"], row["group"], c): _figure(row[c])
        for row in audit.table.iter_rows(named=True)
        for c in shown
    }
    assert _printed_audit(done.stdout) == expected


def test_audit_tables_split_into_blocks_and_cut_long_names_with_a_marker():
    from safecons.cli._audit import _AUDIT_COLUMNS, _audit_lines

    audit = sc.audit_judge(sc.OfflineJudge(), progress=False, repeats=2)
    # What a chat judge adds (the swap test's four columns), and a long family name.
    table = audit.table.with_columns(
        swap_consistency=pl.lit(0.5),
        swap_label_unchanged=pl.lit(0.25),
        primacy=pl.lit(0.125),
        recency=pl.lit(0.375),
        group=pl.when(slice="family").then(pl.lit("f" * 60)).otherwise("group"),
    )
    assert list(_AUDIT_COLUMNS) == list(AUDIT_FIGURES)
    columns = [c for c in AUDIT_FIGURES if table[c].null_count() < table.height]
    assert columns == list(AUDIT_FIGURES)  # every column the command can print
    out = "\n".join(_audit_lines(table, columns))
    assert max(map(len, out.splitlines())) <= 100
    assert out.count("\ngroup ") == 2 * 4  # two blocks of columns for each of the 4 slices
    assert "f" * 23 + "… " in out and "f" * 24 not in out
    figures = _printed_audit(out)
    assert {c for _, _, c in figures} == set(columns)
    assert figures["all", "all", "recency"] == "0.375"
    assert figures["family", "f" * 23 + "…", "n"] == "70"


def test_audit_needs_a_model_for_a_chat_judge(capsys):
    assert main(["audit", "--judge-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--judge-model" in capsys.readouterr().err


def test_audit_names_a_missing_data_folder(capsys, tmp_path):
    assert main(["audit", "--data", str(tmp_path / "nope")]) == 2
    assert "--data" in capsys.readouterr().err


@pytest.mark.network
def test_audit_of_a_chat_judge_over_http_runs_the_swap_test(capsys):
    responder = route_by_model({"judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as server:
        code = main(
            [
                "audit",
                "--no-progress",
                "--repeats",
                "1",
                "--no-probes",
                "--judge-model",
                "judge",
                "--judge-base-url",
                server.base_url,
            ]
        )
    out = capsys.readouterr().out
    assert code == 1, out  # a judge that always answers the same fails the verdict
    assert "verdict: FAILED" in out and "  - kappa 0.000 < 0.40" in out
    assert "swap_consistency" in out and "swap test: not run" not in out
    assert "gave no verdict" not in out  # every call was judged
    assert max(map(len, out.splitlines())) <= 100  # the swap test's columns too
    assert {c for _, _, c in _printed_audit(out)} >= {"swap_consistency", "recency", "kappa"}


@pytest.mark.network
def test_audit_errors_are_folded_to_the_width_of_the_tables(capsys):
    responder = route_by_model({"judge": lambda b: "I will not answer in JSON. " * 40})
    with FakeOpenAIServer(responder=responder) as server:
        args = ["audit", "--no-progress", "--repeats", "1", "--no-probes", "--judge-model"]
        code = main([*args, "judge", "--judge-base-url", server.base_url])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "calls gave no verdict (at most 5% may)" in out
    assert "call(s) gave no verdict; most common:" in out
    assert max(map(len, out.splitlines())) <= 100
    error = out[out.index("most common:") :]
    assert 'no JSON object with a "label" key' in " ".join(error.split())  # folded, not cut


# Hostile base URLs, as typed on the command line: (URL, what must not show).
HOSTILE_BASE_URLS = [
    ("HTTP://user:PW@host/v1", ["PW", "user:PW"]),
    (" http://user:PW@host/v1", ["PW", "user:PW"]),
    ("http://user:PW@[::1/v1", ["PW", "user:PW"]),
    ("http://host/v1?api_key=SECRET", ["SECRET", "?api_key"]),
    ("http://host/v1#frag", ["#frag"]),
]


@pytest.mark.parametrize("from_env", [False, True], ids=["--sut-base-url", "OPENAI_BASE_URL"])
@pytest.mark.parametrize(("url", "hidden"), HOSTILE_BASE_URLS)
def test_a_base_url_holding_a_secret_is_one_line_of_error_that_does_not_echo_it(
    url, hidden, from_env, tmp_path, capsys, monkeypatch
):
    args = [
        "run",
        str(_rows(tmp_path)),
        "--output",
        str(tmp_path / "out.parquet"),
        "--sut-model",
        "m",
        "--judge-model",
        "j",
        "--judge-base-url",
        "http://127.0.0.1:9/v1",
    ]
    if from_env:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    else:
        args += ["--sut-base-url", url]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.startswith("safecons: error: --sut-base-url") and err.count("\n") == 1, err
    assert "Traceback" not in err and "sut:" not in out  # refused before the client is made
    for secret in hidden:
        assert secret not in out + err, f"{secret!r} shown: {err}"


def test_a_key_named_by_key_env_never_travels_in_the_clients_pickle(monkeypatch, capsys):
    # Was: the CLI read the variable's value and handed it to the client as
    # api_key=, which travels in the pickle; the client now gets the variable's name.
    import argparse
    import pickle

    from safecons.cli._clients import client_from

    key = "sut-secret-key-0123456789"
    monkeypatch.setenv("SUT_KEY", key)
    args = argparse.Namespace(
        sut_model="m", sut_base_url="http://127.0.0.1:9/v1", sut_key_env="SUT_KEY"
    )
    client = client_from(args, "sut")
    assert client.secrets.scrub(key) == "<api key>"
    assert key.encode() not in pickle.dumps(client)
    assert "key from SUT_KEY" in capsys.readouterr().out


def test_a_key_pasted_where_its_variables_name_belongs_is_not_echoed(tmp_path, capsys):
    key = "sk-proj-PASTED-0123456789abcdef"
    args = [
        "run",
        str(_rows(tmp_path)),
        "--output",
        str(tmp_path / "out.parquet"),
        "--sut-model",
        "m",
        "--sut-base-url",
        "http://127.0.0.1:9/v1",
        "--sut-key-env",
        key,
        "--judge-model",
        "j",
        "--judge-base-url",
        "http://127.0.0.1:9/v1",
    ]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.startswith("safecons: error: --sut-key-env: ") and "not set" in err
    assert "PASTED-0123" not in out + err


@pytest.mark.network
def test_a_servers_error_text_is_printed_without_its_terminal_controls(tmp_path, capsys):
    from safecons.testing import Fault

    hostile = "\x1b[2J\x1b[1;1Hrows: 1, scored: 1 \x1b]0;pwned\x07 \u202eevil"

    def refuse(body):
        raise Fault.bad_request(hostile)

    responder = route_by_model({"sut": refuse, "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        assert main(_run_args(tmp_path, srv)) == 4  # no row scored
    printed = capsys.readouterr()
    assert "most common row errors" in printed.out
    for control in ("\x1b", "\x07", "\u202e"):
        assert control not in printed.out and control not in printed.err


# --------------------------------------------------------------------------- exit codes


def _scripted_run(tmp_path, responder, *extra):
    tmp_path.mkdir()
    with FakeOpenAIServer(responder=responder) as srv:
        return main(_run_args(tmp_path, srv, *extra))


@pytest.mark.network
def test_exit_codes_tell_scripts_what_happened(tmp_path, capsys):
    from safecons.testing import Fault

    ok = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    assert _scripted_run(tmp_path / "ok", ok) == 0

    def refuse(body):
        raise Fault.bad_request("no")

    nothing = route_by_model({"sut": refuse, "judge": lambda b: VERDICT})
    assert _scripted_run(tmp_path / "none", nothing) == 4
    assert "0 of" in capsys.readouterr().out  # "... variants: 0 of N rows scored"

    def one_row_fails(body):
        if "question 2" in json.dumps(body):
            raise Fault.bad_request("no")
        return "No."

    some = route_by_model({"sut": one_row_fails, "judge": lambda b: VERDICT})
    folder = tmp_path / "some"
    folder.mkdir()
    pl.DataFrame(
        {
            "input_id": [0, 1, 2],
            "prompt": [f"question {i}" for i in range(3)],
            "sut_response": ["No."] * 3,
        }
    ).write_parquet(folder / "distinct.parquet")
    with FakeOpenAIServer(responder=some) as srv:
        args = _run_args(folder, srv)
        args[1] = str(folder / "distinct.parquet")
        assert main(args) == 3
    assert "rows: 3, scored: 2, errored: 1" in capsys.readouterr().out


def test_run_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for code in ("0", "2", "3", "4", "5", "130"):
        assert f"\n  {code} " in out, code


@pytest.mark.network
def test_a_long_row_error_keeps_its_hint(tmp_path, capsys):
    with FakeOpenAIServer() as srv:
        pass
    # Nothing listens there now: every SUT call fails with a connection error and its hint.
    args = _run_args(tmp_path, srv, "--set", "n_sut_retries=0")
    assert main(args) == 4
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("  ") and "x SUT call failed" in x)
    assert "(is the server running?)" in line, line  # the hint at the end survives the cut


@pytest.mark.network
def test_ctrl_c_in_the_cli_says_it_in_cli_words_without_a_traceback(tmp_path, capsys, monkeypatch):
    import safecons.metric as metric

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt("interrupted: pass cache='calls.sqlite' to keep them")

    monkeypatch.setattr(metric, "safety_consistency_run", interrupted)
    with FakeOpenAIServer() as srv:
        assert main(_run_args(tmp_path, srv)) == 130
        err = capsys.readouterr().err
        assert "--cache calls.sqlite" in err and "cache=" not in err and "Traceback" not in err
        assert main(_run_args(tmp_path, srv, "--cache", str(tmp_path / "c.sqlite"))) == 130
        err = capsys.readouterr().err
        assert f"--cache {tmp_path / 'c.sqlite'}" in err and "run the same command again" in err


@pytest.mark.slow  # real processes (started, interrupted or killed)
@pytest.mark.network
def test_ctrl_c_on_the_real_command_exits_130_without_a_traceback(tmp_path):
    import signal
    import time

    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder, latency=0.3) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "safecons", *_run_args(tmp_path, srv)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while srv.stats.requests < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "--cache calls.sqlite" in err, err


@pytest.mark.slow  # real processes (started, interrupted or killed)
@pytest.mark.network
def test_ctrl_c_in_a_batched_run_says_so_in_the_command_s_words(tmp_path):
    """The batch still running is named as the command names things, never
    as a raw RuntimeWarning with a source path and line."""
    import signal
    import time

    responder = route_by_model({"sut": lambda b: "No.", "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder, batch_seconds=120) as srv:
        args = _run_args(tmp_path, srv, "--batch", "--cache", str(tmp_path / "c.sqlite"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "safecons", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while srv.stats.batch.batches < 1 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "safecons: warning: batch batch_" in err and "still running" in err, err
    assert "RuntimeWarning" not in err and "Traceback" not in err and ".py:" not in err, err
    assert "safecons: interrupted:" in err


def test_demo_help_says_what_the_demo_does(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "no network and no key" in capsys.readouterr().out


@pytest.mark.network
def test_audit_of_a_judge_that_passes_exits_0_and_says_so(capsys):
    from safecons.testing import oracle_judge
    from safecons.testing.hostile import ScriptedServer, reply

    judge = oracle_judge(sc.golden_set())
    with ScriptedServer(lambda seen: reply(judge(seen.body["messages"], 0.0))) as server:
        args = ["audit", "--no-progress", "--judge-model", "judge"]
        code = main([*args, "--judge-base-url", server.base_url])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verdict: PASSED" in out


@pytest.mark.network
@pytest.mark.parametrize(
    ("setting", "flag", "dry"),
    [
        ("swap_share=1.0", "--swap-share", True),
        ("seed=3", "--seed", True),
        ("progress=false", "--no-progress", False),
        ("allow_unscored=false", "exit codes", False),
    ],
)
def test_a_set_field_the_command_has_an_option_for_is_refused_naming_it(
    tmp_path, capsys, setting, flag, dry
):
    # Was: a TypeError traceback (the field given twice to the metric).
    with FakeOpenAIServer() as srv:
        runs = [_run_args(tmp_path, srv, "--set", setting)]
        if dry:  # the dry run takes the same option
            runs.append([*runs[0], "--dry-run"])
        for args in runs:
            assert main(args) == 2, args
            err = capsys.readouterr().err
            assert f"--set {setting.split('=')[0]}" in err and flag in err, err
            assert "Traceback" not in err
        assert not srv.stats.requests, "a refused command sent nothing"

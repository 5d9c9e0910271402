"""Output files: checked before the first call, never written through a link, never over a file
that was not meant to be replaced, never over the run's own cache, never half written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from conftest import run_args
from safecons._outputs import check_output, write_output
from safecons.cli import main
from safecons.testing import FakeOpenAIServer, StandInSUT, route_by_model

VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
REFUSE = "I'm sorry, but I can't help with that."


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes report.html where it runs


def _rows(tmp_path: Path) -> Path:
    path = tmp_path / "rows.parquet"
    pl.DataFrame(
        {"input_id": [1, 2], "prompt": ["q1", "q2"], "sut_response": [REFUSE, REFUSE]}
    ).write_parquet(path)
    return path


def _run(tmp_path: Path, srv: FakeOpenAIServer, output: Path | str, *extra: str) -> int:
    return main(run_args(_rows(tmp_path), output, srv.base_url, *extra))


def _server(**kw) -> FakeOpenAIServer:
    return FakeOpenAIServer(
        responder=route_by_model({"sut": lambda b: REFUSE, "judge": lambda b: VERDICT}), **kw
    )


def _unwritable(tmp_path: Path) -> Path:
    """A folder in which no file can be created, even by root (whom mode bits do not stop)."""
    if os.geteuid() == 0:
        if not Path("/sys").is_dir():
            pytest.skip("root, and no /sys to stand for an unwritable folder")
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


# ------------------------------------------------------------------------- safecons run


@pytest.mark.network
@pytest.mark.parametrize("case", ["folder", "unwritable", "link", "dangling link", "exists"])
def test_run_refuses_a_bad_output_before_the_first_call(tmp_path, capsys, case):
    target = tmp_path / "victim.parquet"
    target.write_bytes(b"precious")
    output = {
        "folder": tmp_path / "out.parquet",
        "unwritable": _unwritable(tmp_path) / "out.parquet",
        "link": tmp_path / "link.parquet",
        "dangling link": tmp_path / "dangling.parquet",
        "exists": target,
    }[case]
    if case == "folder":
        output.mkdir()
    elif case == "link":
        output.symlink_to(target)
    elif case == "dangling link":
        output.symlink_to(tmp_path / "nowhere.parquet")
    expected = {
        "folder": "is a folder",
        "unwritable": "cannot create a file in",
        "link": "is a symbolic link",
        "dangling link": "is a symbolic link",
        "exists": "already exists",
    }[case]
    with _server() as srv:
        assert _run(tmp_path, srv, output) == 2
        assert srv.stats.requests == 0
    err = capsys.readouterr().err
    assert expected in err and "--output" in err
    assert target.read_bytes() == b"precious"
    assert not (tmp_path / "nowhere.parquet").exists()


@pytest.mark.network
def test_run_never_writes_its_output_over_its_cache_even_with_force(tmp_path, capsys):
    cache = tmp_path / "same.parquet"
    with _server() as srv:
        assert _run(tmp_path, srv, tmp_path / "first.parquet", "--cache", str(cache)) == 0
        before = cache.read_bytes()
        assert _run(tmp_path, srv, cache, "--cache", str(cache), "--force") == 2
        # The same file under another name (a relative path) is the same file.
        assert _run(tmp_path, srv, "same.parquet", "--cache", str(cache), "--force") == 2
    assert "is the --cache file" in capsys.readouterr().err
    assert cache.read_bytes() == before


@pytest.mark.network
def test_run_replaces_an_existing_output_only_with_force_and_never_a_links_target(tmp_path, capsys):
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old")
    with _server() as srv:
        assert _run(tmp_path, srv, out, "--force") == 0
        assert pl.read_parquet(out).height == 2
        victim = tmp_path / "victim.parquet"
        victim.write_bytes(b"precious")
        link = tmp_path / "link.parquet"
        link.symlink_to(victim)
        assert _run(tmp_path, srv, link, "--force") == 2
    assert victim.read_bytes() == b"precious"
    assert "is a symbolic link" in capsys.readouterr().err


@pytest.mark.network
def test_a_file_that_appears_during_the_run_is_kept_and_the_output_goes_to_a_fresh_name(
    tmp_path, capsys
):
    out = tmp_path / "out.parquet"

    def sut(body):
        if not out.exists():
            out.write_bytes(b"someone else's")  # another process takes the name mid-run
        return REFUSE

    responder = route_by_model({"sut": sut, "judge": lambda b: VERDICT})
    with FakeOpenAIServer(responder=responder) as srv:
        assert _run(tmp_path, srv, out) == 0
    printed = capsys.readouterr().out
    assert out.read_bytes() == b"someone else's"
    fresh = tmp_path / "out-1.parquet"
    assert pl.read_parquet(fresh).height == 2
    assert f"the output went to {fresh}" in printed and f"wrote 2 rows to {fresh}" in printed


def test_audit_output_is_checked_like_run_output(tmp_path, capsys):
    out = tmp_path / "pairs.parquet"
    out.write_bytes(b"mine")
    assert main(["audit", "--no-progress", "--output", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == b"mine"
    cache = tmp_path / "calls.parquet"  # a cache may have any name
    args = ["audit", "--no-progress", "--output", str(cache), "--cache", str(cache), "--force"]
    assert main(args) == 2
    assert "is the --cache file" in capsys.readouterr().err


# ------------------------------------------------------------------------- reports


def test_the_demo_keeps_an_existing_report_and_says_where_its_own_went(tmp_path, capsys):
    real = tmp_path / "report.html"
    real.write_text("<p>my real report</p>")
    assert main(["demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert real.read_text() == "<p>my real report</p>"
    assert "report.html exists (kept; --force replaces it): wrote report-1.html" in out
    assert (tmp_path / "report-1.html").read_text().startswith("<!doctype html>")
    assert main(["demo", "--no-progress", "--force"]) == 0
    assert real.read_text().startswith("<!doctype html>")


@pytest.fixture(scope="module")
def scored() -> pl.DataFrame:
    return (
        sc.demo_frame()
        .head(3)
        .pipe(sc.safety_consistency, sut=StandInSUT(), judge=sc.OfflineJudge(), progress=False)
    )


def test_report_refuses_other_file_types_existing_files_and_links(scored, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    with pytest.raises(sc.InputError, match=r"expected a \.html or \.htm file name"):
        sc.report(scored, notes)
    page = tmp_path / "page.html"
    page.write_text("mine")
    with pytest.raises(sc.InputError, match=r"already exists.*overwrite=True"):
        sc.report(scored, page)
    assert page.read_text() == "mine"
    assert sc.report(scored, page, overwrite=True) == page
    assert page.read_text().startswith("<!doctype html>")
    link = tmp_path / "link.html"
    link.symlink_to(notes)
    with pytest.raises(sc.InputError, match="symbolic link"):
        sc.report(scored, link, overwrite=True)
    assert notes.read_text() == "my notes"
    with pytest.raises(sc.InputError, match="is a folder"):
        sc.report(scored, tmp_path)


def test_a_report_written_again_replaces_its_own_file_and_no_other(scored, tmp_path):
    # A notebook cell run again: the report it wrote is replaced; a file of the user's that
    # is not a report of safecons', or a link to one, is not.
    page = tmp_path / "report.html"
    assert sc.report(scored, page) == page
    first = page.read_text()
    assert '<meta name="generator" content="safecons report ' in first
    assert sc.report(scored, page, title="again") == page
    assert "<title>again</title>" in page.read_text()
    mine = tmp_path / "mine.html"
    mine.write_text("<!doctype html><p>a page of mine</p>")
    with pytest.raises(sc.InputError, match=r"already exists.*overwrite=True"):
        sc.report(scored, mine)
    link = tmp_path / "link.html"
    link.symlink_to(page)
    with pytest.raises(sc.InputError, match="symbolic link"):
        sc.report(scored, link)
    assert "<title>again</title>" in page.read_text()


def test_safecons_report_checks_its_output_before_reading_the_input(scored, tmp_path, capsys):
    src = tmp_path / "scored.parquet"
    scored.write_parquet(src)
    out = tmp_path / "out.html"
    out.write_text("mine")
    assert main(["report", str(src), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err and out.read_text() == "mine"
    # Checked first: a missing input would be said only once the output is known to be fine.
    assert main(["report", str(tmp_path / "missing.parquet"), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["report", str(src), "-o", str(out), "--force"]) == 0
    assert out.read_text().startswith("<!doctype html>")
    link = tmp_path / "l.html"
    link.symlink_to(out)
    assert main(["report", str(src), "-o", str(link), "--force"]) == 2
    assert "symbolic link" in capsys.readouterr().err


# ------------------------------------------------------------------------- the writer


def test_a_write_that_fails_leaves_no_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.parquet"

    def broken(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_output(target, broken)
    assert list(tmp_path.iterdir()) == []


def test_a_written_file_has_the_users_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        written = write_output(tmp_path / "out.txt", lambda tmp: tmp.write_text("x"))
    finally:
        os.umask(old)
    assert written.stat().st_mode & 0o777 == 0o644


def test_check_output_names_the_parameter_and_the_problem(tmp_path):
    with pytest.raises(sc.InputError, match=r"^--output: folder .* does not exist"):
        check_output(tmp_path / "no" / "x.parquet", parameter="--output", suffixes=[".parquet"])
    with pytest.raises(sc.InputError, match=r"^--output: .*is the --cache file"):
        check_output(
            tmp_path / "x.parquet",
            parameter="--output",
            suffixes=[".parquet"],
            not_same_as=[("--cache", tmp_path / "x.parquet")],
        )

"""``cache=`` never touches a file that is not its own, and says what is wrong with a file."""

from __future__ import annotations

import os
import sqlite3
import stat
import warnings

import polars as pl
import pytest

import safecons as sc
from safecons.run import ResponseCache
from safecons.testing import ScriptedChat, StandInJudge

REFUSE = "I'm sorry, but I can't help with that."


def frame(n: int = 2) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"q{i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


def named(chat: ScriptedChat) -> sc.CallableClient:
    # One name for every script, so that a rerun with another script replays the first's answers.
    return sc.CallableClient(chat, name="sut")


def run(cache, sut=None, **kwargs) -> pl.DataFrame:
    return frame().pipe(
        sc.safety_consistency,
        sut=named(sut or ScriptedChat([REFUSE])),
        judge=StandInJudge(),
        cache=cache,
        progress=False,
        **kwargs,
    )


def same(replayed: pl.DataFrame, first: pl.DataFrame) -> bool:
    """The replay equals the first run, every call coming from the cache."""
    hits = replayed["sc_cache_hits"].to_list() == [2] * first.height
    return hits and replayed.drop("sc_cache_hits", "sc_spend").equals(
        first.drop("sc_cache_hits", "sc_spend")
    )


def snapshot(path):
    """What a file is: its bytes, its mode, and which files lie beside it."""
    return path.read_bytes(), stat.S_IMODE(path.lstat().st_mode), sorted(os.listdir(path.parent))


# ----------------------------------------------------------------------------- 9: foreign files


def test_a_foreign_sqlite_database_is_refused_and_left_exactly_as_it_was(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ann')")
    conn.close()
    os.chmod(path, 0o644)
    before = snapshot(path)
    with pytest.raises(sc.CacheError, match=r"app\.db.*not a safecons cache \(tables: users\)"):
        run(path)
    assert snapshot(path) == before  # no table, no WAL switch, no -wal/-shm file, no chmod


def test_a_foreign_database_in_wal_mode_gets_no_companion_files(tmp_path):
    path = tmp_path / "wal.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for extra in ("-wal", "-shm"):
        if os.path.exists(f"{path}{extra}"):
            os.remove(f"{path}{extra}")
    before = snapshot(path)
    with pytest.raises(sc.CacheError, match="tables: t"):
        ResponseCache(path)
    assert snapshot(path) == before


def test_a_parquet_file_is_refused_without_a_chmod(tmp_path):
    path = tmp_path / "rows.parquet"
    frame().write_parquet(path)
    os.chmod(path, 0o644)
    before = snapshot(path)
    with pytest.raises(sc.CacheError, match="not an SQLite database"):
        run(path)
    assert snapshot(path) == before


def test_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    os.chmod(target, 0o644)
    link = tmp_path / "calls.sqlite"
    link.symlink_to(target)
    before = snapshot(target)
    with pytest.raises(sc.CacheError, match="symbolic link"):
        run(link)
    assert snapshot(target) == before


def test_a_symlink_to_a_real_cache_is_refused_too(tmp_path):
    real = tmp_path / "real.sqlite"
    ResponseCache(real).close()
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    with pytest.raises(sc.CacheError, match="follows none"):
        ResponseCache(link)


def test_an_existing_cache_keeps_its_mode_with_a_warning(tmp_path):
    path = tmp_path / "calls.sqlite"
    ResponseCache(path).close()
    os.chmod(path, 0o644)
    with pytest.warns(RuntimeWarning, match="readable by others"):
        ResponseCache(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_cache_safecons_creates_is_private_and_replays(tmp_path):
    path = tmp_path / "new" / "calls.sqlite"
    first = run(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sut = ScriptedChat(["never asked"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file of our own: no warning
        again = run(path, sut=sut)
    assert sut.calls == [] and same(again, first)


# ----------------------------------------------------------------------------- 10: clear errors


def _random_bytes(path):
    path.write_bytes(os.urandom(4096))


def _damaged(path):
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))


def _lookalike(path):
    # The right table names with the wrong columns.
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT, value TEXT)")
        conn.execute("CREATE TABLE responses (key TEXT, answer TEXT)")
    conn.close()


def _version(value):
    def make(path):
        ResponseCache(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE meta SET value=? WHERE name='schema'", (value,))
        conn.close()

    return make


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.mkdir(), "is a folder; pass a file path"),
        (_random_bytes, "not an SQLite database"),
        (_damaged, "damaged or not a database"),
        (_lookalike, "not a safecons cache"),
        (_version("x"), "schema version 'x'"),
        (_version("99"), "schema version '99'"),
    ],
    ids=["folder", "random-bytes", "damaged", "lookalike", "version-x", "version-99"],
)
def test_every_cache_problem_is_one_error_naming_the_path(tmp_path, make, match):
    path = tmp_path / "calls.sqlite"
    make(path)
    with pytest.raises(sc.CacheError, match=match) as info:
        run(path)
    assert str(path) in str(info.value) and info.value.path == path


def test_a_device_is_not_a_cache():
    with pytest.raises(sc.CacheError, match=r"'/dev/null'.*not a regular file"):
        run("/dev/null")


def test_a_folder_that_cannot_be_written_is_named():
    # /proc refuses new files even to root, as a read-only folder refuses them to a user.
    with pytest.raises(sc.CacheError, match=r"cannot be created.*folder you can write to"):
        run("/proc/safecons-calls.sqlite")


def test_a_read_only_cache_serves_a_replay_only_run(tmp_path):
    path = tmp_path / "calls.sqlite"
    first = run(path)
    sut = ScriptedChat(["never asked"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = run(ResponseCache(path, read_only=True), sut=sut)
    assert sut.calls == [] and same(again, first)


def test_a_cache_that_cannot_be_written_opens_read_only(tmp_path, monkeypatch):
    path = tmp_path / "calls.sqlite"
    first = run(path)
    before = snapshot(path)
    # Tests run as root on CI, where a mode cannot make a file unwritable; os.access can.
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK)
    cache = ResponseCache(path)
    assert cache.read_only
    cache.close()
    sut = ScriptedChat(["never asked"])
    assert same(run(path, sut=sut), first) and sut.calls == []
    # Rows the cache does not hold are still answered; their answers are not stored, once said.
    more = pl.concat([frame(), frame(3).tail(1)])
    with pytest.warns(RuntimeWarning, match="is read-only"):
        out = more.pipe(
            sc.safety_consistency,
            sut=named(ScriptedChat([REFUSE])),
            judge=StandInJudge(),
            cache=path,
            progress=False,
        )
    assert out["sc_error"].null_count() == 3
    assert snapshot(path)[0] == before[0]


def test_clearing_a_read_only_cache_says_so(tmp_path):
    path = tmp_path / "calls.sqlite"
    run(path)
    with (
        ResponseCache(path, read_only=True) as cache,
        pytest.raises(sc.CacheError, match="read-only"),
    ):
        cache.clear()


def test_an_empty_file_is_adopted_as_a_new_cache(tmp_path):
    path = tmp_path / "calls.sqlite"
    path.touch()
    os.chmod(path, 0o644)
    run(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it held nothing, and now holds answers
    with ResponseCache(path) as cache:
        assert cache.info()["entries"] == 4  # 2 rows x 2 SUT samples


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda c: c.execute("CREATE VIEW v AS SELECT 1"), "view v"),
        (lambda c: c.execute("PRAGMA user_version = 7"), "a user or application version"),
        (lambda c: c.execute("PRAGMA application_id = 42"), "a user or application version"),
    ],
    ids=["view-only", "user-version", "application-id"],
)
def test_a_database_without_tables_is_still_not_a_cache(tmp_path, make, match):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    make(conn)
    conn.commit()
    conn.close()
    os.chmod(path, 0o644)
    before = snapshot(path)
    with pytest.raises(sc.CacheError, match=match):
        ResponseCache(path)
    assert snapshot(path) == before


def test_a_read_only_cache_creates_no_companion_files(tmp_path):
    path = tmp_path / "calls.sqlite"
    run(path)
    for extra in ("-wal", "-shm"):
        if os.path.exists(f"{path}{extra}"):
            os.remove(f"{path}{extra}")
    before = sorted(os.listdir(tmp_path))
    with ResponseCache(path, read_only=True) as cache:
        assert cache.info()["entries"] == 4
    assert sorted(os.listdir(tmp_path)) == before

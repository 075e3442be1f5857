"""``council store copy --to URL``: a council.db into PostgreSQL (and back), resumably."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import invoke_cli, write_config

from council.storage import copying
from council.storage.copying import TABLES


def _fill_sqlite(tmp_path, council_home):
    """A council.db with sessions, calls, bias records, a comparison and a grade (fake models)."""
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    for question in ("What is 2+2?", "Name a colour.", "Why is the sky blue?"):
        assert invoke_cli("run", question, "--config", str(cfg), env={"COUNCIL_HASH_QUERIES": "1"}).exit_code == 0
    answer = tmp_path / "answer.txt"
    answer.write_text("Paris is the capital of France.")
    assert invoke_cli("compare", "--prompt", "Capital?", "--a", str(answer), "--b", str(answer),
                      "--judge", "fake/j").exit_code == 0  # fmt: skip
    assert invoke_cli("grade", "--prompt", "Capital?", "--response", str(answer), "--judge", "fake/g").exit_code == 0
    return council_home / "council.db"


def _pg_rows(url: str, table: str, columns: list[str]) -> list[tuple]:
    import psycopg

    names = ", ".join(f'"{c}"' for c in columns)
    with psycopg.connect(url) as conn:
        return sorted(conn.execute(f'SELECT {names} FROM "{table}"').fetchall(), key=repr)


def _sqlite_rows(path, table: str) -> tuple[list[str], list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        return columns, sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
    finally:
        conn.close()


def _assert_copied(db, url: str) -> None:
    """Every copied table holds the same rows in PostgreSQL as in the council.db."""
    for table, _ in TABLES:
        columns, rows = _sqlite_rows(db, table)
        assert _pg_rows(url, table, columns) == rows, table


def test_a_council_db_is_copied_into_postgres_row_for_row_and_a_rerun_copies_nothing(
    tmp_path, council_home, postgres_url
):
    db = _fill_sqlite(tmp_path, council_home)
    result = invoke_cli("store", "copy", "--to", postgres_url)
    assert result.exit_code == 0, result.stderr
    assert "sessions: 3 copied, 0 already there" in result.stderr
    _assert_copied(db, postgres_url)
    _, judged = _sqlite_rows(db, "judgment_runs")
    assert len(judged) == 2
    again = invoke_cli("store", "copy", "--to", postgres_url)
    assert again.exit_code == 0 and "copied 0 rows" in again.stderr
    assert "sessions: 0 copied, 3 already there" in again.stderr


def test_an_interrupted_copy_resumes_where_it_stopped(tmp_path, council_home, postgres_url, monkeypatch):
    db = _fill_sqlite(tmp_path, council_home)
    monkeypatch.setattr(copying, "CHUNK", 2)
    real_insert = copying._Side.insert
    inserted = []

    def dies_after_three_chunks(self, *args):
        if len(inserted) == 3:
            raise KeyboardInterrupt
        inserted.append(args[0])
        return real_insert(self, *args)

    monkeypatch.setattr(copying._Side, "insert", dies_after_three_chunks)
    interrupted = invoke_cli("store", "copy", "--to", postgres_url)
    assert interrupted.exit_code != 0 and len(inserted) == 3
    monkeypatch.setattr(copying._Side, "insert", real_insert)
    result = invoke_cli("store", "copy", "--to", postgres_url)
    assert result.exit_code == 0, result.stderr
    assert "sessions: 0 copied, 3 already there" in result.stderr
    _assert_copied(db, postgres_url)


def test_the_copy_reads_the_same_and_takes_new_rows_after_it(tmp_path, council_home, postgres_url, monkeypatch):
    _fill_sqlite(tmp_path, council_home)
    sqlite_listing = json.loads(invoke_cli("sessions", "list", "--json").stdout)
    sid = sqlite_listing[0]["session_id"]
    sqlite_show = invoke_cli("sessions", "show", sid, "--json").stdout
    assert invoke_cli("store", "copy", "--to", postgres_url).exit_code == 0

    monkeypatch.setenv("COUNCIL_DATABASE_URL", postgres_url)
    assert json.loads(invoke_cli("sessions", "list", "--json").stdout) == sqlite_listing
    assert invoke_cli("sessions", "show", sid[:8], "--json").stdout == sqlite_show
    # New sessions and calls on the copy get fresh ids (the identity counters moved past the copied ones).
    cfg = write_config(tmp_path / "c2.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}})
    run = invoke_cli("run", "One more?", "--config", str(cfg))
    assert run.exit_code == 0, run.stderr
    assert len(json.loads(invoke_cli("sessions", "list", "--json").stdout)) == 4


def test_copying_postgres_back_into_a_new_sqlite_file(tmp_path, council_home, postgres_url):
    db = _fill_sqlite(tmp_path, council_home)
    assert invoke_cli("store", "copy", "--to", postgres_url).exit_code == 0
    back = tmp_path / "back.db"
    result = invoke_cli("store", "copy", "--from", postgres_url, "--to", f"sqlite:///{back}")
    assert result.exit_code == 0, result.stderr
    for table, _ in TABLES:
        assert _sqlite_rows(back, table) == _sqlite_rows(db, table), table


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--to", "mysql://x@h/db"], "unsupported database"),
        (["--to", "postgresql://u:s3cret-pw@h:99999/db"], "malformed"),
        (["--to", "sqlite:///{db}"], "the target is the store being copied"),
    ],
)
def test_bad_targets_are_one_line_exit_2(council_home, args, fragment):
    db = council_home / "council.db"
    result = invoke_cli("store", "copy", *[a.format(db=db) for a in args])
    assert result.exit_code == 2 and len(result.error_lines) == 1, result.stderr
    assert fragment in result.stderr and "s3cret-pw" not in result.stderr


def test_reports_read_from_postgres_are_the_same_as_from_sqlite(tmp_path, council_home, postgres_url, monkeypatch):
    _fill_sqlite(tmp_path, council_home)
    commands = [
        ("bias-report", "--json"),
        ("leaderboard", "--json", "--bootstrap", "20"),
        ("export",),
        ("export", "--bias-records"),
    ]
    on_sqlite = [invoke_cli(*c) for c in commands]
    assert all(r.exit_code == 0 for r in on_sqlite), [r.stderr for r in on_sqlite]
    assert invoke_cli("store", "copy", "--to", postgres_url).exit_code == 0
    monkeypatch.setenv("COUNCIL_DATABASE_URL", postgres_url)
    on_postgres = [invoke_cli(*c) for c in commands]
    for command, lite, pg in zip(commands, on_sqlite, on_postgres, strict=True):
        assert pg.exit_code == 0, (command, pg.stderr)
        assert pg.stdout == lite.stdout, command

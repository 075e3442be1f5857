"""Several real processes writing to one council.db at once (WAL, busy timeout).

A module-wide pool of worker processes (tests/writer_worker.py) imports council once,
then runs the commands sent on stdin. A command is written to every worker back to
back while they block on ``readline``, so they all start together.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlite_utils import Database

from council.storage import SQLiteStore
from council.storage.migrations import migrations

WORKER = Path(__file__).with_name("writer_worker.py")
PROCESSES = 8
SESSIONS_EACH = 5
RACE_ROUNDS = 20  # a fresh database each; without the WAL retry fix 3-15 % of rounds here failed
SESSION_TABLES = ("answers", "reviews", "bias_records", "calls")


class Pool:
    def __init__(self, workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COUNCIL_")}
        env.update(COUNCIL_HOME=str(workdir), LITELLM_LOCAL_MODEL_COST_MAP="True")
        self.stderr = [workdir / f"worker{i}.stderr" for i in range(PROCESSES)]
        self.procs = []
        for err in self.stderr:
            with err.open("w") as f:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, str(WORKER)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=f,
                        text=True,
                        env=env,
                    )
                )
        for i in range(PROCESSES):
            assert "ready" in self._read(i)  # every worker has its imports done

    def _read(self, i: int) -> dict:
        line = self.procs[i].stdout.readline()
        assert line, f"worker {i} died: {self.stderr[i].read_text()}"
        return json.loads(line)

    def broadcast(self, cmds: list[dict]) -> list[dict]:
        for proc, cmd in zip(self.procs, cmds, strict=True):
            proc.stdin.write(json.dumps(cmd) + "\n")
            proc.stdin.flush()
        return [self._read(i) for i in range(PROCESSES)]

    def close(self) -> None:
        for proc in self.procs:
            proc.stdin.close()
        for proc in self.procs:
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = Pool(tmp_path_factory.mktemp("writers"))
    yield p
    p.close()


def check_database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    return conn


def test_fresh_database_migration_race(pool, tmp_path):
    expected = [m.name for m in migrations.pending(Database(memory=True))]
    for round_ in range(RACE_ROUNDS):
        path = tmp_path / f"race{round_}.db"
        replies = pool.broadcast([{"cmd": "open", "args": {"path": str(path)}}] * PROCESSES)
        assert [r.get("error") for r in replies] == [None] * PROCESSES, f"round {round_}"
        assert {r["journal_mode"] for r in replies} == {"wal"}
        conn = check_database(path)
        applied = [name for (name,) in conn.execute("select name from _sqlite_migrations order by id")]
        assert applied == expected  # each migration exactly once, in order
        tables = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
        assert {"sessions", *SESSION_TABLES, "judgment_runs", "batch_items"} <= tables
        conn.close()


def test_open_waits_while_another_connection_switches_a_new_database(tmp_path):
    """The state the race above runs into, made deterministic: another connection holds the
    write lock of a database that is not in WAL mode yet (as a process does while it writes
    the WAL header). Opening must wait for it, not fail with "database is locked"."""
    path = tmp_path / "council.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with ThreadPoolExecutor(1) as executor:
        opening = executor.submit(SQLiteStore.open, path)
        time.sleep(0.3)
        assert not opening.done(), opening.exception()  # still waiting, not failed
        other.execute("COMMIT")
        store = opening.result(timeout=30)
    assert store.db.journal_mode == "wal"
    assert store.count("sessions") == 0  # migrated
    store.close()
    other.close()


def test_processes_write_sessions_at_once_without_losing_rows(pool, tmp_path):
    path = tmp_path / "council.db"
    SQLiteStore.open(path).close()  # created up front: this test is about session writes
    replies = pool.broadcast(
        [
            {"cmd": "sessions", "args": {"path": str(path), "n": SESSIONS_EACH, "tag": str(i)}}
            for i in range(PROCESSES)
        ]
    )
    assert [r.get("error") for r in replies] == [None] * PROCESSES
    assert len({r["pid"] for r in replies} - {os.getpid()}) == PROCESSES
    reported = [s for r in replies for s in r["sessions"]]
    assert len(reported) == PROCESSES * SESSIONS_EACH
    assert all(s["status"] == "complete" for s in reported)

    # The writes really overlapped: sessions of different processes were in flight together.
    in_flight = peak = 0
    for _, step in sorted((t, d) for s in reported for t, d in ((s["t0"], 1), (s["t1"], -1))):
        in_flight += step
        peak = max(peak, in_flight)
    assert peak >= 2

    conn = check_database(path)
    rows = conn.execute("select id, status, finished_at, result from sessions").fetchall()
    assert sorted(r[0] for r in rows) == sorted(s["id"] for s in reported)  # none lost, none extra
    assert all(status == "complete" and finished and result for _, status, finished, result in rows)
    for table in SESSION_TABLES:
        # Per session, exactly what the session reported: a lost or duplicated row shows here.
        found = Counter(dict(conn.execute(f"select session_id, count(*) from {table} group by session_id")))
        assert found == Counter({s["id"]: s[table] for s in reported}), table
    # 3 answers + 3 reviews + 1 synthesis, plus the flaky reviewer's re-request.
    assert {s["calls"] for s in reported} == {8}
    dupes = conn.execute(
        "select count(*) from (select 1 from bias_records group by session_id, reviewer_id, model_id"
        " having count(*) > 1)"
    ).fetchone()[0]
    assert dupes == 0
    conn.close()

"""A file store's checkpoints run in a thread of their own once it writes, never in the commit
that reaches the log's threshold; the store's connection keeps a far cap as a safety net; the
thread ends with the store, and the last connection leaves no log behind."""

from __future__ import annotations

import sqlite3
import threading

from mock_server import wait_for

from council.storage import SQLiteStore
from council.storage.checkpoints import WAL_CAP_PAGES


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "council-checkpoint"]


def test_commits_are_checkpointed_by_a_thread_and_the_connection_keeps_only_a_far_cap(tmp_path):
    before = len(_checkpoint_threads())
    store = SQLiteStore.open(tmp_path / "council.db")
    for i in range(50):
        store.swap_setting(f"key-{i}", "x" * 5000)
    assert store.db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == WAL_CAP_PAGES
    assert len(_checkpoint_threads()) == before + 1
    checkpointer = store._checkpointer
    assert checkpointer is not None and wait_for(lambda: checkpointer.checkpoints >= 1, timeout=10)
    store.close()
    assert not checkpointer._thread.is_alive() and len(_checkpoint_threads()) == before
    assert not (tmp_path / "council.db-wal").exists()  # the last connection checkpointed the rest
    conn = sqlite3.connect(tmp_path / "council.db")
    assert conn.execute("SELECT count(*) FROM settings WHERE key LIKE 'key-%'").fetchone()[0] == 50
    conn.close()


def test_a_store_that_only_reads_starts_no_thread_and_memory_stores_none(tmp_path):
    SQLiteStore.open(tmp_path / "council.db").close()  # created (and migrated) once
    before = len(_checkpoint_threads())
    store = SQLiteStore.open(tmp_path / "council.db")
    store.list_sessions()
    assert store._checkpointer is None and len(_checkpoint_threads()) == before
    assert store.db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # SQLite's own, untouched
    store.close()
    memory = SQLiteStore.memory()
    memory.swap_setting("k", "v")
    assert memory._checkpointer is None


def test_without_a_thread_to_be_had_the_write_stands_and_sqlite_keeps_checkpointing(tmp_path, monkeypatch):
    import council.storage.sqlite_store as sqlite_store

    def no_thread(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(sqlite_store, "Checkpointer", no_thread)
    store = SQLiteStore.open(tmp_path / "council.db")
    assert store.swap_setting("k", "v") is None and store.swap_setting("k", "w") == "v"  # both writes stood
    assert store._checkpointer is None
    assert store.db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    store.close()

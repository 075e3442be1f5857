"""On a SQLite file the bias report's per-answer pass runs on a second connection, at the same
time as the per-review pass: the sums must be exactly the sequential ones, and the second
connection is used only when it reads the same snapshot as the first."""

from __future__ import annotations

import sqlite3

import pytest

from council.bias.records import BiasRecord
from council.storage import BiasQuery, SQLiteStore
from council.storage import bias_sums as sums_module
from council.storage.second_reader import open_in_snapshot


def rows(sessions: int, bad: bool = False) -> list[dict]:
    out = []
    for s in range(sessions):
        for r, reviewer in enumerate(("a", "b", "c")):
            for i, model in enumerate(("a", "b", "c", "d")):
                position = (i + r + s) % 4
                if bad and s == 0 and r == 0:
                    position = 0  # every answer of one review at position 0
                out.append(BiasRecord(
                    session_id=f"s{s:03d}", reviewer_id=reviewer, model_id=model, position=position,
                    response_length_chars=100 + 37 * ((s * 7 + i) % 11), response_length_words=20 + (s * 7 + i) % 11,
                    score_value=1 + (s + 3 * i + r * r) % 10, self_review=reviewer == model,
                    timestamp="2026-01-01T00:00:00Z",
                ).row())  # fmt: skip
    return out


@pytest.fixture
def counted(monkeypatch):
    """How many times the per-answer pass ran on the second connection."""
    runs = []
    real = sums_module.Background

    def background(connection, work):
        runs.append(connection)
        return real(connection, work)

    monkeypatch.setattr(sums_module, "Background", background)
    return runs


@pytest.mark.parametrize("bad", [False, True])
@pytest.mark.parametrize("query", [BiasQuery(max_points=5), BiasQuery(reviewers=("b",), skip_bad=True),
                                   BiasQuery(length_unit="chars", since="2025-01-01", skip_bad=True)])  # fmt: skip
def test_the_file_store_gives_the_sums_of_one_connection(tmp_path, counted, bad, query):
    records = rows(40, bad=bad)
    memory = SQLiteStore.memory()  # no file: one connection, one pass after the other
    memory.insert_bias_records(records)
    expected = memory.bias_sums(query)
    memory.close()
    assert not counted
    store = SQLiteStore.open(tmp_path / "council.db")
    store.insert_bias_records(records)
    assert store.bias_sums(query) == expected
    assert len(counted) == 1  # the answers' pass ran ahead (and was set aside when a bad review changed the filter)
    assert not store.db.conn.in_transaction
    store.close()


def test_no_second_reader_when_a_commit_comes_between(tmp_path):
    store = SQLiteStore.open(tmp_path / "council.db")
    store.insert_bias_records(rows(2))
    writer = sqlite3.connect(tmp_path / "council.db", isolation_level=None)
    calls = []

    def begin_with_a_commit_after():
        calls.append(1)
        writer.execute("INSERT INTO settings (key, value) VALUES ('x', 'y')")  # another process commits

    assert open_in_snapshot(tmp_path / "council.db", begin_with_a_commit_after) is None
    second = open_in_snapshot(tmp_path / "council.db", lambda: calls.append(2))  # nothing in between: one state
    assert second is not None and calls == [1, 2]
    assert second.execute("SELECT count(*) FROM bias_records").fetchone()[0] == 24
    second.close()
    writer.close()
    store.close()


def test_no_second_reader_for_a_file_that_cannot_be_opened_again(tmp_path):
    calls = []
    assert open_in_snapshot(tmp_path / "missing" / "council.db", lambda: calls.append(1)) is None
    assert calls == [1]  # the first connection's snapshot is begun all the same

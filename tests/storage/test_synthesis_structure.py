"""The structured synthesis is kept with its session (m026) on both backends, and a database
from before it migrates with its sessions readable."""

from __future__ import annotations

import json
import sqlite3

from sqlite_utils import Database

from council import Council
from council.storage import SQLiteStore
from council.storage.migrations import migrations

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]


async def _session(store, **privacy):
    config = {"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}, **privacy}
    council = Council.from_config(config, store=store)
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    return result


async def test_the_structure_is_stored_with_its_session_members_by_id(store_backend):
    result = await _session(store_backend)
    row = store_backend.get_session(result.session_id)
    stored = json.loads(row["synthesis_structure"])
    assert stored == result.synthesis.structure.model_dump(mode="json")
    held = {m for d in stored["disagreements"] for p in d["positions"] for m in p["members"]}
    assert held and held <= set(MEMBERS)  # never the labels the chairman saw
    assert json.loads(row["result"])["synthesis"]["structure"] == stored


async def test_with_transcripts_off_who_held_what_is_kept_without_a_text(store_backend):
    result = await _session(store_backend, privacy={"store_transcripts": False})
    row = store_backend.get_session(result.session_id)
    stored = json.loads(row["synthesis_structure"])
    assert json.loads(row["result"])["synthesis"]["structure"] == stored
    assert stored["answer"] is None and stored["agreements"] == [None] and stored["blind_spots"] == [None]
    [disagreement] = stored["disagreements"]
    assert disagreement["point"] is None and all(p["summary"] is None for p in disagreement["positions"])
    assert all(p["members"] and set(p["members"]) <= set(MEMBERS) for p in disagreement["positions"])
    assert "Why is the sky blue" not in row["synthesis_structure"] and "sky" not in row["synthesis_structure"]


def test_a_database_from_before_m026_migrates_with_its_sessions(tmp_path):
    path = tmp_path / "council.db"
    legacy = Database(sqlite3.connect(path, isolation_level=None))
    migrations.apply(legacy, stop_before="m026_synthesis_structure")
    assert "synthesis_structure" not in legacy["sessions"].columns_dict
    legacy["sessions"].insert({"id": "old", "created_at": "2026-01-01T00:00:00Z", "status": "complete",
                               "result": json.dumps({"synthesis": {"status": "ok", "text": "t"}})})  # fmt: skip
    legacy.conn.close()
    store = SQLiteStore.open(path)
    row = store.get_session("old")
    assert row["synthesis_structure"] is None and json.loads(row["result"])["synthesis"]["text"] == "t"
    store.close()


def test_a_postgresql_database_from_before_m026_migrates_with_its_sessions(postgres_url):
    import psycopg

    from council.storage import open_location
    from council.storage.location import parse

    open_location(parse(postgres_url)).close()  # migrated, then taken back to before m026
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN synthesis_structure")
        conn.execute("DELETE FROM _council_migrations WHERE name = 'm026_synthesis_structure'")
        conn.execute("INSERT INTO sessions (id, created_at, status, result) VALUES ('old', '2026', 'complete', '{}')")
    store = open_location(parse(postgres_url))
    try:
        row = store.get_session("old")
        assert row["synthesis_structure"] is None and row["result"] == "{}"
    finally:
        store.close()

"""Session events in the store: batches, sequence ids, reading after a resume point."""

from __future__ import annotations

import json

from council.server.background import EventBatcher
from council.storage import memory_store, open_store


def _event(seq: int, type_: str = "stage", **extra: object) -> dict[str, object]:
    return {"seq": seq, "type": type_, "session_id": "s1", "at": "2026-01-01T00:00:00Z", **extra}


def test_events_are_read_back_after_a_resume_point_in_order():
    store = memory_store()
    store.append_events("s1", [_event(1), _event(2, "answer", text="hi"), _event(3)])
    store.append_events("s2", [_event(1)])
    rows = store.events_after("s1", 1)
    assert [(seq, kind) for seq, kind, _ in rows] == [(2, "answer"), (3, "stage")]
    assert json.loads(rows[0][2])["text"] == "hi"
    assert store.events_after("s1", 3) == []
    assert len(store.events_after("s1", 0, limit=2)) == 2


def test_an_event_is_stored_as_pydantic_writes_it():
    """The text a stream sends is the event's JSON as pydantic writes the model (compact, text
    unescaped), written once from the dict the server keeps: not the standard library's form."""
    from council.session.events import AnswerEvent

    event = AnswerEvent(
        session_id="s1", seq=1, at="2026-01-01T00:00:00.000001+00:00", member="m1", model="openai/x",
        status="ok", text="ciel bleu — 空は青い \"quoted\"\n", length_chars=17, latency_ms=1e-05,
    )  # fmt: skip
    store = memory_store()
    store.append_events("s1", [event.model_dump(mode="json")])
    [(seq, kind, text)] = store.events_after("s1")
    assert (seq, kind) == (1, "answer")
    assert text == event.model_dump_json()
    assert json.loads(text) == event.model_dump(mode="json")


def test_a_batch_written_twice_stores_each_event_once():
    store = memory_store()
    store.append_events("s1", [_event(1), _event(2)])
    store.append_events("s1", [_event(2), _event(3)])
    assert [seq for seq, _, _ in store.events_after("s1")] == [1, 2, 3]


def test_batcher_holds_deltas_but_writes_other_events_at_once():
    written: list[list[int]] = []
    batcher = EventBatcher(lambda batch: written.append([e["seq"] for e in batch]), interval=60)
    batcher.add(_event(1, "synthesis_delta", text="a"))
    batcher.add(_event(2, "synthesis_delta", text="b"))
    assert written == [] and batcher.holding
    batcher.add(_event(3, "synthesis"))
    assert written == [[1, 2, 3]]
    batcher.add(_event(4, "synthesis_delta", text="c"))
    batcher.flush()
    assert written == [[1, 2, 3], [4]] and not batcher.holding


def test_sessions_search_is_literal_and_ignores_case(tmp_path):
    store = open_store(tmp_path / "c.db")
    for i, question in enumerate(["What is 100% of X?", "Why is the SKY blue?", "a_b"]):
        store.begin_session(f"s{i}", council="c", question=question, created_at=f"2026-01-0{i + 1}T00:00:00Z")
    assert [r["id"] for r in store.list_sessions(search="sky")] == ["s1"]
    assert [r["id"] for r in store.list_sessions(search="100%")] == ["s0"]
    assert [r["id"] for r in store.list_sessions(search="_")] == ["s2"]
    assert len(store.list_sessions(search=None)) == 3
    store.close()

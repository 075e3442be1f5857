"""Sessions run in the server's background: the id once the session exists, the reason when it
never does, and a store that fails to take events never takes the session down with it."""

from __future__ import annotations

import pytest

from council import Council
from council.errors import CouncilFailure, QuorumError
from council.server.background import LiveSessions
from council.storage import memory_store

CONFIG = {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"], "chairman": "fake/alpha"}}}


async def test_the_id_comes_back_and_every_event_is_stored_in_order():
    store = memory_store()
    council = Council.from_config(CONFIG, store=store)
    live = LiveSessions(store)
    session_id = await live.start(council, "Why is the sky blue?", 3)
    for task in list(live.tasks):
        await task
    rows = store.events_after(session_id)
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))
    assert rows[0][1] == "session_started" and rows[-1][1] == "session_finished"
    await council.aclose()


async def test_an_event_log_waits_with_no_task_and_writes_held_deltas_within_its_interval():
    """A server holds an event log for every session it runs. Only the chairman's deltas are held
    back, and a held one is written at most ``interval`` after it came; nothing keeps waking up
    for a session that holds none (a ticking task each woke every 50 ms for the session's life:
    ~5 % of a busy server's CPU, docs/benchmark-history.md section 44)."""
    import asyncio
    import time

    from council.server.background import EventLog
    from council.session.events import StageStarted, SynthesisDelta

    written: list[tuple[float, list[int]]] = []

    class Store:
        def append_events(self, session_id, batch):
            written.append((time.monotonic(), [e["seq"] for e in batch]))

    tasks = asyncio.all_tasks()
    log = EventLog(Store(), interval=0.05)
    log.add(StageStarted(session_id="s", seq=1, stage="synthesis"))
    assert [seqs for _, seqs in written] == [[1]]  # written at once
    assert asyncio.all_tasks() == tasks
    held = time.monotonic()
    log.add(SynthesisDelta(session_id="s", seq=2, chairman="c", text="a"))
    log.add(SynthesisDelta(session_id="s", seq=3, chairman="c", text="b"))
    assert [seqs for _, seqs in written] == [[1]] and asyncio.all_tasks() == tasks
    for _ in range(300):
        await asyncio.sleep(0.01)
        if len(written) > 1:
            break
    assert written[1][1] == [2, 3]
    assert 0.05 <= written[1][0] - held < 2  # by the timer, not at close (a loaded machine: slack)
    log.add(SynthesisDelta(session_id="s", seq=4, chairman="c", text="c"))
    log.close()  # the rest, at once
    assert [seqs for _, seqs in written] == [[1], [2, 3], [4]]
    await asyncio.sleep(0.1)
    assert len(written) == 3  # nothing written twice, no timer left behind


class _Refuses:
    async def run(self, question, **kwargs):
        raise QuorumError("refused before it began")


async def test_a_session_that_never_began_gives_its_reason_to_the_request():
    live = LiveSessions(memory_store())
    with pytest.raises(QuorumError, match="before it began"):
        await live.start(_Refuses(), "q", None)


async def test_to_end_gives_the_id_of_a_session_that_ended_well_or_the_error_it_ended_with():
    store = memory_store()
    council = Council.from_config(CONFIG, store=store)
    live = LiveSessions(store)
    session_id = await live.start(council, "Why is the sky blue?", 3, to_end=True)
    assert store.get_session(session_id)["status"] == "complete" and not live.tasks  # ended already
    members = ["fake/alpha+fail", "fake/beta+fail", "fake/gamma"]
    failing = Council.from_config({"councils": {"default": {"members": members, "chairman": "fake/gamma"}}},
                                  store=store)  # fmt: skip
    with pytest.raises(QuorumError, match="only 1 of 3"):
        await live.start(failing, "Why?", None, to_end=True)
    [failed] = [s for s in store.list_sessions() if s["id"] != session_id]
    assert store.get_session(failed["id"])["status"] == "failed"  # the session exists, with its reason
    assert store.events_after(failed["id"])[-1][1] == "session_finished"
    await council.aclose()
    await failing.aclose()


class _Silent:
    async def run(self, question, **kwargs):
        return None


async def test_a_session_that_ended_without_a_word_is_a_failure_not_a_hang():
    live = LiveSessions(memory_store())
    with pytest.raises(CouncilFailure, match="ended before it started"):
        await live.start(_Silent(), "q", None)


async def test_a_store_refusing_events_does_not_stop_the_session():
    store = memory_store()

    def broken(session_id, events):
        raise OSError("disk full")

    store.append_events = broken
    council = Council.from_config(CONFIG, store=store)
    live = LiveSessions(store)
    session_id = await live.start(council, "Why is the sky blue?", 3)
    for task in list(live.tasks):
        await task
    assert store.get_session(session_id)["status"] == "complete"
    await council.aclose()


def test_post_sessions_answers_a_refusal_before_the_start_with_its_error_not_a_500():
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server.app import create_app

    app = create_app(load_config(CONFIG))
    with TestClient(app, base_url="http://127.0.0.1") as client:

        async def refuse(council, question, seed, **options):
            raise QuorumError("only 0 of 3 members answered")

        app.state.council_server.live.start = refuse
        reply = client.post("/v1/sessions", json={"council": "default", "question": "q"})
        assert reply.status_code == 502 and "only 0 of 3" in reply.json()["error"]["message"]
        assert reply.headers["x-should-retry"] == "false"


def test_a_session_below_quorum_is_served_with_the_answers_that_came():
    import time

    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server.app import create_app

    members = ["fake/alpha+fail", "fake/beta+fail", "fake/gamma"]
    app = create_app(load_config({"councils": {"default": {"members": members, "chairman": "fake/gamma"}}}))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        started = client.post("/v1/sessions", json={"council": "default", "question": "Why is the sky blue?"})
        assert started.status_code == 202, started.text
        session_id = started.json()["session_id"]
        for _ in range(200):
            stored = client.get(f"/v1/sessions/{session_id}").json()
            if stored["status"] != "running":
                break
            time.sleep(0.02)
    assert stored["status"] == "failed" and "quorum" in stored["error"]  # the web app shows both
    kept = next(a for a in stored["answers"] if a["member"] == "fake/gamma")
    assert kept["status"] == "ok" and kept["text"]


async def test_a_stream_that_has_caught_up_with_an_ended_session_ends_without_waiting(monkeypatch):
    """A reconnect after a session's last event (an EventSource does that) and a session the CLI
    ran (no events) end at the first look, not after a round of polls."""
    from council.server import live as streams

    store = memory_store()
    council = Council.from_config(CONFIG, store=store)
    result = await council.run("Why is the sky blue?", seed=3)  # the library's run: no events stored
    await council.aclose()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(streams.asyncio, "sleep", sleep)
    chunks = [chunk async for chunk in streams._events(store, result.session_id, 0)]
    assert slept == [] and chunks[-1].startswith(b"event: session_finished\n")
    assert b'"status": "complete"' in chunks[-1]

"""The server's reads of a store whose operations may run on several threads (PostgreSQL) run in
a worker thread: on the event loop each was a round trip that every session of the server waited
for, and while the database restarts a wait of up to 10 s (council.storage.postgres,
OUTAGE_GRACE_S). On SQLite they stay on the loop's thread, whose connection they use."""

from __future__ import annotations

import threading

import pytest
from conftest import threads_calling
from starlette.testclient import TestClient

CONFIG = {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"], "chairman": "fake/alpha"}}}


@pytest.fixture
def served(backend_url, monkeypatch, council_home):
    from council.config import load_config
    from council.server.app import create_app

    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    app = create_app(load_config(CONFIG))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, app.state.council_server


def test_every_read_route_reads_the_store_off_the_event_loop_where_it_can(served, monkeypatch):
    client, server = served
    body = {"model": "default", "messages": [{"role": "user", "content": "q"}]}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200
    session_id = reply.json()["council"]["session_id"]
    loop_thread = client.portal.call(lambda: threading.current_thread().name)  # the app's event loop
    store = server.store
    threads = threads_calling(monkeypatch, store, "get_session", "list_sessions", "events_after", "bias_sums",
                              "comparisons")  # fmt: skip
    assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "complete"
    assert [s["session_id"] for s in client.get("/v1/sessions").json()] == [session_id]
    events = client.get(f"/v1/sessions/{session_id}/events").text
    assert events.count("event: session_finished") == 1
    assert client.get("/v1/bias-report").status_code == 200
    assert client.get("/v1/leaderboard?bootstrap=10").status_code == 200
    assert set(threads) == {"get_session", "list_sessions", "events_after", "bias_sums", "comparisons"}
    seen = set().union(*threads.values())
    assert seen == ({loop_thread} if not store.threadsafe else seen - {loop_thread}), threads

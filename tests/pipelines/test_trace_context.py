"""Trace context (issue 60): a caller's W3C ``traceparent`` (and ``tracestate``) is continued by
``council serve`` (the session's span is a child of the caller's) and by the CLI (the
``TRACEPARENT`` variable); a batch keeps its submitting span's ``traceparent`` and each worker's
item span links to it. A malformed or hostile trace context is ignored: the request is served
and the session starts a trace of its own. Read from the SDK's in-memory exporter, and from a
real ``council batch --enqueue`` and ``council worker`` exporting over OTLP/HTTP to the
collector stand-in of test_traces.py (a real ``council serve``: there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_traces import MEMBERS, QUESTION, attrs, collector, exported, received_spans  # noqa: F401 (a fixture)

from council._util import tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
CALLER = f"00-{TRACE_ID}-{SPAN_ID}-01"

HOSTILE = [
    f"00-{TRACE_ID.upper()}-{SPAN_ID}-01",  # hex in upper case
    f"00-{'0' * 32}-{SPAN_ID}-01",  # the invalid trace id
    f"00-{TRACE_ID}-{'0' * 16}-01",  # the invalid span id
    f"ff-{TRACE_ID}-{SPAN_ID}-01",  # the forbidden version
    f"00-{TRACE_ID}-{SPAN_ID}-01-more",  # version 00 has no more fields
    f"00-{TRACE_ID}-{SPAN_ID}",  # no flags
    f"00-{TRACE_ID}-{SPAN_ID}-01" + " " * 600,  # past the length any reader takes
    "00-" + "a" * 5000,
    "<script>alert(1)</script>",
    "00-\u00e9\u00e9-\u0000",
    "",
]


@pytest.fixture
def client(exported, tmp_path, council_home):  # noqa: F811 (the fixture imported above)
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server import create_app

    config = tmp_path / "council.toml"
    config.write_text(f'[councils.default]\nmembers = {json.dumps(MEMBERS)}\nchairman = "fake/beta"\n')
    with TestClient(create_app(load_config(str(config))), base_url="http://127.0.0.1:8000") as c:
        yield c


def ask(client, headers, *, stream: bool = False):
    body = {"model": "default", "messages": [{"role": "user", "content": QUESTION}], "stream": stream}
    reply = client.post("/v1/chat/completions", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply


def session_span(exporter):
    [session] = [s for s in exporter.get_finished_spans() if s.name == "council.session default"]
    return session


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_completion_continues_the_callers_trace(client, exported, stream):  # noqa: F811
    ask(client, {"traceparent": CALLER, "tracestate": "vendor=v1,other=x"}, stream=stream)
    session = session_span(exported)
    assert session.parent is not None and session.parent.is_remote
    assert f"{session.parent.span_id:016x}" == SPAN_ID and f"{session.context.trace_id:032x}" == TRACE_ID
    assert session.context.trace_state.get("vendor") == "v1"  # the caller's tracestate goes on
    spans = exported.get_finished_spans()
    assert {f"{s.context.trace_id:032x}" for s in spans} == {TRACE_ID}  # stages and calls too


def test_a_background_session_continues_the_callers_trace(client, exported):  # noqa: F811
    reply = client.post("/v1/sessions", json={"council": "default", "question": QUESTION},
                        headers={"traceparent": CALLER})  # fmt: skip
    assert reply.status_code == 202, reply.text
    events = client.get(f"/v1/sessions/{reply.json()['session_id']}/events")  # to its end
    assert "session_finished" in events.text
    session = session_span(exported)
    assert f"{session.parent.span_id:016x}" == SPAN_ID and f"{session.context.trace_id:032x}" == TRACE_ID


def test_without_a_traceparent_a_session_starts_its_own_trace(client, exported):  # noqa: F811
    ask(client, {"tracestate": "vendor=v1"})
    assert session_span(exported).parent is None


@pytest.mark.parametrize("traceparent", HOSTILE, ids=range(len(HOSTILE)))
def test_a_malformed_traceparent_is_ignored(client, exported, traceparent):  # noqa: F811
    ask(client, {"traceparent": traceparent.encode("utf-8"), "tracestate": ("=,bad key=\u00e9" * 50).encode("utf-8")})
    session = session_span(exported)
    assert session.parent is None and f"{session.context.trace_id:032x}" != TRACE_ID


def test_a_malformed_tracestate_is_dropped_and_not_logged(client, exported, caplog):  # noqa: F811
    caplog.set_level("DEBUG")
    ask(client, {"traceparent": CALLER, "tracestate": "vendor=v1,bad key=canary-7f3e"})
    session = session_span(exported)
    assert f"{session.parent.span_id:016x}" == SPAN_ID and not session.context.trace_state  # the trace goes on
    assert "canary-7f3e" not in caplog.text


def test_two_traceparent_headers_are_ignored(client, exported):  # noqa: F811
    other = f"00-{'1' * 32}-{'2' * 16}-01"
    ask(client, [("traceparent", CALLER), ("traceparent", other)])
    assert session_span(exported).parent is None


def test_a_request_does_not_leave_its_trace_to_the_next(client, exported):  # noqa: F811
    ask(client, {"traceparent": CALLER})
    exported.clear()
    ask(client, {})
    assert session_span(exported).parent is None


def test_off_a_traceparent_imports_nothing_of_opentelemetry(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    config = tmp_path / "council.toml"
    config.write_text(f'[councils.default]\nmembers = {json.dumps(MEMBERS)}\nchairman = "fake/beta"\n')
    env["COUNCIL_HOME"] = str(tmp_path / "home")
    code = (
        "import sys; from starlette.testclient import TestClient\n"
        "from council.config import load_config; from council.server import create_app\n"
        f"app = create_app(load_config({str(config)!r}))\n"
        "with TestClient(app, base_url='http://127.0.0.1:8000') as c:\n"
        "    r = c.post('/v1/chat/completions', json={'model': 'default', 'messages': [{'role': 'user',"
        f" 'content': 'why?'}}]}}, headers={{'traceparent': {CALLER!r}}})\n"
        "    assert r.status_code == 200, r.text\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "[]"


# -- batches: the submitting span, linked from each item's -----------------------------------


async def judged_batch(store, batch_id: str = "b") -> None:
    from fake_judges import fake_client

    from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch

    text = "".join(json.dumps({"id": f"p{i}", "prompt": "Which?", "a": "A.", "b": "B."}) + "\n" for i in range(2))
    await run_batch(parse_batch(text, "b.jsonl"), settings=BatchSettings(judges=["fake/judge"]),
                    judges=[fake_client("fake/judge")], batch_id=batch_id, source="b.jsonl",
                    content_sha256=content_digest(text), store=store)  # fmt: skip


async def test_batch_items_link_to_the_span_that_submitted_them(exported):  # noqa: F811
    from council.storage import memory_store

    store = memory_store()
    token = tracing.continue_trace({"traceparent": [CALLER]})
    try:
        await judged_batch(store)
    finally:
        tracing.end_continuing(token)
    spans = exported.get_finished_spans()
    [submitted] = [s for s in spans if s.name == "council.batch_submit"]
    assert f"{submitted.parent.span_id:016x}" == SPAN_ID and f"{submitted.context.trace_id:032x}" == TRACE_ID
    assert submitted.attributes["council.batch_id"] == "b"
    items = [s for s in spans if s.name == "council.batch_item"]
    assert len(items) == 2
    for item in items:  # a trace of its own, linked to the submission
        assert item.parent is None and item.context.trace_id != submitted.context.trace_id
        [link] = item.links
        assert link.context.trace_id == submitted.context.trace_id and link.context.span_id == submitted.context.span_id
    assert json.loads(store.db.execute("SELECT spec FROM batches").fetchone()[0])["traceparent"] == (
        f"00-{TRACE_ID}-{submitted.context.span_id:016x}-01"
    )


async def test_a_stored_traceparent_that_is_not_one_is_ignored(exported):  # noqa: F811
    from fake_judges import fake_client

    from council.judging.batch import BatchSettings, parse_batch
    from council.judging.worker import enqueue, run_worker
    from council.storage import memory_store

    store = memory_store()
    judge = fake_client("fake/judge")
    text = json.dumps({"id": "p0", "prompt": "Which?", "a": "A.", "b": "B."}) + "\n"
    enqueue(store, parse_batch(text, "b.jsonl"), batch_id="b", settings=BatchSettings(judges=["fake/judge"]),
            judges=[judge], rubrics={}, source="b.jsonl", content_sha256="x")  # fmt: skip
    spec = json.loads(store.db.execute("SELECT spec FROM batches").fetchone()[0])
    spec["traceparent"] = "<script>" + "x" * 10_000  # whatever wrote the store
    with store.immediate() as db:
        db.execute("UPDATE batches SET spec = ?", [json.dumps(spec)])
    report = await run_worker(store, judges_for=lambda _id, _spec: [judge], batch_id="b", keep_judges=[judge])
    assert report.judged == 1
    [item] = [s for s in exported.get_finished_spans() if s.name == "council.batch_item"]
    assert item.attributes["council.status"] == "judged" and not item.links and item.parent is None


# -- real processes, exporting over OTLP/HTTP -------------------------------------------------


def test_a_batch_enqueued_by_the_cli_is_linked_from_a_real_workers_items(tmp_path):
    env = {**os.environ, "COUNCIL_HOME": str(tmp_path / "home")}
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps({"id": f"p{i}", "prompt": QUESTION, "a": "A.", "b": "B."}) + "\n"
                             for i in range(2)))  # fmt: skip
    with collector() as otel:
        queued = subprocess.run([sys.executable, "-m", "council", "batch", str(batch), "--judge", "fake/judge",
                                 "--enqueue", "--batch-id", "q"], capture_output=True, text=True,
                                env={**env, **otel, "TRACEPARENT": CALLER})  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        other = f"00-{'1' * 32}-{'2' * 16}-01"  # a worker's own caller: its items still link to the submission
        worked = subprocess.run([sys.executable, "-m", "council", "worker", "--batch-id", "q"], capture_output=True,
                                text=True, env={**env, **otel, "TRACEPARENT": other})  # fmt: skip
        assert worked.returncode == 0, worked.stderr
        spans = received_spans()
    [submitted] = [s for s in spans if s.name == "council.batch_submit"]
    assert submitted.trace_id.hex() == TRACE_ID and submitted.parent_span_id.hex() == SPAN_ID  # the caller's
    items = [s for s in spans if s.name == "council.batch_item"]
    assert len(items) == 2
    for item in items:
        assert not item.parent_span_id and item.trace_id.hex() != TRACE_ID  # a trace each, as before
        [link] = item.links
        assert link.trace_id.hex() == TRACE_ID and link.span_id == submitted.span_id

"""OpenTelemetry traces (the ``otel`` extra): one trace per session, a span per stage under it and
a span per provider call under its stage with the GenAI attributes, ``gen_ai.evaluation.result``
events for reviews and the consensus, and no text in any of it (a canary); read from the SDK's
in-memory exporter, and from a real ``council run`` (and ``serve``, continuing its caller's
``traceparent``; ``worker``) exporting over OTLP/HTTP to a collector
stand-in on loopback. Off (no ``OTEL_*`` variable), nothing of OpenTelemetry is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from council import Council
from council._util import tracing

CANARY = "q-7d3f1b9e5a-trace-canary"
QUESTION = f"Which sorting algorithm is stable? {CANARY}"
MEMBERS = ["fake/alpha+quote", "fake/beta", "fake/gamma"]  # +quote: an answer that repeats the question


@pytest.fixture
def exported():
    sdk = pytest.importorskip("opentelemetry.sdk.trace")  # the otel extra
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert tracing.start(provider)
    try:
        yield exporter
    finally:
        tracing.stop()


def council() -> Council:
    return Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": "fake/beta"}}}, store=False)


def everything(span) -> str:
    """Every name, attribute and event of ``span`` as text (what a backend would show)."""
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    return json.dumps([span.name, dict(span.attributes or {}), events], default=str)


def check_session_trace(spans, session_id: str) -> None:
    [session] = [s for s in spans if s.name == "council.session default"]
    assert session.parent is None and session.attributes["council.session_id"] == session_id
    assert session.attributes["council.status"] in ("complete", "partial")
    assert session.attributes["gen_ai.usage.input_tokens"] > 0 and session.attributes["council.calls"] >= 7
    trace_id = session.context.trace_id
    assert {s.context.trace_id for s in spans} == {trace_id}  # one trace for the session
    stages = {s.attributes["council.stage"]: s for s in spans if s.name.startswith("council.stage ")}
    assert set(stages) == {"answer", "review", "synthesis"}
    assert all(s.parent.span_id == session.context.span_id for s in stages.values())
    calls = [s for s in spans if s.name.startswith("chat ")]
    assert len(calls) == session.attributes["council.calls"]
    by_stage = {sid.context.span_id: name for name, sid in stages.items()}
    for call in calls:
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.request.model"].startswith("fake/")
        assert call.attributes["gen_ai.usage.input_tokens"] > 0 and "gen_ai.usage.output_tokens" in call.attributes
        assert by_stage[call.parent.span_id] == call.attributes["council.stage"]  # under its own stage
        assert call.start_time <= call.end_time
    reviews = [e for e in stages["review"].events if e.attributes["gen_ai.evaluation.name"] == "council.review"]
    assert reviews and all(e.name == "gen_ai.evaluation.result" for e in reviews)
    assert any(e.attributes["gen_ai.evaluation.name"] == "council.consensus" for e in stages["review"].events)
    for span in spans:
        assert CANARY not in everything(span), span.name


async def test_a_session_is_one_trace_of_stages_and_calls_without_text(exported):
    c = council()
    try:
        result = await c.run(QUESTION, seed=3)
    finally:
        await c.aclose()
    assert any(CANARY in (a.text or "") for a in result.answers)  # the canary went through the session
    check_session_trace(exported.get_finished_spans(), result.session_id)


async def test_a_streamed_session_is_parented_the_same(exported):
    c = council()
    result = None
    try:
        async for item in c.stream(QUESTION, seed=3):
            result = item
    finally:
        await c.aclose()
    check_session_trace(exported.get_finished_spans(), result.session_id)


def test_off_without_otel_variables_nothing_is_imported(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = (
        "import sys, asyncio; from council import Council; from council._util import tracing\n"
        "c = Council.from_config({'councils': {'default': {'members': ['fake/a', 'fake/b'], 'chairman': 'fake/a'}}},"
        " store=False)\n"
        "asyncio.run(c.run('why?')); assert not tracing.start() and not tracing.ACTIVE\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector stand-in: keeps each export request's protobuf body."""

    received: list[bytes] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/traces":
            Collector.received.append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


@contextmanager
def collector() -> Iterator[dict[str, str]]:
    """A collector stand-in on loopback while the block runs; the variables that export to it."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")  # the otel extra
    pytest.importorskip("opentelemetry.proto")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Collector.received = []
    try:
        yield {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
               "OTEL_SERVICE_NAME": "c-test"}  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()


def received_spans() -> list:
    trace_pb2 = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    spans = []
    for body in Collector.received:
        for resource_spans in trace_pb2.ExportTraceServiceRequest.FromString(body).resource_spans:
            services = {a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"}
            assert services == {"c-test"}
            spans += [s for scope in resource_spans.scope_spans for s in scope.spans]
    return spans


def collected(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list, list[bytes]]:
    """``council ARGS`` exporting to a collector stand-in on loopback: the process, the spans and the bodies."""
    with collector() as otel:
        ran = subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True,
                             env={**os.environ, **env, **otel}, timeout=120)  # fmt: skip
    return ran, received_spans(), Collector.received


def attrs(span) -> dict:
    return {a.key: a.value for a in span.attributes}


def test_council_run_exports_its_trace_over_otlp(tmp_path):
    config = tmp_path / "council.toml"
    config.write_text(f'[councils.default]\nmembers = {json.dumps(MEMBERS)}\nchairman = "fake/beta"\n')
    ran, spans, bodies = collected("run", QUESTION, "--config", str(config), "--json",
                                   env={"COUNCIL_HOME": str(tmp_path / "home")})  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [session] = [s for s in spans if s.name == "council.session default"]
    assert attrs(session)["council.session_id"].string_value == json.loads(ran.stdout)["session_id"]
    assert {s.trace_id for s in spans} == {session.trace_id}
    calls = [s for s in spans if s.name.startswith("chat ")]
    stages = {s.span_id for s in spans if s.name.startswith("council.stage ")}
    assert len(stages) == 3 and calls and all(c.parent_span_id in stages for c in calls)
    assert all(CANARY.encode() not in body for body in bodies)


def test_a_worker_exports_one_trace_per_batch_item(tmp_path):
    env = {"COUNCIL_HOME": str(tmp_path / "home")}
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps({"id": f"p{i}", "prompt": QUESTION, "a": "A.", "b": "B."}) + "\n"
                             for i in range(2)))  # fmt: skip
    queued = subprocess.run([sys.executable, "-m", "council", "batch", str(batch), "--judge", "fake/judge", "--enqueue",
                             "--batch-id", "q"], capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    ran, spans, bodies = collected("worker", "--batch-id", "q", env=env)
    assert ran.returncode == 0, ran.stderr
    items = {attrs(s)["council.item_id"].string_value: s for s in spans if s.name == "council.batch_item"}
    assert set(items) == {"p0", "p1"} and len({s.trace_id for s in items.values()}) == 2  # a trace each
    for item in items.values():
        assert not item.parent_span_id and attrs(item)["council.status"].string_value == "judged"
        calls = [s for s in spans if s.name.startswith("chat ") and s.trace_id == item.trace_id]
        assert len(calls) == 2 and all(c.parent_span_id == item.span_id for c in calls)  # both orders
        verdicts = {}
        for event in item.events:
            assert event.name == "gen_ai.evaluation.result"
            fields = {a.key: a.value for a in event.attributes}
            verdicts.setdefault(fields["gen_ai.evaluation.name"].string_value, []).append(fields)
        assert len(verdicts["council.judgment"]) == 2  # one judgment per order
        [verdict] = verdicts["council.verdict"]
        assert verdict["gen_ai.evaluation.score.label"].string_value in ("A", "B", "tie")
    assert all(CANARY.encode() not in body for body in bodies)


def test_a_server_session_is_one_trace(tmp_path, council_home):
    import httpx
    from serve_helpers import council_serve

    config = tmp_path / "council.toml"
    config.write_text(f'[councils.default]\nmembers = {json.dumps(MEMBERS)}\nchairman = "fake/beta"\n')
    with collector() as otel:
        with council_serve(config, council_home, env=otel) as served:
            body = {"model": "default", "messages": [{"role": "user", "content": QUESTION}]}
            caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # the caller's span: continued
            reply = httpx.post(f"{served.base}/v1/chat/completions", json=body, timeout=60,
                               headers={"traceparent": caller})  # fmt: skip
            assert reply.status_code == 200, reply.text
        spans = received_spans()  # the server flushes its spans as it stops
    [session] = [s for s in spans if s.name == "council.session default"]
    assert attrs(session)["council.session_id"].string_value == reply.headers["x-council-session-id"]
    assert session.trace_id.hex() == caller[3:35] and session.parent_span_id.hex() == caller[36:52]
    mine = [s for s in spans if s.trace_id == session.trace_id]
    assert {s.name for s in mine} >= {"council.stage answer", "council.stage review", "council.stage synthesis"}
    assert all(CANARY.encode() not in body for body in Collector.received)

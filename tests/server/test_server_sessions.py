"""Sessions over HTTP: started in the background, their events streamed from the store (SSE ids,
Last-Event-ID, any replica), listed and searched; the leaderboard as the CLI gives it; and the
chat stream sending the synthesis as it is written, with progress as reasoning_content."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import jsonschema
import pytest
from conftest import db_dump, db_rows, invoke_cli
from mock_server import start_mock_server, wait_for
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # real server processes

TOKEN = "t0ken-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.01, stream_interval=0.01, slow_seconds=1.0) as server:
        yield server.base_url


@pytest.fixture
def config(tmp_path, mock_url):
    return council_config(tmp_path / "council.toml", mock_url)


def council_config(path: Path, mock_url: str) -> Path:
    models = {"a": "mock-alpha", "b": "mock-beta", "c": "mock-gamma", "slow": "mock-delta+slow",
              "broken": "mock-chair+cutoff", "failing": "mock-chair+fail"}  # fmt: skip
    lines = [
        "[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "a"',
        "[councils.slow]", 'members = ["a", "b", "slow"]', 'chairman = "a"',
        "[councils.broken]", 'members = ["a", "b", "c"]', 'chairman = "broken"', 'fallback_chairman = "b"',
        "[councils.nosynthesis]", 'members = ["a", "b", "c"]', 'chairman = "failing"',
        "[councils.structured]", 'members = ["a", "b", "c"]', 'chairman = "fake/chair+flaky"',
    ]  # fmt: skip
    for alias, model in models.items():
        retries = 0 if alias == "failing" else 1
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock_url}"', f"retries = {retries}"]
    path.write_text("\n".join(lines) + "\n")
    return path


SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "session-events.json").read_text())
# Checked once and compiled once: jsonschema.validate() checks the schema itself at every call (80 ms here).
jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)
EVENT = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)


def sse(text: str) -> list[dict]:
    """The events of an SSE body: {"id", "event", "data"} each (comments skipped)."""
    events = []
    for block in text.strip().split("\n\n"):
        fields: dict = {"id": None, "event": None, "data": None}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields["data"] is not None:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events


def events_of(base: str, session_id: str, headers: dict | None = None) -> list[dict]:
    reply = httpx.get(f"{base}/v1/sessions/{session_id}/events", headers={**AUTH, **(headers or {})}, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    events = sse(reply.text)
    for event in events:  # every event in its published shape
        EVENT.validate(event["data"])
    return events


def start(base: str, council: str = "default", question: str = "Why is the sky blue?", **extra) -> httpx.Response:
    return httpx.post(f"{base}/v1/sessions", json={"council": council, "question": question, **extra}, headers=AUTH)


def test_a_session_starts_at_once_and_its_events_stream_resume_and_end(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, lines):
        assert any(f"web app: {base}/" in line for line in lines)  # where to point a browser
        t0 = time.perf_counter()
        started = start(base, "slow", seed=7)
        elapsed = time.perf_counter() - t0
        assert started.status_code == 202, started.text
        session_id = started.json()["session_id"]
        assert elapsed < 0.8  # the slow member takes 1 s: the id came back before it answered

        events = events_of(base, session_id)
        kinds = [e["event"] for e in events]
        assert kinds[0] == "session_started" and kinds[-1] == "session_finished"
        assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
        assert all(e["data"]["type"] == e["event"] for e in events)
        assert {"answer", "review", "consensus", "synthesis"} <= set(kinds)
        assert kinds.count("synthesis_delta") > 5  # the chairman's text, as it was written
        finished = events[-1]["data"]
        assert finished["status"] == "complete"

        # Resume after event 5: exactly the rest, the same ids and contents.
        rest = events_of(base, session_id, {"last-event-id": "5"})
        assert [e["id"] for e in rest] == [e["id"] for e in events[5:]]
        assert [e["data"] for e in rest] == [e["data"] for e in events[5:]]
        assert events_of(base, session_id, {"last-event-id": events[-1]["id"]})[-1]["event"] == "session_finished"

        stored = httpx.get(f"{base}/v1/sessions/{session_id}", headers=AUTH).json()
        synthesis = "".join(e["data"]["text"] for e in events if e["event"] == "synthesis_delta")
        assert synthesis == stored["synthesis"]["text"]


def test_a_chat_client_that_hangs_up_while_members_answer_leaves_the_session_interrupted_with_its_answers(
    tmp_path, council_home
):
    """The slow member takes a minute; the client hangs up once the others have answered: the
    session is cancelled and recorded interrupted, with the answers that had come."""
    body = json.dumps({"model": "slow", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}).encode()
    answered = "select count(*) from session_events where type = 'answer'"
    with start_mock_server(latency=0.01, slow_seconds=60) as mock, council_serve(
        council_config(tmp_path / "council.toml", mock.base_url), council_home, "--token", TOKEN
    ) as (base, _):
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as client:
            head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\nauthorization: Bearer {TOKEN}\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n")  # fmt: skip
            client.sendall(head.encode() + body)
            assert wait_for(lambda: db_rows(council_home, answered) == [(2,)], timeout=30)  # a and b, not slow
        # The client hung up: recorded once the server sees the connection closed.
        assert wait_for(lambda: httpx.get(f"{base}/v1/sessions", headers=AUTH).json()[0]["status"] != "running",
                        timeout=30, interval=0.05)  # fmt: skip
        [listed] = httpx.get(f"{base}/v1/sessions", headers=AUTH).json()
        stored = httpx.get(f"{base}/v1/sessions/{listed['session_id']}", headers=AUTH).json()
    assert listed["status"] == "interrupted"
    answers = {a["member"]: (a["status"], a["error"]) for a in stored["answers"]}
    assert answers == {"a": ("ok", None), "b": ("ok", None), "slow": ("failed", "no answer: interrupted")}


def test_a_replica_sharing_the_store_streams_a_session_another_one_runs(config, council_home):
    with (
        council_serve(config, council_home, "--token", TOKEN) as (one, _),
        council_serve(config, council_home, "--token", TOKEN) as (two, _),
    ):
        session_id = start(one, "slow").json()["session_id"]
        events = events_of(two, session_id)  # while it runs on the first server
        assert events[0]["event"] == "session_started" and events[-1]["event"] == "session_finished"
        assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))


def test_sessions_are_listed_and_searched_and_the_leaderboard_is_the_clis(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        ids = [start(base, question=q).json()["session_id"] for q in ("Why is the SKY blue?", "What is 100% of 3?")]
        for session_id in ids:
            events_of(base, session_id)  # until each has finished
        listed = httpx.get(f"{base}/v1/sessions", params={"limit": 10}, headers=AUTH).json()
        assert {s["session_id"] for s in listed} >= set(ids)
        found = httpx.get(f"{base}/v1/sessions", params={"q": "sky"}, headers=AUTH).json()
        assert [s["session_id"] for s in found] == [ids[0]]
        assert [
            s["session_id"] for s in httpx.get(f"{base}/v1/sessions", params={"q": "100%"}, headers=AUTH).json()
        ] == [ids[1]]
        board = httpx.get(f"{base}/v1/leaderboard", params={"bootstrap": 20, "seed": 1}, headers=AUTH)
        assert board.status_code == 200
        cli = invoke_cli("leaderboard", "--json", "--bootstrap", "20", "--seed", "1")
        assert cli.exit_code == 0 and board.json() == json.loads(cli.stdout)
        assert board.json()["comparisons"] > 0
        styled = httpx.get(f"{base}/v1/leaderboard", params={"control": "length,markdown", "bootstrap": 20},
                           headers=AUTH)  # fmt: skip
        cli = invoke_cli("leaderboard", "--json", "--bootstrap", "20", "--control", "length,markdown")
        assert styled.status_code == 200 and styled.json() == json.loads(cli.stdout)
        assert styled.json()["control"] == ["length", "markdown"]
        report = httpx.get(f"{base}/v1/bias-report", headers=AUTH)
        cli = invoke_cli("bias-report", "--json")
        assert cli.exit_code == 0 and report.status_code == 200 and report.json() == json.loads(cli.stdout)


def test_bad_requests_get_one_clear_4xx_and_nothing_runs(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        for path in ("/v1/sessions", "/v1/leaderboard", "/v1/sessions/x/events"):
            assert httpx.get(base + path).status_code == 401  # the same bearer token as the API
        assert httpx.post(base + "/v1/sessions", json={"council": "default", "question": "q"}).status_code == 401
        cases = [
            ({"question": "q"}, 400, "council"),
            ({"council": "default", "question": "   "}, 400, "empty"),
            ({"council": "default", "question": "q", "seed": -1}, 400, "seed"),
            ({"council": "default", "question": "q", "extra": 1}, 400, "extra"),
            ({"council": "nope", "question": "q"}, 404, "nope"),
        ]
        for body, status, word in cases:
            reply = httpx.post(base + "/v1/sessions", json=body, headers=AUTH)
            assert reply.status_code == status, (body, reply.text)
            assert word in reply.json()["error"]["message"]
        assert httpx.get(f"{base}/v1/sessions", params={"limit": 0}, headers=AUTH).status_code == 400
        assert httpx.get(f"{base}/v1/sessions", params={"limit": "x"}, headers=AUTH).status_code == 400
        assert httpx.get(f"{base}/v1/sessions/does-not-exist/events", headers=AUTH).status_code == 404
        session_id = start(base).json()["session_id"]
        bad = httpx.get(f"{base}/v1/sessions/{session_id}/events", headers={**AUTH, "last-event-id": "abc"})
        assert bad.status_code == 400
        assert httpx.get(f"{base}/v1/leaderboard", params={"bootstrap": "-1"}, headers=AUTH).status_code == 400
        bad = httpx.get(f"{base}/v1/leaderboard", params={"control": "colour"}, headers=AUTH)
        assert bad.status_code == 400 and "--control takes" in bad.json()["error"]["message"]
        assert len(httpx.get(f"{base}/v1/sessions", headers=AUTH).json()) == 1  # only the good one ran


def test_a_session_run_by_the_cli_streams_one_finished_event(config, council_home):
    cli = invoke_cli("run", "--config", str(config), "--json", "Why is the sky blue?")
    assert cli.exit_code == 0, cli.stderr
    session_id = json.loads(cli.stdout)["session_id"]
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        events = events_of(base, session_id)
        assert [e["event"] for e in events] == ["session_finished"]
        assert events[0]["data"]["status"] == "complete"


def chat_stream(base: str, model: str, **extra) -> tuple[list[dict], list[float]]:
    """The chunks of a streamed chat completion and when each arrived (seconds from the request)."""
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "Why is the sky blue?"}], **extra}
    chunks, times = [], []
    t0 = time.perf_counter()
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, headers=AUTH, timeout=30) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
                times.append(time.perf_counter() - t0)
    return chunks, times


def _deltas(chunks: list[dict], key: str) -> list[str]:
    return [c["choices"][0]["delta"].get(key) for c in chunks if c.get("choices") and c["choices"][0]["delta"].get(key)]


def test_chat_streams_progress_as_reasoning_then_the_synthesis_as_it_is_written(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        chunks, times = chat_stream(base, "default")
        reasoning, content = _deltas(chunks, "reasoning_content"), _deltas(chunks, "content")
        assert any("ranked" in r for r in reasoning) and any("Consensus" in r for r in reasoning)
        assert len(content) > 5  # many pieces, not the whole text cut at the end
        first_content = next(
            i for i, c in enumerate(chunks) if c.get("choices") and c["choices"][0]["delta"].get("content")
        )
        last_reasoning = max(
            i for i, c in enumerate(chunks) if c.get("choices") and c["choices"][0]["delta"].get("reasoning_content")
        )
        assert last_reasoning < first_content  # no "thinking" after the answer has started
        # The text arrived over time (10 ms between the mock's chunks), not all at once.
        content_times = [
            t
            for c, t in zip(chunks, times, strict=True)
            if c.get("choices") and c["choices"][0]["delta"].get("content")
        ]
        assert content_times[-1] - content_times[0] > 0.05
        session_id = chunks[-1]["council"]["session_id"]
        stored = httpx.get(f"{base}/v1/sessions/{session_id}", headers=AUTH).json()
        assert "".join(content) == stored["synthesis"]["text"]
        # A chat's session is in the store as it ran: the web app can watch it from any replica.
        events = events_of(base, session_id)
        assert "".join(e["data"]["text"] for e in events if e["event"] == "synthesis_delta") == "".join(content)
        assert events[-1]["event"] == "session_finished"

        whole = httpx.post(base + "/v1/chat/completions", headers=AUTH, timeout=30, json={
            "model": "default", "messages": [{"role": "user", "content": "Name a colour."}]})  # fmt: skip
        kinds = [e["event"] for e in events_of(base, whole.json()["council"]["session_id"])]
        assert kinds[0] == "session_started" and kinds[-1] == "session_finished" and "review" in kinds

        quiet, _ = chat_stream(base, "default", stream_options={"include_progress": False})
        assert not _deltas(quiet, "reasoning_content") and _deltas(quiet, "content")
        bad = httpx.post(base + "/v1/chat/completions", headers=AUTH, json={
            "model": "default", "stream": True, "stream_options": {"include_progress": "yes"},
            "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert bad.status_code == 400 and "include_progress" in bad.json()["error"]["message"]


def test_a_chairman_breaking_off_mid_stream_is_followed_by_a_notice_and_the_fallback(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        chunks, _ = chat_stream(base, "broken")
        text = "".join(_deltas(chunks, "content"))
        session_id = chunks[-1]["council"]["session_id"]
        stored = httpx.get(f"{base}/v1/sessions/{session_id}", headers=AUTH).json()
        assert stored["synthesis"]["fallback_used"] and stored["synthesis"]["chairman"] == "b"
        before, notice, after = text.partition("\n\n[the chairman failed")
        assert notice and before.strip()  # half of the first answer, then the one-line notice
        line, _, fallback = after.partition("]\n\n")
        assert "\n" not in line and "fallback chairman b" in line
        assert fallback == stored["synthesis"]["text"]


def test_a_stream_without_a_synthesis_says_once_that_it_is_partial(config, council_home):
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        chunks, _ = chat_stream(base, "nosynthesis")
        text = "".join(_deltas(chunks, "content"))
        line, _, rest = text.partition("\n\n")  # the partial line first (council.session.degraded)
        assert line == chunks[-1]["council"]["partial_line"] and "no synthesis" in line
        assert rest.startswith("[Partial answer") and text.count("Partial answer") == 1
        assert chunks[-1]["council"]["status"] == "partial"
        best = chunks[-1]["council"]["ranking"][0]["member"]
        stored = httpx.get(f"{base}/v1/sessions/{chunks[-1]['council']['session_id']}", headers=AUTH).json()
        assert text.endswith(next(a["text"] for a in stored["answers"] if a["member"] == best))


def test_with_transcripts_off_no_stored_or_streamed_event_carries_a_text(config, council_home):
    secret = "Is the launch code 7-alpha-zulu still valid?"
    env = {"COUNCIL_STORE_TRANSCRIPTS": "0"}
    with council_serve(config, council_home, "--token", TOKEN, env=env) as (base, _):
        session_id = start(base, question=secret).json()["session_id"]
        events = events_of(base, session_id)
        assert events[-1]["event"] == "session_finished" and events[-1]["data"]["status"] == "complete"
        kinds = {e["event"] for e in events}
        assert "answer" in kinds and "synthesis_delta" not in kinds
        assert all(e["data"].get("text") is None for e in events if e["event"] in ("answer", "synthesis"))
        assert "7-alpha-zulu" not in json.dumps([e["data"] for e in events])
    assert "7-alpha-zulu" not in db_dump(council_home)


def test_with_response_format_the_answer_is_sent_once_validated(config, council_home):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "capital", "schema": schema}}
    with council_serve(config, council_home, "--token", TOKEN) as (base, _):
        # The chairman's first reply is prose (+flaky): it is re-asked, and only the valid JSON is sent.
        chunks, _ = chat_stream(base, "structured", response_format=response_format)
        content = _deltas(chunks, "content")
        assert len(content) == 1 and isinstance(json.loads(content[0])["city"], str)
        stored = httpx.get(f"{base}/v1/sessions/{chunks[-1]['council']['session_id']}", headers=AUTH).json()
        assert stored["synthesis"]["attempts"] == 2 and stored["synthesis"]["text"] == content[0]

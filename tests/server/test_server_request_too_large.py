"""A chat request too large for every member's ``tpm``: one 400 that OpenAI clients read as
"context length exceeded", streamed or not, and the session kept as failed with the reason."""

from __future__ import annotations

import httpx
import pytest
from serve_helpers import council_serve

openai = pytest.importorskip("openai")

TOO_LONG = "Why is the sky blue? " + "Please be thorough. " * 150  # ~3,000 bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "council.toml"
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "fake/chair"']
    for alias in "abc":
        lines += [f"[models.{alias}]", f'model = "fake/{alias}"', "tpm = 2000", "max_tokens = 50"]
    path.write_text("\n".join(lines) + "\n")
    with council_serve(path, tmp_path_factory.mktemp("home")) as server:
        yield server.base


def sessions(base: str) -> list[dict]:
    return httpx.get(f"{base}/v1/sessions?limit=100").json()


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_no_member_can_take_is_a_400_naming_the_limit(served, stream):
    client = openai.OpenAI(base_url=served + "/v1", api_key="unused", max_retries=0)
    before = {s["session_id"] for s in sessions(served)}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": TOO_LONG}],
                                       stream=stream)  # fmt: skip
    error = refused.value.body
    assert refused.value.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert "[models.a] tpm = 2000" in error["message"] and "\n" not in error["message"]
    assert refused.value.response.headers["x-should-retry"] == "false"
    # Nothing lost: the session is kept, failed, with the reason.
    [new] = [s for s in sessions(served) if s["session_id"] not in before]
    kept = httpx.get(f"{served}/v1/sessions/{new['session_id']}").json()
    assert kept["status"] == "failed" and "tpm = 2000" in kept["error"]


def test_a_prompt_that_fits_is_answered(served):
    reply = httpx.post(f"{served}/v1/chat/completions", timeout=30,
                       json={"model": "default", "messages": [{"role": "user", "content": "Why?"}]})  # fmt: skip
    # The members answer; the reviews' prompts (every answer) do not fit 2,000 tokens: partial, not a 400.
    assert reply.status_code == 200, reply.text
    assert reply.json()["council"]["status"] == "partial"


async def test_a_session_run_before_its_stream_is_replayed_whole_or_answered_with_its_error():
    """``_run_first`` (the path a too-large streamed request takes): a session that still ends
    well is streamed as it ran; one that fails is its error response, its events kept."""
    from council.errors import PromptTooLarge
    from council.server.background import EventLog
    from council.server.chat import _run_first

    class Store:
        def __init__(self) -> None:
            self.events: list[dict] = []

        def append_events(self, session_id: str, batch: list[dict]) -> None:
            self.events += batch

    class Event:
        session_id = "s"

        def model_dump(self, mode: str) -> dict:
            return {"session_id": "s", "type": "notice"}

    class Stub:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        async def stream(self, *_, **__):
            yield Event()
            if self.fail:
                raise PromptTooLarge("too large: [models.a] tpm = 1")
            yield "result"

    store = Store()
    replay, failure = await _run_first(Stub(fail=False), "q", [], None, None, EventLog(store))
    assert failure is None and [item async for item in replay.stream()][1] == "result"
    assert store.events == []  # added as the replay streams them, once
    _, failure = await _run_first(Stub(fail=True), "q", [], None, None, EventLog(store))
    assert failure.status_code == 400 and b"context_length_exceeded" in failure.body
    assert store.events == [{"session_id": "s", "type": "notice"}]


def test_starting_a_session_no_member_can_take_is_the_same_400_and_the_session_is_kept(served):
    """``POST /v1/sessions`` answers as the chat route does (not a 202 for a session already lost)."""
    before = {s["session_id"] for s in sessions(served)}
    started = httpx.post(f"{served}/v1/sessions", json={"council": "default", "question": TOO_LONG}, timeout=30)
    assert started.status_code == 400, started.text
    assert started.headers["x-should-retry"] == "false"
    error = started.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert error["param"] == "messages" and "[models.a] tpm = 2000" in error["message"]
    assert "\n" not in error["message"]
    [new] = [s for s in sessions(served) if s["session_id"] not in before]
    kept = httpx.get(f"{served}/v1/sessions/{new['session_id']}").json()
    assert kept["status"] == "failed" and kept["error"] in error["message"]
    # Its events are kept too: a client that watches it sees why it ended.
    events = httpx.get(f"{served}/v1/sessions/{new['session_id']}/events", timeout=30).text
    assert "event: session_finished" in events and "tpm = 2000" in events


def test_starting_a_session_that_fits_is_still_a_202(served):
    started = httpx.post(f"{served}/v1/sessions", json={"council": "default", "question": "Why?"}, timeout=30)
    assert started.status_code == 202, started.text
    assert started.headers["location"] == f"/v1/sessions/{started.json()['session_id']}"

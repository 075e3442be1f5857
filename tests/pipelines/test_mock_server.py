"""The mock LLM server over real HTTP, driven by the official openai client."""

from __future__ import annotations

import json
import signal
import time
from typing import Annotated, Literal

import httpx
import pytest
from mock_server import start_mock_server, wait_for
from pydantic import BaseModel, Field

from council.providers.asking import validate_output
from council.providers.base import ChatRequest
from council.providers.fake import FakeAPI
from council.session import prompts
from council.session.schemas import PEER_REVIEW_SCHEMA_NAME, peer_review_model

openai = pytest.importorskip("openai")

QUESTION = [{"role": "user", "content": "Which planet is known as the red planet?"}]


class Verdict(BaseModel):
    reasoning: str = Field(min_length=1)
    winner: Literal["A", "B", "tie"]
    confidence: Annotated[float, Field(ge=0, le=1)]
    score: Annotated[int, Field(ge=1, le=10)]


def json_schema_format(model: type[BaseModel], name: str) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": model.model_json_schema()}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("mock") / "requests.jsonl"
    with start_mock_server(log_requests=log, slow_seconds=0.2) as running:
        yield running


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def test_plain_completion_is_openai_shaped(client):
    completion = client.chat.completions.create(model="mock-alpha", messages=QUESTION)
    assert completion.id.startswith("chatcmpl-") and completion.created > 0 and completion.model == "mock-alpha"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert "Which planet is known as the red planet" in choice.message.content
    usage = completion.usage
    assert usage.prompt_tokens == 8 and usage.completion_tokens == len(choice.message.content.split())
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_same_reply_as_the_in_process_fake(client):
    completion = client.chat.completions.create(model="mock-alpha", messages=QUESTION, seed=9)
    local = await FakeAPI("fake/mock-alpha").generate(ChatRequest(messages=QUESTION, seed=9))
    assert completion.choices[0].message.content == local.text


def test_json_schema_completion_validates(client):
    completion = client.chat.completions.create(
        model="mock-beta", messages=QUESTION, response_format=json_schema_format(Verdict, "verdict")
    )
    verdict = Verdict.model_validate_json(completion.choices[0].message.content)
    assert verdict.reasoning.strip()


def test_peer_review_over_http_is_valid_and_consistent(client):
    labels = ("A", "B", "C")
    model = peer_review_model(labels, (1, 10))
    schema = model.model_json_schema()
    answers = [("A", "Mars"), ("B", "Venus"), ("C", "Mars, iron oxide")]
    messages = prompts.review_messages("Red planet?", answers, (1, 10), schema)
    completion = client.chat.completions.create(
        model="mock-gamma+first",
        messages=messages,
        response_format={"type": "json_schema", "json_schema": {"name": PEER_REVIEW_SCHEMA_NAME, "schema": schema}},
    )
    parsed, problem = validate_output(model, completion.choices[0].message.content)
    assert problem is None and parsed.ranking == ["A", "B", "C"]


def test_json_object_mode(client):
    completion = client.chat.completions.create(
        model="mock-alpha", messages=QUESTION, response_format={"type": "json_object"}
    )
    assert json.loads(completion.choices[0].message.content)["answer"]


def test_streaming_matches_the_plain_reply_and_ends_with_done(client, server, http):
    plain = client.chat.completions.create(model="mock-delta", messages=QUESTION).choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="mock-delta", messages=QUESTION, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == len(plain.split())
    body = {"model": "m", "messages": QUESTION, "stream": True}
    with http.stream("POST", server.base_url + "/chat/completions", json=body) as r:
        lines = [line for line in r.iter_lines() if line]
    assert r.headers["content-type"].startswith("text/event-stream")
    assert lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines)


def test_models_health_and_max_tokens(client, server, http):
    assert [m.id for m in client.models.list()] == ["mock-alpha", "mock-beta", "mock-gamma", "mock-delta"]
    assert http.get(server.url + "/health").json() == {"status": "ok"}
    cut = client.chat.completions.create(model="mock-alpha", messages=QUESTION, max_tokens=3)
    assert cut.choices[0].finish_reason == "length" and len(cut.choices[0].message.content.split()) == 3


def test_fail_behaviour_is_a_500_in_openai_shape(client, server, http):
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model="mock-alpha+fail", messages=QUESTION)
    assert e.value.status_code == 500 and "+fail" in e.value.body["message"]
    bad = http.post(server.base_url + "/chat/completions", json={"model": "x+nosuch", "messages": QUESTION})
    assert bad.status_code == 404 and bad.json()["error"]["code"] == "model_not_found"
    broken = http.post(server.base_url + "/chat/completions", content=b"{nope")
    assert broken.status_code == 400 and broken.json()["error"]["type"] == "invalid_request_error"


def test_slow_behaviour_adds_its_delay(client):
    t0 = time.perf_counter()
    client.chat.completions.create(model="mock-alpha+slow", messages=QUESTION)
    assert time.perf_counter() - t0 >= 0.2


def test_request_log_counts_calls(server, http):
    before = len(server.logged_requests())
    for _ in range(3):
        http.post(server.base_url + "/chat/completions", json={"model": "mock-log", "messages": QUESTION})
    assert wait_for(lambda: len(server.logged_requests()) == before + 3)
    entries = server.logged_requests()[-3:]
    assert {e["model"] for e in entries} == {"mock-log"} and not any(e["faulted"] for e in entries)


def test_injected_500_and_429_faults(tmp_path, http):
    log = tmp_path / "faults.jsonl"
    with start_mock_server(fault_rate=1.0, fault_kinds="500,429", retry_after=2, seed=5, log_requests=log) as server:
        body = {"model": "mock-alpha", "messages": QUESTION}
        responses = [http.post(server.base_url + "/chat/completions", json=body) for _ in range(12)]
        assert {r.status_code for r in responses} == {500, 429}
        for r in responses:
            assert set(r.json()["error"]) >= {"message", "type", "code"}
            if r.status_code == 429:
                assert r.headers["retry-after"] == "2" and r.json()["error"]["type"] == "rate_limit_error"
        with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as c:
            with pytest.raises(openai.APIStatusError):
                c.chat.completions.create(model="mock-alpha", messages=QUESTION)
        assert wait_for(lambda: len(server.logged_requests()) == 13)
        assert all(e["faulted"] for e in server.logged_requests())


def test_key_latency_and_malformed_json():
    latency = 0.15
    with start_mock_server(require_key="sekret", latency=latency, malformed_rate=1.0) as server:
        with openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as e:
                bad.chat.completions.create(model="mock-alpha", messages=QUESTION)
            assert e.value.status_code == 401 and e.value.body["code"] == "invalid_api_key"
        with openai.OpenAI(base_url=server.base_url, api_key="sekret", max_retries=0) as good:
            t0 = time.perf_counter()
            plain = good.chat.completions.create(model="mock-alpha", messages=QUESTION)
            assert time.perf_counter() - t0 >= latency
            assert plain.choices[0].message.content  # plain text is never malformed
            broken = good.chat.completions.create(
                model="mock-alpha", messages=QUESTION, response_format=json_schema_format(Verdict, "verdict")
            )
            with pytest.raises(ValueError):
                json.loads(broken.choices[0].message.content)


def test_timeout_fault_hangs_and_sigterm_still_exits_cleanly(http):
    with start_mock_server(fault_rate=1.0, fault_kinds="timeout", hang_seconds=60) as server:
        with pytest.raises(httpx.TimeoutException):
            http.post(server.base_url + "/chat/completions", json={"model": "m", "messages": QUESTION}, timeout=0.3)
        t0 = time.perf_counter()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=10) == 0
        assert time.perf_counter() - t0 < 5


def _load_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "mock_llm_server.py"
    spec = importlib.util.spec_from_file_location("mock_llm_server", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_make_app_in_process_takes_the_cli_options_as_keywords():
    script = _load_script()
    with pytest.raises(ValueError, match="fault_rate"):
        script.make_app(fault_rate=1.5)
    app = script.make_app(fault_rate=1.0, fault_kinds=["429"], retry_after=0.5)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mock") as c:
        r = await c.post("/v1/chat/completions", json={"model": "mock-alpha", "messages": QUESTION})
    assert r.status_code == 429 and r.headers["retry-after"] == "0.5"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


def test_the_heavy_tail_is_seeded_and_drawn_from_each_request():
    script = _load_script()
    mock = script.MockLLM(latency=0.1, jitter=0.05, tail_rate=0.1, tail_factor=10.0, seed=4)
    bodies = [json.dumps({"model": "mock-alpha", "messages": [{"role": "user", "content": f"q{i}"}]}).encode()
              for i in range(2000)]  # fmt: skip
    delays = [mock._tail_delay("mock-alpha", b) for b in bodies]
    assert delays == [mock._tail_delay("mock-alpha", b) for b in reversed(bodies)][::-1]  # order does not matter
    slow = [d for d in delays if d >= 1.0]
    assert 150 <= len(slow) <= 250 and all(1.0 <= d <= 1.5 for d in slow)  # 10 % of calls, 10 times slower
    assert all(0.1 <= d <= 0.15 for d in delays if d < 1.0)
    other = script.MockLLM(latency=0.1, jitter=0.05, tail_rate=0.1, seed=5)
    assert [other._tail_delay("mock-alpha", b) for b in bodies] != delays  # the seed picks them

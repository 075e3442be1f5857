"""`council serve` speaks the OpenAI protocol as clients expect it: streamed usage, response_format,
refused parameters, model lookup, JSON errors for every route, real timestamps, --port 0 and CORS.

One server (started for real with ``--port 0``) serves every test in this module; the
official ``openai`` client drives it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import httpx
import pytest
from mock_server import start_mock_server
from pydantic import BaseModel
from serve_helpers import council_serve

openai = pytest.importorskip("openai")

CORS_ORIGIN = "http://localhost:3000"
LISTENING = re.compile(r"council serve: http://(?P<host>[^\s/]+):(?P<port>\d+)/v1")


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("mock") / "requests.jsonl"
    with start_mock_server(latency=0.002, log_requests=str(log)) as server:
        yield server


@pytest.fixture(scope="module")
def config(tmp_path_factory, mock):
    path = tmp_path_factory.mktemp("config") / "council.toml"
    lines = [
        "[councils.default]",
        'members = ["a", "b", "c"]',
        'chairman = "a"',
        "[councils.fakes]",
        'members = ["fake/a", "fake/b", "fake/c"]',
        'chairman = "fake/chair+flaky"',
        "[councils.garbled]",
        'members = ["fake/a", "fake/b"]',
        'chairman = "fake/chair+garbage"',
        "max_review_attempts = 2",
    ]
    for alias, model in (("a", "mock-alpha"), ("b", "mock-beta"), ("c", "mock-gamma")):
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock.base_url}"', "retries = 0"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def server(config, home):
    with council_serve(config, home, "--cors-origin", CORS_ORIGIN, "--cors-origin", "https://chat.example") as served:
        yield served


@pytest.fixture(scope="module")
def base(server):
    return server[0]


@pytest.fixture(scope="module")
def client(base):
    return openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)


def ask(content: str = "What is 2 + 2?") -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def stored_usage(base: str, session_id: str) -> dict:
    return httpx.get(f"{base}/v1/sessions/{session_id}").json()["usage"]


# -- --port 0 ---------------------------------------------------------------------


def test_port_zero_prints_the_port_it_listens_on(server):
    base, lines = server
    port = int(base.rsplit(":", 1)[1])
    assert port != 0
    assert any(f"127.0.0.1:{port}/v1" in line for line in lines)
    assert not any(":0/v1" in line for line in lines)


# -- streamed usage ------------------------------------------------------------------


def test_stream_include_usage_sends_a_final_usage_chunk_with_the_council_totals(client, base):
    stream = client.chat.completions.create(
        model="default", messages=ask(), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])  # only the last chunk carries usage, as OpenAI sends it
    assert all(c.id == last.id and c.created == last.created for c in chunks)
    session_id = next(c.model_extra["council"] for c in chunks if c.model_extra.get("council"))["session_id"]
    usage = stored_usage(base, session_id)
    assert last.usage.prompt_tokens == usage["prompt_tokens"] > 0
    assert last.usage.completion_tokens == usage["completion_tokens"] > 0
    assert last.usage.total_tokens == usage["prompt_tokens"] + usage["completion_tokens"]
    # the council's totals: every member, review and synthesis call, not the chairman's alone
    assert usage["calls"] >= 7


def test_stream_without_include_usage_sends_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model="default", messages=ask(), stream=True))
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


def test_stream_options_without_stream_is_refused(base):
    r = httpx.post(
        base + "/v1/chat/completions",
        json={"model": "default", "messages": ask(), "stream_options": {"include_usage": True}},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream_options"


# -- response_format ---------------------------------------------------------------


class Capital(BaseModel):
    city: str
    country: str
    population_millions: float


def test_response_format_json_schema_parses_into_the_clients_model(client, mock):
    before = len(mock.logged_requests())
    completion = client.chat.completions.parse(
        model="default", messages=ask("What is the capital of France?"), response_format=Capital
    )
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Capital)
    assert json.loads(completion.choices[0].message.content) == parsed.model_dump()
    assert completion.model_extra["council"]["status"] == "complete"
    # the chairman (mock-alpha) was asked for the client's schema, by its name
    asked = [r for r in mock.logged_requests()[before:] if r.get("schema") == "Capital"]
    assert asked and all(r["model"] == "mock-alpha" for r in asked)


def test_response_format_json_object_gives_a_json_object(client):
    completion = client.chat.completions.create(
        model="default", messages=ask("Answer in JSON: name a prime."), response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(completion.choices[0].message.content), dict)


def test_response_format_streams_valid_json(client):
    stream = client.chat.completions.create(
        model="default",
        messages=ask("What is the capital of Italy?"),
        stream=True,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "capital", "schema": Capital.model_json_schema()},
        },
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    Capital.model_validate_json(text)


def test_response_format_invalid_reply_is_re_asked(client, base):
    # fake/chair+flaky returns garbage to the first structured request of a conversation
    completion = client.chat.completions.parse(
        model="fakes", messages=ask("Capital of Spain?"), response_format=Capital
    )
    assert isinstance(completion.choices[0].message.parsed, Capital)
    session = httpx.get(f"{base}/v1/sessions/{completion.model_extra['council']['session_id']}").json()
    assert session["synthesis"]["attempts"] == 2


def test_response_format_never_valid_is_an_error_not_prose(client, base):
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="garbled", messages=ask(), response_format={"type": "json_object"})
    assert caught.value.status_code == 502
    assert "response_format" in caught.value.message and "invalid output after 2 attempts" in caught.value.message
    stream = httpx.post(
        base + "/v1/chat/completions",
        json={"model": "garbled", "messages": ask(), "stream": True, "response_format": {"type": "json_object"}},
        timeout=60,
    )
    events = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: {")]
    assert "error" in events[-1] and "response_format" in events[-1]["error"]["message"]
    assert not any((e.get("choices") or [{}])[0].get("delta", {}).get("content") for e in events)


@pytest.mark.parametrize(
    "response_format, param",
    [
        ({"type": "grammar", "grammar": "root ::= x"}, "response_format.type"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}},
            "response_format.json_schema.schema",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(a+)+$"}}},
            "response_format.json_schema.schema",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "http://127.0.0.1:9/s.json"}}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_unusable_response_format_is_a_400_naming_it(base, response_format, param):
    body = {"model": "default", "messages": ask(), "response_format": response_format}
    r = httpx.post(base + "/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_response_format_text_is_plain(client):
    completion = client.chat.completions.create(model="default", messages=ask(), response_format={"type": "text"})
    assert completion.choices[0].message.content.strip()


# -- parameters we cannot honour ------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tools": [TOOL]}, "tools"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice"),
        ({"functions": [TOOL["function"]]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"web_search_options": {}}, "web_search_options"),
    ],
)
def test_parameters_we_cannot_honour_are_refused_by_name(base, extra, param):
    r = httpx.post(base + "/v1/chat/completions", json={"model": "default", "messages": ask(), **extra})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert param in error["message"]
    assert error["code"] == "unsupported_parameter"


def test_openai_client_sees_the_refusal(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="default", messages=ask(), n=3)
    assert caught.value.param == "n"


@pytest.mark.parametrize(
    "messages, param",
    [
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,x"}}, {"type": "text"}]}],
            "messages[0].content",
        ),
        (
            [*ask("hi"), {"role": "tool", "tool_call_id": "1", "content": "42"}, *ask("?")],
            "messages[1].role",
        ),
        (
            [*ask("hi"), {"role": "assistant", "tool_calls": [{"id": "1", "type": "function"}]}, *ask()],
            "messages[1].tool_calls",
        ),
    ],
)
def test_messages_we_cannot_honour_are_refused(base, messages, param):
    r = httpx.post(base + "/v1/chat/completions", json={"model": "default", "messages": messages})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_sampling_parameters_are_accepted_and_ignored(client):
    completion = client.chat.completions.create(
        model="default",
        messages=[{"role": "developer", "content": "Be brief."}, *ask()],
        temperature=0.2,
        top_p=0.9,
        max_tokens=50,
        max_completion_tokens=50,
        presence_penalty=0.1,
        frequency_penalty=0.1,
        stop=["\n\n"],
        logit_bias={"50256": -100},
        user="someone",
        n=1,
        logprobs=False,
        tool_choice="none",
        parallel_tool_calls=False,
        seed=5,
        extra_body={"tools": [], "functions": None, "modalities": ["text"]},
    )
    assert completion.choices[0].message.content.strip()
    assert completion.model_extra["council"]["status"] == "complete"


# -- models, errors, timestamps ---------------------------------------------------------


def test_models_have_real_creation_times_and_can_be_retrieved(client):
    now = time.time()
    listed = {m.id: m for m in client.models.list()}
    assert set(listed) == {"default", "fakes", "garbled"}
    for m in listed.values():
        assert now - 3600 < m.created <= now + 1
    one = client.models.retrieve("fakes")
    assert one.id == "fakes" and one.object == "model" and one.created == listed["fakes"].created
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("nope")
    assert caught.value.body["code"] == "model_not_found"


def test_completions_have_a_real_time_and_a_system_fingerprint(client):
    t0 = time.time()
    first = client.chat.completions.create(model="default", messages=ask())
    t1 = time.time()
    assert int(t0) <= first.created <= t1
    assert first.system_fingerprint and first.system_fingerprint.startswith("fp_")
    chunks = list(client.chat.completions.create(model="default", messages=ask(), stream=True))
    assert {c.system_fingerprint for c in chunks} == {first.system_fingerprint}
    other = client.chat.completions.create(model="fakes", messages=ask())
    assert other.system_fingerprint != first.system_fingerprint  # a different council is a different backend


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/nope", 404),
        ("GET", "/v1/completions/x", 404),
        ("POST", "/v1/embeddings", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/v1/models", 405),
        ("PUT", "/v1/models/default", 405),
    ],
)
def test_unknown_routes_and_methods_answer_openai_shaped_json(base, method, path, status):
    r = httpx.request(method, base + path)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if status == 405:
        assert "allow" in r.headers


# -- CORS -----------------------------------------------------------------------------


def test_cors_allows_only_the_configured_origins(base):
    preflight = {"origin": CORS_ORIGIN, "access-control-request-method": "POST",
                 "access-control-request-headers": "authorization, content-type, x-stainless-os"}
    ok = httpx.options(base + "/v1/chat/completions", headers=preflight)
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == CORS_ORIGIN
    assert "POST" in ok.headers["access-control-allow-methods"]
    denied = httpx.options(base + "/v1/chat/completions", headers={**preflight, "origin": "http://evil.example"})
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in denied.headers
    simple = httpx.get(base + "/v1/models", headers={"origin": "https://chat.example"})
    assert simple.headers["access-control-allow-origin"] == "https://chat.example"


def test_no_cors_by_default(config, tmp_path):
    with council_serve(config, tmp_path) as (base, _):
        # A page from another origin is refused outright (not only left without CORS headers).
        r = httpx.get(base + "/v1/models", headers={"origin": CORS_ORIGIN})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        preflight = httpx.options(
            base + "/v1/chat/completions", headers={"origin": CORS_ORIGIN, "access-control-request-method": "POST"}
        )
        assert "access-control-allow-origin" not in preflight.headers
        assert preflight.status_code == 403 and preflight.json()["error"]["code"] == "origin_not_allowed"


@pytest.mark.parametrize("origin", ["localhost:3000", "http://x.example/path", "ftp://x.example", ""])
def test_a_malformed_cors_origin_is_refused_at_start(config, tmp_path, origin):
    proc = subprocess.run(
        [sys.executable, "-m", "council", "serve", "--config", str(config), "--port", "0", "--cors-origin", origin],
        env={**os.environ, "COUNCIL_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--cors-origin" in proc.stderr and "not an origin" in proc.stderr and "Traceback" not in proc.stderr

"""Request bodies are read strictly: a number sent as a string (``"seed": "7"``), a boolean for a
number or a number for a boolean is a 400 naming the field, never coerced; nothing is started."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from council.config import load_config
from council.server.app import create_app
from council.storage import SQLiteStore

CONFIG = {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"], "chairman": "fake/alpha"}}}
CHAT = {"model": "default", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}


@pytest.fixture
def client():
    with TestClient(create_app(load_config(CONFIG)), base_url="http://127.0.0.1") as client:
        yield client


def assert_400_naming(reply, field: str) -> None:
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert field in message and "\n" not in message, message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seed", "7"),
        ("seed", True),
        ("seed", 7.5),
        ("seed", 7.0),
        ("stream", "yes"),
        ("stream", "false"),
        ("stream", 1),
        ("n", "1"),
        ("n", True),
        ("n", 1.0),
        ("top_logprobs", False),
        ("logprobs", 0),
    ],
)
def test_chat_fields_of_the_wrong_type_are_a_400(client, field, value):
    assert_400_naming(client.post("/v1/chat/completions", json={**CHAT, field: value}), field)
    assert SQLiteStore.open().list_sessions() == []  # nothing ran


@pytest.mark.parametrize(
    ("field", "value"),
    [("seed", "7"), ("seed", True), ("seed", 7.5), ("seed", 7.0), ("council", 7), ("question", ["q"])],
)
def test_session_fields_of_the_wrong_type_are_a_400(client, field, value):
    body = {"council": "default", "question": "Why is the sky blue?", field: value}
    assert_400_naming(client.post("/v1/sessions", json=body), field)
    assert SQLiteStore.open().list_sessions() == []


def test_the_right_types_still_pass(client):
    reply = client.post("/v1/chat/completions", json={**CHAT, "seed": 7, "stream": False, "n": 1, "logprobs": False,
                                                       "top_logprobs": 0})  # fmt: skip
    assert reply.status_code == 200, reply.text
    started = client.post("/v1/sessions", json={"council": "default", "question": "Why?", "seed": 7})
    assert started.status_code == 202, started.text


USER = {"role": "user", "content": "Why is the sky blue?"}


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content[0].text"),
        ([{"role": "user", "content": [{"type": "text", "text": ["a"]}]}], "messages[0].content[0].text"),
        ([{"role": "system", "content": [{"type": "text", "text": {"a": 1}}]}, USER], "messages[0].content[0].text"),
        ([{"role": "user", "content": [{"type": 5, "text": "x"}]}], "messages[0].content[0].type"),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": {"type": "text", "text": "x"}}], "messages[0].content"),
        ([USER, {"role": 5, "content": "x"}], "messages[1].role"),
        (["hi"], "messages[0]"),
    ],
)
def test_messages_of_the_wrong_shape_are_a_400_naming_the_part(client, messages, param):
    reply = client.post("/v1/chat/completions", json={**CHAT, "messages": messages})
    assert_400_naming(reply, param)
    assert reply.json()["error"]["param"] == param
    assert SQLiteStore.open().list_sessions() == []


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
        ({"stream": True, "stream_options": {"include_progress": 1}}, "stream_options.include_progress"),
        ({"stream": True, "stream_options": []}, "stream_options"),
        ({"response_format": {"type": 5}}, "response_format.type"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"},
                                                                      "strict": "yes"}}},
         "response_format.json_schema.strict"),  # fmt: skip
        ({"response_format": {"type": "json_schema", "json_schema": {"name": 5, "schema": {"type": "object"}}}},
         "response_format.json_schema.name"),  # fmt: skip
    ],
)
def test_honoured_options_of_the_wrong_shape_are_a_400_naming_them(client, extra, param):
    reply = client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert_400_naming(reply, param)
    assert reply.json()["error"]["param"] == param
    assert SQLiteStore.open().list_sessions() == []


LEAF = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(LEAF | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)  # fmt: skip
# Near-valid shapes, drawn more often than anything: a text part whose text is not a string.
PART = st.fixed_dictionaries({"type": st.just("text") | st.just("image_url") | JSON}, optional={"text": JSON}) | JSON
MESSAGE = st.fixed_dictionaries(
    {"role": st.just("user") | st.sampled_from(["system", "developer", "assistant", "tool"]) | JSON},
    optional={"content": st.lists(PART, max_size=3) | st.text(max_size=5) | JSON},
) | JSON
STREAM_OPTIONS = st.fixed_dictionaries({}, optional={"include_usage": JSON, "include_progress": JSON}) | JSON
RESPONSE_FORMAT = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "json_object", "json_schema"]) | JSON},
    optional={"json_schema": st.fixed_dictionaries({}, optional={"name": JSON, "schema": JSON, "strict": JSON}) | JSON},
) | JSON


SETTINGS = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(messages=st.lists(MESSAGE, min_size=1, max_size=2) | JSON, stream=st.booleans())
def test_no_shape_of_messages_is_a_500(client, messages, stream):
    reply = client.post("/v1/chat/completions", json={**CHAT, "messages": messages, "stream": stream})
    assert reply.status_code in (200, 400), reply.text


@SETTINGS
@given(stream_options=STREAM_OPTIONS, response_format=RESPONSE_FORMAT)
def test_no_shape_of_the_honoured_options_is_a_500(client, stream_options, response_format):
    body = {**CHAT, "stream": True, "stream_options": stream_options, "response_format": response_format}
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code in (200, 400), reply.text

"""Request bodies are read strictly: a number sent as a string (``"seed": "7"``), a boolean for a
number or a number for a boolean is a 400 naming the field, never coerced; nothing is started."""

from __future__ import annotations

import pytest
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

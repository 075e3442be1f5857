"""What ``council serve`` logs on stdout, read from a real server process: one JSON line per HTTP
request (method, route template, status, duration, the session the response names) and per
session start and finish (council, status, calls, cost, duration), and never the question, an
answer, the provider's key, the server's token or a secret in a query string (canaries)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from conftest import write_config
from mock_server import start_mock_server
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # a real server process per test

KEY = "k-5d1e7a3c9b-provider-canary"
TOKEN = "t-8c2f4e6a1d-server-canary"
QUESTION = "Why is the sky blue? q-3b9d7f1a-question-canary"
IN_QUERY = "s-6e0a2c4b8f-query-canary"
IN_PATH = "p-4a6c8e0b2d-path-canary"
CANARIES = (KEY, TOKEN, "q-3b9d7f1a-question-canary", IN_QUERY, IN_PATH)


def lines_of(out: list[str]) -> list[dict]:
    return [json.loads(line) for line in out if line.strip()]


def test_one_line_per_request_and_session_and_no_text_or_secret(tmp_path, council_home):
    out: list[str] = []
    env = {"CANARY_PROVIDER_CRED": KEY, "COUNCIL_SERVER_TOKEN": TOKEN}
    auth = {"authorization": f"Bearer {TOKEN}"}
    with start_mock_server(require_key=KEY) as mock:
        # +quote: the answers repeat the question; +leak: every reply quotes the provider's key.
        models = {"m1": "mock-a+quote+leak", "m2": "mock-b+leak", "m3": "mock-c+quote"}
        spec = {"api_base": mock.base_url, "retries": 0, "api_key_env": "CANARY_PROVIDER_CRED",
                "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}  # fmt: skip
        cfg = write_config(tmp_path / "council.toml", {a: {"model": f"openai/{m}", **spec} for a, m in models.items()},
                           chairman="m1")  # fmt: skip
        with council_serve(cfg, council_home, env=env, stdout=out) as served:
            base = served.base
            body = {"model": "default", "messages": [{"role": "user", "content": QUESTION}]}
            chat = httpx.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=60)
            assert chat.status_code == 200, chat.text
            assert QUESTION in chat.text and KEY not in chat.text  # the canaries went through the session
            with httpx.stream("POST", f"{base}/v1/chat/completions", json={**body, "stream": True}, headers=auth,
                              timeout=60) as streamed:  # fmt: skip
                streamed.read()
            started = httpx.post(f"{base}/v1/sessions", json={"council": "default", "question": QUESTION},
                                 headers=auth, timeout=60)  # fmt: skip
            assert started.status_code == 202
            background = started.json()["session_id"]
            deadline = time.monotonic() + 60
            while httpx.get(f"{base}/v1/sessions/{background}", headers=auth, timeout=10).json()["status"] == "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert httpx.get(f"{base}/v1/models?api_key={IN_QUERY}", headers=auth, timeout=10).status_code == 200
            assert httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {IN_QUERY}"}).status_code == 401
            assert httpx.get(f"{base}/v1/{IN_PATH}", headers=auth, timeout=10).status_code == 404
    text = "".join(out)
    for canary in CANARIES:
        assert canary not in text, canary
    logged = lines_of(out)
    assert all(set(line) >= {"ts", "level", "event"} for line in logged)
    requests = [line for line in logged if line["event"] == "http_request"]
    chats = [r for r in requests if r["route"] == "/v1/chat/completions"]
    assert [(r["method"], r["status"]) for r in chats] == [("POST", 200), ("POST", 200)]
    assert chats[0]["session_id"] == chat.headers["x-council-session-id"]
    assert all(r["duration_ms"] > 0 for r in chats)
    assert any(r["route"] == "/v1/sessions/{session_id}" and r["session_id"] == background for r in requests)
    # Refused before routing (the token, a path no route takes): no template, never the raw path.
    assert {(r["route"], r["status"]) for r in requests} >= {("/v1/models", 200), ("unmatched", 401),
                                                             ("unmatched", 404), ("/v1/sessions", 202)}  # fmt: skip
    finished = {line["session_id"]: line for line in logged if line["event"] == "session_finished"}
    begun = {line["session_id"]: line for line in logged if line["event"] == "session_started"}
    assert len(finished) == len(begun) == 3 and background in finished
    for line in finished.values():
        assert line["council"] == "default" and line["status"] in ("complete", "partial")  # +quote reviews are invalid
        assert line["calls"] >= 7 and line["cost_usd"] > 0 and line["duration_ms"] > 0
    mine = finished[chats[0]["session_id"]]
    assert mine["status"] == chat.json()["council"]["status"]
    assert mine["cost_usd"] == pytest.approx(chat.json()["council"]["cost_usd"])
    assert not any("council serve:" in line for line in out)  # the start-up line stays on stderr
    assert any("council serve: http://" in line for line in served.lines)


def one_model(tmp_path, mock):
    spec = {"api_base": mock.base_url, "retries": 0}
    return write_config(tmp_path / "council.toml", {"m1": {"model": "openai/mock-a", **spec}}, chairman="m1")


def test_console_format_is_one_readable_line_per_request(tmp_path, council_home):
    out: list[str] = []
    with start_mock_server() as mock, council_serve(
        one_model(tmp_path, mock), council_home, "--log-format", "console", stdout=out
    ) as served:
        assert httpx.get(f"{served.base}/v1/models", timeout=10).status_code == 200
    line = next(line for line in out if "route=/v1/models" in line)
    assert " info    http_request method=GET route=/v1/models status=200 duration_ms=" in line
    assert not line.startswith("{")


def test_each_server_process_logs_its_requests(tmp_path, council_home):
    out: list[str] = []
    with start_mock_server() as mock, council_serve(one_model(tmp_path, mock), council_home, "--workers", "2",
                                                    stdout=out) as served:  # fmt: skip
        for _ in range(4):
            assert httpx.get(f"{served.base}/v1/models", timeout=10).status_code == 200
    models = [line for line in lines_of(out) if line["event"] == "http_request" and line["route"] == "/v1/models"]
    assert len(models) == 4

"""Slow clients cannot hold the server's connections: a request must arrive whole (its headers and
its body) within ``--read-timeout`` seconds of its first byte, or of the connection opening, or the
connection is closed, however slowly bytes keep coming. No token is needed to open a connection,
so without this a few hundred of them (slowloris) used up the process's file descriptors and
``/health`` failed. Responses are not limited: a streamed chat completion and a session's event
stream that last longer than the timeout arrive whole.

The timeout is set small here (1 s) and each connection is only required to be closed well
within a deadline far above it, so the tests do not depend on timing luck."""

from __future__ import annotations

import json
import resource
import socket
import time

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import serve_process

pytestmark = pytest.mark.slow  # real server processes

DEADLINE = 15.0  # seconds: far above the 1 s timeout of these servers


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency=0.4, stream_interval=0.05) as server:
        yield server


@pytest.fixture(scope="module")
def config(tmp_path_factory, mock):
    path = tmp_path_factory.mktemp("slow") / "council.toml"
    lines = ["[councils.default]", 'members = ["a", "b"]', 'chairman = "a"']
    for alias, model in (("a", "mock-a"), ("b", "mock-b")):
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock.base_url}"', "retries = 0"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def served(config, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    with serve_process(config, home, "--read-timeout", "1") as (_, served):
        yield served


def connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=DEADLINE)


def closed_by_server(sock: socket.socket, *, trickle: bytes = b"", deadline: float | None = None) -> bool:
    """Whether the server closes ``sock`` before ``deadline`` (default: DEADLINE from now; a reply
    before that is read and skipped). ``trickle``: sent a byte at a time meanwhile, as a slowloris
    client does."""
    deadline = time.monotonic() + DEADLINE if deadline is None else deadline
    sock.settimeout(0.2)
    sent = 0
    try:
        while time.monotonic() < deadline:
            if sent < len(trickle):
                sock.sendall(trickle[sent : sent + 1])
                sent += 1
            try:
                if sock.recv(65536) == b"":
                    return True
            except TimeoutError:
                continue
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        sock.close()
    return False


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    ("sent", "trickle"),
    [
        (b"", b""),  # connects, says nothing
        (b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", b""),  # headers never end
        (b"GET /health HTTP/1.1\r\n", b"X-Slow: " + b"a" * 200),  # one header byte every 0.2 s
        (HEAD + b"Content-Length: 1000\r\n\r\n", b""),  # a body that never comes
        (HEAD + b"Content-Length: 1000\r\n\r\n" + b'{"model": ', b" " * 200),  # a body one byte at a time
    ],
    ids=["silent", "partial-headers", "trickled-headers", "no-body", "trickled-body"],
)
def test_a_request_that_does_not_arrive_in_time_has_its_connection_closed(served, sent, trickle):
    sock = connect(served.base)
    sock.sendall(sent)
    assert closed_by_server(sock, trickle=trickle)


def test_a_kept_alive_connection_whose_next_request_stalls_is_closed(served):
    sock = connect(served.base)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert b"200 OK" in sock.recv(65536)
    sock.sendall(b"GET /health HTTP/1.1\r\n")
    assert closed_by_server(sock, trickle=b"X-Slow: " + b"a" * 200)


def test_a_stream_longer_than_the_timeout_arrives_whole(served):
    chat = {"model": "default", "stream": True, "messages": [{"role": "user", "content": "Why is the sky blue?"}]}
    started = time.monotonic()
    with httpx.stream("POST", served.base + "/v1/chat/completions", json=chat, timeout=60) as reply:
        assert reply.status_code == 200
        text = "".join(reply.iter_text())
    assert time.monotonic() - started > 1.0  # three stages of 0.4 s calls: longer than the timeout
    assert text.rstrip().endswith("data: [DONE]") and '"finish_reason": "stop"' in text


def test_a_sessions_event_stream_longer_than_the_timeout_arrives_whole(served):
    started = httpx.post(served.base + "/v1/sessions", json={"council": "default", "question": "Why?"}, timeout=30)
    assert started.status_code == 202, started.text
    session_id = started.json()["session_id"]
    with httpx.stream("GET", f"{served.base}/v1/sessions/{session_id}/events", timeout=60) as reply:
        text = "".join(reply.iter_text())
    finished = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")][-1]
    assert finished["type"] == "session_finished" and finished["status"] == "complete", text[-500:]


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


def test_slow_connections_beyond_the_descriptor_limit_do_not_keep_health_down(config, tmp_path):
    with serve_process(config, tmp_path, "--read-timeout", "1", preexec_fn=_few_descriptors) as (_, served):
        slow = [connect(served.base) for _ in range(200)]  # more than the server can hold at once
        for sock in slow:
            sock.sendall(b"GET /health HTTP/1.1\r\n")
        deadline = time.monotonic() + 2 * DEADLINE
        assert all(closed_by_server(sock, deadline=deadline) for sock in slow)
        assert httpx.get(served.base + "/health", timeout=DEADLINE).status_code == 200


def test_the_default_timeout_closes_a_stalled_request_too(config, tmp_path):
    with serve_process(config, tmp_path) as (_, served):
        sock = connect(served.base)
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        deadline = time.monotonic() + 30  # the default is 10 s
        sock.settimeout(30)
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            data = b""
        sock.close()
    assert data == b"" and time.monotonic() < deadline

"""One server process runs at most ``--max-sessions`` sessions at once: chat completions (streamed
or not) and ``POST /v1/sessions`` alike. One more is refused before anything runs, with a 429 in
OpenAI's shape and ``retry-after`` (OpenAI's SDKs wait and retry), instead of being accepted and
queued without bound; a session that ends, however it ends, gives its place back."""

from __future__ import annotations

import time

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve, fast_and_slow_councils

pytestmark = pytest.mark.slow  # real server processes

QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency=0.01, slow_seconds=120) as server:
        yield server


@pytest.fixture
def config(tmp_path, mock):
    return fast_and_slow_councils(tmp_path / "council.toml", mock.base_url)


def assert_too_many(reply: httpx.Response) -> None:
    assert reply.status_code == 429, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "--max-sessions" in error["message"]
    assert error["code"] == "rate_limit_exceeded"
    assert reply.headers["retry-after"].isdigit() and int(reply.headers["retry-after"]) >= 1


def start(base: str, council: str = "slow") -> httpx.Response:
    return httpx.post(base + "/v1/sessions", json={"council": council, "question": "Why?"}, timeout=30)


def test_sessions_past_the_limit_are_refused_with_429_and_retry_after(config, council_home):
    with council_serve(config, council_home, "--max-sessions", "2") as served:
        assert [start(served.base).status_code for _ in range(2)] == [202, 202]  # both wait on the slow model
        assert_too_many(start(served.base))
        chat = {"model": "default", "messages": QUESTION}
        assert_too_many(httpx.post(served.base + "/v1/chat/completions", json=chat, timeout=30))
        assert_too_many(httpx.post(served.base + "/v1/chat/completions", json={**chat, "stream": True}, timeout=30))
        listed = httpx.get(served.base + "/v1/sessions", timeout=30).json()
    assert len(listed) == 2  # the refused ones never started


def wait_until_accepted(ask) -> httpx.Response:
    """``ask()`` until it is no 429: a place is given back when the server sees a session end."""
    deadline = time.monotonic() + 30
    while (reply := ask()).status_code == 429:
        assert time.monotonic() < deadline, "the place was never given back"
        time.sleep(0.1)
    return reply


def test_a_session_that_ends_gives_its_place_back(config, council_home):
    chat = {"model": "default", "messages": QUESTION}
    with council_serve(config, council_home, "--max-sessions", "1") as served:
        url = served.base + "/v1/chat/completions"
        for _ in range(3):  # one after another: each one's place is free again
            assert httpx.post(url, json=chat, timeout=60).status_code == 200
        with httpx.stream("POST", url, json={**chat, "stream": True}, timeout=60) as reply:
            assert reply.status_code == 200 and "[DONE]" in "".join(reply.iter_text())
        assert start(served.base, "default").status_code == 202  # a background session of the fast council
        assert wait_until_accepted(lambda: httpx.post(url, json=chat, timeout=60)).status_code == 200


def test_a_client_that_leaves_a_stream_gives_its_place_back(config, council_home):
    chat = {"model": "slow", "messages": QUESTION, "stream": True}
    with council_serve(config, council_home, "--max-sessions", "1") as served:
        url = served.base + "/v1/chat/completions"
        with httpx.stream("POST", url, json=chat, timeout=60) as reply:
            assert reply.status_code == 200
            chunks = reply.iter_bytes()  # kept: a dropped iterator closes the connection
            next(chunks)  # the stream has begun; the session waits on the slow model
            assert_too_many(httpx.post(url, json={**chat, "stream": False}, timeout=30))
        # The client has gone: the session is cancelled (recorded interrupted) and its place is free.
        fast = {"model": "default", "messages": QUESTION}
        assert wait_until_accepted(lambda: httpx.post(url, json=fast, timeout=60)).status_code == 200


def test_max_sessions_must_be_a_positive_count(config, council_home):
    from conftest import council_process

    proc = council_process("serve", "--config", str(config), "--port", "0", "--max-sessions", "0",
                           home=council_home, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and b"--max-sessions" in proc.stderr and b"Traceback" not in proc.stderr

"""`council serve` end to end: the official openai client against the real server and the mock LLM."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.slow  # a real server process per test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.005) as server:
        yield server.base_url


@pytest.fixture
def config(tmp_path, mock_url):
    path = tmp_path / "council.toml"
    lines = [
        "[councils.default]",
        'members = ["a", "b", "c"]',
        'chairman = "a"',
        "[councils.pair]",
        'members = ["a", "b"]',
    ]
    for alias, model in (("a", "mock-alpha"), ("b", "mock-beta"), ("c", "mock-gamma")):
        lines += [
            f"[models.{alias}]",
            f'model = "openai/{model}"',
            f'api_base = "{mock_url}"',
            "retries = 1",
            "max_concurrency = 16",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_openai_client_lists_completes_and_streams(config, council_home):
    with council_serve(config, council_home) as (base, _):
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
        models = {m.id for m in client.models.list()}
        assert models == {"default", "pair"}

        completion = client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )
        assert completion.choices[0].message.content.strip()
        details = completion.model_extra["council"]
        assert details["status"] == "complete" and len(details["ranking"]) == 3
        session = httpx.get(f"{base}/v1/sessions/{details['session_id']}").json()
        assert session["session_id"] == details["session_id"]

        stream = client.chat.completions.create(
            model="pair",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Name a prime."},
                {"role": "assistant", "content": "7"},
                {"role": "user", "content": "Another one?"},
            ],
            stream=True,
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text.strip()


def test_errors_in_openai_shape(config, council_home):
    with council_serve(config, council_home) as (base, _):
        bad = httpx.post(
            base + "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        missing = httpx.post(base + "/v1/chat/completions", json={"model": "default"})
        assert missing.status_code == 400 and "messages" in missing.json()["error"]["message"]
        unknown = httpx.post(
            base + "/v1/chat/completions", json={"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
        huge = httpx.post(
            base + "/v1/chat/completions",
            json={"model": "default", "messages": [{"role": "user", "content": "x" * 1_100_000}]},
        )
        assert huge.status_code == 413
        assert httpx.get(base + "/v1/sessions/does-not-exist").status_code == 404


def test_token_required_when_set(config, council_home):
    with council_serve(config, council_home, "--token", "s3cret") as (base, _):
        assert httpx.get(base + "/v1/models").status_code == 401
        assert httpx.get(base + "/v1/models", headers={"authorization": "Bearer wrong"}).status_code == 401
        unauth = httpx.post(base + "/v1/chat/completions", json={"model": "default", "messages": []})
        assert unauth.status_code == 401 and unauth.json()["error"]["code"] == "invalid_api_key"
        ok = httpx.get(base + "/v1/models", headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_non_loopback_without_token_refuses_to_start(config, council_home):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "council",
            "serve",
            "--config",
            str(config),
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        env={**os.environ, "COUNCIL_HOME": str(council_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--token" in proc.stderr


def test_twenty_concurrent_requests_are_twenty_sessions(config, council_home):
    with council_serve(config, council_home) as (base, _):

        async def go():
            client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused", timeout=120)
            return await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="default", messages=[{"role": "user", "content": f"Question {i}?"}]
                    )
                    for i in range(20)
                )
            )

        results = asyncio.run(go())
        ids = {r.model_extra["council"]["session_id"] for r in results}
        assert len(ids) == 20
        assert all(r.choices[0].message.content for r in results)
    import sqlite3

    db = sqlite3.connect(council_home / "council.db")
    rows = db.execute("select status, count(*) from sessions group by status").fetchall()
    assert dict(rows) == {"complete": 20}
    assert db.execute("select count(distinct session_id) from bias_records").fetchone()[0] == 20


WARM_UP_PROBE = """
import gc, sys
from council.cli.serve import _warm_up
from council.config import load_config, resolve_council
loaded = load_config(sys.argv[1])
_warm_up([resolve_council(loaded, name) for name in loaded.config.councils])
print("litellm" in sys.modules, gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(
    "provider, imported",
    [("anthropic/claude-3-5-sonnet", "True"), ("openai/mock-alpha", "False"), ("fake/alpha", "False")],
)
def test_serve_imports_litellm_before_listening_only_when_a_council_needs_it(tmp_path, provider, imported):
    path = tmp_path / "council.toml"
    path.write_text(
        f'[councils.default]\nmembers = ["a"]\n[models.a]\nmodel = "{provider}"\napi_base = "http://127.0.0.1:9"\n'
    )
    out = subprocess.run(
        [sys.executable, "-c", WARM_UP_PROBE, str(path)], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == [imported, "True"]  # the start-up heap is frozen either way

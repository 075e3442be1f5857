"""Canaries: a configured key that models quote in their replies, and the credentials of an
``api_base`` (``http://user:password@host``, sent as HTTP Basic auth), appear in no table of the
store (every text of every row, on SQLite and PostgreSQL), in no served route and in no export
or output, whatever path the text took (a session run by the server, its events, the chat
route, ``council run``, judging, a batch).

The mock's ``+leak`` models put the request's ``Authorization`` header in every plain reply and
every reasoning; its ``+echo`` models quote it in an error.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from conftest import council_process, write_config
from mock_server import start_mock_server
from serve_helpers import council_serve

from council.untrusted.redaction import REDACTED

pytestmark = pytest.mark.slow  # real processes: the server, the CLI

KEY = "k-7f3a9c2e5b1d4e6f8a0b-canary"  # known only by value: the variable is not named like a key
QUESTION = "Why is the sky blue in the afternoon?"


def every_text(url: str) -> str:
    """Every row of every table of the store ``url`` names, as text."""
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        try:
            return "\n".join(db.iterdump())
        finally:
            db.close()
    import psycopg

    with psycopg.connect(url) as conn:
        listed = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        tables = [name for (name,) in listed]
        assert "session_events" in tables
        return "\n".join(str(row) for name in tables for row in conn.execute(f'SELECT t::text FROM "{name}" t'))


def config(tmp_path: Path, base: str, models: dict[str, str], **extra: object) -> Path:
    spec = {"api_base": base, "retries": 0, "timeout": 20, **extra}
    return write_config(tmp_path / "council.toml", {a: {"model": f"openai/{m}", **spec} for a, m in models.items()},
                        chairman="m1")  # fmt: skip


def judged(tmp_path: Path, cfg: Path, home: Path, env: dict[str, str], judge: str) -> dict[str, str]:
    """What ``compare``, ``grade`` and ``batch`` print and write with ``judge``."""
    (tmp_path / "a.txt").write_text("Rayleigh scattering favours short wavelengths.")
    (tmp_path / "b.txt").write_text("Because the sea reflects onto the sky.")
    batch = tmp_path / "batch.jsonl"
    lines = [{"id": "p1", "prompt": QUESTION, "a": "Rayleigh.", "b": "The sea."},
             {"id": "g1", "prompt": QUESTION, "response": "Rayleigh scattering."}]  # fmt: skip
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = {
        "compare": ["compare", "--prompt", QUESTION, "--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt"),
                    "--json"],
        "grade": ["grade", "--prompt", QUESTION, "--response", str(tmp_path / "a.txt"), "--json"],
        "batch": ["batch", str(batch), "--batch-id", "canary", "-o", str(tmp_path / "results.jsonl"), "--json"],
    }  # fmt: skip
    seen = {}
    for name, args in runs.items():
        proc = council_process(*args, "--judge", judge, "--config", str(cfg), home=home, env=env)
        assert proc.returncode in (0, 1), (name, proc.stderr.decode())
        seen[name] = proc.stdout.decode() + proc.stderr.decode()
    seen["batch results file"] = (tmp_path / "results.jsonl").read_text()
    return seen


def exports(home: Path, env: dict[str, str], session_id: str) -> dict[str, str]:
    seen = {}
    for args in (["export"], ["export", "--format", "csv"], ["export", "--redact"], ["sessions", "show", session_id],
                 ["sessions", "show", session_id, "--json"], ["batch", "results", "canary"]):  # fmt: skip
        proc = council_process(*args, home=home, env=env)
        assert proc.returncode == 0, (args, proc.stderr.decode())
        seen[" ".join(args)] = proc.stdout.decode() + proc.stderr.decode()
    return seen


def test_a_key_models_quote_is_in_no_table_route_or_output(tmp_path, backend_url):
    home = tmp_path / "home"
    home.mkdir()
    env = {"CANARY_PROVIDER_CRED": KEY, "COUNCIL_DATABASE_URL": backend_url}
    with start_mock_server(require_key=KEY, stream_interval=0.001) as mock:
        cfg = config(tmp_path, mock.base_url, {"m1": "mock-alpha+leak", "m2": "mock-beta+leak", "m3": "mock-gamma"},
                     api_key_env="CANARY_PROVIDER_CRED")  # fmt: skip
        seen: dict[str, str] = {}
        with council_serve(cfg, home, env=env) as served:
            started = httpx.post(f"{served.base}/v1/sessions", json={"council": "default", "question": QUESTION},
                                  timeout=30)
            assert started.status_code == 202, started.text
            session_id = started.json()["session_id"]
            seen["events"] = httpx.get(f"{served.base}/v1/sessions/{session_id}/events", timeout=60).text
            assert "event: synthesis_delta" in seen["events"] and "event: session_finished" in seen["events"]
            seen["session"] = httpx.get(f"{served.base}/v1/sessions/{session_id}", timeout=30).text
            seen["sessions"] = httpx.get(f"{served.base}/v1/sessions", timeout=30).text
            body = {"model": "default", "messages": [{"role": "user", "content": QUESTION}]}
            seen["chat"] = httpx.post(f"{served.base}/v1/chat/completions", json=body, timeout=60).text
            seen["chat stream"] = httpx.post(f"{served.base}/v1/chat/completions", json={**body, "stream": True},
                                             timeout=60).text  # fmt: skip
        ran = council_process("run", QUESTION, "--config", str(cfg), "--json", home=home, env=env)
        assert ran.returncode == 0, ran.stderr.decode()
        seen["council run"] = ran.stdout.decode() + ran.stderr.decode()
        seen |= judged(tmp_path, cfg, home, env, "m2")
    seen |= exports(home, env, session_id)
    stored = every_text(backend_url)
    assert f"Bearer {REDACTED}" in stored  # the models did quote the key: it was cut
    for where, text in {**seen, "the store": stored}.items():
        assert KEY not in text, where
        assert json.dumps(KEY)[1:-1] not in text, where


def test_the_credentials_of_an_api_base_are_in_no_table_output_or_export(tmp_path, backend_url):
    # Sent as Basic auth: the base64 of "user:password" is what a provider or a model echoes.
    home = tmp_path / "home"
    home.mkdir()
    env = {"COUNCIL_DATABASE_URL": backend_url}
    user, password = "alice", "s3cret-pw-7781"
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    with start_mock_server() as mock:
        base = mock.base_url.replace("http://", f"http://{user}:{password}@")
        cfg = config(tmp_path, base, {"m1": "mock-alpha+leak", "m2": "mock-beta+echo", "m3": "mock-gamma+leak"})
        ran = council_process("run", QUESTION, "--config", str(cfg), "--json", home=home, env=env)
        assert ran.returncode == 0, ran.stderr.decode()
        session_id = json.loads(ran.stdout)["session_id"]
        seen = {"council run": ran.stdout.decode() + ran.stderr.decode()}
        seen |= judged(tmp_path, cfg, home, env, "m1")
    seen |= exports(home, env, session_id)
    stored = every_text(backend_url)
    assert "Authorization: Basic " in stored  # quoted
    for where, text in {**seen, "the store": stored}.items():
        for secret in (token, password, f"{user}:{password}"):
            assert secret not in text, (where, secret)

"""U+0000 (NUL) in text: one behaviour on SQLite and on a real PostgreSQL, whose text columns
cannot hold it. Text handed to council (questions, files, batch items, HTTP requests, MCP
arguments) is refused with one line where it comes in; a provider's text has it replaced by
U+FFFD before anything stores it; and the store itself takes any text it is given (PostgreSQL:
U+FFFD in its place), so one bad value never stops a worker or a server. A batch item whose
result the store refuses for its data fails alone, recorded as failed with the reason."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import council_process, invoke_cli, write_config
from mock_server import start_mock_server

NUL_LINE = "contains a NUL character (U+0000)"
CONFIG = {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"], "chairman": "fake/alpha"}}}


def stored_as(store, text: str) -> str:
    """What the store gives back for ``text``: PostgreSQL cannot keep U+0000 (council.storage.postgres)."""
    return text.replace("\x00", "\ufffd") if getattr(store, "kind", "sqlite") == "postgresql" else text


# -- the store takes any text ------------------------------------------------------------------


def test_the_store_takes_text_with_nul_and_writes_each_row_once(store_backend):
    """Rows written together (one statement for many: executemany) with U+0000 in a middle row:
    every row is stored once, none lost or doubled (a store written by an older council, copied in)."""
    ids = ["a1", "b\x002", "c3", "d\x00\x004", "e5"]
    items = [{"item_id": i, "position": n, "digest": f"d{n}", "item": {"id": i, "mode": "pairwise", "line": n,
                                                                         "prompt": f"Q{n}\x00?", "a": "A", "b": "B"}}
             for n, i in enumerate(ids, 1)]  # fmt: skip
    counts = store_backend.enqueue_batch("nul", source="f\x00.jsonl", content_sha256="x", settings={"judges": ["j"]},
                                         spec={}, items=items)  # fmt: skip
    assert counts["new"] == 5
    sql = "SELECT item_id, item FROM batch_queue WHERE batch_id = ? ORDER BY position"
    rows = list(store_backend.db.query(sql, ["nul"]))
    assert [r["item_id"] for r in rows] == [stored_as(store_backend, i) for i in ids]
    assert [json.loads(r["item"])["prompt"] for r in rows] == [f"Q{n}\x00?" for n in range(1, 6)]  # JSON: escaped
    # Read back by the text as given: found on both.
    assert store_backend.batch_status("nul")["queued"] == 5
    found = list(
        store_backend.db.query("SELECT source FROM batches WHERE id = ? AND source = ?", ["nul", "f\x00.jsonl"])
    )
    assert [r["source"] for r in found] == [stored_as(store_backend, "f\x00.jsonl")]


async def test_a_model_reply_with_nul_is_stored_with_u_fffd_on_both_backends(store_backend):
    from council import Council
    from council.providers.fake import FakeAPI

    council = Council.from_config(CONFIG, store=store_backend)
    council.clients["fake/beta"].api = FakeAPI("fake/beta", script=["Water boils at 100\x00 C.\x00"])
    result = await council.run("At what temperature does water boil?", seed=1)
    await council.aclose()
    assert result.status == "complete", result.partial_reasons
    answer = next(a for a in result.answers if a.member == "fake/beta")
    assert answer.text == "Water boils at 100\ufffd C.\ufffd"
    stored = {a["member"]: a["text"] for a in store_backend.get_session(result.session_id)["answers"]}
    assert stored["fake/beta"] == "Water boils at 100\ufffd C.\ufffd"  # the same on both backends


# -- refused where it comes in, with one line, on both backends ---------------------------------


@pytest.fixture
def env_for(backend_url, council_home):
    return {"COUNCIL_DATABASE_URL": backend_url, "COUNCIL_HOME": str(council_home)}


def test_a_question_with_nul_is_refused_in_one_line(tmp_path, env_for):
    question = tmp_path / "q.txt"
    question.write_bytes(b"Why is\nthe sky\x00 blue?")
    from_file = council_process("run", "--file", str(question), home=Path(env_for["COUNCIL_HOME"]),
                                env=env_for)  # fmt: skip
    from_stdin = subprocess.run([sys.executable, "-m", "council", "run", "-"], input=b"Why\x00?", capture_output=True,
                                env={**os.environ, **env_for}, timeout=120)  # fmt: skip
    for proc, where in ((from_file, f"question file {question} {NUL_LINE} on line 2"),
                        (from_stdin, f"the question on standard input {NUL_LINE} on line 1")):  # fmt: skip
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert err.strip().splitlines() == [f"error: {where}"], err


def test_a_batch_item_with_nul_refuses_the_file_at_enqueue_with_its_line(tmp_path, env_for):
    config = write_config(tmp_path / "j.toml", {"j": {"model": "fake/j"}})
    lines = [{"id": "p1", "prompt": "Q?", "a": "A", "b": "B"},
             {"id": "p2", "prompt": "Q?", "a": "A", "b": "B", "model_a": "gpt\x00"}]  # fmt: skip
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    queued = invoke_cli("batch", str(batch), "--config", str(config), "--judge", "j", "--enqueue", "--batch-id", "q",
                        env=env_for)  # fmt: skip
    assert queued.exit_code == 2, queued.stderr
    assert queued.error_lines == [f'error: {batch}:2: "model_a" {NUL_LINE}']
    assert invoke_cli("batch", "status", "q", env=env_for).exit_code == 2  # nothing was queued


@pytest.fixture
def served(backend_url, monkeypatch, council_home):
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server.app import create_app

    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    with TestClient(create_app(load_config(CONFIG)), base_url="http://127.0.0.1") as client:
        yield client


def test_http_requests_with_nul_are_400s_in_one_line(served):
    chat = {"model": "default", "messages": [{"role": "user", "content": "Why\x00?"}]}
    replies = {
        "chat": served.post("/v1/chat/completions", json=chat),
        "chat, the council's name": served.post("/v1/chat/completions", json={**chat, "model": "def\x00ault"}),
        "sessions": served.post("/v1/sessions", json={"question": "Why\x00?"}),
        "search": served.get("/v1/sessions?q=a%00b"),
        "since": served.get("/v1/sessions?since=2024%00"),
        "session id": served.get("/v1/sessions/abcdef12%00"),
        "events": served.get("/v1/sessions/abc%00/events"),
        "bias report": served.get("/v1/bias-report?reviewer=a%00"),
        "leaderboard": served.get("/v1/leaderboard?council=x%00"),
    }
    for what, reply in replies.items():
        assert reply.status_code == 400, (what, reply.status_code, reply.text)
        assert NUL_LINE in reply.json()["error"]["message"], (what, reply.text)
    assert served.get("/v1/sessions").json() == []  # nothing was stored or started


async def test_mcp_arguments_with_nul_are_a_one_line_tool_error(tmp_path, backend_url, council_home):
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp_stdio import mcp_server

    cfg = write_config(tmp_path / "council.toml", {"alpha": {"model": "fake/alpha"}, "beta": {"model": "fake/beta"}})
    params = mcp_server(cfg, council_home, COUNCIL_DATABASE_URL=backend_url)
    calls = [("council_run", {"question": "Why\x00?"}),
             ("council_sessions", {"session_id": "abcdef12\x00"}),
             ("council_sessions", {"since": "2024\x00"}),
             ("council_bias_report", {"reviewers": ["a\x00"]}),
             ("council_compare", {"prompt": "Q?", "response_a": "A\x00", "response_b": "B"})]  # fmt: skip
    async with Client(params) as client:
        for name, arguments in calls:
            reply = await client.call_tool(name, arguments)
            assert reply.is_error, (name, reply.content)
            [text] = [c.text for c in reply.content]
            assert text.startswith("error: ") and NUL_LINE in text and "\n" not in text, (name, text)
        listed = await client.call_tool("council_sessions", {})
    assert not listed.is_error and listed.structured_content["sessions"] == []


# -- a batch item whose result the store refuses fails alone -------------------------------------


def refuse_model(url: str, model: str) -> None:
    """A trigger that refuses the judgment run of an item naming ``model``: a value the database
    will not take, as a real store may refuse one item's data (PostgreSQL: a data exception)."""
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        with db:
            db.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON judgment_runs WHEN NEW.model_a = '{model}'"
                       " BEGIN SELECT RAISE(ABORT, 'value refused by the database'); END")  # fmt: skip
        db.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF NEW.model_a = '{model}' THEN RAISE EXCEPTION 'value refused by the database'"
            " USING ERRCODE = '22023'; END IF; RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON judgment_runs FOR EACH ROW EXECUTE FUNCTION refuse()")


def test_an_item_the_store_refuses_fails_alone_and_is_never_judged_again(tmp_path, backend_url, council_home):
    env = {**os.environ, "COUNCIL_HOME": str(council_home), "COUNCIL_DATABASE_URL": backend_url}

    def council(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env,
                              timeout=180)  # fmt: skip

    with start_mock_server(log_requests=tmp_path / "requests.jsonl") as mock:
        config = write_config(tmp_path / "j.toml", {"j": {"model": "openai/mock-judge", "api_base": mock.base_url,
                                                           "retries": 0}})  # fmt: skip
        items = [{"id": f"p{i}", "prompt": f"Question {i}?", "a": f"Answer {i}.", "b": "B.", "model_a": f"m{i}",
                  "model_b": "other"} for i in range(4)]  # fmt: skip
        items[1]["model_a"] = "refused-model"
        batch = tmp_path / "b.jsonl"
        batch.write_text("".join(json.dumps(item) + "\n" for item in items))
        queued = council("batch", str(batch), "--config", str(config), "--judge", "j", "--enqueue", "--batch-id", "q")
        assert queued.returncode == 0, queued.stderr
        refuse_model(backend_url, "refused-model")
        first = council("worker", "--batch-id", "q", "--config", str(config), "--concurrency", "4")
        assert first.returncode == 1, first.stderr  # an item failed: the worker went on with the others
        assert "judged 4 items (1 failed)" in first.stderr, first.stderr
        assert "stopped answering" not in first.stderr and "Traceback" not in first.stderr
        again = council("worker", "--batch-id", "q", "--config", str(config))
        assert again.returncode == 0 and "judged 0 items" in again.stderr, again.stderr
        requests = mock.logged_requests()
    assert len(requests) == 4 * 2  # each item judged once (a swap pair: two calls), never again
    status = json.loads(council("batch", "status", "q", "--json").stdout)
    assert (status["done"], status["failed"], status["queued"], status["running"]) == (3, 1, 0, 0)
    results = {r["id"]: r for r in map(json.loads, council("batch", "results", "q").stdout.splitlines())}
    assert sorted(results) == ["p0", "p1", "p2", "p3"]
    assert results["p1"]["status"] == "failed"
    assert "the store refused" in results["p1"]["error"] and "value refused by the database" in results["p1"]["error"]
    assert all(results[i]["status"] == "ok" for i in ("p0", "p2", "p3"))

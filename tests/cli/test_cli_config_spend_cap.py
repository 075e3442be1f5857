"""``[budget] max_cost_usd`` in the council file holds on every front-end, not only ``council run``:
the server and the Python API (each session under it), compare and grade, and ``council worker``
(a batch without a cap of its own takes it). The models are the mock server's (real HTTP on
loopback), priced so that one member call's worst case fits the cap and two do not."""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import db_rows, invoke_cli, write_config
from mock_server import start_mock_server
from serve_helpers import council_serve

from council.accounting.budget import BudgetReached

# A call's worst case is about 0.008 (400 tokens at 2e-5) plus its prompt bound at 1e-6 a byte:
# one member call fits under 0.015, two do not.
PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-5, "max_tokens": 400}
CAP = 0.015
QUESTION = "What is 2+2?"


def capped_config(tmp_path, mock, cap: float | None = CAP):
    models = {
        name: {"model": f"openai/mock-{name}", "api_base": mock.base_url, "api_key_env": "MOCK_KEY", "retries": 0,
               **PRICE}
        for name in ("a", "b", "c")
    }  # fmt: skip
    path = write_config(tmp_path / "c.toml", models, chairman="a")
    if cap is not None:
        path.write_text(path.read_text() + f"\n[budget]\nmax_cost_usd = {cap}\n")
    return path


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("MOCK_KEY", "unused")


def spent_per_session(home) -> list[tuple[int, float]]:
    """(calls, cost) of each session's calls that were answered."""
    return db_rows(home, "select count(*), sum(cost_usd) from calls where ok = 1 group by session_id")


def test_serve_holds_the_config_cap_for_each_session(tmp_path, council_home):
    with start_mock_server(log_requests=str(tmp_path / "requests.jsonl")) as mock:
        config = capped_config(tmp_path, mock)
        with council_serve(config, council_home, env={"MOCK_KEY": "unused"}) as served:
            chat = {"model": "default", "messages": [{"role": "user", "content": QUESTION}]}
            replies = [httpx.post(served.base + "/v1/chat/completions", json=chat, timeout=60) for _ in range(2)]
        sent = len(mock.logged_requests())
    for reply in replies:
        assert reply.status_code == 502 and "budget reached" in reply.json()["error"]["message"], reply.text
    # Each session spent within the cap (per session, as `council run` per invocation), and the
    # provider was asked for nothing more than those calls.
    sessions = spent_per_session(council_home)
    assert len(sessions) == 2 and all(calls == 1 and 0 < cost <= CAP for calls, cost in sessions), sessions
    assert sent == 2
    statuses = db_rows(council_home, "select status, error from sessions")
    assert all(s == "partial" and e.startswith("budget reached: $") for s, e in statuses), statuses


def test_the_python_api_holds_the_config_cap_for_each_session(tmp_path, council_home):
    import asyncio

    from council.api import Council

    with start_mock_server() as mock:
        config = capped_config(tmp_path, mock)

        async def go():
            async with Council.from_config(str(config)) as council:
                for _ in range(2):
                    with pytest.raises(BudgetReached):
                        await council.run(QUESTION)

        asyncio.run(go())
    sessions = spent_per_session(council_home)
    assert len(sessions) == 2 and all(0 < cost <= CAP for _, cost in sessions), sessions


def test_an_explicit_cap_still_covers_every_session_of_the_council(tmp_path, council_home):
    import asyncio

    from council.api import Council

    with start_mock_server() as mock:
        config = capped_config(tmp_path, mock, cap=None)

        async def go():
            async with Council.from_config(str(config), max_cost=CAP) as council:
                with pytest.raises(BudgetReached):
                    await council.run(QUESTION)
                with pytest.raises(BudgetReached):
                    await council.run(QUESTION)  # nothing left for a second session
                return council.accounting.budget.totals()

        spent, cap = asyncio.run(go())
    assert cap == CAP and 0 < spent <= CAP
    assert len(spent_per_session(council_home)) == 1


def test_compare_holds_the_config_cap(tmp_path, council_home):
    (tmp_path / "a.txt").write_text("Four.")
    (tmp_path / "b.txt").write_text("Five.")
    with start_mock_server(log_requests=str(tmp_path / "requests.jsonl")) as mock:
        config = capped_config(tmp_path, mock)
        result = invoke_cli("compare", "--prompt", QUESTION, "--a", str(tmp_path / "a.txt"), "--b",
                            str(tmp_path / "b.txt"), "--judge", "a", "--config", str(config))  # fmt: skip
        sent = mock.logged_requests()
    assert result.exit_code == 1 and "budget reached" in result.stderr, result.stderr
    assert sent == []  # a vote's two passes do not fit together: neither is sent


def write_pairs(path, n):
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Q{i}?", "a": "x", "b": "y"}) + "\n"
                            for i in range(n)))  # fmt: skip
    return path


def test_a_worker_gives_a_batch_without_a_cap_the_configs(tmp_path, council_home):
    items = write_pairs(tmp_path / "pairs.jsonl", 4)
    with start_mock_server(log_requests=str(tmp_path / "requests.jsonl")) as mock:
        free = capped_config(tmp_path, mock, cap=None)
        queued = invoke_cli("batch", str(items), "--judge", "a", "--config", str(free), "--enqueue", "--batch-id", "w")
        assert queued.exit_code == 0, queued.stderr
        config = capped_config(tmp_path, mock)
        stopped = invoke_cli("worker", "--batch-id", "w", "--config", str(config))
        sent = mock.logged_requests()
    assert stopped.exit_code == 1 and "budget reached" in stopped.stderr, stopped.stderr
    assert sent == []
    assert db_rows(council_home, "select cap_usd from budgets") == [(CAP,)]
    assert db_rows(council_home, "select count(*) from batch_queue where state = 'queued'") == [(4,)]


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_serve_and_mcp_refuse_to_start_with_a_model_the_config_cap_cannot_bound(tmp_path, council_home, command):
    from conftest import council_process

    unpriced = {"model": "openai/not-a-real-model", "api_base": "http://127.0.0.1:9/v1", "max_tokens": 10}
    config = write_config(tmp_path / "c.toml", {"a": unpriced})
    config.write_text(config.read_text() + f"\n[budget]\nmax_cost_usd = {CAP}\n")
    port = ["--port", "0"] if command == "serve" else []
    done = council_process(command, "--config", str(config), *port, home=council_home, timeout=60)
    errors = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(errors) == 1 and "no known price" in errors[0], done.stderr

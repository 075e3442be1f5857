"""``council serve --workers N``: N real server processes on one port, one shared store.

Sessions answered by different processes land in the same store, each written whole (its
answers, reviews, calls and events), and a clean stop ends every process's lease, so no session
is left ``running``. On SQLite (WAL, one file) and on PostgreSQL alike.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import council_process, invoke_cli
from conftest import url_rows as rows
from mock_server import start_mock_server
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # real server processes

MEMBERS = ("a", "b", "c")


def ask(base: str, i: int) -> str:
    """One chat completion on a connection of its own (so the processes share them); its session id."""
    body = {"model": "default", "messages": [{"role": "user", "content": f"question {i}: why is the sky blue?"}]}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"connection": "close"}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["council"]["status"] == "complete"
    return reply.json()["council"]["session_id"]


def test_sessions_served_by_two_processes_land_whole_in_one_store(tmp_path, backend_url):
    config = tmp_path / "council.toml"
    with start_mock_server(latency=0.05) as mock:
        lines = ["[councils.default]", f"members = {list(MEMBERS)!r}".replace("'", '"'), 'chairman = "a"']
        for alias in MEMBERS:
            lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}"', f'api_base = "{mock.base_url}"']
        config.write_text("\n".join(lines) + "\n")
        home = tmp_path / "home"
        home.mkdir()
        ids: list[str] = []
        owners: set[int] = set()
        env = {"COUNCIL_DATABASE_URL": backend_url}
        with council_serve(config, home, "--workers", "2", env=env) as served:
            assert "processes: 2" in "".join(served.lines)
            with ThreadPoolExecutor(12) as pool:
                # Both processes accept on the one socket; which one takes a connection is the
                # kernel's choice, so ask in rounds until both have answered.
                for round_ in range(15):
                    ids += pool.map(lambda i: ask(served.base, i), range(round_ * 12, round_ * 12 + 12))
                    owners = {pid for (pid,) in rows(backend_url, "SELECT DISTINCT owner_pid FROM sessions")}
                    if len(owners) >= 2:
                        break
            # Any process streams any session's events: they come from the store.
            for session_id in ids[:3]:
                events = httpx.get(f"{served.base}/v1/sessions/{session_id}/events", timeout=30).text
                assert events.count("event: session_finished") == 1
    assert len(owners) == 2, "both server processes answered sessions"
    assert len(set(ids)) == len(ids)
    stored = dict(rows(backend_url, "SELECT id, status FROM sessions"))
    assert stored == {session_id: "complete" for session_id in ids}  # every session, complete, nothing else
    per_session = {
        "answers": len(MEMBERS),
        "reviews": len(MEMBERS),
        "calls": 2 * len(MEMBERS) + 1,
    }
    for table, expected in per_session.items():
        counts = dict(rows(backend_url, f"SELECT session_id, count(*) FROM {table} GROUP BY session_id"))
        assert counts == {session_id: expected for session_id in ids}, table
    finished = rows(backend_url, "SELECT session_id FROM session_events WHERE type = 'session_finished'")
    assert sorted(s for (s,) in finished) == sorted(ids)
    # A clean stop: every process ended its lease (nothing for the next one to mark interrupted).
    assert rows(backend_url, "SELECT count(*) FROM leases") == [(0,)]


def server_processes(supervisor: int) -> set[int]:
    """The supervisor's worker processes (not multiprocessing's resource tracker)."""
    found = set()
    for task in Path(f"/proc/{supervisor}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(int(child))
            except FileNotFoundError:  # ended since it was listed
                pass
    return found


def wait_for(what, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def test_a_killed_server_process_is_replaced_and_its_session_recorded_interrupted(tmp_path, backend_url):
    config = tmp_path / "council.toml"
    with start_mock_server(latency=0.02, slow_seconds=60) as mock:
        models = {"a": "mock-a", "b": "mock-b", "c": "mock-c", "slow": "mock-s+slow"}
        lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "a"']
        lines += ["[councils.slow]", 'members = ["a", "b", "slow"]', 'chairman = "a"']
        for alias, model in models.items():
            lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock.base_url}"', "retries = 0"]
        config.write_text("\n".join(lines) + "\n")
        home = tmp_path / "home"
        home.mkdir()
        env = {"COUNCIL_DATABASE_URL": backend_url, "COUNCIL_LEASE_SECONDS": "1"}
        with council_serve(config, home, "--workers", "2", env=env) as served:
            reply = httpx.post(f"{served.base}/v1/sessions", json={"council": "slow", "question": "q?"}, timeout=30)
            assert reply.status_code == 202, reply.text
            stuck = reply.json()["session_id"]
            [(victim,)] = wait_for(lambda: rows(backend_url, f"SELECT owner_pid FROM sessions WHERE id = '{stuck}'"))
            supervisor = int(Path(f"/proc/{victim}/status").read_text().split("PPid:")[1].split()[0])
            assert victim in server_processes(supervisor) and len(server_processes(supervisor)) == 2
            os.kill(victim, signal.SIGKILL)
            # uvicorn's supervisor starts a new process in its place; the other one serves meanwhile.
            wait_for(lambda: len(server_processes(supervisor) - {victim}) == 2)
            after = [ask(served.base, i) for i in range(4)]
            # The running processes see that its process has ended (at their start, at each heartbeat):
            # its session is marked interrupted, keeping what it wrote, with no command run.
            stuck_status = f"SELECT status FROM sessions WHERE id = '{stuck}'"
            wait_for(lambda: rows(backend_url, stuck_status) == [("interrupted",)])
            status = dict(rows(backend_url, "SELECT id, status FROM sessions"))
    assert [status[s] for s in after] == ["complete"] * 4
    assert rows(backend_url, "SELECT count(*) FROM leases") == [(0,)]  # the dead one's went with its work


def test_workers_must_be_a_positive_count():
    result = invoke_cli("serve", "--workers", "0")
    assert result.exit_code == 2
    assert "--workers" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_store_that_cannot_be_reached_is_one_line_before_any_process_starts(tmp_path, workers):
    config = tmp_path / "council.toml"
    config.write_text('[councils.default]\nmembers = ["a"]\n[models.a]\nmodel = "openai/m"\napi_base = "http://127.0.0.1:9"\n')
    url = f"postgresql://council@/nope?host={tmp_path}/no-such-dir"
    result = council_process("serve", "--config", str(config), "--port", "0", "--workers", workers,
                             home=tmp_path, env={"COUNCIL_DATABASE_URL": url}, timeout=60)  # fmt: skip
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert len(stderr.strip().splitlines()) == 1 and "cannot connect to the PostgreSQL store" in stderr
    assert "Traceback" not in stderr and "council serve: http" not in stderr

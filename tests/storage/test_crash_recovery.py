"""Crashes and concurrency: kill -9 leaves nothing `running` forever and no billed call off the record;
one process per batch; a client that hangs up on the server interrupts its session.

These need real processes (kill -9, two runners at once, a real server and client).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import db_rows, invoke_cli, url_rows, write_config
from mock_server import start_mock_server, wait_for
from serve_helpers import council_serve

QUESTION = "Why do leaves change colour in autumn?"
SLOW = 60.0  # seconds a +slow mock call takes: far longer than any test waits
LEASE = 2.0  # the council processes' lease (COUNCIL_LEASE_SECONDS): a killed one is found after it


@pytest.fixture(scope="module")
def slow_mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("mock") / "requests.jsonl"
    with start_mock_server(slow_seconds=SLOW, log_requests=log) as server:
        yield server


def popen_council(*args: str, home: Path, lease: float = LEASE, **env: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COUNCIL_HOME": str(home), "COUNCIL_LEASE_SECONDS": str(lease), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "council", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def count(home: Path, sql: str, params: tuple = ()) -> int:
    try:
        return db_rows(home, sql, params)[0][0]
    except sqlite3.Error:  # not created yet, or (before the fix) no such column
        return -1


def kill_9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "it must still have been running when killed"


def slow_council(tmp_path: Path, base_url: str, n: int = 3) -> Path:
    models = {f"m{i}": {"model": f"openai/mock-{i}+slow", "api_base": base_url, "timeout": 600, "retries": 0}
              for i in range(1, n + 1)}  # fmt: skip
    return write_config(tmp_path / "c.toml", models, chairman="m1")


# -- sessions -----------------------------------------------------------------------------


def test_kill_9_mid_session_keeps_its_calls_and_the_next_command_marks_it_interrupted_at_once(
    tmp_path, council_home, slow_mock
):
    # Its lease would last ten minutes: on the machine it ran on, its ended process is seen at once.
    proc = popen_council("run", QUESTION, "--config", str(slow_council(tmp_path, slow_mock.base_url)),
                         home=council_home, lease=600)  # fmt: skip
    try:
        in_flight = "select count(*) from calls where ok is null"
        assert wait_for(lambda: count(council_home, in_flight) == 3, timeout=60), proc.poll()
    finally:
        kill_9(proc)
    # Nothing has looked at the database since the kill: the row still says running.
    assert db_rows(council_home, "select status from sessions") == [("running",)]
    listed = invoke_cli("sessions", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["status"] == "interrupted"
    assert row["question"] == QUESTION  # what was written is kept
    [(status, finished, error)] = db_rows(council_home, "select status, finished_at, error from sessions")
    assert status == "interrupted" and finished and f"pid {proc.pid}" in error
    calls = db_rows(council_home, "select stage, member, ok, error from calls order by member")
    assert [(c[0], c[1], c[2]) for c in calls] == [("answer", f"m{i}", 0) for i in (1, 2, 3)]
    assert all("interrupted" in c[3] for c in calls)


def test_a_live_session_is_never_taken_for_an_orphan(tmp_path, council_home, slow_mock):
    proc = popen_council("run", QUESTION, "--config", str(slow_council(tmp_path, slow_mock.base_url)),
                         home=council_home)  # fmt: skip
    try:
        assert wait_for(lambda: count(council_home, "select count(*) from calls where ok is null") == 3, timeout=60)
        # Other commands open the database while it runs, for three of its leases: its heartbeat
        # keeps the lease alive.
        deadline = time.monotonic() + 3 * LEASE
        while time.monotonic() < deadline:
            assert invoke_cli("sessions", "list", "--json").exit_code == 0
            time.sleep(0.2)
        assert db_rows(council_home, "select status from sessions") == [("running",)]
        assert count(council_home, "select count(*) from calls where ok is null") == 3
    finally:
        kill_9(proc)


def test_a_session_row_whose_owner_is_gone_is_recovered_when_the_store_opens(council_home):
    from council.storage import SQLiteStore

    store = SQLiteStore.open()
    store.begin_session("mine", council="default")
    store.db.execute(  # as a process that died would have left it (no lease file)
        "insert into sessions (id, status, kind, created_at, owner, owner_pid, owner_host) "
        "values ('theirs', 'running', 'council', '2026-01-01', 'f00d', 4242, 'elsewhere')"
    )
    store.db.execute(
        "insert into calls (call_id, session_id, owner, stage, ok) values ('c1', 'theirs', 'f00d', 'answer', null)"
    )
    store.close()
    reopened = SQLiteStore.open()
    try:
        statuses = dict(reopened.db.execute("select id, status from sessions").fetchall())
        assert statuses == {"mine": "running", "theirs": "interrupted"}  # this process is alive
        [(ok, error)] = reopened.db.execute("select ok, error from calls where call_id = 'c1'").fetchall()
        assert ok == 0 and "interrupted" in error
    finally:
        reopened.close()


# -- batches ------------------------------------------------------------------------------


def slow_batch(tmp_path: Path, base_url: str, items: int = 20) -> tuple[Path, Path]:
    rows = [{"id": f"i{i}", "prompt": f"Q{i}?", "a": f"answer a {i}", "b": f"answer b {i}"} for i in range(items)]
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = write_config(tmp_path / "judge.toml", {"j": {"model": "openai/mock-judge+slow", "api_base": base_url,
                                                        "timeout": 600, "retries": 0}})  # fmt: skip
    return batch, cfg


def test_kill_9_mid_batch_leaves_every_call_in_flight_on_record(tmp_path, council_home, slow_mock):
    batch, cfg = slow_batch(tmp_path, slow_mock.base_url)
    proc = popen_council("batch", str(batch), "--config", str(cfg), "--judge", "j", "--concurrency", "4",
                         home=council_home)  # fmt: skip
    try:  # 4 items at once, each judged in both orders at once: 8 calls in flight
        assert wait_for(lambda: count(council_home, "select count(*) from calls where ok is null") == 8, timeout=60)
    finally:
        kill_9(proc)
    # Any command recovers, once the lease has passed.
    assert wait_for(lambda: invoke_cli("sessions", "list").exit_code == 0
                    and count(council_home, "select count(*) from calls where ok is null") == 0,
                    timeout=LEASE + 30, interval=0.25)  # fmt: skip
    rows = db_rows(council_home, "select stage, ok, error from calls")
    assert len(rows) == 8 and all(r[0] == "compare" and r[1] == 0 and "interrupted" in r[2] for r in rows)


def test_a_second_runner_of_a_running_batch_shares_its_queue_and_takes_other_items(
    tmp_path, council_home, slow_mock
):
    batch, cfg = slow_batch(tmp_path, slow_mock.base_url)
    args = ["batch", str(batch), "--config", str(cfg), "--judge", "j", "--concurrency", "2"]
    first = popen_council(*args, home=council_home)
    second = None
    try:
        assert wait_for(lambda: count(council_home, "select count(*) from calls where ok is null") == 4, timeout=60)
        second = popen_council(*args, "--resume", home=council_home)
        # Two items each (both orders at once): 8 calls in flight, on 4 distinct items, 2 workers.
        assert wait_for(lambda: count(council_home, "select count(*) from calls where ok is null") == 8, timeout=60)
        held = db_rows(council_home, "select worker, item_id from batch_queue where state = 'running'")
        assert len(held) == 4 and len({item for _, item in held}) == 4 and len({w for w, _ in held}) == 2
        assert first.poll() is None and second.poll() is None
    finally:
        kill_9(first)
        if second is not None:
            kill_9(second)


# -- the server ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_hangs_up_interrupts_its_session(tmp_path, council_home, slow_mock, stream):
    cfg = slow_council(tmp_path, slow_mock.base_url, n=2)
    with council_serve(cfg, council_home) as (base, _):
        body = {"model": "default", "messages": [{"role": "user", "content": QUESTION}], "stream": stream}
        with pytest.raises(httpx.ReadTimeout):
            with httpx.Client(timeout=httpx.Timeout(30, read=2.0)) as client:
                response = client.post(base + "/v1/chat/completions", json=body)
                for _ in response.iter_lines():  # a streaming response: read until the timeout
                    pass
        assert wait_for(lambda: count(council_home, "select count(*) from sessions where status != 'running'") == 1,
                        timeout=15)  # fmt: skip
        [(status, error, finished)] = db_rows(council_home, "select status, error, finished_at from sessions")
        assert (status, error) == ("interrupted", "interrupted") and finished
        calls = db_rows(council_home, "select ok, error from calls")
        assert len(calls) == 2 and all(c == (0, "cancelled") for c in calls)


def read_stream(url: str, lines: list[str]) -> threading.Thread:
    """Read the SSE stream at ``url`` into ``lines`` in a thread, until the server ends it."""

    def read() -> None:
        with httpx.stream("GET", url, timeout=httpx.Timeout(10, read=120)) as response:
            lines.extend(response.iter_lines())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def in_flight_of_one_session(url: str) -> tuple[str, str] | None:
    """The session's id and owner once its three calls are in flight."""
    if url_rows(url, "select count(*) from calls where ok is null") != [(3,)]:
        return None
    [(session_id, owner)] = url_rows(url, "select id, owner from sessions")
    return session_id, owner


@pytest.mark.parametrize("machine", ["this", "another"])
def test_a_running_server_marks_a_dead_process_session_interrupted_and_ends_its_event_stream(
    tmp_path, council_home, slow_mock, backend_url, machine
):
    store = {"COUNCIL_DATABASE_URL": backend_url}
    cfg = slow_council(tmp_path, slow_mock.base_url)
    # On this machine the run's ended process is seen at the server's next heartbeat, however long
    # its lease; on another machine (or in another container), once its lease has passed.
    lease = 600 if machine == "this" else LEASE
    with council_serve(cfg, council_home, env={**store, "COUNCIL_LEASE_SECONDS": "1"}) as served:
        proc = popen_council("run", QUESTION, "--config", str(cfg), home=council_home, lease=lease, **store)
        lines: list[str] = []
        try:
            found = wait_for(lambda: in_flight_of_one_session(backend_url), timeout=60)
            assert found, proc.poll()
            session_id, owner = in_flight_of_one_session(backend_url)
            if machine == "another":  # its pid means nothing here
                url_rows(backend_url, "update leases set machine = %s where id = %s", ("another machine", owner))
            reader = read_stream(f"{served.base}/v1/sessions/{session_id}/events", lines)
            assert wait_for(lambda: lines, timeout=30)  # the stream is open, the session running
        finally:
            kill_9(proc)
        # No command opens the store: the server finds it while it runs, and the stream ends.
        reader.join(timeout=60)
        assert not reader.is_alive(), f"the event stream never ended: {lines}"
    assert url_rows(backend_url, "select status from sessions") == [("interrupted",)]
    assert [line for line in lines if line.startswith("event: ")][-1] == "event: session_finished", lines
    finished = json.loads([line for line in lines if line.startswith("data: ")][-1].removeprefix("data: "))
    assert finished["status"] == "interrupted" and f"pid {proc.pid}" in finished["error"]


def test_a_running_worker_marks_a_dead_process_session_interrupted(tmp_path, council_home, slow_mock, backend_url):
    store = {"COUNCIL_DATABASE_URL": backend_url}
    cfg = slow_council(tmp_path, slow_mock.base_url)
    worker = popen_council("worker", "--follow", home=council_home, lease=1, **store)
    proc = None
    try:
        def holds_a_lease() -> bool:  # its heartbeat is what looks for dead processes' work
            try:
                return url_rows(backend_url, "select count(*) from leases where pid = %s", (worker.pid,)) == [(1,)]
            except sqlite3.Error:  # the worker has not created the file yet
                return False

        assert wait_for(holds_a_lease, timeout=60), worker.poll()
        proc = popen_council("run", QUESTION, "--config", str(cfg), home=council_home, lease=600, **store)
        try:
            assert wait_for(lambda: in_flight_of_one_session(backend_url), timeout=60), proc.poll()
        finally:
            kill_9(proc)
        interrupted = lambda: url_rows(backend_url, "select status from sessions") == [("interrupted",)]  # noqa: E731
        assert wait_for(interrupted, timeout=30)
        assert worker.poll() is None  # still waiting for items
    finally:
        worker.terminate()
        worker.communicate(timeout=30)


def test_a_bad_lease_length_is_one_line_and_nothing_is_written(tmp_path, council_home):
    cfg = write_config(tmp_path / "c.toml", {f"m{i}": {"model": f"fake/m{i}"} for i in (1, 2, 3)})
    result = invoke_cli("run", QUESTION, "--config", str(cfg), env={"COUNCIL_LEASE_SECONDS": "0"})
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: COUNCIL_LEASE_SECONDS must be a number of seconds from 0.5 to 86400, got '0'"
    )
    assert count(council_home, "select count(*) from sessions") == 0

"""The distributed batch with real processes, on SQLite and on a real PostgreSQL: several
`council worker`s share one batch, a worker killed with kill -9 loses no item, and a database
that stops mid-batch is one clear error with the items back in the queue."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import url_rows, write_config
from mock_server import start_mock_server


def pair(i: int) -> dict[str, str]:
    return {"id": f"p{i}", "prompt": f"Question {i}?", "a": f"Answer A {i}, with detail.", "b": f"B {i}."}


def council(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)  # fmt: skip


def start_worker(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "council", "worker", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def wait_for(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def setup_batch(
    tmp_path: Path, url: str, mock_url: str, items: int, **judge: object
) -> tuple[dict[str, str], Path]:
    env = {**os.environ, "COUNCIL_HOME": str(tmp_path / "council-home"), "COUNCIL_DATABASE_URL": url}
    cfg = write_config(tmp_path / "judge.toml", {"j": {"model": "openai/mock-judge", "api_base": mock_url,
                                                        "retries": 0, "timeout": 60, **judge}})  # fmt: skip
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(pair(i)) + "\n" for i in range(items)))
    queued = council("batch", str(path), "--config", str(cfg), "--judge", "j", "--enqueue", "--batch-id", "q", env=env)
    assert queued.returncode == 0 and queued.stdout.strip() == "q", queued.stderr
    return env, cfg


def status(env: dict[str, str]) -> dict:
    result = council("batch", "status", "q", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_three_workers_share_one_batch_with_no_item_judged_twice(tmp_path, backend_url):
    with start_mock_server(latency=0.05, log_requests=tmp_path / "requests.jsonl") as mock:
        env, cfg = setup_batch(tmp_path, backend_url, mock.base_url, items=24)
        workers = [start_worker("--batch-id", "q", "--config", str(cfg), "--concurrency", "2", env=env)
                   for _ in range(3)]  # fmt: skip
        outputs = [w.communicate(timeout=180) for w in workers]
        # Every worker ends cleanly. How the items fell between them is the scheduler's choice (a
        # worker that starts late on a busy machine may find none left): only their sum is promised.
        assert [w.returncode for w in workers] == [0, 0, 0], outputs
        assert not any("error" in err or "Traceback" in err for _, err in outputs), outputs
        counts = [int(re.search(r"judged (\d+) items", err).group(1)) for _, err in outputs]
        assert sum(counts) == 24, counts
        requests = mock.logged_requests()
    assert status(env) | {"cost_usd": None} == {"batch_id": "q", "items": 24, "queued": 0, "running": 0, "done": 24,
                                                 "failed": 0, "cost_usd": None, "provider_batches": []}  # fmt: skip
    assert len(requests) == 24 * 2  # each item judged once: a swap pair, two calls
    judged = "SELECT b.item_id, count(*) FROM batch_items b JOIN calls c ON c.session_id = b.run_id GROUP BY b.item_id"
    assert sorted(url_rows(backend_url, judged)) == sorted((f"p{i}", 2) for i in range(24))  # each item's run: 2 calls
    lines = council("batch", "results", "q", env=env).stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [f"p{i}" for i in range(24)]


def test_a_worker_killed_with_kill_9_loses_no_item(tmp_path, backend_url):
    with start_mock_server(latency=0.4, log_requests=tmp_path / "requests.jsonl") as mock:
        env, cfg = setup_batch(tmp_path, backend_url, mock.base_url, items=12)
        args = ("--batch-id", "q", "--config", str(cfg), "--concurrency", "3", "--lease-seconds", "2")
        doomed = start_worker(*args, env=env)
        try:  # three items in flight, both passes of each: six calls
            assert wait_for(lambda: len(mock.logged_requests()) >= 6, timeout=60)
        finally:
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        assert status(env)["done"] < 12  # killed mid-batch, holding items whose lease has not passed
        survivor = start_worker(*args, env=env)
        out, err = survivor.communicate(timeout=180)
        assert survivor.returncode == 0, err
        requests = mock.logged_requests()
    final = status(env)
    assert final["done"] == 12 and final["queued"] == final["running"] == final["failed"] == 0
    lines = council("batch", "results", "q", env=env).stdout.splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(f"p{i}" for i in range(12))  # one each
    # Each item judged once (two calls), but the killed worker's three: asked again.
    assert 12 * 2 <= len(requests) <= (12 + 3) * 2


PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 3e-5, "max_tokens": 400}
BUDGET_LINE = re.compile(r"^error: budget reached: \$(\d+\.\d+) of \$(\d+\.\d+)$")


def test_workers_with_max_cost_stop_claiming_at_the_cap_and_the_batch_resumes(tmp_path, backend_url):
    with start_mock_server(latency=0.05, log_requests=tmp_path / "requests.jsonl") as mock:
        env, cfg = setup_batch(tmp_path, backend_url, mock.base_url, items=24, **PRICE)
        args = ("--batch-id", "q", "--config", str(cfg), "--concurrency", "1")
        # Each call reserves its worst case (about $0.016 here, its prompt counted a token a byte):
        # two items in flight, two calls each, fit the cap, and 24 items cost more than it.
        workers = [start_worker(*args, "--max-cost", "0.1", env=env) for _ in range(2)]
        outputs = [w.communicate(timeout=180) for w in workers]
        assert [w.returncode for w in workers] == [1, 1], outputs
        for _, err in outputs:  # each says so in its last line, within the one shared cap
            match = BUDGET_LINE.match(err.strip().splitlines()[-1])
            assert match, err
            assert float(match.group(2)) == 0.1 and float(match.group(1)) <= 0.1
            assert "Traceback" not in err
        stopped = status(env)
        # Claiming stopped: the rest is queued (none failed, none held), ready for a later worker.
        assert 0 < stopped["done"] < 24 and stopped["failed"] == stopped["running"] == 0, (stopped, outputs)
        # Nothing was spent on an item left unfinished: an item's two passes reserve as one.
        assert len(mock.logged_requests()) == 2 * stopped["done"], (stopped, outputs)
        assert stopped["queued"] == 24 - stopped["done"]
        assert stopped["cost_usd"] <= 0.1
        # A worker without a cap honours the stored one. The capped workers stopped when a call's worst case
        # no longer fitted beside the others in flight; those then settled at their (smaller) real cost, so
        # the room left may still take an item or two: the worker judges them and stops at the same cap.
        again = start_worker("--batch-id", "q", "--config", str(cfg), env=env)
        _, err = again.communicate(timeout=180)
        match = BUDGET_LINE.match(err.strip().splitlines()[-1])
        assert again.returncode == 1 and match, err
        assert float(match.group(2)) == 0.1 and float(match.group(1)) <= 0.1
        after = status(env)
        assert stopped["done"] <= after["done"] < 24 and after["cost_usd"] <= 0.1, (stopped, after)
        # A new cap replaces it, and the batch finishes.
        final = start_worker(*args, "--max-cost", "10", env=env)
        _, err = final.communicate(timeout=180)
        assert final.returncode == 0, err
    assert status(env) | {"cost_usd": None} == {"batch_id": "q", "items": 24, "queued": 0, "running": 0, "done": 24,
                                                 "failed": 0, "cost_usd": None, "provider_batches": []}  # fmt: skip


# -- the database stopping mid-batch (its own server: it is stopped and started again) ------------------


def crash_safe_database(server) -> str:
    """A fresh database on ``server`` that keeps every commit through a crash (``pause(crash=True)``)."""
    from urllib.parse import urlsplit

    url = server.fresh_database()
    with server.admin() as admin:
        admin.execute(f'ALTER DATABASE "{urlsplit(url).path[1:]}" SET synchronous_commit = on')
    return url


def test_the_database_stopping_mid_batch_is_one_line_and_the_items_return(tmp_path, own_postgres):
    url = crash_safe_database(own_postgres)
    with start_mock_server(latency=0.5) as mock:
        env, cfg = setup_batch(tmp_path, url, mock.base_url, items=6)
        worker = start_worker("--batch-id", "q", "--config", str(cfg), "--concurrency", "2", "--lease-seconds", "3",
                              env=env)  # fmt: skip
        assert wait_for(lambda: status(env)["running"] == 2, timeout=60)
        own_postgres.pause(crash=True)
        out, err = worker.communicate(timeout=120)
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert worker.returncode == 1, err
        # One error line (before it, the warning log may say which calls could not be logged).
        assert len(errors) == 1 and errors[0].startswith("error: the store stopped answering mid-batch"), err
        assert err.rstrip().endswith("run a worker again") and "Traceback" not in err
        own_postgres.resume()
        time.sleep(3.5)  # the dead worker's leases pass
        assert status(env)["running"] == 0 and status(env)["queued"] + status(env)["done"] == 6
        again = start_worker("--batch-id", "q", "--config", str(cfg), env=env)
        assert again.wait(timeout=120) == 0
    assert status(env)["done"] == 6


def test_a_database_restarting_mid_batch_loses_nothing_and_the_worker_goes_on(tmp_path, own_postgres):
    """Stopped as a crash would stop it while items are being recorded, started again 2 s later:
    the worker waits for it (writes in flight then may have committed before their reply was
    lost: tests/pipelines/test_pipeline_worker_outage.py) and finishes the batch, every item
    recorded once."""
    import psycopg

    url = crash_safe_database(own_postgres)
    with start_mock_server(latency=0.05) as mock:
        env, cfg = setup_batch(tmp_path, url, mock.base_url, items=60)
        worker = start_worker("--batch-id", "q", "--config", str(cfg), "--concurrency", "6", "--lease-seconds", "30",
                              env=env)  # fmt: skip
        assert wait_for(lambda: status(env)["done"] >= 6, timeout=60)
        # The worker's next write waits on a lock held here: the crash finds it in flight.
        blocker = psycopg.connect(url)
        blocker.execute("LOCK TABLE batch_items IN ACCESS EXCLUSIVE MODE")
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        assert wait_for(lambda: blocker.execute(waiting).fetchone()[0] > 0, timeout=30)
        own_postgres.pause(crash=True)
        time.sleep(2)
        own_postgres.resume()
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        assert "the store went away mid-batch; waiting for it" in err, err
        assert ": judged 60 items (0 failed)" in err, err  # each counted once
    final = status(env)
    assert final | {"cost_usd": None} == {"batch_id": "q", "items": 60, "queued": 0, "running": 0, "done": 60,
                                          "failed": 0, "cost_usd": None, "provider_batches": []}  # fmt: skip
    with psycopg.connect(url) as conn:  # one result per item, no run written twice or left over
        rows = conn.execute("SELECT count(*), count(DISTINCT item_id) FROM batch_items WHERE batch_id = 'q'").fetchone()
        runs = conn.execute("SELECT count(*) FROM judgment_runs").fetchone()[0]
        calls = conn.execute(  # two passes an item, each asked once: no item judged twice
            "SELECT count(*), count(*) FILTER (WHERE session_id NOT IN (SELECT id FROM judgment_runs)) FROM calls"
        ).fetchone()
    assert rows == (60, 60) and runs == 60 and calls == (120, 0)

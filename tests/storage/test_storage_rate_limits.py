"""One rate budget across processes (GCRA in one row per key), on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from council.storage.rate_limits import wait_after


def test_the_gcra_waits_follow_the_theoretical_arrival_time():
    assert wait_after(new_tat=10.5, now=10.0, increment=0.5, tolerance=0.0) == 0.0  # first call: at once
    assert wait_after(new_tat=11.0, now=10.0, increment=0.5, tolerance=0.0) == 0.5
    assert wait_after(new_tat=11.0, now=10.0, increment=0.5, tolerance=0.5) == 0.0  # a burst of two


def test_reservations_in_one_process_are_spaced_by_the_interval(url_store):
    starts = [time.monotonic() + url_store.reserve_rate("rpm:x", 0.5) for _ in range(4)]
    assert [round(b - a, 1) for a, b in zip(starts, starts[1:], strict=False)] == [0.5, 0.5, 0.5]
    # Another key has its own budget; a burst tolerance lets that many start at once.
    assert [url_store.reserve_rate("rpm:y", 0.5, tolerance=1.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert url_store.reserve_rate("rpm:y", 0.5, tolerance=1.0) > 0.4


_RESERVER = textwrap.dedent(
    """
    import json, sys, time
    from council.storage import open_store
    store = open_store()
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    starts = []
    for _ in range(int(sys.argv[1])):
        wait = store.reserve_rate("rpm:shared", float(sys.argv[2]))
        starts.append(time.time() + wait)
    print(json.dumps(starts), flush=True)
    """
)


def test_four_processes_share_one_budget_exactly(backend_url):
    interval, per_process, processes = 0.01, 25, 4
    env = {**os.environ, "COUNCIL_DATABASE_URL": backend_url}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RESERVER, str(per_process), str(interval)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    starts = sorted(s for p in procs for s in json.loads(p.communicate(timeout=120)[0]))
    assert len(starts) == processes * per_process
    # The starts are one interval apart whichever process reserved them: 100 calls take 99
    # intervals, and no window holds more than its share. A process descheduled between the
    # reservation and its clock read sees its start late: allow 20 ms of that (2 cores shared).
    assert starts[-1] - starts[0] >= (len(starts) - 1) * interval * 0.99
    window, jitter = 0.25, 0.02
    most = max(sum(1 for t in starts if s <= t < s + window) for s in starts)
    assert most <= (window + jitter) / interval + 1, most


def test_a_council_model_with_rpm_waits_on_the_shared_budget(url_store):
    from council.api import Council

    config = {
        "councils": {"default": {"members": ["a", "b"], "chairman": "a"}},
        "models": {"a": {"model": "fake/a", "rpm": 1200, "max_concurrency": 1}, "b": {"model": "fake/b"}},
    }
    # Another process has just used the budget for the next 0.5 s.
    key = "rpm:a:fake/a"
    for _ in range(10):
        url_store.reserve_rate(key, 60 / 1200)
    council = Council.from_config(config, store=url_store)
    started = time.monotonic()
    result = council.run_sync("What is 2+2?")
    assert result.status in ("complete", "partial")
    assert time.monotonic() - started >= 0.45

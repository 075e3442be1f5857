"""The store's budget ledger (a batch's cap): one budget for every process sharing the store,
never overshot by concurrent reservations; a dead process's reservation counts as spent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from council.storage import SQLiteStore

WORKER = textwrap.dedent(
    """
    import sys, time
    from council.storage import SQLiteStore

    store = SQLiteStore.open(sys.argv[1])
    taken = 0
    while True:
        token, spent, cap = store.reserve_budget("batch:x", 2**-8)  # exact in binary
        if token is None:
            break
        time.sleep(0.002)  # the call in flight, while the others reserve
        store.settle_budget("batch:x", token, 2**-8)
        taken += 1
    print(taken)
    """
)


def test_a_new_cap_replaces_the_old_one_and_spending_is_kept(tmp_path):
    store = SQLiteStore.open(tmp_path / "c.db")
    assert store.open_budget("batch:x", cap_usd=None) is None
    assert store.open_budget("batch:x", cap_usd=1.0, spent_usd=0.25) == 1.0
    token, spent, cap = store.reserve_budget("batch:x", 0.5)
    assert token is not None and (spent, cap) == (0.25, 1.0)
    assert store.reserve_budget("batch:x", 0.5)[0] is None  # 0.25 + 0.5 reserved + 0.5 > 1
    store.settle_budget("batch:x", token, 0.125)
    assert store.budget_totals("batch:x") == (0.375, 1.0)
    assert store.open_budget("batch:x", cap_usd=2.0, spent_usd=99) == 2.0
    assert store.budget_totals("batch:x") == (0.375, 2.0)  # spending is not reset
    assert store.open_budget("batch:x", cap_usd=None) == 2.0


def test_processes_sharing_the_store_never_reserve_past_the_cap(tmp_path):
    path = tmp_path / "c.db"
    store = SQLiteStore.open(path)
    store.open_budget("batch:x", cap_usd=1.0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(path)], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(4)
    ]
    taken = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(taken) == 256  # exactly the cap, never one more, whoever reserved
    assert sum(1 for n in taken if n) >= 2  # they did compete
    assert store.budget_totals("batch:x") == (1.0, 1.0)


def test_a_dead_process_reservation_counts_as_spent(tmp_path):
    path = tmp_path / "c.db"
    store = SQLiteStore.open(path)
    store.open_budget("batch:x", cap_usd=1.0)
    script = textwrap.dedent(
        """
        import os, sys
        from council.storage import SQLiteStore
        store = SQLiteStore.open(sys.argv[1])
        store.reserve_budget("batch:x", 0.4)
        os._exit(0)  # dies with its call in flight
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COUNCIL_LEASE_SECONDS": "1"}
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env, timeout=60)
    assert store.reserve_budget("batch:x", 0.7)[0] is None  # still reserved while nobody looked
    time.sleep(1.1)  # its lease passes
    store.open_budget("batch:x", cap_usd=None)  # the next run of the batch
    assert store.budget_totals("batch:x") == (pytest.approx(0.4), 1.0)
    assert store.reserve_budget("batch:x", 0.6)[0] is not None

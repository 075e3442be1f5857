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
    from concurrent.futures import ThreadPoolExecutor
    from council.storage import open_store

    store = open_store()
    print("ready", flush=True)
    sys.stdin.readline()  # start together

    def reserver(_):
        taken = 0
        while True:
            token, spent, cap = store.reserve_budget("batch:x", 2**-8)  # exact in binary
            if token is None:
                return taken
            time.sleep(0.002)  # the call in flight, while the others reserve
            store.settle_budget("batch:x", token, 2**-8)
            taken += 1

    # A store used from several threads (PostgreSQL) reserves from several at once, as a batch does.
    with ThreadPoolExecutor(8 if store.threadsafe else 1) as pool:
        print(sum(pool.map(reserver, range(8 if store.threadsafe else 1))))
    store.close()
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


def test_processes_sharing_the_store_never_reserve_past_the_cap(url_store, backend_url):
    url_store.open_budget("batch:x", cap_usd=1.0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COUNCIL_DATABASE_URL": backend_url}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(4)]  # fmt: skip
    assert all(p.stdout.readline() == "ready\n" for p in procs)
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    taken = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(taken) == 256  # exactly the cap, never one more, whoever reserved
    assert sum(1 for n in taken if n) >= 2  # they did compete
    assert url_store.budget_totals("batch:x") == (1.0, 1.0)


def test_a_dead_process_reservation_counts_as_spent(url_store, backend_url):
    store = url_store
    store.open_budget("batch:x", cap_usd=1.0)
    script = textwrap.dedent(
        """
        import os
        from council.storage import open_store
        store = open_store()
        store.reserve_budget("batch:x", 0.4)
        os._exit(0)  # dies with its call in flight
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COUNCIL_LEASE_SECONDS": "1",
           "COUNCIL_DATABASE_URL": backend_url}  # fmt: skip
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=60)
    assert store.reserve_budget("batch:x", 0.7)[0] is None  # still reserved while nobody looked
    time.sleep(1.1)  # its lease passes
    store.open_budget("batch:x", cap_usd=None)  # the next run of the batch
    assert store.budget_totals("batch:x") == (pytest.approx(0.4), 1.0)
    assert store.reserve_budget("batch:x", 0.6)[0] is not None

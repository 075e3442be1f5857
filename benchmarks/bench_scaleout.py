"""Benchmark: one batch judged by 1, 2 and 4 `council worker` processes on one PostgreSQL.

    python benchmarks/bench_scaleout.py                   # 400 items a worker, mock latency 0.25 s
    python benchmarks/bench_scaleout.py --items 800 --latency 0.5 --concurrency 8
    python benchmarks/bench_scaleout.py --part rpm        # 4 servers share a 600-rpm budget (bench_scaleout_rpm.py)

Each run enqueues a batch of ``--items`` × N items into a fresh database (every run gives
each worker the same work, so a worker's start-up weighs the same in each) and starts N worker
processes (``--concurrency`` items each) against the mock LLM server (a fixed latency per
call, two calls per item: a swap pair). Throughput is items per second from the first
worker's start to the last one's exit, and from the first result to the last (start-up left
out); the ratio to one worker's should be close to N (goal ≥ 0.9 × N) until the mock, the
database or this machine's CPU binds. The report says which: the cores used by the workers,
the mock and the PostgreSQL server (all its processes) against the machine's, and the
throughput against the mock's latency bound. Then a worker is killed with SIGKILL mid-run
and a second one finishes the batch: lost items (not done) and duplicated results (more than
one per item) must both be 0; calls asked again (the killed worker's in-flight items) are counted.

The PostgreSQL server is a throwaway one (scripts/postgres_test_server.sh) unless
``COUNCIL_TEST_POSTGRES_URL`` names one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import database_cpu, process_cpu  # also puts the package and tests/ on sys.path

ROOT = Path(__file__).resolve().parents[1]


def council(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip


def enqueue(tmp: Path, url: str, mock_url: str, items: int, concurrency: int) -> tuple[dict[str, str], Path]:
    env = {**os.environ, "COUNCIL_HOME": str(tmp), "COUNCIL_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cfg = tmp / "judge.toml"
    # Both passes of every item in flight at once: the judge's own limit is not what binds.
    cfg.write_text(f'[models.j]\nmodel = "openai/mock-judge"\napi_base = "{mock_url}"\nretries = 0\n'
                   f"max_concurrency = {2 * concurrency}\n")  # fmt: skip
    path = tmp / "batch.jsonl"
    rows = [{"id": f"p{i}", "prompt": f"Question {i}?", "a": f"Answer A {i}.", "b": f"B {i}."} for i in range(items)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = council("batch", str(path), "--config", str(cfg), "--judge", "j", "--enqueue", "--batch-id", "bench",
                   env=env)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return env, cfg


def workers(n: int, env: dict[str, str], cfg: Path, concurrency: int, *extra: str) -> list[subprocess.Popen[str]]:
    args = ["worker", "--batch-id", "bench", "--config", str(cfg), "--concurrency", str(concurrency), *extra]
    return [subprocess.Popen([sys.executable, "-m", "council", *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]  # fmt: skip


def status(env: dict[str, str]) -> dict:
    return json.loads(council("batch", "status", "bench", "--json", env=env).stdout)


def results_per_item(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT bi.item_id, count(*) FROM batch_items bi JOIN judgment_runs r ON r.id = bi.run_id"
            " WHERE bi.batch_id = 'bench' GROUP BY bi.item_id"
        ).fetchall()
    return {item: n for item, n in rows}


def finished_span(url: str) -> float:
    """Seconds from the first item recorded to the last (worker start-up and exit left out)."""
    from datetime import datetime

    import psycopg

    with psycopg.connect(url) as conn:
        first, last = conn.execute("SELECT min(finished_at), max(finished_at) FROM batch_items").fetchone()
    return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()


def scale(server, n: int, args: argparse.Namespace, mock) -> dict[str, float]:
    url = server.fresh_database(migrated=True)
    items = args.items * n
    try:
        with tempfile.TemporaryDirectory(prefix="council-scale-") as tmp:
            env, cfg = enqueue(Path(tmp), url, mock.base_url, items, args.concurrency)
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            mock0, db0 = process_cpu(mock.process.pid), database_cpu(server)
            t0 = time.perf_counter()
            procs = workers(n, env, cfg, args.concurrency)
            for proc in procs:
                _, err = proc.communicate()
                if proc.returncode != 0:
                    raise SystemExit(err)
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            mock_cores = (process_cpu(mock.process.pid) - mock0) / wall
            db1 = database_cpu(server)
            steady = (items - 1) / finished_span(url)
            done = status(env)["done"]
            assert done == items, done
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        db_cores = (db1 - db0) / wall if db0 is not None and db1 is not None else float("nan")
        return {"rate": items / wall, "steady": steady, "workers": cpu / wall, "mock": mock_cores, "db": db_cores,
                "cpu_ms_per_item": 1000 * cpu / items, "db_ms_per_item": 1000 * db_cores * wall / items}  # fmt: skip
    finally:
        server.drop_database(url)


def binds(run: dict[str, float], ideal: float) -> str:
    """Which resource holds the throughput back: the mock's latency, or the machine's cores
    (its load average counts every runnable process, this run's and everyone else's)."""
    if run["steady"] >= 0.9 * ideal:
        return "the mock's latency binds"
    used = run["workers"] + run["mock"] + (0 if math.isnan(run["db"]) else run["db"])
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load >= 0.9 * cores:
        return f"the CPU binds (load {load:.1f} on {cores} cores; this run used {used:.2f})"
    return f"neither the mock nor the CPU (load {load:.1f} on {cores} cores): the store's round trips"


def kill_one(server, args: argparse.Namespace, mock) -> None:
    url = server.fresh_database(migrated=True)
    try:
        with tempfile.TemporaryDirectory(prefix="council-kill-") as tmp:
            env, cfg = enqueue(Path(tmp), url, mock.base_url, args.items, args.concurrency)
            before = len(mock.logged_requests())
            lease = ("--lease-seconds", "3")
            [doomed, other] = workers(2, env, cfg, args.concurrency, *lease)
            while status(env)["done"] < args.items // 4:
                time.sleep(0.1)
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
            _, err = other.communicate()
            if other.returncode != 0:
                raise SystemExit(err)
            final = status(env)
            per_item = results_per_item(url)
            calls = len(mock.logged_requests()) - before
        lost = args.items - final["done"]
        duplicated = sum(n - 1 for n in per_item.values() if n > 1)
        repeated = calls - 2 * args.items
        print(f"kill -9 of one of 2 workers at {args.items // 4} items done: {lost} lost, {duplicated} duplicated "
              f"results, {repeated} calls asked again (the killed worker's items in flight)")  # fmt: skip
    finally:
        server.drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400, help="items per worker in each run")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per mock call")
    parser.add_argument("--concurrency", type=int, default=8, help="items in flight per worker")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--part", choices=("workers", "rpm"), default="workers")
    import bench_scaleout_rpm

    bench_scaleout_rpm.add_arguments(parser)
    args = parser.parse_args()
    if args.part == "rpm":
        bench_scaleout_rpm.run(args)
        return
    from mock_server import start_mock_server
    from postgres_server import Server

    server = Server()
    server.start()
    if server.url is None:
        raise SystemExit(f"no PostgreSQL server: {server.problem}")
    try:
        with tempfile.TemporaryDirectory() as logs, start_mock_server(
            latency=args.latency, log_requests=Path(logs) / "requests.jsonl"
        ) as mock:
            print(f"{args.items} items a worker, 2 calls each, mock latency {args.latency}s, {args.concurrency} items "
                  f"in flight per worker, {os.cpu_count()} CPU cores")  # fmt: skip
            base = steady_base = None
            for n in (int(x) for x in args.workers.split(",")):
                load = os.getloadavg()[0]
                run = scale(server, n, args, mock)
                rate, steady = run["rate"], run["steady"]
                base, steady_base = base or rate, steady_base or steady
                ideal = args.concurrency * n / args.latency  # an item's two passes run at once
                print(f"{n} worker(s), {args.items * n} items, load {load:.1f}: {rate:6.1f} items/s start to exit "
                      f"= {rate / base:4.2f} x one worker's; first to last result {steady:6.1f} items/s = "
                      f"{steady / steady_base:4.2f} x (goal >= {0.9 * n:.1f}; latency-bound ideal {ideal:6.1f}); "
                      f"cores used: workers {run['workers']:4.2f}, mock {run['mock']:4.2f}, PostgreSQL "
                      f"{run['db']:4.2f}; CPU per item: workers {run['cpu_ms_per_item']:.2f} ms, PostgreSQL "
                      f"{run['db_ms_per_item']:.2f} ms; {binds(run, ideal)}")  # fmt: skip
            kill_one(server, args, mock)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

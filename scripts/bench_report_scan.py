"""Benchmark: the whole ``council bias-report --json`` process beside plain scans of its data.

    python scripts/bench_report_scan.py                          # 1,000,000 records in a temp home
    python scripts/bench_report_scan.py --records 200000 --home /tmp/scan-home
    python scripts/bench_report_scan.py --home /tmp/scan-home --reuse

Writes the synthetic records of scripts/bench_bias_report.py through the store's batch insert
(``Store.insert_bias_records``, one transaction per batch; goal ≥ 200,000 records/s), then, best
of ``--repeat`` each, interleaved so both see the same machine: the whole report process
(interpreter start, imports, every query, the JSON) and, with plain ``sqlite3`` on the same
file, the two aggregates the report cannot do without: one ``GROUP BY session_id, model_id``
(per answer: count, mean score, length) and one ``GROUP BY reviewer_id`` (per reviewer: count,
mean, sum of squares), each fetched in full. Goal: the report ≤ 1.5 × the slower aggregate.
The machine may be shared: the ratios are what to compare between runs; the load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_bias_report import add_record_options, sessions  # noqa: E402

from council.storage import open_store  # noqa: E402

GOAL_RATIO = 1.5
GOAL_WRITES = 200_000

AGGREGATES = {
    "GROUP BY session_id, model_id": (
        "SELECT session_id, model_id, count(*), avg(score_value), max(response_length_chars) "
        "FROM bias_records GROUP BY session_id, model_id"
    ),
    "GROUP BY reviewer_id": (
        "SELECT reviewer_id, count(*), avg(score_value), sum(score_value * score_value) "
        "FROM bias_records GROUP BY reviewer_id"
    ),
}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write(db_path: Path, records: int, batch: int, seed: int) -> None:
    store = open_store(db_path)
    rows = sessions(records, seed)
    written, insert, generate = 0, 0.0, 0.0
    while True:
        t0 = time.perf_counter()
        chunk = list(itertools.islice(rows, batch))
        generate += time.perf_counter() - t0
        if not chunk:
            break
        t0 = time.perf_counter()
        written += store.insert_bias_records(chunk, batch_size=batch)
        insert += time.perf_counter() - t0
    store.close()
    rate = written / insert
    print(
        f"wrote {written:,} records in batches of {batch:,} (one transaction each): {insert:.2f} s, "
        f"{rate:,.0f} records/s (+ {generate:.1f} s generating them)"
    )
    print(f"goal ≥ {GOAL_WRITES:,} records/s: {'PASS' if rate >= GOAL_WRITES else 'MISS'} ({rate:,.0f})")


def scan(db_path: Path, sql: str) -> float:
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        conn.execute(sql).fetchall()
    finally:
        conn.close()
    return time.perf_counter() - t0


def report(db_path: Path) -> float:
    env = {**os.environ, "COUNCIL_HOME": str(db_path.parent)}
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "council", "bias-report", "--json"], env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bias-report failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_record_options(parser)
    parser.add_argument("--repeat", type=int, default=3, help="timings of each (best is compared)")
    parser.add_argument("--reuse", action="store_true", help="--home already holds the records: only time")
    args = parser.parse_args()
    print("$ python " + " ".join(["scripts/bench_report_scan.py", *sys.argv[1:]]))
    print(f"load average before: {loadavg()} on {os.cpu_count()} cores")

    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="council-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    db_path = args.home / "council.db"
    if args.reuse != db_path.exists():
        sys.exit(f"--reuse needs {db_path} to exist" if args.reuse else f"{db_path} exists: give --reuse")
    if not args.reuse:
        write(db_path, args.records, args.batch, args.seed)

    times: dict[str, list[float]] = {"report": [], **{name: [] for name in AGGREGATES}}
    for _ in range(args.repeat):
        times["report"].append(report(db_path))
        for name, sql in AGGREGATES.items():
            times[name].append(scan(db_path, sql))
    rows = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True).execute("SELECT count(*) FROM bias_records")
    print(f"over {rows.fetchone()[0]:,} records, best of {args.repeat} each, interleaved:")
    for name, runs in times.items():
        label = "council bias-report --json (whole process)" if name == "report" else f"sqlite3 {name}"
        print(f"  {label:<45} {min(runs):6.2f} s   ({' / '.join(f'{t:.2f}' for t in runs)})")
    slowest = max(min(times[name]) for name in AGGREGATES)
    ratio = min(times["report"]) / slowest
    print(f"load average after: {loadavg()}")
    print(
        f"goal report ≤ {GOAL_RATIO} × the slower aggregate: {'PASS' if ratio <= GOAL_RATIO else 'MISS'}"
        f" ({ratio:.2f} ×)"
    )
    if tmp is not None:
        tmp.cleanup()
    return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the whole ``council bias-report --json`` process beside plain scans of its data.

    python benchmarks/bench_report_scan.py                          # 1,000,000 records in a temp home
    python benchmarks/bench_report_scan.py --records 200000 --home /tmp/scan-home
    python benchmarks/bench_report_scan.py --home /tmp/scan-home --reuse
    python benchmarks/bench_report_scan.py --database-url postgresql://council@/postgres?host=/tmp/pg

Writes the synthetic records of benchmarks/bench_bias_report.py through the store's batch insert
(``Store.insert_bias_records``, one transaction per batch: executemany on SQLite, COPY on
PostgreSQL; goal ≥ 200,000 records/s) and, on SQLite, each batch in turn the same rows into the
same table on a bare sqlite3 connection (SQLite alone: the floor of the store's writes); then,
best of ``--repeat`` each, interleaved so both see the same machine: the whole report process
(interpreter start, imports, every query, the JSON) and, with a bare connection to the same
data (``sqlite3``, or psycopg for ``--database-url``), the two aggregates the report cannot do
without: one ``GROUP BY session_id, model_id`` (per answer: count, mean score, length) and one
``GROUP BY reviewer_id`` (per reviewer: count, mean, sum of squares), each fetched in full.
Goal: the report ≤ 1.5 × the per-answer aggregate, the one that reads a covering index of its
own (since m017 the reviewer aggregate has no index: the report sums reviewers in its
per-review pass, so that aggregate sorts and is no bound).
The machine may be shared: the ratios are what to compare between runs; the load average is
printed before and after, and the write's CPU time (this process's: on PostgreSQL the
server's is not counted) beside its wall time.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_bias_report import add_record_options, sessions  # noqa: E402
from bench_common import loadavg  # noqa: E402

from council.storage import open_location, open_store  # noqa: E402
from council.storage.bias_rows import record_rows  # noqa: E402
from council.storage.location import parse as parse_location  # noqa: E402

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


BOUND = "GROUP BY session_id, model_id"


def write(db_path: Path, url: str | None, records: int, batch: int, seed: int) -> None:
    store = open_location(parse_location(url)) if url else open_store(db_path)
    floor = None if url else bare_table(db_path, db_path.with_name("sqlite-alone.db"))
    rows = sessions(records, seed)
    written, insert, cpu, generate, bare = 0, 0.0, 0.0, 0.0, 0.0
    while True:
        t0 = time.perf_counter()
        chunk = list(itertools.islice(rows, batch))
        generate += time.perf_counter() - t0
        if not chunk:
            break
        t0, c0 = time.perf_counter(), time.process_time()
        written += store.insert_bias_records(chunk, batch_size=batch)
        insert += time.perf_counter() - t0
        cpu += time.process_time() - c0
        if floor is not None:  # the same batch, in turn with council's: both see the same machine
            bare += bare_insert(floor, chunk)
    store.close()
    rate = written / insert
    print(
        f"wrote {written:,} records in batches of {batch:,} (one transaction each): {insert:.2f} s, "
        f"{rate:,.0f} records/s; this process's CPU {cpu:.2f} s = {written / cpu:,.0f} records per CPU second "
        f"(+ {generate:.1f} s generating them)"
    )
    if floor is not None:
        floor.close()
        print(
            f"SQLite alone (the same batches into the same table, its CHECK and its index, on a bare sqlite3 "
            f"connection: no summaries, no checkpoint): {bare:.2f} s, {written / bare:,.0f} records/s; "
            f"council {rate / (written / bare):.2f} × that"
        )
    print(f"goal ≥ {GOAL_WRITES:,} records/s: {'PASS' if rate >= GOAL_WRITES else 'MISS'} ({rate:,.0f})")


def bare_table(db_path: Path, floor_path: Path) -> sqlite3.Connection:
    """A file holding ``bias_records`` as council's store creates it (the table with its CHECK
    constraint, and its index) and nothing else, on a plain sqlite3 connection with the store's
    journal (WAL, ``synchronous = NORMAL``) and no checkpoint: the least SQLite does to keep the
    rows. The floor of the store's writes."""
    with sqlite3.connect(db_path) as source:  # the table first, then its index
        ddl = source.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'bias_records' AND sql IS NOT NULL "
            "ORDER BY type = 'table' DESC"
        ).fetchall()
    floor_path.unlink(missing_ok=True)
    conn = sqlite3.connect(floor_path, isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "wal_autocheckpoint = 0"):
        conn.execute(f"PRAGMA {pragma}")
    for (sql,) in ddl:
        conn.execute(sql)
    return conn


def bare_insert(conn: sqlite3.Connection, chunk: list[dict[str, Any]]) -> float:
    """Seconds to insert ``chunk`` in one transaction with one prepared statement (its rows made
    before the clock starts)."""
    columns, rows = record_rows(chunk)
    sql = f"INSERT INTO bias_records ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(sql, rows)
    conn.execute("COMMIT")
    return time.perf_counter() - t0


def connect(db_path: Path, url: str | None) -> Any:
    if url:
        import psycopg

        return psycopg.connect(url, autocommit=True)
    return sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)


def scan(db_path: Path, url: str | None, sql: str) -> tuple[float, float]:
    """(wall, CPU) seconds; the CPU is this process's, so SQLite's work (PostgreSQL's is the server's)."""
    t0, c0 = time.perf_counter(), time.process_time()
    conn = connect(db_path, url)
    try:
        conn.execute(sql).fetchall()
    finally:
        conn.close()
    return time.perf_counter() - t0, time.process_time() - c0


def report(db_path: Path, url: str | None) -> float:
    env = {**os.environ, "COUNCIL_HOME": str(db_path.parent)}
    env.pop("COUNCIL_DATABASE_URL", None)
    if url:
        env["COUNCIL_DATABASE_URL"] = url
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "council", "bias-report", "--json"], env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bias-report failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_record_options(parser)
    parser.add_argument("--repeat", type=int, default=3, help="timings of each (best is compared)")
    parser.add_argument("--reuse", action="store_true", help="--home already holds the records: only time")
    parser.add_argument("--database-url", help="a PostgreSQL database to write and report from instead")
    args = parser.parse_args()
    url = args.database_url
    print("$ python " + " ".join(["benchmarks/bench_report_scan.py", *sys.argv[1:]]))
    print(f"load average before: {loadavg()} on {os.cpu_count()} cores")

    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="council-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    db_path = args.home / "council.db"
    if url:
        with connect(db_path, url) as conn:
            stored = (
                conn.execute("SELECT to_regclass('bias_records') IS NOT NULL").fetchone()[0]
                and conn.execute("SELECT EXISTS (SELECT 1 FROM bias_records)").fetchone()[0]
            )
        if args.reuse != bool(stored):
            sys.exit("--reuse needs records in the database" if args.reuse else "the database has records: --reuse")
    elif args.reuse != db_path.exists():
        sys.exit(f"--reuse needs {db_path} to exist" if args.reuse else f"{db_path} exists: give --reuse")
    if not args.reuse:
        write(db_path, url, args.records, args.batch, args.seed)
    if url:  # fresh statistics for the planner, as autovacuum would have them after a bulk load
        with connect(db_path, url) as conn:
            conn.execute("VACUUM ANALYZE bias_records")

    times: dict[str, list[tuple[float, float]]] = {"report": [], **{name: [] for name in AGGREGATES}}
    for _ in range(args.repeat):
        times["report"].append(report(db_path, url))
        for name, sql in AGGREGATES.items():
            times[name].append(scan(db_path, url, sql))
    with connect(db_path, url) as conn:
        count = conn.execute("SELECT count(*) FROM bias_records").fetchone()[0]
    print(f"over {count:,} records ({'PostgreSQL' if url else 'SQLite'}), best of {args.repeat} each, interleaved:")
    for name, runs in times.items():
        label = "council bias-report --json (whole process)" if name == "report" else f"aggregate {name}"
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"  {label:<45} {min(walls):6.2f} s   ({' / '.join(f'{t:.2f}' for t in walls)}); CPU {min(cpus):.2f} s")
    ratio = min(w for w, _ in times["report"]) / min(w for w, _ in times[BOUND])
    print(f"load average after: {loadavg()}")
    if not url:  # under load, wall time follows the share of a core a process gets; CPU does not
        cpu_ratio = min(c for _, c in times["report"]) / min(c for _, c in times[BOUND])
        print(f"CPU: report {cpu_ratio:.2f} × the {BOUND} aggregate (the whole process's CPU, best of each)")
    print(
        f"goal report ≤ {GOAL_RATIO} × the {BOUND} aggregate: {'PASS' if ratio <= GOAL_RATIO else 'MISS'}"
        f" ({ratio:.2f} ×)"
    )
    if tmp is not None:
        tmp.cleanup()
    return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())

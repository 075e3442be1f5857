"""Benchmark: the whole ``council export`` process beside a bare export of the same rows.

    python benchmarks/bench_export.py                  # 20,000 sessions, 300,000 bias records, 200,000 judged pairs
    python benchmarks/bench_export.py --scale 0.25     # a quarter of each
    python benchmarks/bench_export.py --database-url postgresql://council@/postgres?host=/tmp/pg

Builds a store: one real five-member session (run against the mock LLM server in
``scripts/mock_llm_server.py``, so its stored result has every part a session has, ~10 kB)
written again under new ids and times; the synthetic bias records of benchmarks/bench_bias_report.py
through the store's batch insert; judged pairs with their lengths, markdown counts and prompt
ids. With ``--database-url`` all of it is copied into that PostgreSQL database (``council store
copy``'s code) and both sides read from there.

Then, best of ``--repeat`` each, interleaved: ``council export`` (sessions), ``export
--bias-records`` and ``export --judged-pairs`` as whole processes writing a file, against a bare
process reading the same rows with the driver alone (``sqlite3``, or psycopg's row-by-row
``stream``) and writing each as one JSON line (a session's stored result decoded and encoded
again), the least an export takes. Printed: wall and CPU time, the process's peak memory
(``ru_maxrss``), council ÷ bare. Goals: every export's peak memory under 100 MiB at any size (it
reads a page at a time), and its wall time ≤ 1.5 × the bare export's.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_common import loadavg  # also puts the package and tests/ on sys.path

GOAL_PEAK_MIB = 100
GOAL_RATIO = 1.5
REPO = Path(__file__).resolve().parent.parent
MODELS = [f"provider/model-{k}" for k in range(8)]

# What each export reads, for the bare process: the same rows in the same order.
KINDS = {
    "sessions": ([], "SELECT * FROM sessions ORDER BY created_at, id"),
    "bias records": (["--bias-records"], "SELECT * FROM bias_records ORDER BY id"),
    "judged pairs": (
        ["--judged-pairs"],
        "SELECT id, created_at, model_a, model_b, winner, length_a, length_b, prompt_id, headers_a, lists_a, "
        "bold_a, headers_b, lists_b, bold_b FROM judgment_runs WHERE kind = 'compare' AND status = 'ok' "
        "ORDER BY created_at, id",
    ),
}

BARE = """
import json, sys
kind, sql, source, out = sys.argv[1:5]
if source.startswith("postgresql"):
    import psycopg
    from psycopg.rows import dict_row
    conn = psycopg.connect(source, row_factory=dict_row)
    rows = conn.cursor().stream(sql)
else:
    import sqlite3
    conn = sqlite3.connect(source)
    conn.row_factory = lambda cur, row: dict(zip([c[0] for c in cur.description], row))
    rows = conn.execute(sql)
with open(out, "w", encoding="utf-8") as fh:
    for row in rows:
        if kind == "sessions" and row["result"]:
            row["result"] = json.loads(row["result"])
        fh.write(json.dumps(row, ensure_ascii=False) + "\\n")
"""


def one_session(home: Path) -> dict[str, Any]:
    """A real five-member session against the mock, as stored (kept: its answers, reviews and
    calls are its rows')."""
    from bench_common import council_config
    from mock_server import start_mock_server

    from council import Council

    async def run(base_url: str) -> None:
        async with Council.from_config(council_config(base_url, 5, max_concurrency=5)) as council:
            result = await council.run("Why is the sky blue? Explain it for a curious ten-year-old.", seed=1)
            if result.status != "complete":
                raise SystemExit(f"the session is {result.status}")

    with start_mock_server(latency=0.0) as server:
        asyncio.run(run(server.base_url))
    conn = sqlite3.connect(home / "council.db")
    conn.row_factory = sqlite3.Row
    row = dict(conn.execute("SELECT * FROM sessions WHERE result IS NOT NULL").fetchone())
    conn.close()
    return row


def build(home: Path, n_sessions: int, n_records: int, n_pairs: int, seed: int, url: str | None) -> None:
    """The store, in its own process (``--build``): a child inherits its parent's peak memory as
    its own (Linux keeps ``ru_maxrss`` across exec), so the timing process stays small."""
    from bench_bias_report import sessions as bias_records

    from council.storage import SQLiteStore

    row = one_session(home)
    rng = random.Random(seed)
    store = SQLiteStore.open(home / "council.db")
    conn = store.db.conn
    columns = list(row)
    copies = []
    for i in range(n_sessions):
        copy = dict(row, id=str(uuid.UUID(int=rng.getrandbits(128), version=4)))
        copy["created_at"] = f"2026-01-{1 + i // 10_000 % 28:02d}T00:00:00.{i % 10_000:06d}+00:00"
        copies.append(tuple(copy[c] for c in columns))
    pairs = []
    for i in range(n_pairs):
        a, b = rng.sample(MODELS, 2)
        counts = [rng.randint(0, 9) for _ in range(6)]
        pairs.append((f"run-{i:08d}", "compare", "ok", "TIE" if i % 9 == 0 else rng.choice("AB"), a, b,
                      f"2026-02-01T00:00:00.{i:06d}+00:00", rng.randint(50, 3_000), rng.randint(50, 3_000),
                      f"{rng.getrandbits(256):064x}", *counts))  # fmt: skip
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(f"INSERT INTO sessions ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", copies)
    conn.executemany(
        "INSERT INTO judgment_runs (id, kind, status, winner, model_a, model_b, created_at, length_a, length_b, "
        "prompt_id, headers_a, lists_a, bold_a, headers_b, lists_b, bold_b) VALUES (" + ", ".join("?" * 16) + ")",
        pairs,
    )
    conn.execute("COMMIT")
    records = bias_records(n_records, seed)
    while chunk := list(itertools.islice(records, 50_000)):
        store.insert_bias_records(chunk, batch_size=len(chunk))
    store.close()
    if url:
        from council.storage import copy_into

        copy_into(url)


def child(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MiB) of one process, from its own accounting. ``cwd``: not the
    checkout's root, whose package ``python -m`` would import whatever PYTHONPATH says."""
    # Its errors go to a file, not a pipe: waiting on a child whose pipe is full would never end.
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            said = err.read().decode(errors="replace").strip()[-500:]
            raise SystemExit(f"{' '.join(argv[:4])} ... failed ({code}): {said}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=300_000, help="bias records")
    parser.add_argument("--pairs", type=int, default=200_000, help="judged pairs")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the three counts")
    parser.add_argument("--repeat", type=int, default=3, help="timings of each (best is compared)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", help="a PostgreSQL database to copy the store into and export from")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the store's process (build)
    args = parser.parse_args()
    n_sessions, n_records, n_pairs = (round(n * args.scale) for n in (args.sessions, args.records, args.pairs))
    if args.build:
        os.environ["COUNCIL_HOME"] = str(args.build)
        os.environ.pop("COUNCIL_DATABASE_URL", None)
        build(args.build, n_sessions, n_records, n_pairs, args.seed, args.database_url)
        return 0

    with tempfile.TemporaryDirectory(prefix="council-bench-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(REPO)}
        env.pop("COUNCIL_DATABASE_URL", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the checkout's modules compiled once, not each run
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, *sys.argv[1:], "--build", str(home)], check=True)
        source = str(home / "council.db")
        if args.database_url:
            env["COUNCIL_DATABASE_URL"] = source = args.database_url
        backend = "PostgreSQL" if args.database_url else "SQLite"
        print(f"built {n_sessions:,} sessions, {n_records:,} bias records, {n_pairs:,} judged pairs on {backend} "
              f"in {time.perf_counter() - t0:.1f} s; {os.cpu_count()} cores; load average {loadavg()}")  # fmt: skip
        print(f"best of {args.repeat} each, interleaved (wall s, CPU s, peak MiB)")
        print(f"{'export':<14}{'rows':>10}  {'council':>22}  {'bare':>22}  {'council/bare':>12}")
        worst_peak, worst_ratio = 0.0, 0.0
        for kind, (flags, sql) in KINDS.items():
            out = home / "out.jsonl"
            council = [sys.executable, "-m", "council", "-q", "export", *flags, "-o", str(out)]
            bare = [sys.executable, "-c", BARE, kind, sql, source, str(home / "bare.jsonl")]
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(child(council, env, home))
                theirs.append(child(bare, env, home))
            rows = lines(out)
            if rows != lines(home / "bare.jsonl"):
                raise SystemExit(f"{kind}: council wrote {rows} lines, the bare export {lines(home / 'bare.jsonl')}")
            (w, c, _), (bw, bc, bm) = min(ours), min(theirs)
            peak = max(x[2] for x in ours)
            ratio = w / bw
            worst_peak, worst_ratio = max(worst_peak, peak), max(worst_ratio, ratio)
            print(f"{kind:<14}{rows:>10,}  {w:7.2f} {c:6.2f} {peak:7.1f}  {bw:7.2f} {bc:6.2f} {bm:7.1f}  {ratio:12.2f}")
        print(f"load average after: {loadavg()}")
        verdict = "PASS" if worst_peak < GOAL_PEAK_MIB else "MISS"
        print(f"goal every export's peak memory < {GOAL_PEAK_MIB} MiB: {verdict} ({worst_peak:.1f} MiB)")
        verdict = "PASS" if worst_ratio <= GOAL_RATIO else "MISS"
        print(f"goal every export ≤ {GOAL_RATIO} × the bare export's wall time: {verdict} ({worst_ratio:.2f} ×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

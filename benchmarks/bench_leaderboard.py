"""Benchmark: build a database of council sessions (and judged pairs), then time ``council leaderboard``.

    python benchmarks/bench_leaderboard.py                        # 100,000 sessions + 10,000 judged pairs
    python benchmarks/bench_leaderboard.py --sessions 20000 --home /tmp/bench-home --bootstrap 1000

Each session has 4 members drawn from 8 models; every member reviews the other three
(self-review excluded), ranking them by a planted strength plus noise, so a session gives
12 pairwise comparisons. Judged pairs compare two of the models with a planted verdict
(ties included). The goal: the leaderboard of 100,000 sessions in a few seconds, with the
planted order recovered. Wall and CPU time are both printed: on a busy machine the CPU time
is the steadier figure. Rows are written straight into a migrated database, one
transaction, so that building it does not dominate the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from council.leaderboard.stored import leaderboard  # noqa: E402
from council.storage import SQLiteStore  # noqa: E402

MODELS = [
    "openai/gpt-4o",
    "anthropic/claude-3-5-sonnet",
    "google/gemini-1.5-pro",
    "mistral/mistral-large",
    "meta/llama-3.1-70b",
    "deepseek/deepseek-chat",
    "qwen/qwen-2.5-72b",
    "xai/grok-2",
]
STRENGTH = dict(zip(MODELS, [0.9, 0.8, 0.6, 0.3, 0.2, 0.5, 0.4, 0.0], strict=True))  # θ, natural log scale
NOISE = 1.0


def build(path: Path, n_sessions: int, n_judged: int, seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    sessions, answers, reviews, runs = [], [], [], []
    for i in range(n_sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        created = (start + timedelta(seconds=30 * i)).isoformat(timespec="microseconds")
        members = rng.sample(MODELS, 4)
        ids = [f"member-{k}" for k in range(4)]
        model_of = dict(zip(ids, members, strict=True))
        sessions.append((sid, created, created, "complete", "council", "default" if i % 4 else "research",
                         json.dumps(ids)))
        answers.extend((sid, m, model_of[m], "ok") for m in ids)
        for reviewer in ids:
            shown = [m for m in ids if m != reviewer]
            ranking = sorted(shown, key=lambda m: -(STRENGTH[model_of[m]] + rng.gauss(0, NOISE)))
            reviews.append((sid, reviewer, model_of[reviewer], json.dumps(ranking), 1))
    for i in range(n_judged):
        a, b = rng.sample(MODELS, 2)
        p = 1 / (1 + math.exp(STRENGTH[b] - STRENGTH[a]))
        u = rng.random()
        winner = "TIE" if abs(u - p) < 0.05 else ("A" if u < p else "B")
        created = (start + timedelta(seconds=300 * i)).isoformat(timespec="microseconds")
        runs.append((f"run-{i}", "compare", "ok", winner, a, b, created))
    store = SQLiteStore.open(path)
    conn = store.db.conn
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO sessions (id, created_at, finished_at, status, kind, council, members) VALUES (?,?,?,?,?,?,?)",
        sessions,
    )
    conn.executemany("INSERT INTO answers (session_id, member, model, status) VALUES (?,?,?,?)", answers)
    conn.executemany(
        "INSERT INTO reviews (session_id, reviewer, model, ranking, valid) VALUES (?,?,?,?,?)", reviews
    )
    conn.executemany(
        "INSERT INTO judgment_runs (id, kind, status, winner, model_a, model_b, created_at) VALUES (?,?,?,?,?,?,?)",
        runs,
    )
    conn.execute("COMMIT")
    store.close()


def best_of(repeat: int, fn):  # type: ignore[no-untyped-def]
    """Best wall time and best CPU time of ``repeat`` runs (CPU time is what a busy machine disturbs least)."""
    walls, cpus, value = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--judged", type=int, default=10_000)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--home", type=Path, help="COUNCIL_HOME to use (default: a temporary directory)")
    args = parser.parse_args()
    print("$ python " + " ".join([os.path.relpath(__file__), *sys.argv[1:]]))

    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="council-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    os.environ["COUNCIL_HOME"] = str(args.home)
    path = args.home / "council.db"
    if path.exists():
        print(f"using the existing {path}")
    else:
        t0 = time.perf_counter()
        build(path, args.sessions, args.judged, args.seed)
        print(f"built {args.sessions:,} sessions ({12 * args.sessions:,} pairwise comparisons) and "
              f"{args.judged:,} judged pairs in {time.perf_counter() - t0:.1f} s")

    store = SQLiteStore.open(path)
    try:
        wall, cpu, data = best_of(args.repeat, lambda: store.comparisons())
        print(f"SQL counting (comparisons()): {wall:.2f} s wall, {cpu:.2f} s CPU (best of {args.repeat}); "
              f"{len(data.sessions):,} distinct session patterns, {len(data.judgments)} judged-pair patterns")
        wall, cpu, board = best_of(args.repeat, lambda: leaderboard(store, bootstrap=args.bootstrap))
        print(f"library leaderboard(bootstrap={args.bootstrap}): {wall:.2f} s wall, {cpu:.2f} s CPU "
              f"(best of {args.repeat})")
    finally:
        store.close()
    order = [m.model for m in board.models]
    planted = sorted(MODELS, key=lambda m: -STRENGTH[m])
    print(f"  planted order recovered: {'yes' if order == planted else 'no'}; "
          f"widest 95% CI: {max(m.ci[1] - m.ci[0] for m in board.models if m.ci):.1f} points")

    command = [sys.executable, "-m", "council", "leaderboard", "--json", "--bootstrap", str(args.bootstrap)]
    cli_walls, cli_cpus = [], []
    for _ in range(args.repeat):
        t0, before = time.perf_counter(), os.times()
        proc = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), check=False)
        after = os.times()
        cli_walls.append(time.perf_counter() - t0)
        cli_cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
        if proc.returncode != 0:
            sys.exit(proc.stderr)
    print(f"CLI `python -m council leaderboard --json --bootstrap {args.bootstrap}`: {min(cli_walls):.2f} s wall, "
          f"{min(cli_cpus):.2f} s CPU (best of {args.repeat}, process start included)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()

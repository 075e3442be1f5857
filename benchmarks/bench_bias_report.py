"""Benchmark: write synthetic bias records, then time ``council bias-report``.

    python benchmarks/bench_bias_report.py                 # 1,000,000 records in a temp COUNCIL_HOME
    python benchmarks/bench_bias_report.py --records 200000 --home /tmp/bench-home

Sessions have 5 answering models and 4 reviewers drawn from 8 models; every reviewer
sees its own shuffled order. Planted effects, so the report has something to find:
a reviewer-specific harshness, a length bias (longer answers score higher), a
position bias (earlier positions score higher) and one model's preference for its
own answers. Records are written in batches, one
transaction per batch. The goal is a report in ≤ 2 s on 1 M records, for the whole
``council bias-report --json`` process (interpreter start, imports, the queries, the JSON).
``--reuse`` times the report again on a ``--home`` filled by an earlier run.
"""

from __future__ import annotations

import argparse
import itertools
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

from council.bias.report import bias_report  # noqa: E402
from council.storage import BiasQuery, SQLiteStore  # noqa: E402

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
HARSHNESS = dict(zip(MODELS, [-0.9, 0.8, 0.1, 0.0, -0.2, 0.3, -0.1, 0.4], strict=True))
POSITION_BONUS = [1.2, 0.6, 0.0, -0.6, -1.2]
SELF_PREFERENCE = {"anthropic/claude-3-5-sonnet": 1.0}
LENGTH_BIAS_PER_1000_CHARS = 0.5
GOAL_S = 2.0


def sessions(n_records: int, seed: int):
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    n_sessions = n_records // 20
    for i in range(n_sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        ts = (start + timedelta(seconds=30 * i)).isoformat(timespec="microseconds")
        council = "default" if i % 4 else "research"
        members = rng.sample(MODELS, 5)
        reviewers = rng.sample(MODELS, 4)
        lengths = {m: int(rng.lognormvariate(7.2, 0.5)) for m in members}
        words = {m: max(1, round(n / rng.uniform(5.0, 7.0))) for m, n in lengths.items()}
        quality = {m: rng.gauss(0, 0.8) for m in members}
        for reviewer in reviewers:
            order = members[:]
            rng.shuffle(order)
            for pos, m in enumerate(order):
                raw = (
                    6.5
                    + HARSHNESS[reviewer]
                    + quality[m]
                    + LENGTH_BIAS_PER_1000_CHARS * (lengths[m] - 1400) / 1000
                    + POSITION_BONUS[pos]
                    + (SELF_PREFERENCE.get(reviewer, 0.0) if reviewer == m else 0.0)
                    + rng.gauss(0, 1.0)
                )
                yield {
                    "schema_version": "1.2.0",
                    "session_id": sid,
                    "reviewer_id": reviewer,
                    "model_id": m,
                    "position": pos,
                    "response_length_chars": lengths[m],
                    "response_length_words": words[m],
                    "score_value": float(min(10, max(1, round(raw)))),
                    "query_hash": None,
                    "timestamp": ts,
                    "scale_min": 1,
                    "scale_max": 10,
                    "self_review": int(reviewer == m),
                    "council": council,
                }


def add_record_options(parser: argparse.ArgumentParser) -> None:
    """How many synthetic records, written in what batches, where, from which seed."""
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--home", type=Path, help="COUNCIL_HOME to use (default: a fresh temp dir)")
    parser.add_argument("--seed", type=int, default=7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_options(parser)
    parser.add_argument("--repeat", type=int, default=3, help="report timings to take (best is shown)")
    parser.add_argument("--reuse", action="store_true", help="--home already holds the records: only time reports")
    args = parser.parse_args()
    print("$ python benchmarks/bench_bias_report.py " + " ".join(sys.argv[1:]))

    tmp = None
    if args.home is None:
        tmp = tempfile.TemporaryDirectory(prefix="council-bench-")
        args.home = Path(tmp.name)
    args.home.mkdir(parents=True, exist_ok=True)
    os.environ["COUNCIL_HOME"] = str(args.home)
    db_path = args.home / "council.db"
    if db_path.exists() and not args.reuse:
        sys.exit(f"{db_path} exists; give an empty --home, or --reuse to time reports on it")
    if args.reuse and not db_path.exists():
        sys.exit(f"--reuse: {db_path} does not exist")

    store = SQLiteStore.open(db_path)
    generate = insert = 0.0
    written = 0
    rows = sessions(0 if args.reuse else args.records, args.seed)
    while True:
        t0 = time.perf_counter()
        batch = list(itertools.islice(rows, args.batch))
        generate += time.perf_counter() - t0
        if not batch:
            break
        t0 = time.perf_counter()
        written += store.insert_bias_records(batch, batch_size=args.batch)
        insert += time.perf_counter() - t0
    if written:
        print(
            f"wrote {written:,} records in batches of {args.batch:,} (one transaction each): "
            f"{insert:.1f} s, {written / insert:,.0f} records/s (+ {generate:.1f} s generating them)"
        )

    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        report = bias_report(store)
        best = min(best, time.perf_counter() - t0)
    print(f"library bias_report: {best:.2f} s (best of {args.repeat}) over {report.total_records:,} records")
    t0 = time.perf_counter()
    store.bias_sums(BiasQuery())  # every sum the report reads, from the summaries when they answer
    print(f"  of which the store's sums (record checks, every pass): {time.perf_counter() - t0:.2f} s")
    pb = report.position_bias
    print(
        f"  planted effects found: pooled length r = {report.length_correlation} {report.length_correlation_ci} "
        f"({report.sample_size:,} sessions, {report.confidence_level}); position means {pb.means} "
        f"(variance {pb.variance}, ANOVA p = {pb.test.p_value}); self-preference (adjusted) "
        + ", ".join(f"{m} {report.self_preference[m].adjusted_difference:+.2f}" for m in SELF_PREFERENCE)
    )
    store.close()

    env = {**os.environ, "COUNCIL_HOME": str(args.home)}
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "council", "bias-report", "--json"], env=env, capture_output=True, text=True
        )
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            print(f"CLI failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
            break
    else:
        best, median = min(times), sorted(times)[len(times) // 2]
        verdict = "PASS" if best <= GOAL_S else "MISS"
        print(
            f"CLI `python -m council bias-report --json`, whole process: best {best:.2f} s, median {median:.2f} s "
            f"of {args.repeat}; best ÷ goal = {best / GOAL_S:.2f}"
        )
        print(f"goal whole process ≤ {GOAL_S:g} s over {report.total_records:,} records: {verdict} ({best:.2f} s)")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()

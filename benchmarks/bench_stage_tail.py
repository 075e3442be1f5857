"""Benchmark: the whole session's latency under a heavy tail, with ``stage_grace`` auto and off.

    python benchmarks/bench_stage_tail.py
    python benchmarks/bench_stage_tail.py --core-python /tmp/peers/bin/python

One mock LLM server (``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1) with a seeded heavy
tail: each call waits ``--latency`` plus up to ``--jitter`` seconds, and ``--tail-rate`` of the
calls (10 %) ``--tail-factor`` times as long (10×); each call's delay is drawn from its own
request body, so a repeated request waits as long in every run. Five members (``--members``), the
default quorums (3 answers, 1 review), ``--sessions`` sessions (200), ``--concurrency`` at a
time, each with its own question and seed.

- council, ``stage_grace = "off"`` and ``"auto"``, in this process (``Council.run``); a session's
  time is its result's ``duration_ms``.
- the oracle: per session of the ``off`` run, each stage as long as its quorum-th fastest call
  (answers: the 3rd; reviews: the 1st; the chairman's call), summed, from the session's call log.
- llm-council-core (PyPI, pinned 0.53.0) in its own virtualenv (``--core-python``): the same
  questions, ``run_full_council`` timed around each session, the same concurrency.
  karpathy/llm-council is driven the same way given ``--karpathy-dir`` (a checkout).

Time is scaled: a realistic call of 2–3 s (tail 20–30 s) runs here as ``--scale`` (0.2) of it,
so 0.4–0.6 s; the ``"auto"`` rule's floor and cap (seconds) are scaled by the same factor, as if
the clock ran 5× fast. Its factor is a ratio and does not change. Percentiles are
nearest-rank over the sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import council_config  # also puts tests/ on sys.path

PEER_DRIVER = """
import asyncio, json, os, sys, time
url, n, sessions, concurrency, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
models = [f"mock/m{i}" for i in range(n)]
os.environ.update({"OPENROUTER_API_KEY": "unused", "LLM_COUNCIL_MODELS": ",".join(models),
                   "LLM_COUNCIL_CHAIRMAN": models[0]})
if kind == "core":
    import llm_council.openrouter as openrouter
    from llm_council.council import run_full_council
    openrouter.resolve_endpoint = lambda: (url + "/chat/completions", "unused", "openrouter")
    run = lambda q: run_full_council(q, bypass_cache=True, models=models)
else:
    sys.path.insert(0, os.getcwd())
    import backend.council as council
    import backend.openrouter as openrouter
    openrouter.OPENROUTER_API_URL = url + "/chat/completions"
    council.COUNCIL_MODELS, council.CHAIRMAN_MODEL = models, models[0]
    run = council.run_full_council
QUESTIONS = json.loads(sys.stdin.read())
async def main():
    gate = asyncio.Semaphore(concurrency)
    async def one(q):
        async with gate:
            t0 = time.perf_counter()
            stage1, stage2, *_ = await run(q)
            return time.perf_counter() - t0, len(stage1), len(stage2)
    return await asyncio.gather(*(one(q) for q in QUESTIONS))
print("SPANS " + json.dumps(asyncio.run(main())))
"""


def question(i: int) -> str:
    return f"Question {i}: why is the sky blue at noon but red at sunset, in two sentences?"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def run_council(base_url: str, args: argparse.Namespace, grace: str, home: str) -> dict[str, Any]:
    from council import Council
    from council.storage import SQLiteStore

    config = council_config(base_url, args.members, max_concurrency=args.concurrency * 4, timeout=600)
    config["councils"]["default"]["stage_grace"] = grace
    store = SQLiteStore.open(Path(home) / f"{grace}.db")
    council = Council.from_config(config, store=store)
    gate = asyncio.Semaphore(args.concurrency)

    async def one(i: int) -> Any:
        async with gate:
            return await council.run(question(i), seed=i)

    try:
        results = await asyncio.gather(*(one(i) for i in range(args.sessions)))
    finally:
        await council.aclose()
    oracle = []
    for r in results:
        calls = store.session_calls(r.session_id)
        by_stage: dict[str, list[float]] = {}
        for c in calls:
            if c["ok"]:
                by_stage.setdefault(c["stage"], []).append(c["latency_ms"] / 1000)
        needed = {"answer": council.resolved.quorum, "review": council.resolved.review_quorum, "synthesis": 1}
        oracle.append(sum(sorted(by_stage[s])[k - 1] for s, k in needed.items() if by_stage.get(s)))
    store.close()
    return {
        "spans": [r.duration_ms / 1000 for r in results],
        "oracle": oracle,
        "late_answers": sum(len(r.late_members) for r in results),
        "late_reviews": sum(len(r.late_reviewers) for r in results),
        "statuses": {s: sum(1 for r in results if r.status == s) for s in {r.status for r in results}},
    }


def run_peer(python: str, kind: str, base_url: str, args: argparse.Namespace, cwd: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    argv = [python, "-c", PEER_DRIVER, base_url, str(args.members), str(args.sessions), str(args.concurrency), kind]
    questions = json.dumps([question(i) for i in range(args.sessions)])
    proc = subprocess.run(argv, input=questions, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("SPANS "))
    spans = json.loads(line[len("SPANS ") :])
    full = sum(1 for _, answers, reviews in spans if (answers, reviews) == (args.members, args.members))
    return {"spans": [s for s, _, _ in spans], "full_councils": full}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=10, help="sessions at a time (more saturates two cores)")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per call, before --scale")
    parser.add_argument("--jitter", type=float, default=1.0, help="up to this many more seconds, before --scale")
    parser.add_argument("--tail-rate", type=float, default=0.1)
    parser.add_argument("--tail-factor", type=float, default=10.0)
    parser.add_argument("--scale", type=float, default=0.2, help="the clock's speed-up: every duration times this")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--core-python", help="an interpreter with llm-council-core installed")
    parser.add_argument("--karpathy-dir", help="a checkout of karpathy/llm-council")
    parser.add_argument("--karpathy-python", default=sys.executable, help="interpreter for the karpathy checkout")
    args = parser.parse_args()
    print("$ python benchmarks/bench_stage_tail.py " + " ".join(sys.argv[1:]))
    from mock_server import start_mock_server

    from council.session import grace

    grace.AUTO_FLOOR *= args.scale  # the auto rule on the scaled clock (its factor is a ratio)
    grace.AUTO_CAP *= args.scale
    latency, jitter = args.latency * args.scale, args.jitter * args.scale
    print(
        f"{args.members} members, {args.sessions} sessions, {args.concurrency} at a time; calls {latency:.2f}–"
        f"{latency + jitter:.2f} s, {args.tail_rate:.0%} of them {args.tail_factor:g}× (seed {args.seed}); "
        f"auto grace min({grace.AUTO_CAP:g}, max({grace.AUTO_FLOOR:g}, {grace.AUTO_FACTOR:g} × t_q)); "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as home, start_mock_server(
        latency=latency, jitter=jitter, tail_rate=args.tail_rate, tail_factor=args.tail_factor, seed=args.seed
    ) as server:  # fmt: skip
        os.environ["COUNCIL_HOME"] = home
        for mode in ("off", "auto"):
            t0 = time.perf_counter()
            run = asyncio.run(run_council(server.base_url, args, mode, home))
            rows[f"council, stage_grace {mode}"] = run
            if mode == "off":
                rows["oracle (quorum-th fastest call a stage)"] = {"spans": run["oracle"]}
            print(f"  council {mode}: {time.perf_counter() - t0:.0f} s, {run['statuses']}, late answers "
                  f"{run['late_answers']}, late reviews {run['late_reviews']}", flush=True)  # fmt: skip
        peers = {"llm-council-core 0.53.0": ("core", args.core_python, tempfile.gettempdir()),
                 "karpathy/llm-council": ("karpathy", args.karpathy_python if args.karpathy_dir else None,
                                          args.karpathy_dir)}  # fmt: skip
        for name, (kind, python, cwd) in peers.items():
            if python is None:
                rows[name] = "skipped: " + ("no --core-python" if kind == "core" else "no --karpathy-dir")
                continue
            t0 = time.perf_counter()
            try:
                rows[name] = run_peer(python, kind, server.base_url, args, cwd)
                print(f"  {name}: {time.perf_counter() - t0:.0f} s, {rows[name]['full_councils']} full councils",
                      flush=True)  # fmt: skip
            except (RuntimeError, subprocess.TimeoutExpired, StopIteration) as exc:
                rows[name] = f"failed: {exc}"

    oracle_p95 = percentile(rows["oracle (quorum-th fastest call a stage)"]["spans"], 95)
    auto_p95 = percentile(rows["council, stage_grace auto"]["spans"], 95)
    print()
    print(f"{'':<40} {'p50 s':>7} {'p95 s':>7} {'p99 s':>7} {'p95/oracle':>10} {'p95/auto':>9}")
    for name, r in rows.items():
        if isinstance(r, str):
            print(f"{name:<40} {r}")
            continue
        p50, p95, p99 = (percentile(r["spans"], p) for p in (50, 95, 99))
        print(f"{name:<40} {p50:>7.2f} {p95:>7.2f} {p99:>7.2f} {p95 / oracle_p95:>10.2f} {p95 / auto_p95:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

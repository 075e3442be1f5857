"""Benchmark: ``council batch`` on generated pairs against the mock LLM server at a fixed latency.

    python scripts/bench_batch.py                       # 500 pairs, votes 3, 50 ms, 16 calls in flight
    python scripts/bench_batch.py --pairs 200 --latency 0.1 --concurrency 32

Runs the batch twice through the library (``council.judging.batch.run_batch``, the call
``council batch`` makes), adaptive voting off and on, each in a fresh COUNCIL_HOME.
The judge allows ``--concurrency`` calls in flight and as many items run at once, so
the model's call limit is what binds. For each run it prints the calls made and saved,
the wall time, the lower bound ``calls × latency ÷ concurrency`` and their ratio, and
the client's CPU time per call (which is what separates the two on a small machine).
LiteLLM is imported before timing starts: its ~2.5 s import is a one-off cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def start_mock_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "mock_llm_server.py"), "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the mock LLM server did not start (got {line!r})")
    return proc, line.split(" ", 1)[1] + "/v1"


def pairs(n: int) -> str:
    lines = []
    for i in range(n):
        item = {
            "id": f"pair-{i}",
            "prompt": f"Question {i}: explain one consequence of topic {i % 37}.",
            "a": f"Answer A to question {i}, with a concrete example and a caveat ({i * 7 % 11}).",
            "b": f"Answer B to question {i}, shorter ({i * 3 % 5}).",
        }
        lines.append(json.dumps(item))
    return "\n".join(lines) + "\n"


async def one_run(base_url: str, content: str, votes: int, adaptive: bool, concurrency: int) -> dict[str, float]:
    from council.config import load_config
    from council.judging.batch import BatchSettings, content_digest, default_batch_id, parse_batch, run_batch
    from council.judging.engine import make_judges
    from council.storage import Store

    config = {
        "councils": {"default": {"members": ["judge"]}},
        "models": {
            "judge": {
                "model": "openai/mock-alpha",
                "api_base": base_url,
                "max_concurrency": concurrency,
                "timeout": 30,
                "retries": 1,
            }
        },
    }
    judges = make_judges(load_config(config), [])
    items = parse_batch(content, "bench.jsonl")
    settings = BatchSettings(judges=["judge=openai/mock-alpha"], votes=votes, adaptive=adaptive)
    batch_id = default_batch_id(content, settings)
    with tempfile.TemporaryDirectory() as home:
        store = Store.open(Path(home) / "council.db")
        cpu0 = time.process_time()
        summary = await run_batch(
            items,
            settings=settings,
            judges=judges,
            batch_id=batch_id,
            source="bench.jsonl",
            content_sha256=content_digest(content),
            concurrency=concurrency,
            store=store,
        )
        cpu = time.process_time() - cpu0
        store.close()
    for judge in judges:
        await judge.aclose()
    if summary.failed or summary.missing:
        raise SystemExit(f"the batch did not finish cleanly: {summary.failed} failed, {summary.missing} missing")
    return {"calls": summary.calls, "saved": summary.calls_saved, "wall": summary.wall_time_s, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per mock call")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight (and items in flight)")
    args = parser.parse_args()

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from council.providers.litellm_api import import_litellm

    import_litellm()
    content = pairs(args.pairs)
    server, base_url = start_mock_server(args.latency)
    try:
        asyncio.run(one_run(base_url, pairs(8), args.votes, False, args.concurrency))  # warm-up: connections, caches
        print(
            f"{args.pairs} pairs, votes {args.votes}, swap on, latency {args.latency * 1000:g} ms, "
            f"{args.concurrency} calls in flight"
        )
        header = f"{'adaptive':>8} {'calls':>6} {'saved':>6} {'wall s':>7} {'bound s':>8} {'ratio':>6}"
        header += f" {'cpu ms/call':>11}"
        print(header)
        for adaptive in (False, True):
            r = asyncio.run(one_run(base_url, content, args.votes, adaptive, args.concurrency))
            bound = r["calls"] * args.latency / args.concurrency
            print(
                f"{'on' if adaptive else 'off':>8} {r['calls']:>6.0f} {r['saved']:>6.0f} {r['wall']:>7.2f} "
                f"{bound:>8.2f} {r['wall'] / bound:>6.2f} {1000 * r['cpu'] / r['calls']:>11.2f}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())

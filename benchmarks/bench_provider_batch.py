"""Benchmark: a batch of pairs through the provider batch API vs. direct calls, on the mock.

    python benchmarks/bench_provider_batch.py                 # 10,000 pairs, both passes each
    python benchmarks/bench_provider_batch.py --pairs 2000 --concurrency 64

The same pairs file is judged twice by one judge (``openai/mock-judge`` on the mock server, real
HTTP on 127.0.0.1, priced at 1e-5 / 3e-5 USD a token): once with direct calls (``--concurrency``
items in flight), once with ``provider_batch=True`` (one round through the mock's Files + Batches
API). For each: calls, rounds, wall time, this process's CPU (``time.process_time``: the client
only, the mock runs in its own process), and the cost at list and at batch price.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from bench_common import prepare  # also puts the package and tests/ on sys.path

PRICE_IN, PRICE_OUT = 1e-5, 3e-5


async def judge(path: Path, base_url: str, *, batch_id: str, provider_batch: bool, concurrency: int) -> dict:
    from council.config import load_config
    from council.judging import batch as batching
    from council.judging.engine import make_judges

    loaded = load_config(
        {
            "councils": {"default": {"members": ["j"], "chairman": "j"}},
            "models": {
                "j": {
                    "model": "openai/mock-judge", "api_base": base_url, "api_key_env": "MOCK_KEY",
                    "max_tokens": 800, "input_cost_per_token": PRICE_IN, "output_cost_per_token": PRICE_OUT,
                    "max_concurrency": concurrency, "timeout": 60,
                }
            },
        }
    )  # fmt: skip
    judges = make_judges(loaded, ["j"])
    content = path.read_text()
    items = batching.parse_batch(content, str(path))
    settings = batching.BatchSettings(judges=["j"])
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        summary = await batching.run_batch(
            items, settings=settings, judges=judges, batch_id=batch_id, source=str(path),
            content_sha256=batching.content_digest(content), concurrency=concurrency, keep_text=True,
            provider_batch=provider_batch,
        )  # fmt: skip
    finally:
        for j in judges:
            await j.aclose()
    return {
        "wall": time.perf_counter() - wall0,
        "cpu": time.process_time() - cpu0,
        "calls": summary.calls,
        "finished": summary.finished,
        "cost": summary.cost_usd,
        "rounds": summary.provider_rounds,
        "tokens": (summary.prompt_tokens, summary.completion_tokens),
    }


async def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    home = prepare(__file__, " ".join(__doc__.split("\n\n")[2].split()), litellm=False)
    os.environ["MOCK_KEY"] = "unused"
    from mock_server import start_mock_server

    path = Path(home.name) / "pairs.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"Question {i}: why is the sky blue?",
                        "a": f"Rayleigh scattering {i}.", "b": f"The sea reflects onto it {i}."}) + "\n"
            for i in range(args.pairs)
        )
    )  # fmt: skip
    with start_mock_server(batch_seconds=0.1) as server:
        direct = await judge(
            path, server.base_url, batch_id="direct", provider_batch=False, concurrency=args.concurrency
        )
        batched = await judge(
            path, server.base_url, batch_id="batched", provider_batch=True, concurrency=args.concurrency
        )
    list_cost = direct["cost"]
    print(f"\n{args.pairs} pairs, swap on (2 calls a pair), judge openai/mock-judge")
    print(f"{'':22} {'calls':>7} {'rounds':>7} {'wall s':>8} {'client CPU s':>13} {'CPU ms/call':>12} {'cost USD':>10}")
    for name, r in (("direct calls", direct), ("--provider-batch", batched)):
        per = 1000 * r["cpu"] / max(r["calls"], 1)
        rounds = "-" if name == "direct calls" else str(r["rounds"])
        figures = f"{r['wall']:8.1f} {r['cpu']:13.1f} {per:12.3f} {r['cost']:10.4f}"
        print(f"{name:22} {r['calls']:>7} {rounds:>7} {figures}")
    share = batched["cost"] / list_cost
    print(f"\ncost at list price {list_cost:.4f} USD, at batch price {batched['cost']:.4f} USD ({share:.2f} of it);"
          f" finished {direct['finished']} / {batched['finished']}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())

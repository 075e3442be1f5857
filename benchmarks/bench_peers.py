"""Benchmark: council next to its peers, on the same mock server, as whole processes.

    python benchmarks/bench_peers.py --core-python /tmp/peers/bin/python
    python benchmarks/bench_peers.py --core-python /tmp/peers/bin/python --karpathy-dir ~/src/llm-council

Every tool runs a 5-member council (``--members``), one question, against one mock LLM server
(``scripts/mock_llm_server.py``, real HTTP on 127.0.0.1) answering every call after ``--latency``
seconds (0.25 s). Each has three sequential stages of parallel calls (answers, peer reviews, one
synthesis), so the critical path is 3 × latency. For each tool, ``--repeats`` fresh processes
(after one warm-up): the whole process's wall time, and the span of the council call inside
it, both as ratios to the critical path.

- council: the ``council run QUESTION --config FILE --json`` console script (native transport;
  JSON out, as the peers print no rendered output either); the span is the result's
  ``duration_ms``.
- llm-council-core (PyPI, pinned ``llm-council-core==0.53.0``): in its own virtualenv, given with
  ``--core-python``; the driver below sets its models and chairman through its environment
  variables, points its OpenRouter endpoint at the mock server and calls ``run_full_council``.
  Set up with ``python -m venv /tmp/peers && /tmp/peers/bin/pip install llm-council-core==0.53.0``.
- karpathy/llm-council (GitHub, not on PyPI): a checkout given with ``--karpathy-dir``, run with
  ``--karpathy-python`` (needs httpx and python-dotenv); the driver points ``backend.openrouter``'s
  URL at the mock server and sets ``backend.council``'s models and chairman before
  ``run_full_council``. A tool that is not given is reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import council_config, entry_point, this_checkout, write_council_toml  # also puts tests/ on sys.path

QUESTION = "Why is the sky blue?"

CORE_DRIVER = """
import asyncio, os, sys, time
url, n, question = sys.argv[1], int(sys.argv[2]), sys.argv[3]
models = [f"mock/m{i}" for i in range(n)]
os.environ.update({"OPENROUTER_API_KEY": "unused", "LLM_COUNCIL_MODELS": ",".join(models),
                   "LLM_COUNCIL_CHAIRMAN": models[0]})
import llm_council.openrouter as openrouter
from llm_council.council import run_full_council
openrouter.resolve_endpoint = lambda: (url + "/chat/completions", "unused", "openrouter")
async def main():
    t0 = time.perf_counter()
    stage1, stage2, stage3, _ = await run_full_council(question, bypass_cache=True, models=models)
    return time.perf_counter() - t0, len(stage1), len(stage2)
span, answers, reviews = asyncio.run(main())
print("SPAN " + str(span) + " " + str(answers) + " " + str(reviews))
"""

KARPATHY_DRIVER = """
import asyncio, os, sys, time
url, n, question = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.environ.setdefault("OPENROUTER_API_KEY", "unused")
sys.path.insert(0, os.getcwd())
import backend.council as council
import backend.openrouter as openrouter
models = [f"mock/m{i}" for i in range(n)]
openrouter.OPENROUTER_API_URL = url + "/chat/completions"
council.COUNCIL_MODELS, council.CHAIRMAN_MODEL = models, models[0]
async def main():
    t0 = time.perf_counter()
    stage1, stage2, stage3, _ = await council.run_full_council(question)
    return time.perf_counter() - t0, len(stage1), len(stage2)
span, answers, reviews = asyncio.run(main())
print("SPAN " + str(span) + " " + str(answers) + " " + str(reviews))
"""


def timed(argv: list[str], env: dict[str, str], cwd: str | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return wall, proc.stdout


def run_council(base_url: str, members: int, repeats: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as home:
        config = council_config(base_url, members, max_concurrency=members)
        path = write_council_toml(Path(home) / "council.toml", config)
        env = this_checkout({**os.environ, "COUNCIL_HOME": home})
        env.pop("COUNCIL_CONFIG", None)
        walls, spans = [], []
        for i in range(repeats + 1):
            wall, out = timed([*entry_point(), "run", QUESTION, "--config", str(path), "--json"], env)
            result = json.loads(out)
            if result["status"] != "complete":
                raise RuntimeError(f"the session is {result['status']}")
            if i > 0:
                walls.append(wall)
                spans.append(result["duration_ms"] / 1000)
    return {"wall": walls, "span": spans}


def run_driver(python: str, driver: str, base_url: str, members: int, repeats: int, cwd: str) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    walls, spans = [], []
    for i in range(repeats + 1):
        wall, out = timed([python, "-c", driver, base_url, str(members), QUESTION], env, cwd=cwd)
        line = next(x for x in out.splitlines() if x.startswith("SPAN "))
        span, answers, reviews = line.split()[1:]
        if (int(answers), int(reviews)) != (members, members):
            raise RuntimeError(f"{answers} answers and {reviews} reviews of {members}: not a full council")
        if i > 0:
            walls.append(wall)
            spans.append(float(span))
    return {"wall": walls, "span": spans}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per mock call")
    parser.add_argument("--repeats", type=int, default=5, help="timed processes per tool (after one warm-up)")
    parser.add_argument("--core-python", help="an interpreter with llm-council-core installed")
    parser.add_argument("--karpathy-dir", help="a checkout of karpathy/llm-council")
    parser.add_argument("--karpathy-python", default=sys.executable, help="interpreter for the karpathy checkout")
    args = parser.parse_args()
    print("$ python benchmarks/bench_peers.py " + " ".join(sys.argv[1:]))
    critical = 3 * args.latency
    print(
        f"{args.members} members, latency {args.latency * 1000:g} ms, critical path {critical * 1000:.0f} ms; "
        f"{args.repeats} processes per tool after a warm-up; {os.cpu_count()} cores; medians"
    )
    from mock_server import start_mock_server

    results: dict[str, Any] = {}
    with start_mock_server(latency=args.latency) as server:
        tools = {"council (native)": lambda: run_council(server.base_url, args.members, args.repeats)}
        if args.core_python:
            tools["llm-council-core 0.53.0"] = lambda: run_driver(
                args.core_python, CORE_DRIVER, server.base_url, args.members, args.repeats, tempfile.gettempdir()
            )
        else:
            results["llm-council-core 0.53.0"] = "skipped: no --core-python"
        if args.karpathy_dir:
            tools["karpathy/llm-council"] = lambda: run_driver(
                args.karpathy_python, KARPATHY_DRIVER, server.base_url, args.members, args.repeats, args.karpathy_dir
            )
        else:
            results["karpathy/llm-council"] = "skipped: no --karpathy-dir"
        for name, run in tools.items():
            try:
                results[name] = run()
            except (RuntimeError, subprocess.TimeoutExpired, StopIteration) as exc:
                results[name] = f"failed: {exc}"

    print()
    print(f"{'tool':<26} {'process s':>9} {'process/CP':>10} {'span s':>7} {'span/CP':>8}")
    for name, r in results.items():
        if isinstance(r, str):
            print(f"{name:<26} {r}")
            continue
        wall, span = statistics.median(r["wall"]), statistics.median(r["span"])
        print(f"{name:<26} {wall:>9.2f} {wall / critical:>10.2f} {span:>7.2f} {span / critical:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

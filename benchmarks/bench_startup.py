"""Benchmark: start-up time of ``council --help`` and ``council sessions list`` as fresh processes.

    python benchmarks/bench_startup.py            # 20 runs of each
    python benchmarks/bench_startup.py -n 50

Runs the installed ``council`` entry point (the console script next to this interpreter;
``python -m council`` if there is none) as a new process each time, in a temp COUNCIL_HOME
whose council.db already holds a few sessions (so ``sessions list`` reads rows and does not
create the database), and prints min / median / max wall time per command, next to
``python -c pass`` (the interpreter's own start-up, the floor). Then each command runs once
under ``python -X importtime`` to list what it imported: whether LiteLLM (any ``litellm``
module) was imported, how many modules, and the heaviest top-level imports.

Goals: ``--help`` median well under 500 ms; LiteLLM imported by neither command.
Exit code 0 when both hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import entry_point, this_checkout  # also puts the package on sys.path

HELP_GOAL_MS = 500.0
COMMANDS = {"council --help": ["--help"], "council sessions list": ["sessions", "list"]}


def seed_sessions(home: Path, n: int = 10) -> None:
    """A few finished sessions (in-process fake models), so ``sessions list`` has rows to show."""
    from council import Council
    from council.storage import SQLiteStore

    async def go() -> None:
        store = SQLiteStore.open(home / "council.db")
        council = Council.from_config(
            {"councils": {"default": {"members": ["fake/alpha", "fake/beta", "fake/gamma"]}}}, store=store
        )
        for i in range(n):
            await council.run(f"Start-up benchmark question {i}", seed=i)
        await council.aclose()
        store.close()

    asyncio.run(go())


def time_runs(argv: list[str], env: dict[str, str], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        times.append((time.perf_counter() - t0) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"{shlex.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return times


def imports(argv: list[str], env: dict[str, str]) -> tuple[list[str], list[tuple[int, str]]]:
    """Every module the command imported, and (cumulative µs, name) of the top-level ones."""
    script = argv[1:] if argv[0] == sys.executable else argv  # `python -m council ...` or the console script
    proc = subprocess.run([sys.executable, "-X", "importtime", *script], capture_output=True, text=True, env=env)
    modules, top = [], []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "| cumulative |" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        modules.append(name.strip())
        if not name.startswith("  "):  # nested imports are indented under their importer
            top.append((int(cumulative), name.strip()))
    return modules, sorted(top, reverse=True)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("-n", "--runs", type=int, default=20, help="runs of each command")
    args = p.parse_args()
    print("$ " + shlex.join(["python", "benchmarks/bench_startup.py", *sys.argv[1:]]))
    council = entry_point()
    print(f"entry point: {shlex.join(council)}; {args.runs} runs each; {os.cpu_count()} CPUs")

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        seed_sessions(home)
        env = this_checkout({**os.environ, "COUNCIL_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        env.pop("COUNCIL_CONFIG", None)
        rows = {"python -c pass (floor)": [sys.executable, "-c", "pass"]}
        rows.update({name: [*council, *cmd] for name, cmd in COMMANDS.items()})
        print(f"{'command':<24} {'min ms':>7} {'median':>7} {'max ms':>7}")
        medians = {}
        for name, argv in rows.items():
            t = time_runs(argv, env, args.runs)
            medians[name] = statistics.median(t)
            print(f"{name:<24} {min(t):>7.0f} {medians[name]:>7.0f} {max(t):>7.0f}")
        if medians["council --help"] >= HELP_GOAL_MS:
            ok = False
        print(f"goal: council --help median < {HELP_GOAL_MS:.0f} ms: {'met' if ok else 'NOT met'}")

        for name, cmd in COMMANDS.items():
            modules, top = imports([*council, *cmd], env)
            litellm = sorted(m for m in modules if m.split(".")[0] == "litellm")
            ok = ok and not litellm
            heaviest = ", ".join(f"{m} {us / 1000:.0f}" for us, m in top[:5])
            verdict = f"YES ({len(litellm)} modules)" if litellm else "no"
            print(f"{name}: litellm imported: {verdict}; {len(modules)} modules imported")
            print(f"  heaviest top-level imports (cumulative ms): {heaviest}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

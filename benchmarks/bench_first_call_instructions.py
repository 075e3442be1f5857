"""Benchmark: the instructions a ``council run`` process executes before its first model call,
counted by valgrind. Unlike CPU time, the count does not move with the machine's load, so two
trees compare in one run each on a busy machine.

    python benchmarks/bench_first_call_instructions.py                     # this checkout, output piped
    python benchmarks/bench_first_call_instructions.py --tree ../other --tree . --terminal

Each tree (``--tree DIR``, put first on PYTHONPATH; default this checkout) runs ``council run
QUESTION --config FILE`` on 5 native members of the mock server (as part 2 of
bench_critical_path.py) under a probe that ends the process when the first connection to the
mock opens: the count is all the process did before its first call. The jobs the runner gives
worker threads, and the price map's loader thread, are made no-ops: how far they got by then
differed from run to run, and what is counted is the main thread's path to the first call.
``--terminal`` sets TTY_COMPATIBLE=1 (stderr taken for a terminal: the live progress line).
A warm-up run writes the bytecode; each count runs in a fresh COUNCIL_HOME holding a copy of a
database made by one whole run. Needs valgrind (``apt-get install valgrind``), ~15 s a count.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import ROOT, council_config, write_council_toml  # also puts tests/ on sys.path

PROBE = """
import asyncio, os, sys, threading
from importlib.machinery import PathFinder
port = int(sys.argv.pop(1))
def at_first_call(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][1] == port:
        os._exit(0)
sys.addaudithook(at_first_call)
class NoWorkerJobs:
    def find_spec(self, name, path=None, target=None):
        if name != "council._util.speedups":
            return None
        spec = PathFinder.find_spec(name, path)
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            module.in_worker = lambda job, start=None: asyncio.ensure_future(asyncio.sleep(0))
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, NoWorkerJobs())
start = threading.Thread.start
threading.Thread.start = lambda self: None if self.name == "council-price-map" else start(self)
sys.argv = ["council", *sys.argv[1:]]
from council.cli.main import main
main()
"""


def count(tree: Path, argv: list[str], port: int, database: Path, terminal: bool) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    for name in ("PYTHONDONTWRITEBYTECODE", "COUNCIL_CONFIG", "PYDANTIC_DISABLE_PLUGINS", "TTY_COMPATIBLE"):
        env.pop(name, None)
    if terminal:
        env["TTY_COMPATIBLE"] = "1"
    probe = [sys.executable, "-c", PROBE, str(port), *argv]
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    for command in (probe, [*valgrind, *probe]):  # the first writes the bytecode
        with tempfile.TemporaryDirectory() as home:
            shutil.copy(database, home)
            proc = subprocess.run(command, env={**env, "COUNCIL_HOME": home}, cwd=home, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"the probe failed in {tree} ({proc.returncode}): {proc.stderr[-800:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tree", action="append", type=Path, help="a checkout to count (repeatable; default: this one)"
    )
    parser.add_argument("--terminal", action="store_true", help="stderr taken for a terminal (TTY_COMPATIBLE=1)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    from mock_server import start_mock_server

    trees = [t.resolve() for t in args.tree or [ROOT]]
    with start_mock_server(latency=0.25) as server, tempfile.TemporaryDirectory() as work:
        config = write_council_toml(Path(work) / "council.toml", council_config(server.base_url, 5))
        argv = ["run", "Why is the sky blue?", "--config", str(config)]
        made = Path(work) / "home"
        made.mkdir()
        env = {**os.environ, "COUNCIL_HOME": str(made), "PYTHONPATH": str(trees[0])}
        subprocess.run([sys.executable, "-m", "council", *argv], env=env, cwd=made, capture_output=True, check=True)
        port = int(server.url.rsplit(":", 1)[1])
        print(f"instructions before the first call ({'terminal' if args.terminal else 'piped'}), millions:")
        for tree in trees:
            print(f"  {count(tree, argv, port, made / 'council.db', args.terminal) / 1e6:9.1f}  {tree}")


if __name__ == "__main__":
    main()

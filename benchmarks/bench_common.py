"""What the session benchmarks share: echo the command, a throwaway COUNCIL_HOME, the CLI's
logging, the council config of N mock members, and, when a benchmark uses it, LiteLLM imported
before anything is timed (its ~2.5 s import is a one-off)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):  # the package and tests/mock_server.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


TRANSPORTS = ("native", "litellm")


def council_config(base_url: str, members: int, *, transport: str = "native", **model: Any) -> dict[str, Any]:
    """A council of ``members`` models ``openai/mock-mN`` on the mock server (m0 is the chairman),
    reached through ``transport``; ``model`` adds [models.X] settings (``max_concurrency``...)."""
    names = [f"m{i}" for i in range(members)]
    spec = {"api_base": base_url, "transport": transport, "timeout": 30, "retries": 0, **model}
    return {
        "councils": {"default": {"members": names, "chairman": names[0]}},
        "models": {name: {"model": f"openai/mock-{name}", **spec} for name in names},
    }


def write_council_toml(path: Path, config: dict[str, Any]) -> Path:
    """``council_config``'s dict as a council.toml, as a user writes it (the values are strings,
    numbers and lists of strings, whose JSON form is valid TOML)."""
    lines = []
    for name, council in config["councils"].items():
        lines.append(f"[councils.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in council.items()]
    for name, model in config["models"].items():
        lines.append(f"[models.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in model.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_CAPTURED: list[bytes] | None = None


def capture_bodies() -> list[bytes]:
    """Record, from now on, every request body council's OpenAI-compatible transport encodes: the
    bytes it sends, kept as its encoder returns them (encoding them a second time to record them
    charged council ~2 % of its CPU for the benchmark's own work). Called again, the same list
    (the encoder is wrapped once)."""
    global _CAPTURED
    from council.providers import openai_compatible

    if _CAPTURED is not None:
        return _CAPTURED
    bodies: list[bytes] = []
    _CAPTURED = bodies
    api = openai_compatible.OpenAICompatibleAPI
    encode = api.encoded_body

    def encoded_body(self: Any, request: Any, *, stream: bool = False) -> bytes:
        data = encode(self, request, stream=stream)
        bodies.append(data)
        return data

    api.encoded_body = encoded_body  # type: ignore[method-assign]
    return bodies


class StageBodies:
    """The request bodies council's transport encodes (:func:`capture_bodies`), told apart by stage
    from a session's events: pass :meth:`note` as (or from) the session's listener."""

    def __init__(self) -> None:
        self.bodies = capture_bodies()
        self.starts: dict[str, int] = {}  # a stage's first body, by its index among those sent

    def clear(self) -> None:
        """Forget what was sent before: the next session's bodies from here."""
        del self.bodies[:]
        self.starts.clear()

    def note(self, event: Any) -> None:
        if event.type == "stage":
            self.starts[event.stage] = len(self.bodies)

    def stages(self) -> list[list[bytes]]:
        """The bodies sent since :meth:`clear`: the answers', the reviews', the chairman's."""
        bounds = [self.starts["answer"], self.starts["review"], self.starts["synthesis"], len(self.bodies)]
        return [self.bodies[a:b] for a, b in pairwise(bounds)]


async def session_bodies(base_url: str, members: int) -> list[list[bytes]]:
    """The request bodies one session of a ``members`` council on the mock at ``base_url`` sends,
    as council encodes them, by stage (:meth:`StageBodies.stages`). The session runs in this
    process (no store) with a listener, as a server runs it: the chairman's is streamed."""
    from council import Council

    sent = StageBodies()
    sent.clear()
    config = council_config(base_url, members, max_concurrency=members)
    async with Council.from_config(config, store=False) as council:
        result = await council.run("Why is the sky blue?", seed=1, on_event=sent.note)
    if result.status != "complete":
        raise SystemExit(f"the session whose bodies are replayed is {result.status}: {result.partial_reasons}")
    return sent.stages()


def add_collector_option(parser: Any) -> None:
    """``--collector``: the garbage collector's thresholds a benchmark runs with."""
    parser.add_argument(
        "--collector",
        choices=("cli", "default"),
        default="cli",
        help="the garbage collector's thresholds: the `council` command's (default) or Python's own",
    )


def apply_collector(args: Any) -> None:
    """The thresholds ``--collector`` chose: ``cli`` as `council batch` runs (council.cli.main.main
    sets them first), ``default`` Python's own."""
    if args.collector == "cli":
        import gc

        from council.cli.main import START_UP_GC_THRESHOLD

        gc.set_threshold(*START_UP_GC_THRESHOLD)


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as every benchmark prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextmanager
def postgres_if(wanted: bool) -> Iterator[Any]:
    """A throwaway PostgreSQL server (scripts/postgres_test_server.sh through tests/postgres_server.py,
    or COUNCIL_TEST_POSTGRES_URL's) while the block runs, when ``wanted``; else None."""
    if not wanted:
        yield None
        return
    from postgres_server import Server

    server = Server()
    server.start()
    try:
        if server.url is None:
            raise SystemExit(f"no PostgreSQL server: {server.problem}")
        yield server
    finally:
        server.stop()


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (which may hold spaces)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; OSError for one gone)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_cpu(server: Any) -> float | None:
    """CPU seconds of a throwaway PostgreSQL server (tests/postgres_server.py) so far: the
    postmaster, its live processes and the backends it has reaped (a client's connections end
    with it). None: a server named by COUNCIL_TEST_POSTGRES_URL, not one of ours."""
    if server._root is None:
        return None
    postmaster = int((Path(server._root) / "data" / "postmaster.pid").read_text().split()[0])
    # utime, stime, and the reaped children's cutime, cstime
    total = sum(int(f) for f in _stat(postmaster)[11:15]) / os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(_stat(int(stat.parent.name))[1]) == postmaster:
                total += process_cpu(int(stat.parent.name))
        except OSError:  # ended since it was listed
            continue
    return total


def this_checkout(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on PYTHONPATH: the console script then runs this
    checkout's package, not the one installed (a second worktree measured side by side would
    otherwise time the installed copy's code)."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}


def entry_point() -> list[str]:
    """The installed ``council`` console script next to this interpreter (``python -m council`` if
    none); run it with :func:`this_checkout`'s environment."""
    script = Path(sys.executable).with_name("council")
    if script.exists():
        return [str(script)]
    found = shutil.which("council")
    return [found] if found else [sys.executable, "-m", "council"]


def prepare(script: str, *description: str, litellm: bool = True) -> tempfile.TemporaryDirectory[str]:
    """Print how the benchmark was run and what it measures; return the temporary home
    (keep a reference: it is removed when collected or at exit). ``litellm``: import it now."""
    print("$ python " + shlex.join([os.path.relpath(script), *sys.argv[1:]]))
    for line in description:
        print(line)
    home = tempfile.TemporaryDirectory(prefix="council-bench-")
    os.environ["COUNCIL_HOME"] = home.name
    from council._util.logs import configure_logging

    configure_logging()  # as the CLI does: warnings and errors on stderr
    if litellm:
        from council.providers.litellm_api import import_litellm

        import_litellm()
    return home

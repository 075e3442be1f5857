"""What the session benchmarks share: echo the command, a throwaway COUNCIL_HOME, the CLI's
logging, the council config of N mock members, and, when a benchmark uses it, LiteLLM imported
before anything is timed (its ~2.5 s import is a one-off)."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
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


def prepare(script: str, *description: str, litellm: bool = True) -> tempfile.TemporaryDirectory[str]:
    """Print how the benchmark was run and what it measures; return the temporary home
    (keep a reference: it is removed when collected or at exit). ``litellm``: import it now."""
    print("$ python " + shlex.join([os.path.relpath(script), *sys.argv[1:]]))
    for line in description:
        print(line)
    home = tempfile.TemporaryDirectory(prefix="council-bench-")
    os.environ["COUNCIL_HOME"] = home.name
    from council.logs import configure_logging

    configure_logging()  # as the CLI does: warnings and errors on stderr
    if litellm:
        from council.providers.litellm_api import import_litellm

        import_litellm()
    return home

"""What the session benchmarks share: echo the command, a throwaway COUNCIL_HOME, the CLI's
logging, and LiteLLM imported before anything is timed (its ~2.5 s import is a one-off)."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):  # the package and tests/mock_server.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def prepare(script: str, *description: str) -> tempfile.TemporaryDirectory[str]:
    """Print how the benchmark was run and what it measures; return the temporary home
    (keep a reference: it is removed when collected or at exit)."""
    print("$ python " + shlex.join([os.path.relpath(script), *sys.argv[1:]]))
    for line in description:
        print(line)
    home = tempfile.TemporaryDirectory(prefix="council-bench-")
    os.environ["COUNCIL_HOME"] = home.name
    from council.logs import configure_logging
    from council.providers.litellm_api import import_litellm

    configure_logging()  # as the CLI does: warnings and errors on stderr
    import_litellm()
    return home

"""``council mcp`` as the tests start it for the MCP SDK's client over stdio: this checkout's code,
a council home of the test's own, and litellm's bundled price map (no download)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]


def council_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``council`` subprocess: this checkout first on its path, ``home`` as
    its ``COUNCIL_HOME``, and ``extra`` (e.g. ``COUNCIL_DATABASE_URL``)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "COUNCIL_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


def mcp_server(config: Path, home: Path, *args: str, **env: str) -> StdioServerParameters:
    """``python -m council mcp --config config *args`` with :func:`council_env`'s environment."""
    from mcp.client.stdio import StdioServerParameters

    command = ["-m", "council", "mcp", "--config", str(config), *args]
    return StdioServerParameters(command=sys.executable, args=command, env=council_env(home, **env))

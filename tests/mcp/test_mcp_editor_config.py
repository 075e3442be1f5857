"""The editor config in docs/chat-apps/mcp.md works as written: the server started the way an
editor starts it (the official MCP client, the config's command and arguments, an editor's
minimal PATH), with the absolute path to ``council`` found as the page says (issue 60)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp_stdio import council_env  # noqa: E402

import council  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/chat-apps/mcp.md"
EDITOR_PATH = "/usr/bin:/bin"  # what a desktop app launched from the dock has


def documented_config() -> dict:
    [block] = [b for b in re.findall(r"```json\n(.*?)```", PAGE.read_text(), flags=re.S) if "mcpServers" in b]
    return json.loads(block)["mcpServers"]["council"]


def council_executable() -> str:
    # As the page says: `which council` in the environment council is installed in (here: the
    # one running the tests, whose bin/ a test's PATH may not hold).
    found = shutil.which("council", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    assert found is not None and os.path.isabs(found)
    return found


def editor_server(command: str, args: list[str], env: dict[str, str], home: Path) -> StdioServerParameters:
    # PYTHONPATH: this checkout's code, in place of an installed one; PATH: an editor's.
    return StdioServerParameters(command=command, args=args, env={**env, **council_env(home, PATH=EDITOR_PATH)})


def configured(tmp_path: Path) -> tuple[dict, list[str]]:
    entry = documented_config()
    config = tmp_path / "council.toml"
    config.write_text('[councils.default]\nmembers = ["fake/alpha", "fake/beta"]\nchairman = "fake/alpha"\n')
    args = [str(config) if a == "/path/to/council.toml" else a for a in entry["args"]]
    env = {k: v for k, v in entry["env"].items() if k != "OPENAI_API_KEY"}  # no key: the fake models need none
    return {**entry, "env": env}, args


async def test_the_documented_config_starts_the_server_under_an_editors_path(tmp_path, council_home):
    entry, args = configured(tmp_path)
    assert entry["command"] == "/absolute/path/to/council" and args[0] == "mcp"
    executable = council_executable()
    async with Client(editor_server(executable, args, entry["env"], council_home)) as client:
        assert client.server_info.name == "council" and client.server_info.version == council.__version__
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"council_run", "council_compare", "council_batch"} <= tools
        compared = await client.call_tool("council_compare", {"prompt": "Q?", "response_a": "a", "response_b": "b",
                                                             "judges": ["fake/judge"]})  # fmt: skip
        assert not compared.is_error, compared.content


async def test_the_bare_command_the_page_warns_about_is_not_found_under_that_path(tmp_path, council_home):
    if shutil.which("council", path=EDITOR_PATH) is not None:
        pytest.skip("council is installed system-wide here: the bare command would be found")
    entry, args = configured(tmp_path)
    with pytest.raises(BaseException) as caught:  # noqa: PT011, the client's task group wraps it
        async with Client(editor_server("council", args, entry["env"], council_home)) as client:
            await client.list_tools()
    assert "FileNotFoundError" in repr(caught.value) or isinstance(caught.value, FileNotFoundError)

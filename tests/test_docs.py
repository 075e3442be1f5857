"""Keep the README honest: its commands exist and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from council.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def test_quick_start_is_two_commands_install_then_run():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    (block,) = bash_blocks(quick)
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == 2
    assert lines[0] == "bash scripts/install.sh" and (ROOT / "scripts" / "install.sh").is_file()
    assert lines[1].startswith("council run ")


def test_ci_runs_the_readme_test_command():
    tests = README.split("## Tests", 1)[1].split("##", 1)[0]
    (block,) = bash_blocks(tests)
    command = block.strip()
    assert "pytest" in command
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci.splitlines()


def test_every_cli_command_is_documented():
    runner = CliRunner()
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    commands = cli.list_commands(None)  # type: ignore[arg-type]
    assert "run" in commands and "sessions" in commands
    for name in commands:
        assert f"council {name}" in README, f"README does not mention `council {name}`"

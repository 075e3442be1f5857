"""Keep the README honest: its commands exist and CI runs its test command."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from council.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
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


def test_ci_runs_property_tests_derandomized():
    from hypothesis import settings

    ci = (ROOT / ".ci" / "run").read_text()
    assert "export HYPOTHESIS_PROFILE=ci" in ci.splitlines()
    assert settings.get_profile("ci").derandomize is True


def test_readme_layout_names_every_module():
    layout = README.split("## Layout", 1)[1]
    package = ROOT / "council"
    for path in sorted(package.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        rel = path.relative_to(package)
        name = (
            path.name
            if len(rel.parts) == 1 or rel.parts[0] in {"session", "judging", "bias", "providers", "storage"}
            else None
        )
        if name is not None:
            assert f"`{name}`" in layout, f"README's layout section does not name council/{rel}"
    for folder in ("session", "judging", "bias", "providers", "storage", "config", "cli", "server"):
        assert f"`{folder}/`" in layout


def test_readme_lists_the_parameters_the_server_ignores():
    from council.server.protocol import IGNORED

    row = next(line for line in README.splitlines() if "accepted and ignored" in line)
    listed = set(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    assert listed == set(IGNORED)


def test_readme_says_when_kendall_w_is_empty_as_the_code_decides_it():
    from council.methods.concordance import agreement

    note = README.split("`kendall_w` is empty when", 1)[1].split("\n- ", 1)[0]
    # Two members, self-review excluded: one answer per ballot, nothing to agree on.
    assert agreement([["b"], ["a"]]) is None and "two members" in note
    # Three members, self-review excluded: three ballots of two, each pair once, a balanced design.
    three = agreement([["b", "c"], ["a", "c"], ["a", "b"]])
    assert three is not None and three.design == "balanced incomplete"
    assert "three members" not in note

"""Keep the README and the documentation site honest: the README is a short front door whose
commands are the real ones, the site builds with no broken link, and what the pages say about the
CLI, the server and the layout is what the code does."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from site_docs import bash_blocks, page, site_pages, site_text

from council.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]


# -- the README: a front door ------------------------------------------------------------------


def test_the_readme_is_a_front_door_of_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_quick_start_is_two_commands_install_then_run():
    for text in (README, page("getting-started.md")):
        (block,) = bash_blocks(section(text, "Quick start"))
        lines = [line for line in block.splitlines() if line.strip()]
        assert len(lines) == 2
        assert lines[0] == "bash scripts/install.sh" and (ROOT / "scripts" / "install.sh").is_file()
        assert lines[1].startswith("council run ")


def test_ci_runs_the_readme_test_command():
    (block,) = bash_blocks(section(README, "Tests"))
    command = block.strip()
    assert command == "python -m pytest -q -n auto"
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci.splitlines()


def test_ci_runs_property_tests_derandomized():
    from hypothesis import settings

    ci = (ROOT / ".ci" / "run").read_text()
    assert "export HYPOTHESIS_PROFILE=ci" in ci.splitlines()
    assert settings.get_profile("ci").derandomize is True


def test_the_tour_on_the_mock_server_is_a_valid_council_file_pointing_at_the_mock():
    from council.config.loader import parse_config

    for text in (README, page("getting-started.md")):
        tour = section(text, "A 30-second tour on the bundled mock server")
        (block,) = bash_blocks(tour)
        port = re.search(r"python scripts/mock_llm_server\.py --port (\d+) &", block).group(1)
        toml = block.split("<<'TOML'\n", 1)[1].split("\nTOML\n", 1)[0]
        import tomllib

        config = parse_config(tomllib.loads(toml), "the tour")
        assert {m.api_base for m in config.models.values()} == {f"http://127.0.0.1:{port}/v1"}
        for command in ("council run ", "council sessions ", "council bias-report"):
            assert command in block


def test_the_readme_links_the_site():
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).is_file(), target
    assert "mkdocs build --strict" in README


# -- the site -----------------------------------------------------------------------------------


def test_the_site_builds_strict_with_no_broken_link_page_or_anchor(tmp_path):
    if os.environ.get("CI") != "true":
        pytest.importorskip("mkdocs", reason="the site needs the docs extra (bash scripts/install.sh)")
        pytest.importorskip("mkdocstrings", reason="the site needs the docs extra (bash scripts/install.sh)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").read_text().count("council.api.Council") > 0


def test_every_page_is_in_the_nav_but_the_benchmark_history():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for path in site_pages():
        relative = path.relative_to(ROOT / "docs").as_posix()
        assert f": {relative}\n" in config, f"{relative} is not in mkdocs.yml's nav"
    assert "/benchmark-history.md" in config.split("not_in_nav:", 1)[1].split("\nnav:", 1)[0]


def test_every_cli_command_is_documented():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    commands = cli.list_commands(None)  # type: ignore[arg-type]
    assert "run" in commands and "sessions" in commands
    text = site_text()
    for name in commands:
        assert f"council {name}" in text, f"the site does not mention `council {name}`"


def _examples() -> list[tuple[str, str]]:
    """(page, line) for every `council ...` line of a bash block in the README and the site."""
    out = []
    for path in [ROOT / "README.md", *site_pages()]:
        for block in bash_blocks(path.read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("council "):
                    out.append((path.relative_to(ROOT).as_posix(), line))
    return out


def _words(line: str) -> list[str]:
    line = re.split(r"\s#\s|\s#$", line, maxsplit=1)[0]  # a trailing comment
    line = re.split(r"\s[|<>&]|\s2>", line, maxsplit=1)[0]  # pipes, redirections, background
    return shlex.split(line.replace("[", " ").replace("]", " "))


def _resolve(words: list[str]) -> tuple[list[click.Command], list[str]]:
    chain: list[click.Command] = [cli]
    rest = words[1:]
    while isinstance(chain[-1], click.Group) and rest:
        if rest[0].startswith("-"):
            rest = rest[1:]  # a group's own flag (--debug, --quiet)
            continue
        sub = chain[-1].get_command(click.Context(chain[-1]), rest[0])
        if sub is None:
            default = getattr(chain[-1], "DEFAULT", None)  # `council batch FILE`: the group's default command
            if default is not None:
                chain.append(chain[-1].commands[default])
            break
        chain.append(sub)
        rest = rest[1:]
    return chain, rest


def test_every_council_example_in_the_docs_names_a_real_command_and_real_options():
    examples = _examples()
    assert len(examples) > 40
    wrong = []
    for where, line in examples:
        words = _words(line)
        chain, rest = _resolve(words)
        if isinstance(chain[-1], click.Group) and len(chain) > 1 and chain[-1] is not cli:
            pass  # a group given no subcommand: `council sessions ID`-style defaults
        elif chain[-1] is cli:
            wrong.append(f"{where}: {line!r}: no such command")
            continue
        known = {opt for command in chain for p in command.params for opt in [*p.opts, *p.secondary_opts]}
        for word in rest:
            if word.startswith("-") and word not in ("-", "--"):
                flag = word.split("=", 1)[0]
                if flag not in known:
                    wrong.append(f"{where}: {line!r}: {flag} is not an option of {' '.join(c.name for c in chain)}")
    assert not wrong, "\n".join(wrong)


def test_every_documented_subcommand_answers_help():
    seen = set()
    for _, line in _examples():
        chain, _ = _resolve(_words(line))
        seen.add(tuple(c.name for c in chain[1:]))
    runner = CliRunner()
    for path in sorted(seen):
        result = runner.invoke(cli, [*path, "--help"], prog_name="council")
        assert result.exit_code == 0, (path, result.output)


# -- what the pages say is what the code does ---------------------------------------------------


def test_the_architecture_page_names_every_module_and_package():
    layout = page("maintainers/architecture.md")
    package = ROOT / "council"
    for path in sorted(package.rglob("*.py")):
        assert f"`{path.name}`" in layout, f"the architecture page does not name council/{path.relative_to(package)}"
    for folder in sorted(p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        assert f"`{folder.name}/`" in layout, f"the architecture page does not name council/{folder.name}/"
    assert "```mermaid" in layout


def test_the_code_sends_readers_to_docs_pages_that_exist_not_to_the_readme():
    """The README is a front door: a comment, a help text or a message points to the docs page
    that holds the reference, and every page it names exists."""
    for path in sorted((ROOT / "council").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        assert "README" not in text, f"{where} sends its reader to the README; name the docs page"
        for named in re.findall(r"docs/[\w./-]+\.md", text):
            assert (ROOT / named).is_file(), f"{where} names {named}, which does not exist"


def test_the_server_page_lists_the_parameters_the_server_ignores():
    from council.server.protocol import IGNORED

    row = next(line for line in page("chat-apps/server.md").splitlines() if "accepted and ignored" in line)
    listed = set(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    assert listed == set(IGNORED)


def test_the_exports_page_says_when_kendall_w_is_empty_as_the_code_decides_it():
    from council.methods.concordance import agreement

    note = page("exports.md").split("`kendall_w` is empty when", 1)[1].split("\n- ", 1)[0]
    # Two members, self-review excluded: one answer per ballot, nothing to agree on.
    assert agreement([["b"], ["a"]]) is None and "two members" in note
    # Three members, self-review excluded: three ballots of two, each pair once, a balanced design.
    three = agreement([["b", "c"], ["a", "c"], ["a", "b"]])
    assert three is not None and three.design == "balanced incomplete"
    assert "three members" not in note


def test_the_configuration_reference_lists_every_environment_variable_of_the_cli():
    reference = page("operators/configuration.md")
    for command in [cli, *(cli.get_command(click.Context(cli), n) for n in cli.list_commands(None))]:  # type: ignore[arg-type]
        subcommands = command.commands.values() if isinstance(command, click.Group) else []
        for c in [command, *subcommands]:
            for p in c.params:
                envvar = getattr(p, "envvar", None)
                if isinstance(envvar, str):
                    assert f"`{envvar}`" in reference, f"{envvar} ({c.name} {p.opts}) is not in the reference"


def test_the_docs_extra_is_installed_by_default():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert {r.split(">")[0].split("[")[0] for r in extras["docs"]} >= {"mkdocs", "mkdocs-material", "mkdocstrings"}
    install = (ROOT / "scripts" / "install.sh").read_text(encoding="utf-8")
    default = re.search(r'EXTRAS="\$\{COUNCIL_EXTRAS:-([a-z,]+)\}"', install).group(1)
    assert "docs" in default.split(",")

"""One meaning per flag across every command, walked from the real command tree (so a new
command cannot drift), plus the behaviour behind the shared flags."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from council import Council
from council.cli.main import cli
from council.errors import CouncilError

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")

#: Commands that write a file: each takes -o/--output FILE, and no other command does.
WRITES_FILES = {"export", "batch", "batch results", "bias-report", "leaderboard"}


def leaf_commands() -> dict[str, click.Command]:
    """Every runnable command, by its full name (``sessions list``)."""
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            full = f"{prefix} {name}".strip()
            if getattr(group, "DEFAULT", None) == name:  # `council batch FILE`: the group's own command
                full = prefix
            if isinstance(command, click.Group):
                walk(command, full)
            else:
                found[full] = command

    walk(cli, "")
    return found


COMMANDS = leaf_commands()


def options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]


def test_the_walk_finds_every_command():
    expected = {"run", "sessions list", "sessions show", "bias-report", "export", "compare", "grade", "batch",
                "batch status", "batch results", "worker", "serve"}  # fmt: skip
    assert expected <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_says_what_it_does(name):
    for option in options(COMMANDS[name]):
        assert option.help and option.help.strip(), f"{name}: {option.opts} has no help text"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_debug_and_quiet_are_accepted_after_every_subcommand(name):
    opts = {o for option in options(COMMANDS[name]) for o in option.opts}
    assert {"--debug", "--quiet", "-q"} <= opts, name


def test_json_means_the_whole_result_as_json_everywhere():
    having = [name for name, c in COMMANDS.items() if any("--json" in o.opts for o in options(c))]
    assert len(having) >= 6
    for name in having:
        (option,) = [o for o in options(COMMANDS[name]) if "--json" in o.opts]
        assert option.is_flag and option.name == "as_json", name
        assert "JSON" in (option.help or ""), name


def test_output_is_minus_o_on_every_command_that_writes_a_file():
    writers = {name for name, c in COMMANDS.items() if any("--output" in o.opts or "-o" in o.opts for o in options(c))}
    assert writers == WRITES_FILES
    for name in WRITES_FILES:
        (option,) = [o for o in options(COMMANDS[name]) if "--output" in o.opts]
        assert set(option.opts) == {"-o", "--output"} and option.name == "output", name
        assert isinstance(option.type, click.Path) and not option.type.dir_okay, name
        assert option.metavar == "FILE", name


# The one flag SPEC.md names twice: `leaderboard --judgments FILE...` reads judgments files, and
# `export --judgments` (round four, "Exports") writes the batches' judgments; both are about judgments.
SPEC_NAMED_TWICE = {("export", "--judgments")}


def test_a_flag_means_the_same_thing_in_every_command():
    seen: dict[str, tuple] = {}
    short_to_long: dict[str, str] = {}
    for name, command in COMMANDS.items():
        for option in options(command):
            shape = (option.name, option.is_flag, option.multiple, type(option.type).__name__)
            longs = [o for o in option.opts if o.startswith("--") and (name, o) not in SPEC_NAMED_TWICE]
            for opt in longs:
                assert seen.setdefault(opt, shape) == shape, f"{opt} in {name}: {shape} vs {seen[opt]}"
            for short in (o for o in option.opts if not o.startswith("--")):
                assert short_to_long.setdefault(short, longs[0]) == longs[0], f"{short} in {name}"


# -- behaviour -------------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "council.toml"
    path.write_text('[councils.default]\nmembers = ["fake/a", "fake/b", "fake/c"]\n')
    return path


def invoke(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_debug_after_the_subcommand_shows_the_real_error(tmp_path):
    missing = str(tmp_path / "missing.toml")
    plain = invoke("run", "hello", "--config", missing)
    assert plain.exit_code == 2 and "error:" in plain.stderr and "Traceback" not in plain.output
    debug = invoke("run", "hello", "--config", missing, "--debug")
    assert isinstance(debug.exception, CouncilError)  # re-raised for the traceback, as with `council --debug run`
    before = invoke("--debug", "run", "hello", "--config", missing)
    assert type(before.exception) is type(debug.exception)


async def test_quiet_silences_status_lines_but_not_results(tmp_path):
    council = Council.from_config({"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c"]}}})
    await council.run("What is 2 + 2?", seed=1)
    await council.aclose()
    loud = invoke("export", "--format", "jsonl")
    assert "exported 1 sessions" in loud.stderr
    quiet = invoke("export", "--format", "jsonl", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout.count("\n") == 1
    root_quiet = invoke("-q", "export", "-o", str(tmp_path / "s.jsonl"))
    assert root_quiet.exit_code == 0 and root_quiet.stderr == ""


def test_run_dash_reads_the_question_from_stdin(config):
    result = invoke("run", "-", "--config", str(config), "--json", input="What is the capital of France?\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["question"] == "What is the capital of France?"


def test_run_file_reads_the_question_from_a_file(config, tmp_path):
    question = tmp_path / "q.txt"
    question.write_text("Explain  photosynthesis,\nbriefly.\n", encoding="utf-8")
    result = invoke("run", "--file", str(question), "--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["question"] == "Explain  photosynthesis,\nbriefly."


@pytest.mark.parametrize(
    "args, input, words",
    [
        (["run"], None, "QUESTION"),
        (["run", "hi", "--file", "q.txt"], None, "not both"),
        (["run", "-"], "  \n", "empty"),
        (["run", "--file", "missing.txt"], None, "not found"),
        (["run", "-"], b"\xff\xfe bad", "UTF-8"),
    ],
)
def test_run_question_sources_fail_in_one_line(config, tmp_path, monkeypatch, args, input, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.txt").write_text("hello")
    result = invoke(*args, "--config", str(config), input=input)
    assert result.exit_code == 2, result.output
    assert words in result.stderr and "Traceback" not in result.output


async def test_sessions_list_json_uses_session_id_and_a_members_list():
    council = Council.from_config({"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c"]}}})
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    listed = json.loads(invoke("sessions", "list", "--json").stdout)
    (row,) = listed
    assert row["session_id"] == result.session_id and "id" not in row
    assert row["members"] == ["fake/a", "fake/b", "fake/c"]
    shown = json.loads(invoke("sessions", "show", result.session_id, "--json").stdout)
    assert shown["session_id"] == row["session_id"]


def test_bias_report_writes_its_report_with_minus_o(tmp_path):
    from council.storage import SQLiteStore
    from tests.bias.test_bias_report import make_records

    store = SQLiteStore.open()
    store.insert_bias_records(make_records(5, sessions=12))
    store.close()
    as_json = tmp_path / "report.json"
    result = invoke("bias-report", "--json", "-o", str(as_json))
    assert result.exit_code == 0 and result.stdout == ""
    assert "reviewers" in json.loads(as_json.read_text())
    page = tmp_path / "report.html"
    assert invoke("bias-report", "--html", "-o", str(page)).exit_code == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    text = tmp_path / "report.txt"
    assert invoke("bias-report", "--output", str(text)).exit_code == 0
    assert "Reviewer Profiles" in text.read_text()
    both = invoke("bias-report", "--json", "--html")
    assert both.exit_code == 2 and "--json" in both.stderr


@pytest.mark.parametrize("command", ["bias-report", "leaderboard"])
def test_the_report_commands_write_a_page_beside_their_json(tmp_path, command):
    from council.storage import SQLiteStore
    from tests.bias.test_bias_report import make_records

    store = SQLiteStore.open()
    store.insert_bias_records(make_records(5, sessions=12))
    store.close()
    page = tmp_path / "page.html"
    result = invoke(command, "--html", str(page), "--json", *(["--bootstrap", "0"] if command == "leaderboard" else []))
    assert result.exit_code == 0, result.stderr
    assert page.read_text().startswith("<!DOCTYPE html>") and isinstance(json.loads(result.stdout), dict)
    assert f"wrote {page}" in result.stderr


# -- shell completion --------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_is_documented_and_works(shell):
    assert f"_COUNCIL_COMPLETE={shell}_source council" in CLI_PAGE
    result = CliRunner().invoke(cli, [], prog_name="council", env={"_COUNCIL_COMPLETE": f"{shell}_source"})
    assert result.exit_code == 0 and "_COUNCIL_COMPLETE" in result.output


def test_completion_offers_commands_and_options():
    def complete(words: str) -> str:
        env = {"_COUNCIL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        return CliRunner().invoke(cli, [], prog_name="council", env=env).output

    assert "bias-report" in complete("council bi")
    assert "--format" in complete("council export --fo")

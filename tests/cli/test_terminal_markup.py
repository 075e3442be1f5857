"""Text that looks like terminal markup is data: every command prints it as written.

The mock's ``+markup`` models put rich markup (``[/]``, ``[link=...]``), ANSI colours and an
OSC 8 hyperlink in their answers and review reasoning; questions, item ids and reviewer ids
carry markup too. Nothing may crash, hide a URL, recolour the terminal or become an emoji.
"""

from __future__ import annotations

import json

import pytest
from conftest import invoke_cli, write_config
from mock_server import start_mock_server

from council.testing.replies import MARKUP

QUESTION = "What does [/] mean, and is [link=http://evil.example/q]this[/link] a link? :warning:"


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server() as server:
        yield server.base_url


def assert_literal(text: str) -> None:
    """The markup of MARKUP is shown as written, escapes visible and none of them live."""
    for piece in ("[/]", "[bold red]ALERT[/bold red]", "[link=http://evil.example/]click", "here[/link]",
                  "\\x1b[31mred\\x1b[0m", "\\x1b]8;;http://evil.example/\\x07hyperlink", ":warning:"):  # fmt: skip
        assert piece in text, piece
    assert "\x1b" not in text and "\x07" not in text and "⚠" not in text


def test_run_sessions_list_and_show_print_markup_literally(tmp_path, council_home, mock_url):
    models = {m: {"model": f"openai/mock-{m}+markup", "api_base": mock_url} for m in ("a", "b", "c")}
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    run = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", "5")
    assert run.exit_code == 0, run.stderr
    assert_literal(run.stdout)  # the chairman's answer
    result = json.loads(invoke_cli("run", QUESTION, "--config", str(cfg), "--json").stdout)
    assert result["synthesis"]["text"].startswith(MARKUP)  # the markup really reached council

    listed = invoke_cli("sessions", "list")
    assert listed.exit_code == 0, listed.stderr
    assert "[/]" in listed.stdout and "[link=http://evil.example/q]this" in listed.stdout
    shown = invoke_cli("sessions", "show", result["session_id"])
    assert shown.exit_code == 0, shown.stderr
    assert_literal(shown.stdout)


def test_failures_and_errors_show_markup_and_escapes_literally(tmp_path, council_home, mock_url):
    models = {"a": {"model": "openai/mock-a", "api_base": mock_url},
              "b": {"model": "openai/mock-b", "api_base": mock_url},
              "c": {"model": "fake/[/]\x1b[31m+fail", "retries": 0}}  # fmt: skip
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    run = invoke_cli("run", QUESTION, "--config", str(cfg))
    assert run.exit_code == 0, run.stderr
    assert "fake/[/]\\x1b[31m+fail" in run.stderr and "\x1b" not in run.stdout + run.stderr  # the warning line
    shown = invoke_cli("run", QUESTION, "--config", str(cfg), "--show", "answers,reviews")
    assert "fake/[/]\\x1b[31m+fail" in shown.stdout and "\x1b" not in shown.stdout

    bad = invoke_cli("run", QUESTION, "--config", str(cfg), "--council", "[red]x\x1b]8;;http://evil.example/\x07")
    assert bad.exit_code == 2
    [line] = bad.error_lines
    assert "'[red]x\\x1b]8;;http://evil.example/\\x07'" in line and "\x1b" not in line


def test_grade_and_compare_print_judge_text_literally(tmp_path, council_home):
    response = tmp_path / "r.txt"
    response.write_text("An answer with [/] and [link=http://evil.example/r]a link[/link].")
    grade = invoke_cli("grade", "--prompt", QUESTION, "--response", str(response), "--judge", "fake/g+markup")
    assert grade.exit_code == 0, grade.stderr
    assert "[/] [bold red]ALERT" in grade.stdout and "\x1b" not in grade.stdout  # reasoning, cut to fit the table
    compare = invoke_cli("compare", "--prompt", QUESTION, "--a", str(response), "--b", str(response),
                      "--judge", "fake/[/]j+fail")  # fmt: skip
    assert compare.exit_code == 1
    assert "judge fake/[/]j+fail failed:" in compare.stdout


def test_batch_summary_prints_item_ids_literally(tmp_path, council_home):
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"id": "[/][link=http://evil.example/]x", "prompt": "Q?", "a": "A", "b": "B"}) + "\n")
    proc = invoke_cli("batch", str(batch), "--judge", "fake/j+fail")
    assert proc.exit_code == 1
    assert "failed [/][link=http://evil.example/]x:" in proc.stdout


def test_bias_report_prints_reviewer_ids_literally(council_home):
    from council.storage import SQLiteStore

    store = SQLiteStore.open()
    records = [
        {"session_id": f"s{s}", "reviewer_id": reviewer, "model_id": model, "position": p, "response_length_chars": 10,
         "score_value": 5.0 + p, "scale_min": 1, "scale_max": 10, "self_review": 0}
        for s in range(3)
        for reviewer in ("[/]rev\x1b[31m", "[bold]other")
        for p, model in enumerate(("m[/]1", "m2", "m3"))
    ]  # fmt: skip
    store.insert_bias_records(records)
    store.close()
    proc = invoke_cli("bias-report")
    assert proc.exit_code == 0, proc.stderr
    assert "[/]rev\\x1b[31m" in proc.stdout and "[bold]other" in proc.stdout and "\x1b" not in proc.stdout



# -- bidirectional controls ----------------------------------------------------------------

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
        "\u200f", "\u061c"]  # fmt: skip


@pytest.mark.parametrize("char", BIDI)
def test_every_bidi_control_is_shown_as_an_escape(char):
    from council.untrusted.terminal import visible

    shown = visible(f"gpt-4o{char}1-inim")
    assert char not in shown and f"\\u{ord(char):04x}" in shown


def test_a_bidi_override_in_a_model_name_cannot_reorder_what_the_terminal_shows(tmp_path, council_home):
    spoofed = "fake/gpt-4o\u202e1-inim\u202c"
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": spoofed}, "b": {"model": "fake/b"}}, chairman="b",
                       self_review="flag")  # fmt: skip
    run = invoke_cli("run", "Is \u2067this\u2069 reordered?", "--config", str(cfg))
    assert run.exit_code == 0, run.stderr
    listed = invoke_cli("sessions", "list")
    shown = invoke_cli("sessions", "show", json.loads(invoke_cli("sessions", "list", "--json").stdout)[0]["session_id"])
    for out in (run.stdout + run.stderr, listed.stdout, shown.stdout):
        assert not any(c in out for c in BIDI), out
    assert "gpt-4o\\u202e1-inim\\u202c" in run.stdout + shown.stdout

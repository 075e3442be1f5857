"""`council run --show` and `council sessions show`: the whole session, readable, lossless in a
pipe, literal; and the exit codes of a partial session."""

from __future__ import annotations

import json

from conftest import invoke_cli, write_config
from rich.console import Console

from council.storage import SQLiteStore

QUESTION = "Why is a stable sort useful when sorting records by several keys in turn?"
MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]


def config(tmp_path, members=MEMBERS, **council):
    council.setdefault("chairman", members[0])
    return str(write_config(tmp_path / "council.toml", {}, members=list(members), **council))


def stored_session():
    store = SQLiteStore.open()
    [row] = store.list_sessions(limit=5)
    result = json.loads(store.get_session(row["id"])["result"])
    store.close()
    return result


def assert_whole_session_in(stdout, result):
    for a in result["answers"]:
        assert a["text"] in stdout  # whole: not wrapped, not cut, in a pipe
    for r in result["reviews"]:
        for member, reasoning in r["reasoning"].items():
            assert reasoning in stdout
            assert f"{member}: {r['scores'][member]}" in stdout
        assert "ranking: " + " > ".join(r["ranking"]) in stdout
        assert "order seen: " + "  ".join(f"{lab} = {m}" for lab, m in r["labels"].items()) in stdout
    for line in result["synthesis"]["text"].splitlines():  # the answer, then where the council disagreed
        assert line in stdout


def test_run_show_prints_answers_and_reviews_as_the_session_runs(tmp_path):
    proc = invoke_cli("run", QUESTION, "--config", config(tmp_path), "--seed", "3", "--show", "answers,reviews")
    assert proc.exit_code == 0, proc.stderr
    result = stored_session()
    assert_whole_session_in(proc.stdout, result)
    # answers come before reviews, both before the summary; the reviews table is not repeated
    assert proc.stdout.index("Answer fake/alpha") < proc.stdout.index("Review by") < proc.stdout.index("Session ")
    assert "Reviews (each reviewer" not in proc.stdout
    assert proc.error_lines == []


def test_sessions_show_prints_the_question_answers_reviews_consensus_and_synthesis(tmp_path):
    assert invoke_cli("run", QUESTION, "--config", config(tmp_path), "--seed", "4").exit_code == 0
    result = stored_session()
    shown = invoke_cli("sessions", "show", result["session_id"][:8])
    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    assert QUESTION in out and "Consensus ranking" in out and "Kendall's W" in out
    assert_whole_session_in(out, result)
    order = [out.index(x) for x in ("Question", "Answer fake/", "Review by", "Consensus ranking", "Synthesis by")]
    assert order == sorted(order)
    only = invoke_cli("sessions", "show", result["session_id"], "--show", "question")
    assert QUESTION in only.stdout and "Answer fake/" not in only.stdout and "Review by" not in only.stdout


def test_long_texts_fold_at_the_terminal_width_and_lose_nothing(monkeypatch):
    from council.cli import render

    text = "word " * 60 + "a-very-long-unbroken-token-" * 4 + "\nsecond paragraph"
    console = render.LiteralConsole(force_terminal=True, width=40, record=True, color_system=None)
    monkeypatch.setattr(render, "out", console)
    render.text_block(text)
    shown = console.export_text()
    lines = shown.splitlines()
    assert len(lines) > 8 and max(map(len, lines)) <= 40
    assert "".join(shown.split()) == "".join(text.split())  # every character, only re-wrapped

    pipe = render.LiteralConsole(file=open("/dev/null", "w"), width=40, record=True)  # noqa: SIM115
    assert not pipe.is_terminal
    monkeypatch.setattr(render, "out", pipe)
    render.text_block(text)
    assert pipe.export_text() == "  " + text.replace("\n", "\n  ") + "\n"


def test_markup_and_escapes_in_answers_and_reasoning_are_shown_literally(tmp_path):
    cfg = config(tmp_path, ["fake/alpha+markup", "fake/beta+markup", "fake/gamma"])
    proc = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "5", "--show", "all")
    assert proc.exit_code == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "[/] [bold red]ALERT[/bold red] [link=http://evil.example/]click here[/link]" in proc.stdout
    assert "\\x1b[31mred\\x1b[0m" in proc.stdout


def test_missing_synthesis_is_partial_exit_1_with_its_cause_once(tmp_path):
    cfg = config(tmp_path, chairman="fake/chair+fail")
    proc = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "1")
    assert proc.exit_code == 1
    [line] = proc.error_lines
    assert line.startswith("error: partial session") and "no synthesis" in line
    cause = "fake failure requested by the +fail behaviour"
    assert (proc.stdout + proc.stderr).count(cause) == 1
    assert stored_session()["status"] == "partial"

    as_json = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "1", "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["status"] == "partial"
    assert len(as_json.error_lines) == 1


def test_no_synthesis_asked_exits_0(tmp_path):
    cfg = config(tmp_path, chairman="fake/chair+fail")
    proc = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "1", "--no-synthesis")
    assert proc.exit_code == 0, proc.stderr
    assert proc.error_lines == []


def test_failed_member_with_a_synthesis_exits_0_with_one_warning_line(tmp_path):
    cfg = config(tmp_path, ["fake/alpha", "fake/beta", "fake/gamma+fail"], quorum=2)
    proc = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "2")
    assert proc.exit_code == 0, proc.stderr
    answer_warnings = [line for line in proc.error_lines if "failed to answer" in line]
    assert len(answer_warnings) == 1 and answer_warnings[0].startswith("warning: 1 of 3 members failed to answer")
    assert "fake/gamma+fail" in answer_warnings[0]
    assert not any(line.startswith("error") for line in proc.error_lines)
    assert "Chairman's answer" in proc.stdout


def test_a_fallback_chairman_is_a_warning_not_a_failure(tmp_path):
    cfg = config(tmp_path, chairman="fake/chair+fail", fallback_chairman="fake/beta")
    proc = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "2")
    assert proc.exit_code == 0, proc.stderr
    [line] = proc.error_lines
    assert line.startswith("warning: the chairman failed") and "fallback chairman fake/beta wrote" in line


def test_bad_show_values_are_one_line_exit_2(tmp_path):
    cfg = config(tmp_path)
    bad = invoke_cli("run", QUESTION, "--config", cfg, "--show", "answers,votes")
    assert bad.exit_code == 2 and len(bad.error_lines) == 1 and "'votes'" in bad.error_lines[0]
    both = invoke_cli("run", QUESTION, "--config", cfg, "--show", "answers", "--json")
    assert both.exit_code == 2 and len(both.error_lines) == 1
    assert SQLiteStore.open().list_sessions(limit=5) == []  # nothing was run


def test_sessions_show_with_transcripts_off_says_the_text_was_not_kept(tmp_path):
    env = {"COUNCIL_STORE_TRANSCRIPTS": "0"}
    assert invoke_cli("run", QUESTION, "--config", config(tmp_path), "--seed", "6", env=env).exit_code == 0
    [row] = SQLiteStore.open().list_sessions(limit=5)
    shown = invoke_cli("sessions", "show", row["id"])
    assert shown.exit_code == 0, shown.stderr
    assert QUESTION not in shown.stdout
    assert shown.stdout.count("(text not kept: transcripts are off)") >= 1 + 3  # question + answers
    assert "ranking: " in shown.stdout  # what is not text is still shown


def test_terminal_console_is_literal(monkeypatch):
    # The view prints through the literal console: a Console that reads markup would fail above.
    from council.cli import views

    assert isinstance(views.out, Console) and views.out._markup is False  # noqa: SLF001


def test_run_show_all_with_transcripts_off_still_prints_the_chairmans_answer(tmp_path):
    env = {"COUNCIL_STORE_TRANSCRIPTS": "0"}
    proc = invoke_cli("run", QUESTION, "--config", config(tmp_path), "--seed", "7", "--show", "all", "--json", env=env)
    assert proc.exit_code == 2  # --show and --json: one or the other
    proc = invoke_cli("run", QUESTION, "--config", config(tmp_path), "--seed", "7", "--show", "all", env=env)
    assert proc.exit_code == 0, proc.stderr
    assert "(text not kept: transcripts are off)" in proc.stdout  # the live views had no text
    assert "Chairman's answer" in proc.stdout and "Synthesis of 3 answers" in proc.stdout


def test_run_show_prints_while_the_session_runs_even_into_a_pipe(tmp_path, council_home):
    # The chairman hangs (the mock server's "+slow" waits 30 s): the answers and reviews must
    # reach the pipe before the session can end, i.e. while the process is still running.
    import os
    import subprocess
    import sys
    from pathlib import Path

    from mock_server import start_mock_server

    root = Path(__file__).resolve().parents[2]
    with start_mock_server(latency=0.01, slow_seconds=30) as mock:
        models = {
            "a": {"model": "openai/mock-a", "api_base": mock.base_url},
            "b": {"model": "openai/mock-b", "api_base": mock.base_url},
            "chair": {"model": "openai/mock-c+slow", "api_base": mock.base_url, "timeout": 25, "retries": 0},
        }
        cfg = write_config(tmp_path / "slow.toml", models, members=["a", "b"], chairman="chair")
        proc = subprocess.Popen(
            [sys.executable, "-m", "council", "run", QUESTION, "--config", str(cfg), "--show", "answers,reviews"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONPATH": str(root), "COUNCIL_HOME": str(council_home)},
        )  # fmt: skip
        try:
            seen = []
            for line in proc.stdout:
                if line.startswith(("Answer ", "Review by ")):
                    seen.append(line.split(" (")[0])
                if len(seen) == 4:
                    break
            assert sorted(seen) == ["Answer a", "Answer b", "Review by a", "Review by b"]
            assert proc.poll() is None  # still waiting for the chairman
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_sessions_show_of_a_session_below_quorum_shows_the_answer_that_came(tmp_path):
    cfg = config(tmp_path, ["fake/alpha+fail", "fake/beta+fail", "fake/gamma"], quorum=2, chairman="fake/gamma")
    ran = invoke_cli("run", QUESTION, "--config", cfg, "--seed", "2")
    assert ran.exit_code == 1 and "quorum" in ran.error_lines[-1]
    [row] = SQLiteStore.open().list_sessions(limit=5)
    stored = json.loads(SQLiteStore.open().get_session(row["id"])["result"])
    kept = next(a["text"] for a in stored["answers"] if a["member"] == "fake/gamma")
    shown = invoke_cli("sessions", "show", row["id"])
    assert shown.exit_code == 0, shown.stderr
    assert QUESTION in shown.stdout and "Answer fake/gamma" in shown.stdout and kept in shown.stdout
    assert "fake/alpha+fail" in shown.stdout  # the failed members, with their errors
    last = shown.stdout.strip().splitlines()[-1]  # why it failed, after the summary
    assert last.startswith("error: session failed: only 1 of 3 members answered (quorum 2)"), shown.stdout
    as_json = invoke_cli("sessions", "show", row["id"], "--json")
    assert as_json.exit_code == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["status"] == "failed" and doc["error"].startswith("only 1 of 3 members answered (quorum 2)")
    assert next(a for a in doc["answers"] if a["member"] == "fake/gamma")["text"] == kept


def test_an_empty_show_is_one_line_exit_2_in_run_and_in_sessions_show(tmp_path):
    cfg = config(tmp_path)
    for value in ("", " , "):
        bad = invoke_cli("run", QUESTION, "--config", cfg, "--show", value)
        assert bad.exit_code == 2 and len(bad.error_lines) == 1, bad.stderr
        assert bad.error_lines[0].startswith("error: --show: no part named; choose from")
    assert SQLiteStore.open().list_sessions(limit=5) == []  # nothing was run
    assert invoke_cli("run", QUESTION, "--config", cfg, "--seed", "1").exit_code == 0
    [row] = SQLiteStore.open().list_sessions(limit=5)
    shown = invoke_cli("sessions", "show", row["id"], "--show", "")
    assert shown.exit_code == 2 and len(shown.error_lines) == 1 and shown.stdout == ""
    assert shown.error_lines[0].startswith("error: --show: no part named; choose from")


def test_show_and_json_are_refused_together_in_run_and_in_sessions_show(tmp_path):
    cfg = config(tmp_path)
    assert invoke_cli("run", QUESTION, "--config", cfg, "--seed", "1").exit_code == 0
    [row] = SQLiteStore.open().list_sessions(limit=5)
    run = invoke_cli("run", QUESTION, "--config", cfg, "--show", "answers", "--json")
    shown = invoke_cli("sessions", "show", row["id"], "--show", "answers", "--json")
    assert run.exit_code == shown.exit_code == 2 and shown.stdout == ""
    assert run.error_lines == shown.error_lines == [
        "error: --show prints for people; --json prints the whole result: choose one"
    ]
    assert invoke_cli("sessions", "show", row["id"], "--json").exit_code == 0  # --json alone: the whole session

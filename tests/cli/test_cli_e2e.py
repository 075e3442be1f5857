"""`council run` end to end against the mock LLM server over real HTTP.

The command runs in-process (click's test runner) where only its behaviour matters; the
installed console script and import costs are checked in real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import invoke_cli
from mock_server import start_mock_server

QUESTION = "Which planet is known as the red planet, and why?"


def mock_config(tmp_path: Path, base_url: str, members: list[str], **council: str) -> Path:
    aliases = [f"m{i}" for i in range(1, len(members) + 1)]
    lines = ["[councils.default]", f"members = {json.dumps(aliases)}", 'chairman = "m1"', 'fallback_chairman = "m2"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in council.items()]
    for alias, model in zip(aliases, members, strict=True):
        lines += [
            f"[models.{alias}]",
            f'model = "openai/{model}"',
            f'api_base = "{base_url}"',
            "timeout = 10",
            "retries = 1",
        ]
    path = tmp_path / "council.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.01) as server:
        yield server.base_url


def test_run_json_four_members_over_http(tmp_path, council_home, mock_url):
    cfg = mock_config(tmp_path, mock_url, ["mock-alpha", "mock-beta", "mock-gamma", "mock-delta"])
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", "--seed", "11")
    assert proc.exit_code == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "complete"
    assert result["members"] == ["m1", "m2", "m3", "m4"]
    for member in ("m1", "m2", "m3", "m4"):
        assert member in result["models"]
        assert any(e["member"] == member for e in result["consensus"]["ranking"])
    orders = {tuple(r["display_order"]) for r in result["reviews"]}
    assert len(orders) >= 2, "at least two reviewers must have seen different orders"
    assert result["synthesis"]["text"]

    import sqlite3

    db = sqlite3.connect(council_home / "council.db")
    rows = db.execute("select reviewer_id, model_id, position, score_value, query_hash from bias_records").fetchall()
    pairs = {(r[0], r[1]) for r in rows}
    models = {f"openai/{m}" for m in ("mock-alpha", "mock-beta", "mock-gamma", "mock-delta")}
    assert pairs == {(a, b) for a in models for b in models if a != b}
    dump = "\n".join(db.iterdump())
    bias_dump = [line for line in dump.splitlines() if "bias_records" in line]
    assert bias_dump and not any(QUESTION in line for line in bias_dump)
    assert db.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_run_human_output_and_sessions_commands(tmp_path, council_home, mock_url):
    cfg = mock_config(tmp_path, mock_url, ["mock-alpha", "mock-beta", "mock-gamma"])
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", "3")
    assert proc.exit_code == 0, proc.stderr
    assert "Consensus ranking" in proc.stdout and "Chairman" in proc.stdout
    listed = invoke_cli("sessions", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == 1 and rows[0]["status"] == "complete"
    shown = invoke_cli("sessions", "show", rows[0]["session_id"][:8], "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["session_id"] == rows[0]["session_id"]


def test_member_failure_over_http_is_reported(tmp_path, council_home, mock_url):
    cfg = mock_config(tmp_path, mock_url, ["mock-alpha", "mock-beta", "mock-gamma+fail"])
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--json")
    assert proc.exit_code == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "partial"
    failure = next(f for f in result["failures"] if f["member"] == "m3")
    assert "500" in failure["error"] or "Internal" in failure["error"]


def test_no_member_answers_exit_1_one_line(tmp_path, council_home):
    # nothing listens on this port: every call fails to connect
    cfg = mock_config(tmp_path, "http://127.0.0.1:9/v1", ["a", "b"])
    proc = invoke_cli("run", QUESTION, "--config", str(cfg))
    assert proc.exit_code == 1
    assert len(proc.error_lines) == 1, proc.stderr
    assert proc.error_lines[0].startswith("error:") and "quorum" in proc.error_lines[0]
    assert "Connection" in proc.error_lines[0]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["run", "   "], "question is empty"),
        (["run", "q", "--config", "/nonexistent/c.toml"], "not found"),
        (["run", "q", "--council", "nope", "--config", "{cfg}"], "unknown council"),
        (["run", "q", "--candidates", "{bad_candidates}", "--config", "{cfg}"], "candidate 1 is not"),
        (["run", "q", "--candidates", "{latin1}", "--config", "{cfg}"], "not UTF-8"),
    ],
)
def test_bad_input_exit_2_one_line_nothing_written(tmp_path, council_home, args, fragment):
    cfg = mock_config(tmp_path, "http://127.0.0.1:9/v1", ["a", "b"])
    bad = tmp_path / "cands.json"
    bad.write_text('{"not": ["a", "list"]}')
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('[{"id": "a", "text": "caf\xe9"}]'.encode("latin-1"))
    args = [a.format(cfg=cfg, bad_candidates=bad, latin1=latin1) for a in args]
    proc = invoke_cli(*args)
    assert proc.exit_code == 2, proc.stderr
    assert len(proc.error_lines) == 1 and fragment in proc.error_lines[0], proc.stderr
    assert not (council_home / "council.db").exists()


@pytest.mark.slow
def test_installed_script_runs_a_council_over_http(tmp_path, council_home, mock_url):
    # The console script, in its own process, as a user runs it.
    script = shutil.which("council", path=os.path.dirname(sys.executable)) or shutil.which("council")
    assert script, "the council console script is not installed"
    cfg = mock_config(tmp_path, mock_url, ["mock-alpha", "mock-beta"])
    env = {**os.environ, "COUNCIL_HOME": str(council_home)}
    proc = subprocess.run(
        [script, "run", QUESTION, "--config", str(cfg), "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "complete"


def test_help_is_fast_and_does_not_import_litellm(council_home):
    code = (
        "import sys; from council.cli.main import cli; sys.argv=['council','--help']\n"
        "try:\n    cli()\nexcept SystemExit: pass\nprint('litellm' in sys.modules)"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "COUNCIL_HOME": str(council_home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("False")
    assert "run" in proc.stdout and "sessions" in proc.stdout
    assert time.perf_counter() - t0 < 30  # generous; the real figure is in docs/benchmarks.md


def test_sessions_list_does_not_import_litellm(council_home):
    code = (
        "import sys; from council.cli.main import cli; sys.argv=['council','sessions','list']\n"
        "try:\n    cli()\nexcept SystemExit: pass\nprint('litellm' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "COUNCIL_HOME": str(council_home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("False")

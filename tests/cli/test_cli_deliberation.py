"""Deliberation rounds end to end: ``council run`` in its own process against the mock LLM
server over real HTTP, and the stored session shown again (issue 59)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import invoke_cli
from mock_server import start_mock_server
from test_cli_e2e import mock_config as write_config

QUESTION = "Which planet is known as the red planet, and why?"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.01) as server:
        yield server.base_url


def test_council_run_deliberates_in_a_real_process_and_sessions_show_tells_the_rounds(
    tmp_path, council_home, mock_url
):
    models = ["mock-alpha", "mock-beta", "mock-gamma", "mock-delta+adopt"]
    cfg = write_config(tmp_path, mock_url, models, deliberation="always", max_rounds=2)
    env = {**os.environ, "COUNCIL_HOME": str(council_home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "council", "run", QUESTION, "--config", str(cfg), "--json", "--seed", "5"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    rounds = result["deliberation"]["rounds"]
    assert rounds and rounds[0]["round"] == 1 and rounds[0]["trigger"] == "always"
    for r in rounds:
        assert set(r) >= {"round", "kendall_w_before", "kendall_w_after", "members"}
        assert [m["member"] for m in r["members"]] == ["m1", "m2", "m3", "m4"]
        for m in r["members"]:
            assert set(m) >= {"member", "changed", "similarity_to_own", "reason", "capitulation"}
    delta = rounds[0]["members"][3]
    assert delta["changed"] and delta["adopted_from"] in ("m1", "m2", "m3") and delta["capitulation"] is True
    assert rounds[-1]["kendall_w_after"] == result["consensus"]["kendall_w"]
    assert any(f.startswith("capitulation: m4 adopted") for f in result["flags"])

    shown = invoke_cli("sessions", "show", result["session_id"])
    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    assert "Deliberation round 1 (always; Kendall's W before" in out
    assert "Revision round 1: m4 revised its answer" in out and "with no reason given (capitulation)" in out
    assert "Deliberation (always, at most 2 rounds)" in out
    assert "Round 1 (always): Kendall's W" in out
    as_json = invoke_cli("sessions", "show", result["session_id"], "--json")
    assert json.loads(as_json.stdout)["deliberation"] == result["deliberation"]


def test_deliberation_off_adds_nothing_to_the_json(tmp_path, council_home, mock_url):
    cfg = write_config(tmp_path, mock_url, ["mock-alpha", "mock-beta", "mock-gamma"], deliberation="off")
    proc = invoke_cli("run", QUESTION, "--config", str(cfg), "--json", "--seed", "5")
    assert proc.exit_code == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "deliberation" not in result and not any("capitulation" in f for f in result["flags"])
    shown = invoke_cli("sessions", "show", result["session_id"])
    assert "Deliberation" not in shown.stdout and "Revision" not in shown.stdout


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ('deliberation = "sometimes"', "councils.default.deliberation: Input should be 'off', 'auto' or 'always'"),
        ("max_rounds = 4", "councils.default.max_rounds: Input should be less than or equal to 3"),
        ("max_rounds = 0", "councils.default.max_rounds: Input should be greater than or equal to 1"),
        ('deliberation_threshold = "0.5"', "councils.default.deliberation_threshold: Input should be a valid number"),
        ("deliberation_threshold = 1.5", "councils.default.deliberation_threshold: Input should be less than"),
        ("deliberation_margin = -0.1", "councils.default.deliberation_margin: Input should be greater than"),
    ],
)
def test_a_bad_deliberation_setting_is_one_line_exit_2(tmp_path, council_home, setting, fragment):
    cfg = tmp_path / "council.toml"
    cfg.write_text(f'[councils.default]\nmembers = ["fake/a", "fake/b"]\n{setting}\n')
    proc = invoke_cli("run", QUESTION, "--config", str(cfg))
    assert proc.exit_code == 2, proc.stderr
    assert len(proc.error_lines) == 1 and fragment in proc.error_lines[0], proc.stderr


def test_markup_in_revised_answers_and_reasons_is_shown_as_written(tmp_path, council_home, mock_url):
    from test_terminal_markup import assert_literal

    models = ["mock-alpha+markup", "mock-beta+markup", "mock-gamma+markup"]
    cfg = write_config(tmp_path, mock_url, models, deliberation="always")
    run = invoke_cli("run", QUESTION, "--config", str(cfg), "--seed", "5", "--json")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)
    reasons = [m["reason"] for r in result["deliberation"]["rounds"] for m in r["members"]]
    assert reasons and all(reason.startswith("[/] [bold red]ALERT") for reason in reasons)
    shown = invoke_cli("sessions", "show", result["session_id"], "--show", "answers")
    assert shown.exit_code == 0, shown.stderr
    reason_lines = [line for line in shown.stdout.splitlines() if line.strip().startswith("reason:")]
    assert len(reason_lines) == len(reasons)
    for line in reason_lines:
        assert_literal(line)

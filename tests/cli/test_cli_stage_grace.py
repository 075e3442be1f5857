"""`council run` in its own process with a stalled member on the mock server: it returns at the
quorum plus the grace, the member shown late (``stage_grace``), not after the straggler."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import invoke_cli
from mock_server import start_mock_server

QUESTION = "Which planet is known as the red planet, and why?"
STALL = 600.0  # the straggler's delay: hundreds of times the grace, and past the subprocess's timeout


def config(tmp_path, base_url: str, grace: str) -> str:
    models = {"m1": "mock-alpha", "m2": "mock-beta", "m3": "mock-gamma+slow"}
    lines = ["[councils.default]", 'members = ["m1", "m2", "m3"]', 'chairman = "m1"', f"stage_grace = {grace}"]
    for alias, model in models.items():
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{base_url}"']
        lines.append(f"timeout = {STALL * 2}")
    path = tmp_path / "council.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_council_run_returns_before_the_straggler(tmp_path, council_home):
    with start_mock_server(latency=0.01, slow_seconds=STALL) as server:
        cfg = config(tmp_path, server.base_url, "0.5")
        env = {**os.environ, "COUNCIL_HOME": str(council_home)}
        proc = subprocess.run(
            [sys.executable, "-m", "council", "run", QUESTION, "--config", cfg, "--json", "--seed", "3"],
            capture_output=True, text=True, env=env, timeout=STALL / 4,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["late_members"] == ["m3"] and result["status"] == "partial"
    assert [a["status"] for a in result["answers"]] == ["ok", "ok", "late"]
    assert result["synthesis"]["text"] and sorted(e["member"] for e in result["consensus"]["ranking"]) == ["m1", "m2"]
    assert "late, not reviewed: m3" in proc.stderr

    shown = invoke_cli("sessions", "show", result["session_id"], "--show", "answers,reviews")
    assert shown.exit_code == 0, shown.stderr
    assert "m3 (openai/mock-gamma+slow) late: not reviewed" in shown.stdout

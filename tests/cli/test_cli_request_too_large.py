"""`council run` with a question no member's ``tpm`` can take: one line, exit 2, the session kept."""

from __future__ import annotations

import json

from conftest import invoke_cli, write_config


def test_a_question_too_large_for_the_members_is_one_line_and_exit_2(tmp_path):
    models = {m: {"model": f"fake/{m}", "tpm": 2000, "max_tokens": 50} for m in "abc"}
    cfg = write_config(tmp_path / "c.toml", models, chairman="fake/chair")
    result = invoke_cli("run", "Why? " + "x" * 3000, "--config", str(cfg))
    assert result.exit_code == 2, result.stderr
    [line] = result.error_lines
    assert "too large" in line and "[models.a] tpm = 2000" in line and "Traceback" not in result.stderr
    [kept] = json.loads(invoke_cli("sessions", "list", "--json").stdout)
    assert kept["status"] == "failed" and "tpm = 2000" in kept["error"]

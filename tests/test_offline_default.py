"""The README's main job: `council run` with no config and no keys, on the real local models."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp", reason="the offline default needs the 'local' extra (bash scripts/install.sh)")

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


def test_offline_default_runs_a_real_two_model_council(council_home):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["COUNCIL_HOME"] = str(council_home)
    proc = subprocess.run(
        [sys.executable, "-m", "council", "run", "What is the capital of France?", "--json", "--seed", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["offline_default"] is True
    assert "offline default" in result["notice"] and "README" in result["notice"]
    assert {result["models"][m] for m in result["members"]} == {"local/smollm2", "local/gemma3"}
    answers = [a for a in result["answers"] if a["status"] == "ok"]
    assert len(answers) == 2 and all(a["text"].strip() for a in answers)
    assert any(r["valid"] for r in result["reviews"])
    for r in result["reviews"]:
        if r["valid"]:
            assert sorted(r["ranking"]) == sorted(r["display_order"])
            assert all(1 <= s <= 10 and isinstance(s, int) for s in r["scores"].values())
    assert result["status"] in ("complete", "partial")
    assert result["usage"]["calls"] >= 5

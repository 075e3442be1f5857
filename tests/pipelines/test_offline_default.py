"""The README's main job: `council run` with no config and no keys, on the real local models."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp", reason="the offline default needs the 'local' extra (bash scripts/install.sh)")

# Each test waits up to 900 s for its `council` process; pytest-timeout's 300 s (a hang guard) is
# too short for the slowest beside other busy test processes (192 s beside one, over 300 beside three).
pytestmark = [pytest.mark.local_model, pytest.mark.slow, pytest.mark.timeout(900)]


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
    assert "offline default" in result["notice"] and "docs/operators/configuration.md" in result["notice"]
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
    # The structured synthesis, under the grammar: valid, its answer in words, labels mapped to members.
    synthesis = result["synthesis"]
    assert synthesis["status"] == "ok" and synthesis["attempts"] == 1, synthesis
    structure = synthesis["structure"]
    assert structure["answer"].strip() and "Where the council disagreed" in synthesis["text"]
    named = {i["member"] for i in structure["unique_insights"]}
    named |= {m for d in structure["disagreements"] for p in d["positions"] for m in p["members"]}
    assert named <= set(result["members"])


def _council(home, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["COUNCIL_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env, timeout=900
    )


def test_offline_default_judge_compares_with_every_pass_valid(council_home, tmp_path):
    # The grammar follows the pass schema, so a tiny local judge's pass is valid by construction.
    (tmp_path / "a.txt").write_text("Paris is the capital of France.", encoding="utf-8")
    (tmp_path / "b.txt").write_text("The capital of France is Lyon.", encoding="utf-8")
    proc = _council(
        council_home, "compare", "--prompt", "What is the capital of France?",
        "--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout)
    assert outcome["success"] and outcome["winner"] in ("A", "B", "TIE")
    assert [p["valid"] for p in outcome["passes"]] == [True, True]
    assert {p["judge_model"] for p in outcome["passes"]} == {"local/smollm2"}


def test_offline_default_judge_grades_and_batches(council_home, tmp_path):
    # With a final newline, as editors save a file: SmolLM2 then flagged a bias with an empty note in
    # every attempt until the grammar required the note (grammar._detected_needs_a_note).
    (tmp_path / "r.txt").write_text("Paris is the capital of France.\n", encoding="utf-8")
    proc = _council(
        council_home, "grade", "--prompt", "What is the capital of France?",
        "--response", str(tmp_path / "r.txt"), "--votes", "1", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout)
    assert outcome["success"] and all(p["valid"] for p in outcome["passes"])
    report = outcome["report"]
    assert all(isinstance(c["score"], int) and 1 <= c["score"] <= 5 for c in report["criteria"])
    items = tmp_path / "pairs.jsonl"
    rows = [
        {"id": "capital", "prompt": "Capital of France?", "a": "Paris.", "b": "Lyon.", "label": "A"},
        {"id": "boil", "prompt": "Water boils at sea level at?", "a": "50 C.", "b": "100 C.", "label": "B"},
    ]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = _council(council_home, "batch", str(items), "--json", "--output", str(tmp_path / "out.jsonl"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(results) == 2 and all(r["result"]["success"] for r in results)
    assert all(p["valid"] for r in results for p in r["result"]["passes"])

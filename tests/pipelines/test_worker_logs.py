"""What ``council worker`` logs on stdout, read from a real worker process: one JSON line per
claim and per finished item (batch id, item id, status, duration), and never an item's text, a
judge's reply or the provider's key (canaries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import write_config
from mock_server import start_mock_server

KEY = "k-2b4d6f8a0c-provider-canary"
IN_TEXT = "c-9e7c5a3b1d-item-canary"


def council(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, text=True, env=env,
                          timeout=180)  # fmt: skip


def test_one_line_per_claim_and_item_and_no_text_or_secret(tmp_path):
    env = {**os.environ, "COUNCIL_HOME": str(tmp_path / "home"), "CANARY_PROVIDER_CRED": KEY}
    env.pop("COUNCIL_DATABASE_URL", None)
    items = [{"id": f"p{i}", "prompt": f"Question {i}? {IN_TEXT}", "a": f"A {i} {IN_TEXT}", "b": f"B {i} {IN_TEXT}"}
             for i in range(5)]  # fmt: skip
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps(item) + "\n" for item in items))
    with start_mock_server(require_key=KEY) as mock:
        # +leak: every reply and reasoning quotes the provider's key.
        judge = {"model": "openai/mock-judge+leak", "api_base": mock.base_url, "retries": 0,
                 "api_key_env": "CANARY_PROVIDER_CRED"}  # fmt: skip
        cfg = write_config(tmp_path / "judge.toml", {"j": judge})
        queued = council("batch", str(batch), "--config", str(cfg), "--judge", "j", "--enqueue", "--batch-id", "q",
                         env=env)  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        ran = council("worker", "--batch-id", "q", "--config", str(cfg), "--concurrency", "2", env=env)
    assert ran.returncode == 0, ran.stderr
    assert KEY not in ran.stdout and IN_TEXT not in ran.stdout
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    claimed = [line for line in lines if line["event"] == "items_claimed"]
    assert sum(line["count"] for line in claimed) == 5 and all(line["batch_ids"] == ["q"] for line in claimed)
    finished = [line for line in lines if line["event"] == "item_finished"]
    assert sorted(line["item_id"] for line in finished) == [f"p{i}" for i in range(5)]
    assert {(line["batch_id"], line["status"]) for line in finished} == {("q", "judged")}
    assert all(line["duration_ms"] > 0 and line["level"] == "info" for line in finished)
    assert "judged 5 items" in ran.stderr  # the summary stays on stderr

"""Every command that opens the store closes it (``using_store``): its lease is let go and the
last connection folds the write-ahead log into council.db, which a copy of the file then holds
whole. Real processes, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma"]


def council(home, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COUNCIL_HOME": str(home)}
    argv = [sys.executable, "-m", "council", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_reading_commands_leave_no_write_ahead_log_behind(tmp_path, council_home):
    (council_home / "council.toml").write_text(f"[councils.default]\nmembers = {json.dumps(MEMBERS)}\n")
    ran = council(council_home, "run", "Why is the sky blue?", "--json")
    assert ran.returncode == 0, ran.stderr
    session_id = json.loads(ran.stdout)["session_id"]
    wal = council_home / "council.db-wal"
    assert not wal.exists()
    for args in (
        ["sessions", "list"],
        ["sessions", "show", session_id[:8]],
        ["export", "--output", str(tmp_path / "sessions.jsonl")],
        ["export", "--bias-records", "--output", str(tmp_path / "records.jsonl")],
        ["export", "--judged-pairs", "--output", str(tmp_path / "pairs.jsonl")],
        ["bias-report", "--json"],
    ):
        proc = council(council_home, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert not wal.exists(), f"`council {' '.join(args)}` left {wal.name} behind"

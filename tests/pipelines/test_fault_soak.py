"""The fault soak (benchmarks/bench_fault_soak.py), small, as a test: worker processes run sessions
through a mock server that fails, hangs and garbles replies, under session deadlines, then the
database is audited against what each run() returned or raised and the server's request log.
Which faults hit which requests varies from run to run; what is checked never does: nothing
lost, nothing duplicated, every row as run() reported it, no session left running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sessions_under_faults_and_deadlines_lose_and_duplicate_nothing(request, backend):
    args = ["--sessions", "60", "--workers", "2", "--concurrency", "6", "--session-timeout", "1.5"]
    if backend == "postgresql":
        args += ["--database-url", request.getfixturevalue("postgres_url")]
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_fault_soak.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "RESULT: all goals met" in out.stdout, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.returncode == 0

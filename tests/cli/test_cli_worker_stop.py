"""``council worker --follow`` stopped by a process manager (SIGTERM) after it has judged items: the
same clean stop as Ctrl-C (one line, ``interrupted``, exit 130, no traceback), also when started by
a script that ignores SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import council_process

pytestmark = pytest.mark.slow  # real processes


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "script"])
def test_sigterm_after_judging_stops_a_following_worker_cleanly(tmp_path, council_home, sigint_ignored):
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Q{i}?", "a": "A.", "b": "B."}) + "\n"
                            for i in range(3)))  # fmt: skip
    queued = council_process("batch", str(path), "--judge", "fake/j", "--enqueue", "--batch-id", "q", home=council_home)
    assert queued.returncode == 0, queued.stderr

    def done() -> int:
        status = council_process("batch", "status", "q", "--json", home=council_home)
        return json.loads(status.stdout)["done"]

    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    worker = subprocess.Popen([sys.executable, "-m", "council", "worker", "--follow"], stderr=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, text=True, preexec_fn=ignore,
                              env={**os.environ, "COUNCIL_HOME": str(council_home)})  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while done() < 3:
            assert time.monotonic() < deadline and worker.poll() is None, "the worker did not judge the batch"
            time.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert worker.returncode == 130 and "Traceback" not in stderr and lines[-1] == "interrupted", stderr

"""Start ``scripts/mock_llm_server.py`` as a subprocess for a test or a benchmark.

    with start_mock_server(latency=0.01, fault_rate=0.2, fault_kinds="500,429") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused")

Keyword options are the server's CLI flags with underscores (``fault_kinds="500,timeout"``,
``require_key="k"``, ``log_requests=path``); ``True`` becomes a bare flag, ``None``/``False`` is left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mock_llm_server.py"


@dataclass
class MockServer:
    url: str
    """``http://127.0.0.1:PORT``"""
    process: subprocess.Popen[str]
    log_path: Path | None = None
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def logged_requests(self) -> list[dict[str, Any]]:
        """Entries of ``--log-requests`` so far (one per chat request)."""
        if self.log_path is None or not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)


def _flags(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, list | tuple):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


@contextmanager
def start_mock_server(*, ready_timeout: float = 20.0, **options: Any) -> Iterator[MockServer]:
    """Run the mock server until the block ends; raises with its stderr if it does not start."""
    options.setdefault("port", 0)
    log_path = Path(options["log_requests"]) if options.get("log_requests") else None
    root = str(SCRIPT.parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *_flags(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    stderr_lines: list[str] = []
    # Drain stderr continuously so a chatty server can never block on a full pipe.
    drain = threading.Thread(target=lambda: stderr_lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    drain.start()
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(ready_timeout)
    line = ready[0].strip() if ready else ""
    if not line.startswith("READY "):
        _stop(proc)
        drain.join(2)
        raise RuntimeError(
            f"mock LLM server did not become ready within {ready_timeout:g}s "
            f"(exit code {proc.poll()}, stdout {line!r}):\n{''.join(stderr_lines)}"
        )
    server = MockServer(url=line.split(" ", 1)[1], process=proc, log_path=log_path, stderr_lines=stderr_lines)
    failed = False
    try:
        yield server
    except BaseException:
        failed = True
        raise
    finally:
        code = _stop(proc)
        drain.join(2)
        if failed or code not in (0, None):
            sys.stderr.write(f"--- mock LLM server stderr (exit code {code}) ---\n{server.stderr}\n")


def _stop(proc: subprocess.Popen[str], timeout: float = 10.0) -> int | None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    if proc.stdout:
        proc.stdout.close()
    return proc.returncode


def wait_for(predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll ``predicate()`` until it is true or ``timeout`` passes (for logs written asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())

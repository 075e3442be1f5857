"""Start a real ``council serve --port 0`` process for a test: the one helper every server test uses.

The port is read from the line the server prints once it listens; the helper then waits for
``/health`` (the app's start-up), and stops the process on exit, whatever happened.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import httpx

LISTENING = re.compile(r"council serve: http://(?P<host>[^\s/]+):(?P<port>\d+)/v1")


class Served(NamedTuple):
    base: str
    """``http://127.0.0.1:PORT`` (no ``/v1``)."""
    lines: list[str]
    """What the server printed on stderr so far (filled while it runs)."""


@contextmanager
def council_serve(
    config: Path, home: Path, *extra: str | bytes, env: dict[str, str] | None = None, stdout: list[str] | None = None
) -> Iterator[Served]:
    """``council serve --config CONFIG --port 0 EXTRA...`` with ``COUNCIL_HOME=home``; ``stdout``:
    a list the lines the server prints on stdout are appended to (else they are dropped)."""
    with serve_process(config, home, *extra, env=env, stdout=stdout) as (_, served):
        yield served


@contextmanager
def serve_process(
    config: Path | None,
    home: Path,
    *extra: str | bytes,
    env: dict[str, str] | None = None,
    stdout: list[str] | None = None,
    **popen: Any,
) -> Iterator[tuple[subprocess.Popen[bytes], Served]]:
    """:func:`council_serve`, with the process too (to signal it, read its exit code); no ``config``:
    no ``--config``; ``popen``: more ``subprocess.Popen`` arguments."""
    config_args = () if config is None else ("--config", str(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "council", "serve", *config_args, "--port", "0", *extra],
        env={**os.environ, "COUNCIL_HOME": str(home), **(env or {})},
        stdout=subprocess.DEVNULL if stdout is None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )
    reading = None
    if stdout is not None:
        out = stdout  # drained as it comes (a full pipe would stop the server), all of it read at the end
        reading = threading.Thread(target=lambda: out.extend(r.decode() for r in iter(proc.stdout.readline, b"")))
        reading.start()
    lines: list[str] = []
    announced = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            if LISTENING.search(line):
                announced.set()
        announced.set()  # the process ended: stop waiting

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not announced.wait(60) or not any(map(LISTENING.search, lines)):
            raise RuntimeError(f"council serve did not announce its port: {''.join(lines)}")
        match = next(m for m in map(LISTENING.search, lines) if m)
        base = f"http://127.0.0.1:{match['port']}"
        deadline = time.monotonic() + 30
        while True:  # the socket listens as soon as the port is printed; wait for the app's start-up
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"council serve did not answer on {base}: {''.join(lines)}")
            time.sleep(0.05)
        yield proc, Served(base, lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if reading is not None:
            reading.join(15)


def fast_and_slow_councils(path: Path, mock_url: str) -> Path:
    """A council file for a server test: ``default`` answers at once, ``slow`` waits on the mock's
    ``+slow`` model (its ``slow_seconds``) until the test is done with it."""
    lines = ["[councils.default]", 'members = ["a", "b"]', 'chairman = "a"']
    lines += ["[councils.slow]", 'members = ["a", "slow"]', 'chairman = "a"']
    for alias, model in (("a", "mock-a"), ("b", "mock-b"), ("slow", "mock-s+slow")):
        lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock_url}"', "retries = 0"]
    path.write_text("\n".join(lines) + "\n")
    return path

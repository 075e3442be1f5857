"""A real PostgreSQL server for the tests, and a fresh database per test.

The server: ``COUNCIL_TEST_POSTGRES_URL`` when set (``.ci/run`` starts one), else one started
for the test session by ``scripts/postgres_test_server.sh`` (the script CI uses) when the
binaries are installed. When neither works, PostgreSQL tests skip with one line locally and
FAIL in CI (``CI`` set): a missing server must never pass for a green run there.

Each test gets its own database, created from a template that already holds the migrated
schema (~30 ms with fsync off), so tests never see each other's rows; each test process
(pytest-xdist worker) has its own template.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "postgres_test_server.sh"
# One template per pytest-xdist worker: a worker drops and recreates its template at start, which
# must not pull the template from under another worker's CREATE DATABASE.
TEMPLATE = "council_test_template_" + os.environ.get("PYTEST_XDIST_WORKER", "main")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip the test (locally) or fail it (in CI) for want of a server."""
    message = f"PostgreSQL tests need a server: {reason}"
    if in_ci():
        pytest.fail(message + " (CI=true: never skipped in CI)", pytrace=False)
    pytest.skip(message)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


class Server:
    """The session's server: its URL, and the template database each test copies."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.problem: str | None = None
        self._root: str | None = None
        self._template_ready = False

    def start(self, *, own: bool = False) -> None:
        """``own``: start a server of this test's own (one it may stop), whatever the environment says."""
        url = "" if own else os.environ.get("COUNCIL_TEST_POSTGRES_URL", "").strip()
        if url:
            self.url = url
            return
        if shutil.which("bash") is None:
            self.problem = "bash is missing"
            return
        # Short path: the unix socket lives in this directory (~107-byte limit).
        self._root = tempfile.mkdtemp(prefix="council-pg-", dir="/tmp")
        proc = subprocess.run(
            ["bash", str(SCRIPT), "start", self._root], capture_output=True, text=True, timeout=60, check=False
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["it failed"])[-1]
            self.problem = f"set COUNCIL_TEST_POSTGRES_URL, or install PostgreSQL ({last})"
            self.stop()
            return
        self.url = proc.stdout.strip().splitlines()[-1]

    def pause(self, *, crash: bool = False) -> None:
        """Stop a server of the test's own (``start(own=True)``), keeping its data: an outage. A
        fast stop (as a restart does), or with ``crash`` an immediate one, which ends connections
        without a word (with ``synchronous_commit`` off it loses the last commits: turn it on)."""
        assert self._root is not None, "only a server of the test's own is paused"
        action = "stop" if crash else "pause"
        subprocess.run(["bash", str(SCRIPT), action, self._root], capture_output=True, timeout=60, check=True)

    def resume(self) -> None:
        """Start a paused server again, on its data and its socket."""
        assert self._root is not None
        subprocess.run(["bash", str(SCRIPT), "resume", self._root], capture_output=True, timeout=60, check=True)

    def stop(self) -> None:
        if self._root is not None:
            subprocess.run(["bash", str(SCRIPT), "stop", self._root], capture_output=True, timeout=60, check=False)
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def admin(self):
        import psycopg

        assert self.url is not None
        return psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def _ensure_template(self) -> None:
        if self._template_ready:
            return
        from council.storage.postgres import PostgresStore

        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}"')
            conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
        store = PostgresStore.open(with_database(self.url, TEMPLATE))
        store.close()
        self._template_ready = True

    def fresh_database(self, *, migrated: bool = True) -> str:
        """A new database's URL: the migrated template's copy, or empty."""
        name = "t_" + uuid.uuid4().hex[:16]
        if migrated:
            self._ensure_template()
        with self.admin() as conn:
            template = f' TEMPLATE "{TEMPLATE}"' if migrated else " TEMPLATE template0"
            conn.execute(f'CREATE DATABASE "{name}"{template}')
        return with_database(self.url, name)

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

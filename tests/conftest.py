"""Every test runs offline in its own COUNCIL_HOME, with instant retry waits.

Shared helpers: ``invoke_cli`` runs the ``council`` command in-process (click's test
runner); ``write_config`` writes a council.toml. Tests that need a real process (signals,
``kill -9``, several writers, import costs, the installed script) start one themselves.

Property tests: ``HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``) derandomizes them, so CI
can never fail on an unlucky draw; local runs keep exploring new examples.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# Tests live in per-layer folders (tests/methods, tests/storage, ...); the shared helper modules
# (mock_server, serve_helpers, storage_backends, writer_worker, fake_judges, batch_files) stay in tests/ and
# import from any of them.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_backends import BACKENDS

# The browser tests' fixtures (a served web app, one headless Chromium per module): a plugin
# rather than tests/web/conftest.py, which would shadow this module under the name ``conftest``
# that other folders import helpers from.
pytest_plugins = ["web_browser"]

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# Under pytest-xdist the other worker keeps a core busy, and llama.cpp's threads spin-wait on each
# other, so a local model runs on one thread. Idle, a grade takes 30 s on two threads and 39 s on
# one; beside another worker, the slowest local test took over 300 s on two threads (123 s alone)
# and 192 s on one. Set before any test starts a process, so `council` subprocesses inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("COUNCIL_LOCAL_THREADS", "1")


def pytest_collection_modifyitems(items):
    """The local-model tests first (~5 of the suite's ~9 minutes on 2 cores): under pytest-xdist they
    start at once, each model on one thread (above), and the other tests fill the cores around them
    (docs/benchmark-history.md, section 29)."""
    local = [item for item in items if item.get_closest_marker("local_model")]
    items[:] = local + [item for item in items if not item.get_closest_marker("local_model")]


_ENV_TO_CLEAR = (
    "COUNCIL_CONFIG",
    "COUNCIL_HASH_QUERIES",
    "COUNCIL_STORE_TRANSCRIPTS",
    "COUNCIL_LOG_LEVEL",
    "COUNCIL_LOG_FILE",
    "COUNCIL_DEBUG",
    "COUNCIL_DATABASE_URL",
)


@pytest.fixture(autouse=True)
def council_home(tmp_path, monkeypatch):
    home = tmp_path / "council-home"
    home.mkdir()
    monkeypatch.setenv("COUNCIL_HOME", str(home))
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    # No test may reach the internet through LiteLLM's cost-map fetch.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return home


@pytest.fixture(autouse=True)
def fast_retry_waits(monkeypatch):
    from council.providers import client

    monkeypatch.setattr(client, "DEFAULT_RETRY", client.RetryPolicy(initial_wait=0.0, max_wait=0.0, jitter=0.0))


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def invoke_cli(*args: str, env: dict[str, str] | None = None, input: str | bytes | None = None) -> CliResult:
    """Run ``council ARGS`` in this process, as the console script would (exit code, stdout, stderr).

    An exception that escapes the command (a bug: the real command would print a traceback)
    is re-raised here, so a test can never mistake it for a clean exit.
    """
    from click.testing import CliRunner

    from council._util.logs import unconfigure_logging
    from council.cli.main import cli

    try:
        result = CliRunner().invoke(cli, list(args), env=env, input=input, prog_name="council")
    finally:
        unconfigure_logging()  # the command sent council's log events to the runner's stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr)


def council_process(*args: str | bytes, home: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """``council ARGS`` as a real process (arguments may be bytes, as a shell passes them)."""
    full_env = {**os.environ, "COUNCIL_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "council", *args], capture_output=True, env=full_env, timeout=timeout)


def write_config(path: Path, models: dict[str, dict[str, object]], **council: object) -> Path:
    """A council.toml with these [models] and [councils.default] settings (members: all of
    the models, in order, unless ``members`` is given)."""
    council.setdefault("members", list(models))
    lines = ["[councils.default]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in council.items()]
    for alias, spec in models.items():
        lines.append(f"[models.{alias}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in spec.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def threads_calling(monkeypatch, target: object, *names: str) -> dict[str, list[str]]:
    """The names of the threads each of ``target``'s methods ``names`` is called on, from now on."""
    import threading

    threads: dict[str, list[str]] = {}
    for name in names:
        real = getattr(target, name)

        def watched(*args, name=name, real=real, **kwargs):
            threads.setdefault(name, []).append(threading.current_thread().name)
            return real(*args, **kwargs)

        monkeypatch.setattr(target, name, watched)
    return threads


def db_rows(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(home / "council.db", timeout=30)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def url_rows(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of ``sql`` (``%s`` marks) read straight from the store a ``COUNCIL_DATABASE_URL`` names
    (a SQLite file or PostgreSQL): no council code, so nothing is recovered or written by looking."""
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        try:
            with db:
                return db.execute(sql.replace("%s", "?"), params).fetchall()
        finally:
            db.close()
    import psycopg

    with psycopg.connect(url) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def db_dump(home: Path) -> str:
    """Every row of every table, as SQL text."""
    db = sqlite3.connect(home / "council.db", timeout=30)
    try:
        return "\n".join(db.iterdump())
    finally:
        db.close()


@pytest.fixture(params=sorted(BACKENDS))
def store_backend(request, tmp_path):
    """A fresh store of each backend the run has (tests/storage_backends.py), closed after the test."""
    store = BACKENDS[request.param](tmp_path, request)
    try:
        yield store
    finally:
        store.close()


# -- a real PostgreSQL server (tests/postgres_server.py) --------------------------------


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL server; skips locally (fails in CI) when there is none."""
    from postgres_server import Server, unavailable

    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    server = Server()
    server.start()
    try:
        if server.url is None:
            unavailable(server.problem or "no server")
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_postgres(postgres_server):
    """A PostgreSQL server of this test's own, which it may stop, pause and resume; gone after."""
    from postgres_server import Server

    own = Server()
    own.start(own=True)
    try:
        assert own.url is not None, own.problem
        yield own
    finally:
        own.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh, migrated database on the real server, dropped after the test."""
    url = postgres_server.fresh_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request, tmp_path):
    """The store URL of each backend: a SQLite file, or a fresh database on the real server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/council.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def url_store(backend_url, monkeypatch):
    """The store ``COUNCIL_DATABASE_URL`` names, set to each backend's URL in turn."""
    from council.storage import open_store

    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    opened = open_store()
    yield opened
    opened.close()

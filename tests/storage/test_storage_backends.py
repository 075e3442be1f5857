"""What the store URL selects, and what differs between backends behind the same contract
(tests/test_storage_contract.py has the operations): ownership after a crash, one batch
runner, migrations, errors. Tests taking ``backend_url`` run once per backend; the PostgreSQL
run gets a fresh database (tests/postgres_server.py) and skips locally (fails in CI) without a server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import url_rows

from council._util.clock import utc_now
from council.storage import SQLiteStore, open_store


def test_backend_is_the_one_the_url_names(url_store, backend_url):
    assert (getattr(url_store, "kind", "sqlite") == "postgresql") == backend_url.startswith("postgresql")


def test_invalid_bias_records_are_refused_by_the_database(url_store):
    bad = {
        "schema_version": "1",
        "session_id": "s-bias-0001",
        "reviewer_id": "a",
        "model_id": "m",
        "position": 0,
        "response_length_chars": 1,
        "score_value": 99.0,
        "timestamp": utc_now(),
    }
    with pytest.raises(Exception):  # noqa: B017 - sqlite3.IntegrityError or psycopg.errors.CheckViolation
        url_store.insert_bias_records([bad])
    assert url_store.count("bias_records") == 0
    assert url_store.insert_bias_records([{**bad, "score_value": 5.0}] * 3) == 3


_DIES_WHILE_RUNNING = textwrap.dedent(
    """
    import os, sys
    from council.storage import open_store
    from council.accounting.usage import CallRecord
    from council._util.clock import utc_now
    store = open_store()
    store.begin_session("s-orphan-01", council="default")
    store.journal("s-orphan-01").call_started(
        CallRecord(call_id="c-orphan", stage="answer", member="a", model="m", started_at=utc_now(),
                   attempt=1, latency_ms=0.0))
    print("ready", flush=True)
    if sys.argv[1] == "exit_cleanly":
        sys.exit(0)
    os._exit(0) if sys.argv[1] == "exit" else os.kill(os.getpid(), 9)
    """
)


def _start_running(backend_url: str, lease: float) -> subprocess.Popen[str]:
    """A process that has begun a session and a call, and kills itself with -9 at a line on stdin."""
    code = _DIES_WHILE_RUNNING.replace('print("ready", flush=True)', 'print("ready", flush=True); sys.stdin.readline()')
    env = {**os.environ, "COUNCIL_DATABASE_URL": backend_url, "COUNCIL_LEASE_SECONDS": str(lease)}
    child = subprocess.Popen([sys.executable, "-c", code, "kill"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout.readline().strip() == "ready", child.stderr.read()
    return child


def _assert_recovered(store) -> None:
    """The dead process's session and call are interrupted, with what they wrote."""
    session = store.get_session("s-orphan-01")
    assert session["status"] == "interrupted" and "ended before it finished" in session["error"]
    (call,) = store.session_calls("s-orphan-01")
    assert call["ok"] == 0 and "in flight" in call["error"]


def _run_and_die(backend_url: str, how: str, lease: float = 30.0) -> None:
    env = {**os.environ, "COUNCIL_DATABASE_URL": backend_url, "COUNCIL_LEASE_SECONDS": str(lease)}
    proc = subprocess.run(
        [sys.executable, "-c", _DIES_WHILE_RUNNING, how], env=env, capture_output=True, text=True, timeout=60
    )
    assert "ready" in proc.stdout, proc.stderr


def test_work_of_a_killed_process_on_this_machine_is_interrupted_at_once(backend_url, monkeypatch):
    _run_and_die(backend_url, "kill", lease=600.0)  # its lease would last ten minutes
    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    store = open_store()
    try:
        _assert_recovered(store)
    finally:
        store.close()


def test_a_lease_whose_pid_names_another_process_now_is_dead_at_once(backend_url, monkeypatch):
    # A pid is reused: a lease of this machine whose process started at another time is not its
    # process's any more, however alive the pid.
    child = _start_running(backend_url, lease=600)
    try:
        url_rows(backend_url, "UPDATE leases SET started = started - 1 WHERE pid = %s", (child.pid,))
        monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
        store = open_store()
        try:
            assert store.get_session("s-orphan-01")["status"] == "interrupted"
        finally:
            store.close()
    finally:
        child.kill()
        child.communicate(timeout=30)


def test_work_of_a_killed_process_on_another_machine_becomes_interrupted_once_its_lease_expires(
    backend_url, monkeypatch
):
    from mock_server import wait_for

    _run_and_die(backend_url, "kill", lease=3.0)
    died = time.monotonic()
    # As if it had run on another machine (or in another container): its pid means nothing here.
    url_rows(backend_url, "UPDATE leases SET machine = %s", ("another machine",))
    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    store = open_store()
    if time.monotonic() - died < 1.5:  # its lease (renewed every second) has not expired yet
        assert store.get_session("s-orphan-01")["status"] == "running"
    # Any process finds it once the lease has passed, on its own clock's say-so alone.
    assert wait_for(lambda: store.recover_interrupted() == ["s-orphan-01"], timeout=30, interval=0.2)
    assert time.monotonic() - died >= 1.0
    _assert_recovered(store)
    store.close()


def test_work_of_a_process_that_exits_cleanly_is_found_at_once(backend_url, monkeypatch):
    _run_and_die(backend_url, "exit_cleanly", lease=60.0)  # sys.exit: atexit deletes its lease
    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    store = open_store()
    assert store.get_session("s-orphan-01")["status"] == "interrupted"
    store.close()


def test_a_live_process_heartbeat_keeps_its_lease_past_its_length(backend_url, monkeypatch):
    from mock_server import wait_for

    child = _start_running(backend_url, lease=1)
    try:
        monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
        store = open_store()
        deadline = time.monotonic() + 3.5  # three and a half leases: alive only by its heartbeat
        while time.monotonic() < deadline:
            assert store.recover_interrupted() == []
            time.sleep(0.1)
        assert store.get_session("s-orphan-01")["status"] == "running"
    finally:
        child.stdin.write("die\n")  # kill -9 of itself
        child.stdin.flush()
        child.communicate(timeout=30)
    assert child.returncode == -9
    assert wait_for(lambda: store.recover_interrupted() == ["s-orphan-01"], timeout=10, interval=0.1)
    store.close()


def test_a_live_process_work_is_never_taken_for_dead(url_store):
    url_store.begin_session("s-alive-0001", council="default")
    assert url_store.recover_interrupted() == []
    assert url_store.get_session("s-alive-0001")["status"] == "running"


def test_two_stores_on_one_database_never_hold_the_same_queued_item(url_store, backend_url):
    settings = {"judges": ["fake/j"]}
    items = [{"item_id": f"i{n}", "position": n, "digest": str(n), "item": {"n": n}} for n in range(6)]
    url_store.enqueue_batch("b-1", source="b", content_sha256="c", settings=settings, spec={}, items=items)
    other = open_store()  # another process's store holds its own connection
    try:
        mine = url_store.claim_items("w1", batch_id="b-1", limit=4, lease_seconds=60)
        theirs = other.claim_items("w2", batch_id="b-1", limit=4, lease_seconds=60)
        assert len(mine) == 4 and len(theirs) == 2
        assert {r["item_id"] for r in mine} | {r["item_id"] for r in theirs} == {f"i{n}" for n in range(6)}
    finally:
        other.close()


# -- PostgreSQL only: migrations, URLs and errors -------------------------------------------


_OPEN = "from council.storage import open_store; s = open_store(); print(s.count('sessions')); s.close()"


def test_ten_processes_opening_a_fresh_database_at_once_migrate_it_once(postgres_server):
    url = postgres_server.fresh_database(migrated=False)
    try:
        env = {**os.environ, "COUNCIL_DATABASE_URL": url}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(10)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 10, [err for _, err in outs]
        assert [out.strip() for out, _ in outs] == ["0"] * 10
        import psycopg

        from council.storage.postgres_schema import MIGRATIONS

        with psycopg.connect(url) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM _council_migrations ORDER BY name")]
        assert names == sorted(name for name, _ in MIGRATIONS)
    finally:
        postgres_server.drop_database(url)


def test_the_postgres_schema_has_every_sqlite_table_and_column(postgres_url, tmp_path):
    import psycopg

    sqlite_store = SQLiteStore.open(tmp_path / "council.db")
    sqlite_columns = {
        (table, col[1])
        for (table,) in sqlite_store.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not table.startswith(("sqlite_", "_"))
        for col in sqlite_store.db.execute(f"PRAGMA table_info({table})")
    }
    with psycopg.connect(postgres_url) as conn:
        pg_columns = set(
            conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
            ).fetchall()
        )
    assert sqlite_columns <= pg_columns
    assert {t for t, _ in pg_columns} - {t for t, _ in sqlite_columns} == {"_council_migrations"}


def test_importing_the_store_does_not_import_psycopg():
    code = "import sys, council.storage, council.api, council.cli.main; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_reading_sessions_through_the_cli_on_postgres(postgres_url):
    from conftest import invoke_cli

    env = {"COUNCIL_DATABASE_URL": postgres_url}
    result = invoke_cli("sessions", "list", env=env)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("postgresql://council@localhost:notaport/db", "malformed"),
        ("postgresql://council:s3cret-pw@localhost:5432/", "names no database"),
        ("mysql://council:s3cret-pw@localhost/db", "unsupported database"),
        ("council.db", "not a URL"),
        ("sqlite://council.db", "sqlite:///PATH"),
        ("postgresql://council:s3cret-pw@localhost/db?sslmode=bogus", "malformed"),
        ("postgresql://council:s3cret-pw@localhost/db?nonsense=1", "malformed"),
    ],
)
def test_a_malformed_url_is_one_line_exit_2_without_the_password(url, fragment):
    pytest.importorskip("psycopg")
    from conftest import invoke_cli

    result = invoke_cli("sessions", "list", env={"COUNCIL_DATABASE_URL": url})
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert len(result.error_lines) == 1 and fragment in result.stderr
    assert "s3cret-pw" not in result.stderr + result.stdout


def test_an_unreachable_server_or_a_refused_login_is_one_line_exit_1_without_the_password(postgres_server, tmp_path):
    from urllib.parse import urlsplit

    from conftest import invoke_cli

    host = dict(p.split("=", 1) for p in urlsplit(postgres_server.url).query.split("&") if "=" in p).get("host")
    urls = [f"postgresql://council:s3cret-pw@/postgres?host={tmp_path}"]  # no server on that socket
    if host:
        urls.append(f"postgresql://nobody:s3cret-pw@/postgres?host={host}")  # no such role: login refused
    for url in urls:
        started = time.monotonic()
        result = invoke_cli("sessions", "list", env={"COUNCIL_DATABASE_URL": url})
        assert result.exit_code == 1, (result.stdout, result.stderr)
        assert len(result.error_lines) == 1 and "cannot connect to the PostgreSQL store" in result.stderr
        assert "s3cret-pw" not in result.stderr + result.stdout and "***" in result.stderr
        assert time.monotonic() - started < 15


def test_sqlite_url_names_the_file(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere.db"
    monkeypatch.setenv("COUNCIL_DATABASE_URL", f"sqlite:///{target}")
    store = open_store()
    store.begin_session("s-file-0001", council="default")
    store.close()
    assert target.exists() and SQLiteStore.open(target).get_session("s-file-0001")["id"] == "s-file-0001"


def test_a_server_that_goes_away_is_one_line_and_nothing_half_written(own_postgres):
    from conftest import invoke_cli

    from council.errors import CouncilFailure, StoreWentAway
    from council.storage.postgres import PostgresStore

    url = own_postgres.fresh_database()
    store = PostgresStore.open(url)
    store.outage_grace_s = 2.0  # how long a server gone is waited for (10 s by default)
    store.begin_session("s-before-stop", council="default")
    own_postgres.stop()
    with pytest.raises(CouncilFailure, match="the PostgreSQL store .* failed") as failed:
        store.fail_session("s-before-stop", status="failed", error="boom", calls=[])
    assert "\n" not in str(failed.value)
    # Said as the server going away (what a batch worker waits for, and then checks what was done).
    assert isinstance(failed.value, StoreWentAway)
    result = invoke_cli("sessions", "list", env={"COUNCIL_DATABASE_URL": url})
    assert result.exit_code == 1 and len(result.error_lines) == 1, result.stderr
    assert "cannot connect to the PostgreSQL store" in result.stderr
    # Known away now: once the grace has passed, the next call waits for a connection a second,
    # not the whole 10 s again (a worker meeting a stopped server took 30-60 s, one 10 s wait
    # after another).
    assert store.away
    for _ in range(10):  # the pool's other connections broke too: each says so once, at once
        with pytest.raises(CouncilFailure) as again:
            store.get_session("s-before-stop")
        if "couldn't get a connection after 1.00 sec" in str(again.value):  # the grace is over
            break
    assert "couldn't get a connection after 1.00 sec" in str(again.value)
    store.close()


def _session_then_away(own_postgres, session_id: str, outage_grace_s: float | None = None):
    """A store on a fresh database of ``own_postgres`` (with ``outage_grace_s``, if given) that has
    begun session ``session_id``, its server then paused (gone, as a fast stop leaves it)."""
    from council.storage.postgres import PostgresStore

    store = PostgresStore.open(own_postgres.fresh_database())
    if outage_grace_s is not None:
        store.outage_grace_s = outage_grace_s
    store.begin_session(session_id, council="default")
    own_postgres.pause()
    return store


def test_a_server_back_within_the_outage_grace_is_waited_for_and_nothing_is_lost(own_postgres):
    # A restart or a failover takes seconds: a session finishing meanwhile waited a second for a
    # connection and lost its record (2 of 60 sessions in a `council serve` probe whose database
    # was down 3 s; one of them left "running" with none of its answers).
    from council.errors import CouncilFailure

    store = _session_then_away(own_postgres, "s-blip")
    with pytest.raises(CouncilFailure, match="the PostgreSQL store .* failed"):
        store.get_session("s-blip")  # its connection broke: the server is known away
    assert store.away
    back = threading.Timer(1.5, own_postgres.resume)
    back.start()
    started = time.monotonic()
    store.fail_session("s-blip", status="failed", error="boom", calls=[])  # waits for it
    back.join()
    assert 1.5 < time.monotonic() - started < store.outage_grace_s + 1
    assert store.get_session("s-blip")["status"] == "failed" and not store.away
    store.close()


def test_once_the_grace_is_over_the_calls_behind_a_failed_wait_fail_at_once(own_postgres):
    # After the outage's grace each call waited a second for a connection, one after another: a
    # server's write thread with sessions' records queued reported them failed one a second.
    from council.errors import CouncilFailure
    from council.storage.postgres import AWAY_TIMEOUT_S

    store = _session_then_away(own_postgres, "s-long", outage_grace_s=0.0)  # over once the server is found gone
    waits: list[float] = []
    while not waits or waits[-1] < AWAY_TIMEOUT_S:  # the pool's broken connections fail at once first
        started = time.monotonic()
        with pytest.raises(CouncilFailure):
            store.get_session("s-long")
        waits.append(time.monotonic() - started)
        assert len(waits) < 20, waits
    # One call waited for the server; those right behind it are told at once, in one line.
    started = time.monotonic()
    for _ in range(5):
        with pytest.raises(CouncilFailure, match="the PostgreSQL store .* failed: .*a moment ago") as failed:
            store.get_session("s-long")
        assert "\n" not in str(failed.value)
    assert time.monotonic() - started < AWAY_TIMEOUT_S / 2
    # A second on, the next call waits for the server again, and finds it back once the pool has
    # reconnected: an attempt of the pool's may still be waiting out its backoff (1, 2 s, for up
    # to RECONNECT_TIMEOUT_S), so that may take a few calls (CI: one call of a second was not
    # enough, once).
    own_postgres.resume()
    deadline = time.monotonic() + 30
    while True:
        time.sleep(AWAY_TIMEOUT_S)
        started = time.monotonic()
        try:
            session = store.get_session("s-long")
            break
        except CouncilFailure as exc:
            assert time.monotonic() - started >= AWAY_TIMEOUT_S * 0.9, exc  # it waited for the server
            assert time.monotonic() < deadline, exc
    assert session["status"] == "running" and not store.away
    store.close()


def test_after_a_long_outage_the_store_finds_the_server_back_within_seconds(own_postgres):
    # psycopg_pool tries to connect again after 1, 2, 4, 8 ... s, for up to 5 minutes, and a call
    # waiting for a connection waits for the pool's next attempt: after an outage of 40 s the store
    # found the server back 17.6 s after it was (4-4.5 s after 25 s away).
    from council.errors import CouncilFailure
    from council.storage.postgres import AWAY_TIMEOUT_S

    store = _session_then_away(own_postgres, "s-outage", outage_grace_s=0.0)  # each call fails after its wait
    outage_ends = time.monotonic() + 40
    while time.monotonic() < outage_ends:  # calls one at a time meanwhile (an app's), each failing in one line
        with pytest.raises(CouncilFailure, match="the PostgreSQL store .* failed"):
            store.get_session("s-outage")
        time.sleep(AWAY_TIMEOUT_S)
    own_postgres.resume()
    back = time.monotonic()
    while True:
        try:
            session = store.get_session("s-outage")
            break
        except CouncilFailure:
            assert time.monotonic() - back < 30, "the server is back; the store never found it"
            time.sleep(0.1)
    found_after = time.monotonic() - back
    assert session["status"] == "running" and not store.away
    assert found_after < 5.0, f"found the server back {found_after:.1f} s after it was"
    store.close()


def test_the_first_operation_after_a_restart_while_idle_does_not_fail(own_postgres):
    # The pool held connections the restart had closed; the first operation to take one failed
    # (a session refused with a 502 after every restart of the database, up to one per pooled
    # connection). A connection idle for a while is tested before it is handed out.
    from council.storage.postgres import IDLE_CHECK_S

    store = _session_then_away(own_postgres, "s-idle")
    own_postgres.resume()
    time.sleep(IDLE_CHECK_S + 0.1)
    store.fail_session("s-idle", status="failed", error="boom", calls=[])
    assert store.get_session("s-idle")["status"] == "failed" and not store.away
    store.close()


def test_a_refused_statement_is_not_taken_for_a_server_gone_and_success_ends_the_away_state(postgres_server):
    from council.errors import CouncilFailure
    from council.storage.postgres import PostgresStore

    store = PostgresStore.open(postgres_server.fresh_database())
    try:
        with pytest.raises(CouncilFailure, match="canceling statement due to statement timeout"):
            with store.transaction() as conn:  # an OperationalError with a SQLSTATE: the server answered
                conn.execute("SET LOCAL statement_timeout = 10")
                conn.execute("SELECT pg_sleep(1)")
        assert not store.away
        asked: list[float | None] = []
        connection = store.pool.connection
        store.pool.connection = lambda timeout=None: asked.append(timeout) or connection(timeout=timeout)
        # As after a failure long ago: the next call waits briefly (the outage's grace is over),
        # and its success ends the away state.
        store.away_since = time.monotonic() - store.outage_grace_s
        store.begin_session("s-back", council="default")
        assert not store.away
        store.get_session("s-back")
        assert asked[0] == 1.0 and set(asked[1:]) == {None}, asked
    finally:
        store.close()


def test_the_council_file_names_the_store_and_the_environment_wins(tmp_path, council_home, monkeypatch):
    from conftest import invoke_cli

    from council.storage.location import configured

    file_db, env_db = tmp_path / "from-file.db", tmp_path / "from-env.db"
    (council_home / "council.toml").write_text(f'[storage]\nurl = "sqlite:///{file_db}"\n')
    assert configured().path == file_db
    store = open_store()
    store.close()
    assert file_db.exists() and not (council_home / "council.db").exists()
    monkeypatch.setenv("COUNCIL_DATABASE_URL", f"sqlite:///{env_db}")
    assert configured().path == env_db
    monkeypatch.delenv("COUNCIL_DATABASE_URL")
    (council_home / "council.toml").write_text("[storage]\nurl = 5\n")
    result = invoke_cli("sessions", "list")
    assert result.exit_code == 2 and "[storage] url must be a string" in result.stderr
    (council_home / "council.toml").write_text('[storage]\nurl = "mysql://x:s3cret-pw@h/db"\n')
    result = invoke_cli("sessions", "list")
    assert result.exit_code == 2 and len(result.error_lines) == 1
    assert "[storage] url: unsupported database" in result.stderr and "s3cret-pw" not in result.stderr
    (council_home / "council.toml").write_text('[storage]\nulr = "sqlite:///x.db"\n')
    assert invoke_cli("run", "Q?").exit_code == 2  # the whole file is checked where it is used: a typo


def test_the_server_keeps_its_sessions_in_the_store_the_url_names(backend_url, tmp_path, monkeypatch):
    from conftest import write_config
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server.app import create_app

    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a")
    body = {"model": "default", "messages": [{"role": "user", "content": "What is 2+2?"}]}
    with TestClient(create_app(load_config(str(cfg))), base_url="http://127.0.0.1:8000") as client:
        answer = client.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        session_id = answer.json()["council"]["session_id"]
        shown = client.get(f"/v1/sessions/{session_id}")
        report = client.get("/v1/bias-report")
    assert shown.status_code == 200 and shown.json()["session_id"] == session_id
    assert report.status_code == 200 and report.json()["reviewers"]
    store = open_store()
    assert store.get_session(session_id)["status"] == "complete"
    store.close()


def test_both_backends_apply_the_migrations_in_their_numbered_order():
    # Read top to bottom, council/storage/migrations.py is the order a fresh SQLite database is built in.
    from council.storage.migrations import migrations
    from council.storage.postgres_schema import MIGRATIONS
    from council.storage.sqlite import Database

    sqlite_names = [m.name for m in migrations.pending(Database(memory=True))]
    assert sqlite_names == sorted(sqlite_names)
    assert sqlite_names == [name for name, _ in MIGRATIONS]

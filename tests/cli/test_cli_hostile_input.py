"""Hostile input and hostile environments: one line, the right exit code, nothing lost.

Batch and bias-record files, config values, environment variables, the data directory and
its database, output paths: each case runs the real command (in-process, or as a real
process where the environment must be real) and checks the one error line, the exit code,
and that nothing was called or written before the input was checked.
"""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from conftest import council_process, invoke_cli, write_config

PAIR = {"id": "p1", "prompt": "Which is better?", "a": "Paris is the capital.", "b": "Lyon."}


def assert_one_line(result, code: int, fragment: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert len(result.error_lines) == 1, result.stderr
    assert result.error_lines[0].startswith("error: "), result.stderr
    assert fragment in result.error_lines[0], result.error_lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def assert_process_one_line(proc, code: int, fragment: str) -> None:
    stderr = proc.stderr.decode("utf-8", "replace")
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert fragment in lines[0], lines[0]


# -- batch files: every item checked before any call ----------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BAD_BATCH_LINES = [
    ('{"id": "s", "prompt": "Why?", "a": "x \\ud800 y", "b": "z"}', 'batch.jsonl:2: "a" is not valid UTF-8 text'),
    ('{"id": "s", "prompt": "\\udfff", "a": "x", "b": "z"}', 'batch.jsonl:2: "prompt" is not valid UTF-8 text'),
    ('{"id": "\\ud800", "prompt": "Why?", "a": "x", "b": "z"}', 'batch.jsonl:2: "id" is not valid UTF-8 text'),
    ('{"id": ' + "9" * 5000 + ', "prompt": "Why?", "a": "x", "b": "z"}', "batch.jsonl:2: not valid JSON"),
    ('{"id": "n", "prompt": "Why?", "a": "x", "b": "z", "metadata": ' + nested(100_000) + "}",
     "batch.jsonl:2: not valid JSON (nested too deeply)"),
    ('{"id": "m", "prompt": "Why?", "a": "x", "b": "z", "metadata": {"k": "\\ud800"}}',
     'batch.jsonl:2: "metadata" is not valid UTF-8 text'),
    ('{"id": "z", "prompt": "\\u200b\\u2060", "a": "x", "b": "z"}', 'batch.jsonl:2: "prompt" has no visible text'),
    ('{"id": "g", "prompt": "Why?", "response": "x", "gold_score": ' + "9" * 400 + "}",
     'batch.jsonl:2: "gold_score" must be a number'),
]  # fmt: skip


@pytest.mark.parametrize("line, fragment", BAD_BATCH_LINES)
def test_a_bad_batch_line_is_one_line_before_any_call(tmp_path, council_home, line, fragment):
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(PAIR) + "\n" + line + "\n", encoding="utf-8")
    result = invoke_cli("batch", str(path), "--judge", "fake/alpha")
    assert_one_line(result, 2, fragment)
    assert not (council_home / "council.db").exists()  # nothing judged, nothing billed


def test_a_binary_batch_file_is_one_line(tmp_path, council_home):
    path = tmp_path / "batch.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    assert_one_line(invoke_cli("batch", str(path), "--judge", "fake/alpha"), 2, "is not UTF-8 text")


# -- bias-record files ---------------------------------------------------------------------


def record(**override) -> str:
    base = {
        "schema_version": "1.1.0", "session_id": "s1", "reviewer_id": "r1", "model_id": "m1", "position": 0,
        "response_length_chars": 10, "score_value": 5, "timestamp": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    return json.dumps({**base, **override})


BAD_RECORDS = [
    (record(position=1e30).encode(), "recs.jsonl:1: position"),
    (record(response_length_chars=10**30).encode(), "recs.jsonl:1: response_length_chars"),
    (b'{"position": ' + b"1" * 5000 + b"}", "recs.jsonl:1: not valid JSON"),
    (b'{"x": ' + nested(100_000).encode() + b"}", "recs.jsonl:1: not valid JSON (nested too deeply)"),
    (record().encode() + b"\n\xff\xfe\x00garbage\n", "recs.jsonl:2: not UTF-8 text"),
    (b"\x00\x01\x02\x03" * 64, "recs.jsonl:1: not valid JSON"),
    (record(session_id="\ud800").encode(), "recs.jsonl:1: a string in it is not valid UTF-8 text"),
    (b'{"session_id": "\xed\xa0\x80"}', "recs.jsonl:1: not UTF-8 text"),
]


@pytest.mark.parametrize("content, fragment", BAD_RECORDS)
def test_a_bad_records_file_is_one_line(tmp_path, council_home, content, fragment):
    path = tmp_path / "recs.jsonl"
    path.write_bytes(content)
    assert_one_line(invoke_cli("bias-report", "--records", str(path)), 2, fragment)


# -- input files have a size cap -----------------------------------------------------------


def test_a_records_file_that_never_ends_is_one_line(council_home):
    proc = council_process("bias-report", "--records", "/dev/zero", home=council_home, timeout=60)
    assert_process_one_line(proc, 2, "/dev/zero:1: a line longer than 1 MiB (not read)")


def test_a_records_line_over_the_line_cap_is_refused_or_skipped_alone(tmp_path, council_home):
    path = tmp_path / "recs.jsonl"
    good = [record(reviewer_id=f"r{i}", session_id=f"s{i}") for i in range(2)]
    path.write_bytes((good[0] + "\n" + "x" * (2 << 20) + "\n" + good[1] + "\n").encode())
    assert_one_line(invoke_cli("bias-report", "--records", str(path)), 2, "recs.jsonl:2: a line longer than 1 MiB")
    skipped = invoke_cli("bias-report", "--records", str(path), "--skip-bad", "--json")
    assert skipped.exit_code == 0, skipped.stderr
    assert json.loads(skipped.stdout)["skipped_lines"] == 1


@pytest.mark.parametrize("source", ["file", "/dev/zero"])
def test_a_records_file_over_the_size_cap_is_one_line_even_skipping_bad_lines(tmp_path, monkeypatch, source):
    from council.bias import loading

    monkeypatch.setattr(loading, "MAX_RECORDS_FILE_BYTES", 64 * 1024)
    path = tmp_path / "recs.jsonl"
    path.write_text("".join(record(session_id=f"s{i}") + "\n" for i in range(1000)))  # ~250 kB
    name = str(path) if source == "file" else source
    result = invoke_cli("bias-report", "--records", name, "--skip-bad")
    assert_one_line(result, 2, f"records file {name} is larger than 64 KiB")


def test_a_question_file_that_never_ends_is_one_line(council_home):
    proc = council_process("run", "--file", "/dev/zero", "--council", "x", home=council_home, timeout=60)
    assert_process_one_line(proc, 2, "question file /dev/zero is larger than")


def test_a_batch_file_may_be_larger_than_a_question_file(tmp_path, council_home):
    from council.untrusted.inputs import MAX_INPUT_BYTES

    path = tmp_path / "batch.jsonl"
    line = json.dumps({**PAIR, "a": "x" * 100_000})
    path.write_text("".join(line.replace('"p1"', f'"p{i}"') + "\n" for i in range(MAX_INPUT_BYTES // 100_000 + 5)))

    assert path.stat().st_size > MAX_INPUT_BYTES
    result = invoke_cli("batch", str(path), "--judge", "fake/alpha", "--mode", "grade")
    assert_one_line(result, 2, 'a grade item needs "response"')  # read and parsed, not refused for its size


def test_a_question_on_stdin_that_never_ends_is_one_line(council_home):
    with open("/dev/zero", "rb") as zero:
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, "-m", "council", "run", "-"], stdin=zero, capture_output=True,
                              env={**os.environ, "COUNCIL_HOME": str(council_home)}, timeout=60)  # fmt: skip
    assert_process_one_line(proc, 2, "standard input is larger than")


@pytest.mark.parametrize("question", ["\u200b\u200c\u200d", "\u2060 \ufeff\n\u202e", "\u00ad\u034f"])
def test_a_question_with_nothing_visible_is_refused(council_home, tmp_path, question):
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a")
    assert_one_line(invoke_cli("run", question, "--config", str(cfg)), 2, "the question has no visible text")
    assert not (council_home / "council.db").exists()


# -- config values -------------------------------------------------------------------------


def config_text(model_extra: str = "", council_extra: str = "") -> str:
    return (
        '[councils.default]\nmembers = ["a", "b", "c"]\nchairman = "a"\n' + council_extra + "\n"
        '[models.a]\nmodel = "fake/a"\n' + model_extra + "\n"
        '[models.b]\nmodel = "fake/b"\n[models.c]\nmodel = "fake/c"\n'
    )


BAD_CONFIGS = [
    (config_text("timeout = inf"), "models.a.timeout"),
    (config_text("timeout = nan"), "models.a.timeout"),
    (config_text("input_cost_per_token = inf"), "models.a.input_cost_per_token"),
    (config_text(council_extra="scale = [9223372036854775000, 9223372036854775807]"), "councils.default.scale"),
    (config_text(council_extra="scale = [-9223372036854775808, -9223372036854775800]"), "councils.default.scale"),
    (config_text('api_base = "localhost:8000/v1"'), "models.a.api_base"),
    (config_text('api_base = "127.0.0.1:8000"'), "models.a.api_base"),
    (config_text('api_base = "ftp://example.org/v1"'), "models.a.api_base"),
]  # fmt: skip


@pytest.mark.parametrize("text, fragment", BAD_CONFIGS)
def test_a_bad_config_value_is_one_line_before_any_call(tmp_path, council_home, text, fragment):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text, encoding="utf-8")
    assert_one_line(invoke_cli("run", "Why is the sky blue?", "--config", str(cfg)), 2, fragment)
    assert not (council_home / "council.db").exists()


@pytest.mark.parametrize("extra, compared", [("", False), ('reviewers = ["a", "b", "c"]\n', True),
                                              ('self_review = "flag"\n', True)])  # fmt: skip
def test_a_two_member_exclude_council_says_nothing_was_compared(tmp_path, council_home, extra, compared):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[councils.default]\nmembers = ["a", "b"]\nchairman = "a"\n'
        + extra
        + '[models.a]\nmodel = "fake/a"\n[models.b]\nmodel = "fake/b"\n[models.c]\nmodel = "fake/c"\n'
    )
    run = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), "--json")
    assert run.exit_code == 0, run.stderr
    flags = json.loads(run.stdout)["flags"]
    assert any(f.startswith("nothing compared") for f in flags) is not compared, flags
    if not compared:
        shown = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg))
        assert "flag: nothing compared" in " ".join(shown.stdout.split())


def test_a_scheme_less_api_base_says_what_to_write(tmp_path, council_home):
    cfg = tmp_path / "c.toml"
    cfg.write_text(config_text('api_base = "localhost:8000/v1"'), encoding="utf-8")
    line = invoke_cli("run", "Why?", "--config", str(cfg)).error_lines[0]
    assert "http://" in line and "localhost:8000/v1" in line


def test_a_log_level_typo_is_one_line(council_home):
    result = invoke_cli("sessions", "list", env={"COUNCIL_LOG_LEVEL": "DEBUGG"})
    assert_one_line(result, 2, "COUNCIL_LOG_LEVEL")
    assert "DEBUGG" in result.error_lines[0] and "WARNING" in result.error_lines[0]


@pytest.mark.parametrize("level", ["debug", "Warning", "ERROR", "critical", "info"])
def test_log_levels_in_any_case_are_accepted(council_home, level):
    assert invoke_cli("sessions", "list", env={"COUNCIL_LOG_LEVEL": level}).exit_code == 0


# -- the data directory and its database ---------------------------------------------------


def test_a_council_home_that_is_a_file_is_one_line(tmp_path):
    home = tmp_path / "not-a-dir"
    home.write_text("x")
    proc = council_process("sessions", "list", home=home)
    assert_process_one_line(proc, 2, f"COUNCIL_HOME {home} is not a directory")
    assert home.read_text() == "x"


def test_a_council_home_under_a_file_is_one_line(tmp_path):
    parent = tmp_path / "file"
    parent.write_text("x")
    proc = council_process("sessions", "list", home=parent / "home")
    assert_process_one_line(proc, 2, "COUNCIL_HOME")


def test_a_corrupt_database_is_one_line_and_left_as_it_is(council_home):
    db = council_home / "council.db"
    garbage = os.urandom(8192)
    db.write_bytes(garbage)
    result = invoke_cli("sessions", "list")
    assert_one_line(result, 1, f"{db} is not a council database")
    assert db.read_bytes() == garbage


def test_a_foreign_sqlite_database_is_one_line_and_left_as_it_is(council_home):
    db = council_home / "council.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE sessions (user TEXT, cookie TEXT)")
    conn.execute("INSERT INTO sessions VALUES ('ann', 'c00kie')")
    conn.commit()
    conn.close()
    result = invoke_cli("sessions", "list")
    assert_one_line(result, 1, f"{db} is not a council database")
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT * FROM sessions").fetchall() == [("ann", "c00kie")]
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["sessions"]
    conn.close()


def test_a_database_from_a_newer_council_is_refused_naming_both_versions(council_home):
    from council.storage import SQLiteStore
    from council.storage.opening import schema_version

    ours = schema_version()

    SQLiteStore.open().close()
    conn = sqlite3.connect(council_home / "council.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == ours
    conn.execute(f"PRAGMA user_version = {ours + 3}")
    conn.close()
    result = invoke_cli("sessions", "list")
    assert_one_line(result, 1, f"schema version {ours + 3}")
    assert f"version {ours}" in result.error_lines[0].replace(f"version {ours + 3}", "")


def test_a_database_from_before_the_version_check_is_upgraded(council_home):
    from council.storage import SQLiteStore
    from council.storage.opening import schema_version

    ours = schema_version()

    SQLiteStore.open().close()
    conn = sqlite3.connect(council_home / "council.db")
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    assert invoke_cli("sessions", "list").exit_code == 0
    conn = sqlite3.connect(council_home / "council.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == ours
    conn.close()


@pytest.fixture
def read_only_home(tmp_path):
    """A home with a database and a session in it, then mounted read-only (a bind mount when
    we are root, where permissions alone stop nothing)."""
    import subprocess

    home = tmp_path / "ro-home"
    home.mkdir()
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a",
                       self_review="flag")  # fmt: skip
    proc = council_process("run", "What is 2+2?", "--config", str(cfg), home=home)
    assert proc.returncode == 0, proc.stderr
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(home), str(home)], capture_output=True)
        if mounted.returncode != 0:
            pytest.skip(f"cannot make a read-only mount here: {mounted.stderr.decode().strip()}")
        subprocess.run(["mount", "-o", "remount,bind,ro", str(home)], capture_output=True)
        try:
            (home / "probe").write_text("x")
        except OSError:
            pass
        else:
            subprocess.run(["umount", str(home)])
            pytest.skip("the bind mount is writable")
        yield home
        subprocess.run(["umount", str(home)], check=True)
    else:
        os.chmod(home, 0o500)
        os.chmod(home / "council.db", 0o400)
        yield home
        os.chmod(home, 0o700)


def test_read_only_commands_work_on_a_read_only_home(read_only_home):
    proc = council_process("sessions", "list", home=read_only_home)
    assert proc.returncode == 0, proc.stderr
    assert b"What is 2+2?" in proc.stdout
    for args in (["bias-report", "--json"], ["leaderboard"], ["export", "--format", "jsonl"]):
        proc = council_process(*args, home=read_only_home)
        assert proc.returncode == 0, (args, proc.stderr)


def test_a_write_on_a_read_only_home_is_one_line(read_only_home, tmp_path):
    cfg = write_config(tmp_path / "c2.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a",
                       self_review="flag")  # fmt: skip
    proc = council_process("run", "What is 3+3?", "--config", str(cfg), home=read_only_home)
    assert_process_one_line(proc, 1, "read-only")


# -- output paths --------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path):
    """A path whose writes fail with "no space left" (a link to /dev/full: a command that
    replaced its output would replace the link, never the device)."""
    link = tmp_path / "full.out"
    link.symlink_to("/dev/full")
    yield link
    assert link.is_symlink() and link.is_char_device()


def test_bias_report_to_a_full_disk_is_one_line(council_home, full_disk):
    assert_one_line(invoke_cli("bias-report", "--json", "-o", str(full_disk)), 2, "No space left on device")


def test_bias_report_into_a_missing_directory_is_one_line(tmp_path, council_home):
    out = tmp_path / "missing-dir" / "sub" / "out.json"
    assert_one_line(invoke_cli("bias-report", "--json", "-o", str(out)), 2, "missing-dir")


@pytest.mark.parametrize("target, fragment", [("a-file/out.jsonl", "a-file is a file"), ("a-file/x/y", "a-file is")])
def test_batch_results_that_cannot_be_written_are_refused_before_any_call(tmp_path, council_home, target, fragment):
    (tmp_path / "a-file").write_text("x")
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(PAIR) + "\n", encoding="utf-8")
    result = invoke_cli("batch", str(path), "--judge", "fake/alpha", "-o", str(tmp_path / target))
    assert_one_line(result, 2, fragment)
    assert not (council_home / "council.db").exists()


def test_batch_results_to_a_full_disk_is_one_line(tmp_path, council_home, full_disk):
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(PAIR) + "\n", encoding="utf-8")
    result = invoke_cli("--quiet", "batch", str(path), "--judge", "fake/alpha", "-o", str(full_disk))
    assert_one_line(result, 2, "No space left on device")
    assert "rerun with --resume" in result.error_lines[0]
    out = tmp_path / "results.jsonl"
    resumed = invoke_cli("--quiet", "batch", str(path), "--judge", "fake/alpha", "-o", str(out), "--resume")
    assert resumed.exit_code == 0 and json.loads(out.read_text())["id"] == "p1"


def test_a_full_disk_under_the_database_is_one_line(tmp_path):
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    home = tmp_path / "small"
    home.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(home)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}},
                           chairman="a", self_review="flag")  # fmt: skip
        assert council_process("run", "What is 2+2?", "--config", str(cfg), home=home).returncode == 0
        # Unbuffered: a buffered file would keep the last partial write's rest and fail again at
        # close, whenever the free space is not a whole number of writes.
        with open(home / "filler", "wb", buffering=0) as fh:  # fill the disk to the last block
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
        proc = council_process("run", "What is 3+3?" * 2000, "--config", str(cfg), home=home)
        assert_process_one_line(proc, 1, f"cannot write to the database {home / 'council.db'}: disk")
        assert council_process("sessions", "list", home=home).returncode == 0
    finally:
        subprocess.run(["umount", str(home)], check=True)


def test_a_member_failing_down_to_two_answers_under_exclude_is_flagged_too(tmp_path, council_home):
    cfg = write_config(
        tmp_path / "c.toml",
        {m: {"model": f"fake/{m}"} for m in ("a", "b")} | {"c": {"model": "fake/c+fail"}},
        chairman="a",
    )
    run = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), "--json")
    assert run.exit_code == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "partial"
    assert any(f.startswith("nothing compared") for f in result["flags"]), result["flags"]


def test_a_limit_of_twenty_digits_is_one_line(council_home):
    result = invoke_cli("sessions", "list", "--limit", "9" * 20)
    assert result.exit_code == 2 and "--limit" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "config file /dev/zero is larger than 10 MB"),
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "invalid TOML: nested too deeply"),
        (b"\xff\xfe[councils]", "is not UTF-8 text"),
    ],
)
def test_a_hostile_config_file_is_one_line(tmp_path, council_home, content, fragment):
    if content is None:
        path = "/dev/zero"
    else:
        path = tmp_path / "c.toml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert_one_line(invoke_cli("run", "Why?", "--config", str(path)), 2, fragment)


def test_a_hostile_rubric_file_is_one_line(tmp_path, council_home):
    rubric = tmp_path / "r.toml"
    rubric.write_text("scale = " + "[" * 100_000 + "]" * 100_000 + "\n")
    response = tmp_path / "resp.txt"
    response.write_text("An answer.")
    result = invoke_cli(
        "grade", "--prompt", "Why?", "--response", str(response), "--rubric", str(rubric), "--judge", "fake/alpha"
    )
    assert_one_line(result, 2, "nested too deeply")


@pytest.mark.parametrize(
    "criteria, fragment",
    [(["x" * 101], "at most 100 characters"), ([f"c{i}" for i in range(51)], "at most 50 criteria")],
)
def test_a_criterion_list_the_judges_cannot_take_is_one_line_before_any_call(tmp_path, council_home, criteria,
                                                                             fragment):  # fmt: skip
    given = [arg for name in criteria for arg in ("--criteria", name)]
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.txt").write_text("y")
    compared = invoke_cli("compare", "--prompt", "Why?", "--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt"),
                          *given, "--judge", "fake/alpha")  # fmt: skip
    assert_one_line(compared, 2, fragment)
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(PAIR) + "\n")
    batched = invoke_cli("batch", str(path), *given, "--judge", "fake/alpha")
    assert_one_line(batched, 2, fragment)
    queued = invoke_cli("batch", str(path), *given, "--judge", "fake/alpha", "--enqueue")
    assert_one_line(queued, 2, fragment)
    assert not (council_home / "council.db").exists() or not any(
        sqlite3.connect(council_home / "council.db").execute("select 1 from calls union all select 1 from batches")
    )

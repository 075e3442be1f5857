"""`-o FILE` given carelessly: an empty name, or the very file the command reads. One line, nothing lost."""

from __future__ import annotations

import json

import pytest
from conftest import invoke_cli

JUDGMENTS = "".join(
    json.dumps({"model_a": a, "model_b": b, "winner": w}) + "\n" for a, b, w in [("x", "y", "A"), ("y", "z", "B")]
)
RECORD = {
    "schema_version": "1.2.0", "session_id": "s1", "reviewer_id": "r1", "model_id": "m1", "position": 0,
    "response_length_chars": 10, "response_length_words": 2, "score_value": 5.0, "query_hash": None,
    "timestamp": "2026-01-01T00:00:00+00:00", "scale_min": 1, "scale_max": 10, "self_review": False,
}  # fmt: skip


def assert_one_line(result, fragment: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_output_name_is_one_line(council_home):
    assert_one_line(invoke_cli("export", "-o", ""), "empty")


@pytest.mark.parametrize(
    "args, name, content",
    [
        (["leaderboard", "--judgments", "{f}", "-o", "{f}"], "j.jsonl", JUDGMENTS),
        (["leaderboard", "--judgments", "{f}", "--json", "-o", "{f}"], "j.jsonl", JUDGMENTS),
        (["bias-report", "--records", "{f}", "-o", "{f}"], "r.jsonl", json.dumps(RECORD) + "\n"),
        (["batch", "{f}", "--judge", "fake/judge", "--output", "{f}"], "b.jsonl",
         json.dumps({"id": "1", "prompt": "p", "a": "x", "b": "y"}) + "\n"),
    ],
)  # fmt: skip
def test_writing_over_the_file_the_command_reads_is_refused(tmp_path, council_home, args, name, content):
    path = tmp_path / name
    path.write_text(content)
    link = tmp_path / ("link-" + name)
    link.symlink_to(path)
    for target in (path, link):  # the same file under another name too
        argv = [a.replace("{f}", str(path)) for a in args]
        argv[-1] = str(target)
        assert_one_line(invoke_cli(*argv), "reads it")
        assert path.read_text() == content


def test_a_batch_whose_default_results_file_is_a_directory_is_one_line(tmp_path, council_home):
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({"id": "1", "prompt": "p", "a": "x", "b": "y"}) + "\n")
    (tmp_path / "b.results.jsonl").mkdir()
    assert_one_line(invoke_cli("batch", str(path), "--judge", "fake/judge"), "is a directory")


def test_no_command_writes_over_the_store_in_use_wherever_it_lives(tmp_path, council_home, monkeypatch):
    # COUNCIL_DATABASE_URL names a SQLite file outside $COUNCIL_HOME, through a link: every
    # command that writes a file refuses it, its -wal and -shm files, a -journal file not there
    # (SQLite would read it as its journal) and another link to it.
    import sqlite3

    store_dir = tmp_path / "elsewhere"
    store_dir.mkdir()
    database = store_dir / "live.db"
    link = tmp_path / "link.db"
    link.symlink_to(database)
    monkeypatch.setenv("COUNCIL_DATABASE_URL", f"sqlite:///{link}")
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"id": "1", "prompt": "p", "a": "x", "b": "y"}) + "\n")
    made = invoke_cli("batch", str(batch), "--judge", "fake/judge", "--batch-id", "kept", "-o", str(tmp_path / "r"))
    assert made.exit_code == 0, made.stderr
    other_link = tmp_path / "other-link"
    other_link.symlink_to(database)
    held = sqlite3.connect(database)  # an open connection keeps the -wal and -shm files
    try:
        held.execute("select count(*) from batches").fetchone()
        before = {p.name: p.read_bytes() for p in store_dir.iterdir()}
        assert {"live.db", "live.db-wal", "live.db-shm"} <= set(before)
        commands = [
            ["export", "-o"], ["export", "--format", "csv", "-o"], ["bias-report", "-o"], ["bias-report", "--html"],
            ["leaderboard", "-o"], ["leaderboard", "--html"], ["batch", "results", "kept", "-o"],
            ["batch", str(batch), "--judge", "fake/judge", "--batch-id", "new", "-o"],
        ]  # fmt: skip
        side_files = [store_dir / f"live.db{suffix}" for suffix in ("-wal", "-shm", "-journal")]
        for target in (database, other_link, *side_files, link):
            for args in commands:
                result = invoke_cli(*args, str(target))
                assert_one_line(result, "database")
                assert {p.name: p.read_bytes() for p in store_dir.iterdir()} == before, (args, target)
    finally:
        held.close()
    assert invoke_cli("batch", "status", "kept").exit_code == 0

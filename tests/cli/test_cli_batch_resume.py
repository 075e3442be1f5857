"""`council batch --resume` after the file was edited: items are matched by id and content;
changed items are judged again, unchanged ones keep their results, and the command says how
many of each (SPEC, "Distributed batch")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from batch_files import pair, write_jsonl
from conftest import invoke_cli


def runs(home: Path) -> int:
    db = sqlite3.connect(home / "council.db")
    try:
        return db.execute("SELECT count(*) FROM judgment_runs").fetchone()[0]
    finally:
        db.close()


def results(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


@pytest.mark.parametrize("named", [False, True])
def test_resuming_an_edited_file_judges_only_what_changed(tmp_path, council_home, named):
    batch = write_jsonl(tmp_path / "batch.jsonl", [pair(1), pair(2), pair(3), pair(4)])
    out = tmp_path / "out.jsonl"
    ids = ["--batch-id", "mine"] if named else []
    first = invoke_cli("batch", str(batch), "--judge", "fake/alpha", "-o", str(out), *ids)
    assert first.exit_code == 0, first.stderr
    before = results(out)
    assert runs(council_home) == 4

    # item-2 edited, item-4 removed, item-5 added, item-1 and item-3 swapped lines
    write_jsonl(batch, [pair(3), pair(2, a="A completely different answer."), pair(1), pair(5)])
    second = invoke_cli("batch", str(batch), "--judge", "fake/alpha", "-o", str(out), "--resume", *ids)
    assert second.exit_code == 0, second.stderr
    assert runs(council_home) == 6  # item-2 again and item-5: nothing else billed
    said = " ".join(second.stderr.split())
    assert (
        "4 items, 2 already finished and kept, 1 changed since (judged again), 1 no longer in the file; judging 2"
        in said
    )
    after = results(out)
    assert list(after) == ["item-3", "item-2", "item-1", "item-5"]  # the file's order now
    assert after["item-1"] == before["item-1"] and after["item-3"] == before["item-3"]
    summary = invoke_cli("batch", str(batch), "--judge", "fake/alpha", "-o", str(out), "--resume", "--json", *ids)
    data = json.loads(summary.stdout)
    assert (data["items"], data["skipped"], data["judged_this_run"], data["changed"]) == (4, 4, 0, 0)
    assert runs(council_home) == 6


def test_resume_with_other_settings_is_refused_in_one_line(tmp_path, council_home):
    batch = write_jsonl(tmp_path / "batch.jsonl", [pair(1)])
    assert invoke_cli("batch", str(batch), "--judge", "fake/alpha", "--batch-id", "b1").exit_code == 0
    result = invoke_cli("batch", str(batch), "--judge", "fake/beta", "--batch-id", "b1", "--resume")
    assert result.exit_code == 2
    assert result.error_lines == [
        "error: batch b1 was started with different settings (judges, strategy, rubric, votes...); use the same "
        "settings to continue it, or another --batch-id"
    ]


def test_an_edited_file_without_resume_is_a_new_batch(tmp_path, council_home):
    batch = write_jsonl(tmp_path / "batch.jsonl", [pair(1), pair(2)])
    assert invoke_cli("batch", str(batch), "--judge", "fake/alpha").exit_code == 0
    write_jsonl(batch, [pair(1), pair(2, a="edited")])
    again = invoke_cli("batch", str(batch), "--judge", "fake/alpha")
    assert again.exit_code == 0 and runs(council_home) == 4

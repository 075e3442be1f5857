"""`council batch`: whole-file validation, summaries, and resume after kill -9 with no duplicates or gaps."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_files import pair, write_jsonl
from conftest import CliResult, invoke_cli
from fake_judges import fake_client
from mock_server import start_mock_server

from council.errors import InputError, NotFoundError
from council.judging.batch import (
    BatchSettings,
    content_digest,
    default_batch_id,
    load_rubrics,
    parse_batch,
    run_batch,
)
from council.storage import SQLiteStore
from council.storage.ownership import SQLITE_CLOCK

ITEMS = 300


def council_cli(*args: str, home: Path) -> CliResult:
    """``council ARGS`` in-process, with ``home`` as COUNCIL_HOME."""
    return invoke_cli(*args, env={"COUNCIL_HOME": str(home)})


def start_batch(*args: str, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "COUNCIL_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "council", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        # A background test runner may ignore SIGINT; the child must see it as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def wait_until_recorded(proc: subprocess.Popen[str], home: Path, items: int) -> None:
    """Until the running batch ``proc`` has recorded ``items`` items (or ended, or 60 s passed)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db_rows(home, "select count(*) from batch_items")[0][0] >= items:
                return
        except sqlite3.OperationalError:  # the database or its tables do not exist yet
            pass
        time.sleep(0.05)


def db_rows(home: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(home / "council.db", timeout=10)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


# ------------------------------------------------------------- the file (no models)


def test_parse_infers_the_mode_per_line_and_reports_bad_lines_by_number():
    text = "\n".join(
        [
            json.dumps(pair(1)),
            "",
            json.dumps({"id": 2, "prompt": "Q?", "response": "R", "reference": "R", "metadata": {"k": 1}}),
        ]
    )
    items = parse_batch(text, "f.jsonl")
    assert [(i.id, i.mode, i.line) for i in items] == [("item-1", "pairwise", 1), ("2", "grade", 3)]
    assert items[1].metadata == {"k": 1}

    bad = {
        '{"id": "x", "prompt": "Q", "a": "A"': "f.jsonl:2: not valid JSON",
        '["a list"]': "f.jsonl:2: expected a JSON object",
        '{"id": "x", "prompt": "Q", "a": "A"}': 'needs both "a" and "b"',
        '{"id": "x", "prompt": "Q", "a": "A", "b": "B", "response": "R"}': "not both",
        '{"id": "x", "prompt": "Q", "a": "A", "b": "B", "answer": "?"}': "unknown key(s) for a pairwise item: answer",
        '{"id": true, "prompt": "Q", "a": "A", "b": "B"}': '"id" must be',
        '{"id": "x", "prompt": " ", "a": "A", "b": "B"}': '"prompt" must be a non-empty string',
        '{"id": "x", "prompt": "Q", "a": "A", "b": 3}': '"b" must be a string',
        '{"id": "item-1", "prompt": "Q", "a": "A", "b": "B"}': "duplicate id 'item-1' (first on line 1)",
    }
    for line, message in bad.items():
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_batch(json.dumps(pair(1)) + "\n" + line, "f.jsonl")
    with pytest.raises(InputError, match='a grade item needs "response"'):
        parse_batch(json.dumps(pair(1)), "f.jsonl", mode="grade")
    with pytest.raises(InputError, match="no items"):
        parse_batch("\n\n", "f.jsonl")
    grade_item = parse_batch(json.dumps({"id": "g", "prompt": "Q", "response": "R", "rubric": "nosuch"}), "f.jsonl")
    with pytest.raises(NotFoundError, match="f.jsonl:1: rubric 'nosuch' not found"):
        load_rubrics(grade_item, "general", "f.jsonl")


def test_the_default_batch_id_follows_the_file_and_the_settings():
    settings = BatchSettings(judges=["j=fake/j"])
    assert default_batch_id("x", settings) == default_batch_id("x", settings)
    assert default_batch_id("x", settings) != default_batch_id("y", settings)
    assert default_batch_id("x", settings) != default_batch_id("x", settings.model_copy(update={"votes": 3}))


# ------------------------------------------------------------ in-process, fake judge


async def test_summary_numbers_add_up_and_a_failed_item_is_retried_on_resume(tmp_path, council_home):
    rows = [pair(i) for i in range(6)] + [{"id": "g", "prompt": "Capital?", "response": "Paris", "reference": "Paris"}]
    text = write_jsonl(tmp_path / "b.jsonl", rows).read_text()
    items = parse_batch(text, "b.jsonl")
    settings = BatchSettings(judges=["fake/j"], votes=3, adaptive=True, max_attempts=1)
    common = {"settings": settings, "batch_id": "b1", "source": "b.jsonl", "content_sha256": content_digest(text)}
    output = tmp_path / "out.jsonl"
    store = SQLiteStore.open()

    # concurrency 1: the first item's first vote gets the two garbage replies, so that item fails
    flaky = fake_client("fake/j", script=["no json", "no json"])
    first = await run_batch(items, judges=[flaky], concurrency=1, output=output, store=store, **common)
    assert (first.finished, first.failed, first.missing) == (6, 1, 0) and list(first.errors) == ["item-0"]
    assert first.a_wins + first.b_wins + first.ties == first.pairwise == 5 and first.graded == 1
    assert first.calls == sum(r["calls"] for r in store.db.query("select calls from judgment_runs"))
    assert first.calls_saved > 0  # adaptive: unanimous votes stop after two of three

    again = await run_batch(items, judges=[fake_client("fake/j")], resume=True, output=output, store=store, **common)
    assert (again.finished, again.failed, again.skipped, again.judged_this_run) == (7, 0, 6, 1)
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [line["id"] for line in lines] == [r["id"] for r in rows]
    assert all(line["status"] == "ok" for line in lines)
    assert store.db["batch_items"].count == 7
    assert store.db["judgment_runs"].count == 8  # the failed attempt stays on record, replaced in the batch


# ---------------------------------------------------- end to end: real CLI, real HTTP


@pytest.fixture(scope="module")
def mock_url():
    with start_mock_server(latency=0.05) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def judge_config(tmp_path_factory, mock_url) -> Path:
    path = tmp_path_factory.mktemp("config") / "council.toml"
    path.write_text(
        "[councils.default]\nmembers = [\"judge\"]\n\n[models.judge]\n"
        f'model = "openai/mock-alpha"\napi_base = "{mock_url}"\nmax_concurrency = 32\ntimeout = 10\nretries = 1\n'
    )
    return path


@pytest.fixture(scope="module")
def batch_file(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("batch") / "pairs.jsonl", [pair(i) for i in range(ITEMS)])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, batch_file, judge_config):
    """The whole batch, run straight through: the reference for the resumed run."""
    home = tmp_path_factory.mktemp("home")
    output = home / "results.jsonl"
    args = ["batch", str(batch_file), "--config", str(judge_config), "--concurrency", "16"]
    proc = council_cli(*args, "--output", str(output), "--json", home=home)
    assert proc.exit_code == 0, proc.stderr
    return home, json.loads(proc.stdout), output


@pytest.mark.slow
def test_a_batch_completes_with_a_consistent_summary(uninterrupted, batch_file):
    home, summary, output = uninterrupted
    assert (summary["items"], summary["finished"], summary["failed"], summary["missing"]) == (ITEMS, ITEMS, 0, 0)
    assert summary["a_wins"] + summary["b_wins"] + summary["ties"] == summary["pairwise"] == ITEMS
    assert summary["a_win_rate"] + summary["b_win_rate"] + summary["tie_rate"] == pytest.approx(1.0)
    assert summary["calls"] == 2 * ITEMS and summary["swap_pairs"] == ITEMS and summary["calls_saved"] == 0
    assert summary["inconsistency_rate"] == 0.0  # the mock's default judge is position-fair
    assert summary["prompt_tokens"] > 0 and summary["completion_tokens"] > 0
    assert db_rows(home, "select count(*) from calls")[0][0] == summary["calls"]
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"item-{i}" for i in range(ITEMS)]


@pytest.mark.slow
def test_resume_after_kill_9_records_every_item_exactly_once(
    tmp_path, council_home, batch_file, judge_config, uninterrupted
):
    output = tmp_path / "results.jsonl"
    args = ["batch", str(batch_file), "--config", str(judge_config), "--output", str(output)]
    # A 2 s claim lease: the resume below takes the items the killed process held 2 s after its
    # last renewal instead of the default 60 (the queue's leases: tests/pipelines/test_pipeline_batch_workers.py).
    proc = start_batch(*args, "--concurrency", "4", "--lease-seconds", "2", home=council_home)
    wait_until_recorded(proc, council_home, 30)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the batch must still have been running when killed"
    before = db_rows(council_home, "select count(*) from batch_items")[0][0]
    assert 30 <= before < ITEMS
    assert not output.exists()
    left = f"select max(lease_until) - {SQLITE_CLOCK.now} from batch_queue where state = 'running'"
    held = db_rows(council_home, left)[0][0]
    assert held is not None and held <= 2.0  # what the killed process held, under its --lease-seconds
    # nothing half-written: every recorded item has its run, both passes and both calls; no orphans
    assert db_rows(council_home, "select count(*) from judgment_runs")[0][0] == before
    assert db_rows(council_home, "select count(*) from judgments")[0][0] == 2 * before
    in_runs = "select count(*) from calls where session_id in (select id from judgment_runs)"
    assert db_rows(council_home, in_runs)[0][0] == 2 * before
    # calls in flight at the kill stay on record (they may have been billed): tests/storage/test_crash_recovery.py

    refused = council_cli(*args, home=council_home)
    assert refused.exit_code == 2 and "--resume" in refused.stderr

    resumed = council_cli(*args, "--concurrency", "16", "--resume", "--json", home=council_home)
    assert resumed.exit_code == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["skipped"], summary["judged_this_run"]) == (before, ITEMS - before)
    assert (summary["finished"], summary["failed"], summary["missing"]) == (ITEMS, 0, 0)

    ids = [row[0] for row in db_rows(council_home, "select item_id from batch_items order by position")]
    assert ids == [f"item-{i}" for i in range(ITEMS)]  # no duplicates, no gaps
    assert db_rows(council_home, "select count(*) from judgment_runs")[0][0] == ITEMS
    assert db_rows(council_home, "select count(*) from judgments")[0][0] == 2 * ITEMS
    lines = output.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ids
    _, _, reference = uninterrupted
    assert output.read_text() == reference.read_text()  # same results as a run that was never interrupted


def test_ctrl_c_returns_the_items_in_flight_to_the_queue_at_once(tmp_path, council_home, batch_file, judge_config):
    """A Ctrl-C is not a crash: the claims are released on the way out, so a resume takes those
    items at once instead of waiting for their lease (60 s by default)."""
    args = ["batch", str(batch_file), "--config", str(judge_config), "--output", str(tmp_path / "out.jsonl")]
    proc = start_batch(*args, "--concurrency", "8", home=council_home)
    wait_until_recorded(proc, council_home, 10)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted"
    recorded = db_rows(council_home, "select count(*) from batch_items")[0][0]
    assert 10 <= recorded < ITEMS
    states = dict(db_rows(council_home, "select state, count(*) from batch_queue group by state"))
    assert "running" not in states, states  # released, not left to their lease
    assert states == {"done": recorded, "queued": ITEMS - recorded}


def test_a_bad_line_is_rejected_with_its_number_and_nothing_is_written(tmp_path, council_home, judge_config):
    rows = [json.dumps(pair(i)) for i in range(5)]
    rows[2] = '{"id": "item-2", "prompt": "Q", "a": "A", "b": }'
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(rows) + "\n")
    output = tmp_path / "out.jsonl"
    proc = council_cli("batch", str(bad), "--config", str(judge_config), "--output", str(output), home=council_home)
    assert proc.exit_code == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {bad}:3: not valid JSON")
    assert "Traceback" not in proc.stderr
    assert not output.exists()
    assert not (council_home / "council.db").exists()

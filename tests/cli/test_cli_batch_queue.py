"""`council batch FILE --enqueue`, `council worker`, `council batch status|results ID` (SQLite, in process)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import db_rows, invoke_cli, write_config


def pair(i: int, extra: str = "") -> dict[str, str]:
    return {"id": f"p{i}", "prompt": f"Question {i}?{extra}", "a": f"Answer A {i}, in detail.", "b": f"B {i}."}


def write_batch(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def enqueue(path: Path, *args: str) -> str:
    result = invoke_cli("batch", str(path), "--judge", "fake/j", "--enqueue", *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


def status(batch_id: str) -> dict:
    result = invoke_cli("batch", "status", batch_id, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_enqueue_stores_the_items_and_a_worker_judges_them_like_a_plain_batch(tmp_path):
    path = write_batch(tmp_path / "b.jsonl", [pair(i) for i in range(5)])
    batch_id = enqueue(path, "--batch-id", "queued")
    assert batch_id == "queued"
    assert status("queued") == {"batch_id": "queued", "items": 5, "queued": 5, "running": 0, "done": 0,
                                "failed": 0, "cost_usd": 0.0, "provider_batches": []}  # fmt: skip
    assert db_rows(tmp_path / "council-home", "select count(*) from calls") == [(0,)]  # nothing judged yet
    worked = invoke_cli("worker", "--batch-id", "queued", "--concurrency", "3")
    assert worked.exit_code == 0, worked.stderr
    assert "judged 5 items (0 failed)" in worked.stderr
    assert status("queued")["done"] == 5
    results = invoke_cli("batch", "results", "queued", "-o", str(tmp_path / "queued.jsonl"))
    assert results.exit_code == 0, results.stderr
    # The same lines as a plain run of the same file.
    plain = invoke_cli("batch", str(path), "--judge", "fake/j", "--batch-id", "plain", "-o", str(tmp_path / "p.jsonl"))
    assert plain.exit_code == 0, plain.stderr
    assert (tmp_path / "queued.jsonl").read_text() == (tmp_path / "p.jsonl").read_text()
    assert invoke_cli("batch", "results", "queued").stdout == (tmp_path / "p.jsonl").read_text()


def test_a_changed_file_under_the_same_id_judges_only_what_changed(tmp_path):
    path = write_batch(tmp_path / "b.jsonl", [pair(i) for i in range(4)])
    enqueue(path, "--batch-id", "b")
    assert invoke_cli("worker").exit_code == 0
    runs = {r[0]: r[1] for r in db_rows(tmp_path / "council-home", "select item_id, run_id from batch_items")}
    write_batch(path, [pair(0), pair(1, " Edited."), pair(2), pair(9)])  # p3 removed, p9 new
    again = invoke_cli("batch", str(path), "--judge", "fake/j", "--enqueue", "--batch-id", "b")
    assert again.exit_code == 0, again.stderr
    assert "1 new, 1 changed (judged again), 2 unchanged (kept)" in again.stderr and "1 removed" in again.stderr
    assert status("b") == {**status("b"), "items": 4, "queued": 2, "done": 2}
    assert invoke_cli("worker", "--batch-id", "b").exit_code == 0
    after = {r[0]: r[1] for r in db_rows(tmp_path / "council-home", "select item_id, run_id from batch_items")}
    assert sorted(after) == ["p0", "p1", "p2", "p9"]
    assert after["p0"] == runs["p0"] and after["p2"] == runs["p2"] and after["p1"] != runs["p1"]
    lines = [json.loads(line) for line in invoke_cli("batch", "results", "b").stdout.splitlines()]
    assert [line["id"] for line in lines] == ["p0", "p1", "p2", "p9"]


def test_another_file_under_an_existing_id_is_refused_unless_replace_is_given(tmp_path, monkeypatch):
    # Someone else's file under the same --batch-id would silently replace the finished results:
    # refused in one line, before anything changes; --replace asks for it (the changed items judged
    # again, as an edited file of the batch's own is). The same file under another name (a link, a
    # relative path) is the same file; an identical copy changes nothing.
    home = tmp_path / "council-home"
    mine = write_batch(tmp_path / "mine.jsonl", [pair(i) for i in range(4)])
    enqueue(mine, "--batch-id", "shared")
    assert invoke_cli("worker").exit_code == 0
    runs = db_rows(home, "select item_id, run_id from batch_items order by item_id")
    theirs = write_batch(tmp_path / "theirs.jsonl", [pair(0), pair(1, " Theirs."), pair(7)])
    for args in (["--enqueue"], ["--resume"]):
        refused = invoke_cli("batch", str(theirs), "--judge", "fake/j", "--batch-id", "shared", *args)
        assert refused.exit_code == 2, (args, refused.stderr)
        assert refused.error_lines == [
            f"error: batch shared already holds 4 items from another file ({mine}): pass --replace to re-judge "
            "changed items, or choose another --batch-id"
        ]  # fmt: skip
        assert db_rows(home, "select item_id, run_id from batch_items order by item_id") == runs
        assert status("shared")["done"] == 4
    (tmp_path / "copy.jsonl").write_text(mine.read_text())
    link = tmp_path / "link.jsonl"
    link.symlink_to(mine)
    monkeypatch.chdir(tmp_path)
    for same in (link, tmp_path / "copy.jsonl", "mine.jsonl"):
        assert "4 unchanged (kept)" in invoke_cli("batch", str(same), "--judge", "fake/j", "--enqueue",
                                                  "--batch-id", "shared").stderr  # fmt: skip
    replaced = invoke_cli("batch", str(theirs), "--judge", "fake/j", "--batch-id", "shared", "--enqueue", "--replace")
    assert replaced.exit_code == 0, replaced.stderr
    assert "1 new, 1 changed (judged again), 1 unchanged (kept)" in replaced.stderr and "2 removed" in replaced.stderr
    # Now the batch is the other file's: its owner edits it as the documented update.
    write_batch(theirs, [pair(0), pair(1, " Theirs, edited."), pair(7)])
    assert "1 changed" in invoke_cli("batch", str(theirs), "--judge", "fake/j", "--enqueue",
                                     "--batch-id", "shared").stderr  # fmt: skip
    assert invoke_cli("batch", str(mine), "--judge", "fake/j", "--enqueue", "--batch-id", "shared").exit_code == 2


def test_with_transcripts_off_an_items_texts_leave_the_queue_once_done(tmp_path, monkeypatch):
    monkeypatch.setenv("COUNCIL_STORE_TRANSCRIPTS", "0")
    path = write_batch(tmp_path / "b.jsonl", [pair(i) for i in range(3)])
    enqueue(path, "--batch-id", "private")
    home = tmp_path / "council-home"
    assert db_rows(home, "select count(*) from batch_queue where item like '%Question%'") == [(3,)]
    assert invoke_cli("worker").exit_code == 0
    assert db_rows(home, "select state, item from batch_queue") == [("done", None)] * 3
    assert "Question" not in "\n".join(map(str, db_rows(home, "select * from batch_queue")))


def test_subcommand_names_win_over_file_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_batch(tmp_path / "status", [pair(0)])
    missing = invoke_cli("batch", "status")
    assert missing.exit_code == 2 and "Missing argument 'ID'" in missing.stderr
    judged = invoke_cli("batch", "./status", "--judge", "fake/j", "-o", "out.jsonl")
    assert judged.exit_code == 0, judged.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["id"] == "p0"
    assert invoke_cli("batch", "--help").stdout.startswith("Usage: council batch [OPTIONS] FILE")


def test_unknown_batches_and_unreachable_judges_are_one_line(tmp_path):
    for args in (["batch", "status", "nope"], ["batch", "results", "nope"], ["worker", "--batch-id", "nope"]):
        result = invoke_cli(*args)
        assert result.exit_code == 2 and result.error_lines == ["error: no batch 'nope' in the store"], args
    # A judge reached through an api_base: the worker's machine must say where its server is.
    cfg = write_config(tmp_path / "c.toml", {"j": {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1"}})
    path = write_batch(tmp_path / "b.jsonl", [pair(0)])
    assert invoke_cli("batch", str(path), "--config", str(cfg), "--judge", "j", "--enqueue").exit_code == 0
    result = invoke_cli("worker")
    assert result.exit_code == 2 and len(result.error_lines) == 1
    assert "api_base" in result.stderr and "--config" in result.stderr and "[models.j]" in result.stderr
    stored = db_rows(tmp_path / "council-home", "select spec from batches")[0][0]
    assert "127.0.0.1:9" not in stored  # the server's address stays on the machines that use it


async def test_a_worker_waits_for_items_a_stopped_worker_held_and_judges_them(tmp_path):
    import logging

    from fake_judges import fake_client

    from council.judging.batch import BatchSettings, content_digest, parse_batch
    from council.judging.worker import enqueue, run_worker
    from council.storage import SQLiteStore

    judge = fake_client("fake/j")
    text = "".join(json.dumps(pair(i)) + "\n" for i in range(3))
    items = parse_batch(text, "b.jsonl")
    store = SQLiteStore.open(tmp_path / "w.db")
    try:
        enqueue(store, items, batch_id="w", settings=BatchSettings(judges=["fake/j"]), judges=[judge], rubrics={},
                source="b.jsonl", content_sha256=content_digest(text))  # fmt: skip
        [held] = store.claim_items("gone", batch_id="w", lease_seconds=3)  # a worker that then died
        seen: list[str] = []
        catch = logging.Handler(logging.WARNING)
        catch.emit = lambda record: seen.append(str(record.msg))  # type: ignore[method-assign]
        logger = logging.getLogger("council.judging")
        logger.addHandler(catch)
        try:
            report = await run_worker(store, judges_for=lambda _id, _spec: [judge], batch_id="w", lease_seconds=5,
                                      keep_judges=[judge])  # fmt: skip
        finally:
            logger.removeHandler(catch)
        assert report.judged == 3 and store.batch_status("w")["done"] == 3 and held["item_id"] == "p0"
        assert len(seen) == 1 and "waiting for 1 item(s) held by another worker" in seen[0], seen
    finally:
        store.close()


def test_a_worker_keeps_prompt_ids_when_its_config_hashes_queries(tmp_path):
    """``[privacy] hash_queries`` of the worker's --config: each judged pair keeps its prompt's
    salted query hash (m018), the one the bias records use; without it, none."""
    from council.bias.records import QueryHasher

    rows = [{**pair(i), "model_a": "fake/x", "model_b": "fake/y"} for i in range(3)]
    path = write_batch(tmp_path / "b.jsonl", rows)
    enqueue(path, "--batch-id", "hashed")
    cfg = tmp_path / "hashing.toml"
    cfg.write_text("[privacy]\nhash_queries = true\n", encoding="utf-8")
    assert invoke_cli("worker", "--config", str(cfg)).exit_code == 0
    stored = db_rows(tmp_path / "council-home", "select prompt_id from judgment_runs order by model_a, id")
    hasher = QueryHasher(tmp_path / "council-home")
    assert sorted(r[0] for r in stored) == sorted(hasher.hash(r["prompt"]) for r in rows)
    enqueue(write_batch(tmp_path / "c.jsonl", [{**pair(9), "model_a": "fake/x", "model_b": "fake/y"}]))
    assert invoke_cli("worker").exit_code == 0
    assert len(db_rows(tmp_path / "council-home", "select 1 from judgment_runs where prompt_id is null")) == 1


def test_a_plain_batch_keeps_prompt_ids_when_its_config_hashes_queries(tmp_path):
    """``council batch FILE --config`` takes ``[privacy] hash_queries`` from that file, as
    ``council worker --config`` does: the judged pairs keep their prompts' salted hashes."""
    from council.bias.records import QueryHasher

    rows = [{**pair(i), "model_a": "fake/x", "model_b": "fake/y"} for i in range(3)]
    path = write_batch(tmp_path / "b.jsonl", rows)
    cfg = tmp_path / "hashing.toml"
    cfg.write_text("[privacy]\nhash_queries = true\n", encoding="utf-8")
    result = invoke_cli("batch", str(path), "--judge", "fake/j", "--config", str(cfg), "-o", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 0, result.stderr
    stored = db_rows(tmp_path / "council-home", "select prompt_id from judgment_runs order by model_a, id")
    hasher = QueryHasher(tmp_path / "council-home")
    assert sorted(r[0] for r in stored) == sorted(hasher.hash(r["prompt"]) for r in rows)
    # Without hashing in its --config (and none in the environment or default file): no prompt id.
    plain = tmp_path / "plain.toml"
    plain.write_text("[privacy]\nhash_queries = false\n", encoding="utf-8")
    other = write_batch(tmp_path / "c.jsonl", [{**pair(9), "model_a": "fake/x", "model_b": "fake/y"}])
    assert invoke_cli("batch", str(other), "--judge", "fake/j", "--config", str(plain)).exit_code == 0
    assert len(db_rows(tmp_path / "council-home", "select 1 from judgment_runs where prompt_id is null")) == 1

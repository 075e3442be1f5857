"""The batch queue: a batch's items in the store, claimed by workers under a lease.

Any number of workers, in one process or on many machines sharing the store, take items
from ``batch_queue``. A claim marks the item ``running`` with the worker's name and a
lease (``lease_until``, epoch seconds on the store's clock: the database's on PostgreSQL,
the host's on SQLite, where every worker runs on that host). A live worker's heartbeat
pushes its leases forward (:func:`renew_claims`); a worker that dies (``kill -9``) stops
renewing, and once its leases have passed its items are claimed again by any worker. So
an item's calls may be made twice after a crash, but it is recorded once: its
``batch_items`` row (primary key ``(batch_id, item_id)``) is written in the same
transaction that marks it done (council.storage.judgments.record_run and finish_item), and a second
result for it is refused.

Claims take the rows in one statement: PostgreSQL ``FOR UPDATE SKIP LOCKED`` (workers
never wait on each other's rows), SQLite ``BEGIN IMMEDIATE`` + ``UPDATE ... RETURNING``
(one writer at a time on the file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from council.storage import judgments

#: Item states: queued -> running (claimed) -> done | failed; a running item whose lease has
#: passed is claimable again.
STATES = ("queued", "running", "done", "failed")


def enqueue_batch(
    store: Any,
    batch_id: str,
    *,
    source: str,
    content_sha256: str,
    settings: Mapping[str, Any],
    spec: Mapping[str, Any],
    items: Sequence[Mapping[str, Any]],
    replace: bool = False,
) -> dict[str, int]:
    """Put a batch's items in the queue, matched with what the batch holds by id and content.

    ``items``: ``item_id, position, digest, item`` (``digest``: the item's content, as
    ``batch_items.content_sha256`` keeps it; ``item``: the item as JSON-ready data). A batch of
    this id with other ``settings``, or from another file ``source`` (its absolute path) unless
    ``replace`` (which makes it the batch's file), is refused (``UsageError``); its file may have changed:
    the recorded results are matched by :func:`council.storage.judgments.reconcile_batch_items`
    (a changed item's result leaves the batch, an unchanged one's stays), then every item
    without a finished result is queued (a failed one again), unless a worker holds it with
    the same content. Returns how many items are ``new, changed, unchanged, retried, removed``.
    """
    existed = judgments.open_batch(store, batch_id, source=source, content_sha256=content_sha256,
                                   settings=settings, items=len(items), replace=replace)  # fmt: skip
    digests = {item["item_id"]: (item["digest"], item["position"]) for item in items}
    had_result = set(judgments.batch_item_status(store, batch_id))  # counted by reconcile_batch_items
    changed, removed = judgments.reconcile_batch_items(store, batch_id, digests, content_sha256=content_sha256)
    counts = {"new": 0, "changed": changed, "unchanged": 0, "retried": 0, "removed": removed}
    recorded = judgments.batch_item_status(store, batch_id)
    spec_text = json.dumps(spec, sort_keys=True, ensure_ascii=False)
    with store.immediate() as db:
        if replace or not existed:
            db.execute("UPDATE batches SET source = ?, spec = ? WHERE id = ?", [source, spec_text, batch_id])
        else:  # the file stays the batch's (an identical copy elsewhere changes nothing)
            db.execute("UPDATE batches SET spec = ? WHERE id = ?", [spec_text, batch_id])
        queued = {
            r["item_id"]: (r["digest"], r["state"])
            for r in db.query("SELECT item_id, digest, state FROM batch_queue WHERE batch_id = ?", [batch_id])
        }
        # Gathered by statement, each sent as one executemany: on PostgreSQL one pipeline each
        # instead of a round trip per item, each of which held the event loop.
        inserts, rewrites, moves = _queue_changes(batch_id, items, recorded, queued, had_result, counts)
        gone = sorted(set(queued) - set(digests))
        counts["removed"] += sum(1 for item_id in gone if item_id not in had_result)
        for sql, rows in (
            ("INSERT INTO batch_queue (batch_id, item_id, position, digest, item, state, attempts)"
             " VALUES (?, ?, ?, ?, ?, ?, 0)", inserts),
            ("UPDATE batch_queue SET position = ?, digest = ?, item = ?, state = ?, worker = NULL,"
             " lease_until = NULL WHERE batch_id = ? AND item_id = ?", rewrites),
            ("UPDATE batch_queue SET position = ? WHERE batch_id = ? AND item_id = ?", moves),
            ("DELETE FROM batch_queue WHERE batch_id = ? AND item_id = ?", [[batch_id, i] for i in gone]),
        ):  # fmt: skip
            if rows:
                db.conn.executemany(sql, rows)
    return counts


def _queue_changes(
    batch_id: str,
    items: Sequence[Mapping[str, Any]],
    recorded: Mapping[str, str],
    queued: Mapping[str, tuple[str, str]],
    had_result: set[str],
    counts: dict[str, int],
) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]]]:
    """What :func:`enqueue_batch` writes to the queue, as the parameters of its three statements
    (rows to insert, rows to rewrite, rows only moved to a new position), each item counted in
    ``counts``. ``recorded``: the items' result status; ``queued``: the queue's rows, item id to
    (digest, state); ``had_result``: the items that had a result before it was reconciled."""
    inserts: list[list[Any]] = []
    rewrites: list[list[Any]] = []
    moves: list[list[Any]] = []
    for item in items:
        key = [batch_id, item["item_id"]]
        status = recorded.get(item["item_id"])
        before = queued.get(item["item_id"])
        if status == "ok":
            state = "done"
            counts["unchanged"] += 1
        elif before is not None and before[0] == item["digest"] and before[1] in ("queued", "running"):
            # Waiting or held by a worker, with this content: left as it is.
            counts["unchanged"] += 1
            moves.append([item["position"], *key])
            continue
        else:
            state = "queued"
            if status == "failed":
                counts["retried"] += 1
            elif item["item_id"] in had_result:
                pass  # its result was dropped: counted as changed
            elif before is not None and before[0] != item["digest"]:
                counts["changed"] += 1  # queued, not judged yet, and edited since
            elif before is None:
                counts["new"] += 1
        if before is None:
            inserts.append([*key, item["position"], item["digest"], _item_text(item), state])
        elif state == "queued" or before[1] != "done":
            rewrites.append([item["position"], item["digest"], _item_text(item), state, *key])
        else:  # done, and still done: its texts may have left the queue already
            moves.append([item["position"], *key])
    return inserts, rewrites, moves


def _item_text(item: Mapping[str, Any]) -> str:
    return json.dumps(item["item"], ensure_ascii=False)


def _decode(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "item": json.loads(r["item"]) if r["item"] else None} for r in rows]


_CLAIMED = ("batch_id", "item_id", "digest", "item")
_CLAIMABLE = "(state = 'queued' OR (state = 'running' AND lease_until < ?))"


def claim_sqlite(
    store: Any, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
) -> list[dict[str, Any]]:
    with store.immediate() as db:
        return claim_within_sqlite(store, db, worker, batch_id=batch_id, limit=limit, lease_seconds=lease_seconds)


def claim_within_sqlite(
    store: Any, db: Any, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
) -> list[dict[str, Any]]:
    """``claim_items`` inside the caller's write transaction (``db``)."""
    if limit < 1:
        return []
    now = store.clock()
    if batch_id is None:
        chosen = f"SELECT rowid FROM batch_queue WHERE {_CLAIMABLE} ORDER BY batch_id, position LIMIT ?"
        params: list[Any] = [now, limit]
    else:
        # The first queued items read in order from the (batch_id, state, position) index, with the
        # running ones whose lease passed: not every item of the batch read and sorted per claim.
        chosen = (
            "SELECT rowid FROM (SELECT * FROM (SELECT rowid, position FROM batch_queue"
            " WHERE batch_id = ? AND state = 'queued' ORDER BY position LIMIT ?)"
            " UNION ALL SELECT rowid, position FROM batch_queue WHERE batch_id = ? AND state = 'running'"
            " AND lease_until < ?) ORDER BY position LIMIT ?"
        )
        params = [batch_id, limit, batch_id, now, limit]
    # On the connection itself: sqlite-utils' query wraps a statement in a savepoint, whose
    # release fails (raised and caught) while RETURNING rows are unread; in the caller's
    # transaction a failed statement rolls everything back anyway (``benchmarks/bench_judge_cpu.py``).
    cursor = db.conn.execute(
        "UPDATE batch_queue SET state = 'running', worker = ?, lease_until = ?, attempts = attempts + 1"
        f" WHERE rowid IN ({chosen}) RETURNING {', '.join(_CLAIMED)}",
        [worker, now + lease_seconds, *params],
    )
    return _decode([dict(zip(_CLAIMED, row, strict=True)) for row in cursor.fetchall()])


def claim_postgres(
    store: Any, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
) -> list[dict[str, Any]]:
    # One statement (atomic on its own: no BEGIN and COMMIT round trips), timed by the
    # database's clock when it runs.
    with store.connection() as conn:
        return _claim_postgres(conn, worker, batch_id, limit, lease_seconds)


def claim_within_postgres(
    store: Any, db: Any, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
) -> list[dict[str, Any]]:
    """``claim_items`` inside the caller's transaction (``db``, the store's ``immediate()``)."""
    return _claim_postgres(db.conn.raw, worker, batch_id, limit, lease_seconds) if limit >= 1 else []


def _claim_postgres(conn: Any, worker: str, batch_id: str | None, limit: int, lease_seconds: float) -> list[Any]:
    now = "extract(epoch from statement_timestamp())"
    if batch_id is None:
        chosen = (
            f"SELECT batch_id, item_id FROM batch_queue WHERE {_CLAIMABLE.replace('?', now)}"
            " ORDER BY batch_id, position LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
        )
    else:
        # As on SQLite: the first queued items read in order from the (batch_id, state, position)
        # index, with the running ones whose lease passed, each locked as it is read (skipping the
        # rows another claim holds). One condition with an OR read and sorted every queued item of
        # the batch per claim (``benchmarks/bench_bare_client.py``). Up to ``limit`` rows read but not
        # taken stay locked until the transaction ends: another claim meanwhile takes later ones.
        chosen = (
            "WITH queued AS (SELECT batch_id, item_id, position FROM batch_queue"
            "   WHERE batch_id = %(batch)s AND state = 'queued' ORDER BY position LIMIT %(limit)s"
            "   FOR UPDATE SKIP LOCKED),"
            " stale AS (SELECT batch_id, item_id, position FROM batch_queue"
            f"   WHERE batch_id = %(batch)s AND state = 'running' AND lease_until < {now}"
            "   ORDER BY position LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
            " SELECT batch_id, item_id FROM (SELECT * FROM queued UNION ALL SELECT * FROM stale) both_kinds"
            " ORDER BY position LIMIT %(limit)s"
        )
    rows = conn.execute(  # returned in file order (an UPDATE returns its rows in the join's order)
        "WITH claimed AS (UPDATE batch_queue q SET state = 'running', worker = %(worker)s,"
        f" lease_until = {now} + %(lease)s, attempts = q.attempts + 1 FROM ({chosen}) c"
        " WHERE q.batch_id = c.batch_id AND q.item_id = c.item_id"
        " RETURNING q.batch_id, q.item_id, q.digest, q.item, q.position)"
        " SELECT batch_id, item_id, digest, item FROM claimed ORDER BY batch_id, position",
        {"worker": worker, "lease": lease_seconds, "batch": batch_id, "limit": limit},
    ).fetchall()
    return _decode(rows)


def renew_claims(store: Any, worker: str, *, lease_seconds: float) -> int:
    """The heartbeat: push the leases of ``worker``'s running items forward; how many."""
    now = store.clock()
    with store.immediate() as db:
        cur = db.execute(
            "UPDATE batch_queue SET lease_until = ? WHERE worker = ? AND state = 'running'",
            [now + lease_seconds, worker],
        )
        return int(cur.rowcount)


def claims_of(store: Any, worker: str) -> list[dict[str, Any]]:
    """The items ``worker`` holds now, as a claim returns them, in queue order: after a claim
    whose reply was lost (the server went away as it committed), those it does not know it took."""
    rows = store.db.query(
        f"SELECT {', '.join(_CLAIMED)} FROM batch_queue WHERE worker = ? AND state = 'running'"
        " ORDER BY batch_id, position",
        [worker],
    )
    return _decode(list(rows))


def release_claims(store: Any, worker: str) -> int:
    """A worker stopping cleanly: its running items go back to the queue at once; how many."""
    with store.immediate() as db:
        cur = db.execute(
            "UPDATE batch_queue SET state = 'queued', worker = NULL, lease_until = NULL"
            " WHERE worker = ? AND state = 'running'",
            [worker],
        )
        return int(cur.rowcount)


def batch_spec(store: Any, batch_id: str) -> dict[str, Any] | None:
    """What a worker needs to judge the batch's items (the stored ``spec``), or None."""
    rows = list(store.db.query("SELECT spec FROM batches WHERE id = ?", [batch_id]))
    if not rows or not rows[0]["spec"]:
        return None
    return json.loads(rows[0]["spec"])


def queue_status(store: Any, batch_id: str) -> dict[str, Any] | None:
    """``items, queued, running, done, failed, cost_usd`` of a batch, or None when unknown.
    A running item whose lease has passed counts as queued (any worker may claim it)."""
    if not list(store.db.query("SELECT id FROM batches WHERE id = ?", [batch_id])):
        return None
    now = store.clock()
    rows = store.db.query(
        "SELECT CASE WHEN state = 'running' AND lease_until < ? THEN 'queued' ELSE state END AS st,"
        " COUNT(*) AS n FROM batch_queue WHERE batch_id = ? GROUP BY 1",
        [now, batch_id],
    )
    counts = dict.fromkeys(STATES, 0)
    for r in rows:
        counts[r["st"]] = int(r["n"])
    cost = list(
        store.db.query(
            "SELECT SUM(r.cost_usd) AS cost, SUM(CASE WHEN r.cost_usd IS NULL THEN 1 ELSE 0 END) AS unknown"
            " FROM batch_items bi JOIN judgment_runs r ON r.id = bi.run_id WHERE bi.batch_id = ?",
            [batch_id],
        )
    )[0]
    cost_usd = None if cost["unknown"] else round(float(cost["cost"] or 0.0), 8)
    return {"batch_id": batch_id, "items": sum(counts.values()), **counts, "cost_usd": cost_usd}


def queue_depth(store: Any) -> dict[str, int]:
    """``queued`` and ``running`` items of every batch (a running item whose lease has passed
    counts as queued, as in :func:`queue_status`): what a metrics scrape reports."""
    rows = store.db.query(
        "SELECT CASE WHEN state = 'running' AND lease_until < ? THEN 'queued' ELSE state END AS st,"
        " COUNT(*) AS n FROM batch_queue WHERE state IN ('queued', 'running') GROUP BY 1",
        [store.clock()],
    )
    counts = {"queued": 0, "running": 0}
    for r in rows:
        counts[r["st"]] += int(r["n"])
    return counts

"""Judgment runs, their passes, and resumable batches in council.db.

A finished comparison or grade is written in ONE ``BEGIN IMMEDIATE`` transaction:
its run row, one row per judge pass, its call log and, inside a batch, its
``batch_items`` row. A crash (even ``kill -9``) therefore leaves an item either fully
recorded or not at all, and the ``(batch_id, item_id)`` primary key makes recording
an item twice impossible.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from council._util.clock import utc_now
from council.errors import ItemAlreadyRecorded, ItemRefused, StoreRefused, UsageError
from council.storage import pages
from council.storage.group_commit import call_row
from council.storage.retries import retried
from council.untrusted.redaction import redact

if TYPE_CHECKING:
    from council.accounting.usage import CallRecord
    from council.storage.connection import Backend


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


#: Types stored as they are: no value of one is turned into JSON text (:func:`_column_value`).
_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def _column_value(value: Any) -> Any:
    # What sqlite-utils stores for these types (lists and dicts as JSON text).
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


def insert_rows(conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    """Plain INSERTs into an existing table, one statement per set of columns.

    sqlite-utils' ``insert`` re-reads the table's schema on every call (several PRAGMA queries),
    which made up most of a judged batch item's write; rows written often go through here.
    """
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for row in rows:
        values = tuple(row.values())
        if not _SCALARS.issuperset(map(type, values)):  # one test in C for the usual row (~30 columns)
            values = tuple(map(_column_value, values))
        groups.setdefault(tuple(row), []).append(values)
    for columns, values in groups.items():
        conn.executemany(insert_statement(table, columns), values)


@functools.lru_cache(maxsize=64)  # a few tables, a few shapes of row each
def insert_statement(table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    quoted = '"' + table.replace('"', '""') + '"'
    return f"INSERT INTO {quoted} ({names}) VALUES ({', '.join('?' * len(columns))})"


@dataclass(frozen=True)
class JudgmentRows:
    """A finished run's rows, redacted, ready to write (:func:`judgment_rows`)."""

    run: dict[str, Any]
    passes: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    batch_item: dict[str, Any] | None
    keep_text: bool


def judgment_rows(
    kind: str,
    outcome: Any,
    calls: Sequence[CallRecord],
    *,
    keep_text: bool,
    batch_id: str | None = None,
    item: Any = None,
    item_digest: str | None = None,
    prompt_id: str | None = None,
) -> JudgmentRows:
    """The rows of a finished comparison or grade (and its batch item), as :func:`save_judgment` writes them.

    ``keep_text=False`` (``COUNCIL_STORE_TRANSCRIPTS=0``) stores verdicts, scores and
    validity but none of the judge's words: no pass output, no reasoning in the result
    (``outcome.stored_json``)."""
    from pydantic_core import to_json  # here, not with the module: a listing writes no judgment

    is_compare = kind == "compare"
    flagged = outcome.flagged_for_review if is_compare else bool(outcome.report and outcome.report.flagged_for_review)
    now = utc_now()
    run_id = outcome.run_id
    error = outcome.error
    run = {
        "created_at": now,
        "id": run_id,
        "kind": kind,
        "status": "ok" if outcome.success else "failed",
        # Error texts may quote a provider or a judge: redacted like every stored text.
        "error": redact(error) if error else error,
        "judges": _json([j.model for j in outcome.judges]),
        "winner": outcome.winner if is_compare and outcome.success else None,
        "unstable": int(outcome.unstable) if is_compare else 0,
        "flagged": int(flagged),
        "calls": outcome.calls,
        "calls_saved": outcome.calls_saved,
        "prompt_tokens": outcome.usage.prompt_tokens,
        "completion_tokens": outcome.usage.completion_tokens,
        "cost_usd": outcome.usage.cost_usd,
        "elapsed_ms": outcome.elapsed_ms,
        "result": outcome.stored_json(keep_text=keep_text),
    }
    pass_kind = "pairwise" if is_compare else "grade"
    passes = []
    for p in outcome.passes:
        row = {"kind": pass_kind, **p.__dict__}  # every field as it is (no dump per pass)
        output = row.pop("output")
        row["pass"] = row.pop("pass_number")
        row["valid"] = int(p.valid)
        row["problem"] = redact(p.problem) if p.problem else p.problem
        # pydantic-core's encoder: several times json.dumps on a pass (NaN kept as NaN, as there).
        row["output"] = None if output is None or not keep_text else to_json(output).decode()
        row["run_id"], row["created_at"] = run_id, now
        passes.append(row)
    batch_item = None
    if item is not None:
        run["model_a"], run["model_b"] = item.model_a, item.model_b
        if is_compare and item.a is not None and item.b is not None:
            run |= pair_style(item.a, item.b)
            run["prompt_id"] = prompt_id
        batch_item = {
            "batch_id": batch_id,
            "item_id": item.id,
            "position": item.line,
            "mode": item.mode,
            "status": run["status"],
            "metadata": None if item.metadata is None else json.dumps(item.metadata, ensure_ascii=False),
            "label": item.label,
            "gold_score": item.gold_score,
            "content_sha256": item_digest,
            "run_id": run_id,
            "finished_at": now,
        }
    call_rows = [call_row(c, session_id=run_id) for c in calls]
    return JudgmentRows(run, passes, call_rows, batch_item, keep_text)


@dataclass(frozen=True)
class JudgmentSave:
    """A finished comparison or grade to record, with what :func:`save_judgment` takes. Its rows
    are built (and redacted) when it is made, in the privacy scope of the item it belongs to,
    wherever they are written after (council.judging.worker writes several items together)."""

    kind: str
    outcome: Any
    calls: Sequence[CallRecord]
    _: KW_ONLY
    keep_text: bool
    batch_id: str | None = None
    item: Any = None
    item_digest: str | None = None
    prompt_id: str | None = None
    built: JudgmentRows = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = judgment_rows(self.kind, self.outcome, self.calls, keep_text=self.keep_text, batch_id=self.batch_id,
                             item=self.item, item_digest=self.item_digest, prompt_id=self.prompt_id)  # fmt: skip
        object.__setattr__(self, "built", rows)

    def rows(self) -> JudgmentRows:
        return self.built


def save_judgment(
    store: Backend,
    kind: str,
    outcome: Any,
    calls: Sequence[CallRecord],
    *,
    keep_text: bool,
    batch_id: str | None = None,
    item: Any = None,
    item_digest: str | None = None,
    prompt_id: str | None = None,
) -> None:
    """Write a finished comparison or grade (and its batch item) in one transaction: its run
    row, one row per judge pass, its call log and, inside a batch, its ``batch_items`` row.

    A failed item of the batch is replaced (a re-run after ``--resume``); a finished one raises
    ``ItemAlreadyRecorded``, and so does an item whose queued content is no longer its
    ``content_sha256`` (the file changed while it was judged). Its queue entry is marked done in
    the same transaction (:func:`finish_item`). ``prompt_id``: the item's prompt as the query
    hash makes it (m018), or None."""
    save = JudgmentSave(kind, outcome, calls, keep_text=keep_text, batch_id=batch_id, item=item,
                        item_digest=item_digest, prompt_id=prompt_id)  # fmt: skip
    retried(lambda: _record_alone(store, save.rows()))


def _record_alone(store: Backend, rows: JudgmentRows) -> None:
    with store.immediate() as db:
        _record_together(store, db, [rows])


def _record_together(
    store: Backend, db: Any, rows: Sequence[JudgmentRows], claim: Callable[[], list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """Inside the caller's write transaction: the runs' rows, then ``claim()``, sent together where
    the backend can (PostgreSQL: one pipeline, whose results come back at the claim's read or at
    its end); then the checks that read the statements' counts (``ItemAlreadyRecorded``)."""
    checks: list[Callable[[], None]] = []
    calls: list[dict[str, Any]] = []
    with _together(db):
        for row in rows:
            record_run(db, row, checks, calls)
        calls = store.calls_to_record(calls)  # those the call log has not already on record
        if calls:  # every run's call rows in one write, in the order every writer of calls keeps
            store.write_calls(calls)
        claimed = claim() if claim is not None else []
    for check in checks:
        check()
    return claimed


def record_and_claim(
    store: Backend,
    saves: Sequence[JudgmentSave],
    worker: str,
    *,
    batch_id: str | None = None,
    limit: int = 0,
    lease_seconds: float,
) -> tuple[list[ItemAlreadyRecorded | ItemRefused | None], list[dict[str, Any]]]:
    """Record finished batch items, each as :func:`save_judgment` would, and claim up to ``limit``
    more for ``worker`` (as ``claim_items``), in one transaction: a worker's items that finish
    together cost one commit, not one each plus one per claim (``benchmarks/bench_bare_client.py``).
    Returns, per save, None (recorded) or the ``ItemAlreadyRecorded`` it raised (not recorded),
    and the rows claimed. When one cannot be recorded, the transaction is rolled back and each
    is recorded in its own (as :func:`save_judgment`), then the claim is made alone. A save
    whose rows the database refuses (:func:`refused_value`) is recorded as a failed run saying
    why instead, and returned as an ``ItemRefused``: one item's data never stops its batch."""
    rows = [save.rows() for save in saves]

    def together() -> list[dict[str, Any]]:
        with store.immediate() as db:
            return _record_together(
                store,
                db,
                rows,
                lambda: store.claim_within(db, worker, batch_id=batch_id, limit=limit, lease_seconds=lease_seconds),
            )

    try:
        return [None] * len(rows), retried(together)
    except ItemAlreadyRecorded:
        pass  # rare: another worker finished one first, or the file changed while it was judged
    except Exception as exc:
        if not refused_value(exc):
            raise
    results: list[ItemAlreadyRecorded | ItemRefused | None] = []
    for row in rows:
        try:
            retried(lambda row=row: _record_alone(store, row))
            results.append(None)
        except ItemAlreadyRecorded as exc:
            results.append(exc)
        except Exception as exc:
            if not refused_value(exc):
                raise
            # This item's data: it fails alone (its calls are on record), and is not judged again.
            refused = ItemRefused(f"the store refused this item's result ({redact(' '.join(str(exc).split()))[:300]})")
            failed = refused_rows(row, str(refused))
            try:
                retried(lambda failed=failed: _record_alone(store, failed))
                results.append(refused)
            except ItemAlreadyRecorded as again:
                results.append(again)
    claimed = store.claim_items(worker, batch_id=batch_id, limit=limit, lease_seconds=lease_seconds) if limit else []
    return results, claimed


def refused_value(exc: BaseException) -> bool:
    """Whether the database refused a value written (a data exception, a constraint: the data of
    what was written, not the database failing or going away), on either backend."""
    return isinstance(exc, StoreRefused | sqlite3.DataError | sqlite3.IntegrityError | OverflowError)


def refused_rows(rows: JudgmentRows, error: str) -> JudgmentRows:
    """A run whose rows the store refused, as a failed run saying why: its counts, calls and
    batch item kept, none of its texts (one of them was refused)."""
    kept = ("created_at", "id", "kind", "judges", "calls", "calls_saved", "prompt_tokens", "completion_tokens",
            "cost_usd", "elapsed_ms")  # fmt: skip
    run = {key: rows.run[key] for key in kept} | {"status": "failed", "error": error, "unstable": 0, "flagged": 0}
    item = None if rows.batch_item is None else rows.batch_item | {"status": "failed"}
    return JudgmentRows(run, [], rows.calls, item, rows.keep_text)


def runs_recorded(store: Backend, run_ids: Sequence[str]) -> set[str]:
    """Which of these runs are in the store: after a write whose reply was lost (the server went
    away as it committed), the saves it did record, not to be written twice."""
    if not run_ids:
        return set()
    marks = ", ".join("?" for _ in run_ids)
    return {r["id"] for r in store.db.query(f"SELECT id FROM judgment_runs WHERE id IN ({marks})", list(run_ids))}


def pair_style(a: str, b: str) -> dict[str, int]:
    """The ``judgment_runs`` style columns (m015) of answers ``a`` and ``b``: the one definition
    of length and markdown counts (council.methods.style_counts)."""
    from council.methods.style_counts import answer_style

    row: dict[str, int] = {}
    for side, text in (("a", a), ("b", b)):
        length, markdown = answer_style(text)
        row[f"length_{side}"] = length
        row |= {f"{key}_{side}": count for key, count in markdown.items()}
    return row


_JUDGED_PAIRS = """
    SELECT id, created_at, model_a, model_b, winner, length_a, length_b,
           headers_a, lists_a, bold_a, headers_b, lists_b, bold_b, prompt_id
    FROM judgment_runs
    WHERE kind = 'compare' AND status = 'ok' AND winner IN ('A', 'B', 'TIE')
      AND model_a IS NOT NULL AND model_b IS NOT NULL AND model_a <> model_b"""


def judged_pairs(store: Backend, *, since: str | None = None) -> Iterator[dict[str, Any]]:
    """Every judged pair the leaderboard counts (a finished compare naming its two models), oldest
    first (ties by run id), as a judgments-file line, its keys in this order: ``run_id,
    created_at, model_a, model_b, winner, length_a, length_b, markdown_a, markdown_b,
    prompt_id``; the styles are None for pairs recorded before m015, ``prompt_id`` for those
    recorded before m018 or with queries not hashed.
    Read :data:`pages.ROWS_PAGE` at a time (``export --judged-pairs`` writes them as it reads)."""
    sql, params = (_JUDGED_PAIRS, []) if since is None else (_JUDGED_PAIRS + " AND created_at >= ?", [since])

    def read(statement: str, values: list[Any]) -> Iterable[tuple[Any, ...]]:
        return store.db.execute(statement, values)  # tuples: cheaper than a dict a row

    rows = pages.in_time_order(read, sql, params, key=lambda r: (r[1], r[0]), size=pages.ROWS_PAGE)
    for run_id, created_at, model_a, model_b, winner, length_a, length_b, *counts, prompt_id in rows:
        yield {  # the keys in the export's order (JudgedPairLine)
            "run_id": run_id,
            "created_at": created_at,
            "model_a": model_a,
            "model_b": model_b,
            "winner": winner,
            "length_a": length_a,
            "length_b": length_b,
            "markdown_a": _markdown(*counts[:3]),
            "markdown_b": _markdown(*counts[3:]),
            "prompt_id": prompt_id,
        }


def _markdown(headers: int | None, lists: int | None, bold: int | None) -> dict[str, int] | None:
    """A side's markdown counts; None when recorded before council kept them (m015)."""
    if headers is None or lists is None or bold is None:
        return None
    return {"headers": headers, "lists": lists, "bold": bold}


def record_run(db: Any, rows: JudgmentRows, checks: list[Callable[[], None]], calls: list[dict[str, Any]]) -> None:
    """Inside the caller's write transaction: a finished run's rows and its batch item. The
    checks that raise ``ItemAlreadyRecorded`` (an item that cannot be recorded) are appended to
    ``checks``, for the caller to run once the statements' counts are back (several items'
    statements sent together); the caller's transaction is then rolled back. The run's call rows
    are appended to ``calls``, for the caller to write with those of the other runs."""
    insert_rows(db.conn, "judgment_runs", [rows.run])
    insert_rows(db.conn, "judgments", rows.passes)
    calls += rows.calls
    item = rows.batch_item
    if item is None:
        return
    key = [item["batch_id"], item["item_id"]]
    finished = finish_item(db, *key, item["content_sha256"], item["status"], keep_text=rows.keep_text)

    def queued_as_judged() -> None:
        if not finished():
            raise ItemAlreadyRecorded(
                f"batch {key[0]}: item {key[1]!r} changed in the queue while it was judged; result dropped"
            )

    # One statement: a failed result is replaced, a finished one is kept (no row changed).
    columns = list(item)
    names = ", ".join(columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in ("batch_id", "item_id"))
    cur = db.execute(
        f"INSERT INTO batch_items ({names}) VALUES ({', '.join('?' * len(columns))})"
        f" ON CONFLICT (batch_id, item_id) DO UPDATE SET {updates} WHERE batch_items.status = 'failed'",
        list(item.values()),
    )

    def recorded_here() -> None:
        if cur.rowcount == 0:
            raise ItemAlreadyRecorded(
                f"batch {key[0]}: item {key[1]!r} is already recorded (another worker finished it first)"
            )

    checks += [queued_as_judged, recorded_here]


def finish_item(
    db: Any, batch_id: str, item_id: str, digest: str | None, status: str, *, keep_text: bool
) -> Callable[[], bool]:
    """Inside the transaction that records the item's result: mark it done or failed (its
    texts dropped when transcripts are off). Returns the check, to run once the statement's
    count is back: False when the queue holds another content for it (the file changed while
    it was judged): that result must not be recorded."""
    cur = db.execute(
        "UPDATE batch_queue SET state = ?, worker = NULL, lease_until = NULL"
        + ("" if keep_text else ", item = NULL")
        + " WHERE batch_id = ? AND item_id = ?"
        + ("" if digest is None else " AND digest = ?"),
        ["done" if status == "ok" else "failed", batch_id, item_id] + ([] if digest is None else [digest]),
    )

    def check() -> bool:
        if cur.rowcount:
            return True
        # Not updated: another content is queued for it, or a batch recorded without the queue
        # (a store written by an older council), which has no entry at all.
        sql = "SELECT 1 FROM batch_queue WHERE batch_id = ? AND item_id = ?"
        return db.execute(sql, [batch_id, item_id]).fetchone() is None

    return check


def _together(db: Any) -> Any:
    """The statements of the block sent in one pipeline where the store's connection has them
    (PostgreSQL; ``db.pipeline``), else as they come (SQLite: each runs as it is sent)."""
    pipeline = getattr(db, "pipeline", None)
    return pipeline() if pipeline is not None else nullcontext()


def get_run(store: Backend, run_id: str) -> dict[str, Any] | None:
    rows = list(store.db.query("SELECT * FROM judgment_runs WHERE id = ?", [run_id]))
    if not rows:
        return None
    row = rows[0]
    row["result"] = json.loads(row["result"]) if row["result"] else None
    return row


def run_passes(store: Backend, run_id: str) -> list[dict[str, Any]]:
    rows = list(store.db.query("SELECT * FROM judgments WHERE run_id = ? ORDER BY id", [run_id]))
    for row in rows:
        row["output"] = json.loads(row["output"]) if row["output"] else None
    return rows


def position_audit(store: Backend, *, judge_model: str | None = None) -> list[dict[str, Any]]:
    """Per judge model, over every valid swapped pass pair on record: how often the two
    passes agree, and how often the response shown first won a decisive pass."""
    sql = """
        SELECT p1.judge_model AS judge_model,
               COUNT(*) AS pairs,
               SUM(CASE WHEN p1.winner = p2.winner THEN 1 ELSE 0 END) AS consistent,
               SUM(CASE WHEN p1.winner_as_seen = 'A' THEN 1 ELSE 0 END)
                 + SUM(CASE WHEN p2.winner_as_seen = 'A' THEN 1 ELSE 0 END) AS first_shown_wins,
               SUM(CASE WHEN p1.winner_as_seen <> 'TIE' THEN 1 ELSE 0 END)
                 + SUM(CASE WHEN p2.winner_as_seen <> 'TIE' THEN 1 ELSE 0 END) AS decisive_passes
        FROM judgments p1
        JOIN judgments p2
          ON p2.run_id = p1.run_id AND p2.judge = p1.judge AND p2.vote = p1.vote AND p2.pass = 2
        WHERE p1.kind = 'pairwise' AND p1.pass = 1 AND p1.valid <> 0 AND p2.valid <> 0
    """
    params: list[Any] = []
    if judge_model is not None:
        sql += " AND p1.judge_model = ?"
        params.append(judge_model)
    rows = list(store.db.query(sql + " GROUP BY p1.judge_model ORDER BY p1.judge_model", params))
    for row in rows:
        row["consistency_rate"] = row["consistent"] / row["pairs"]
        decisive = row["decisive_passes"]
        row["first_shown_win_rate"] = row["first_shown_wins"] / decisive if decisive else None
    return rows


# --------------------------------------------------------------------------- batches


def open_batch(
    store: Backend,
    batch_id: str,
    *,
    source: str,
    content_sha256: str,
    settings: Mapping[str, Any],
    items: int,
    replace: bool = False,
) -> bool:
    """Register the batch, or check that a batch of this id was started with the same
    settings and from the same file ``source`` (its absolute path), which may have changed
    since (:func:`reconcile_batch_items`). Another file under the id is refused (``UsageError``)
    unless it holds what the batch holds, or ``replace`` is given. Returns True when the batch
    already existed."""
    with store.immediate() as db:
        existing = list(
            db.query("SELECT source, content_sha256, settings, items FROM batches WHERE id = ?", [batch_id])
        )
        if not existing:
            batch = {
                "id": batch_id,
                "source": source,
                "content_sha256": content_sha256,
                "settings": json.dumps(settings, sort_keys=True),
                "items": items,
                "created_at": utc_now(),
            }
            insert_rows(db.conn, "batches", [batch])
            return False
    row = existing[0]
    if row["source"] != source and row["content_sha256"] != content_sha256 and not replace:
        # Someone else's file under the same id would replace the results it holds.
        raise UsageError(
            f"batch {batch_id} already holds {row['items']} items from another file ({row['source']}): "
            "pass --replace to re-judge changed items, or choose another --batch-id"
        )
    if json.loads(row["settings"]) != json.loads(json.dumps(settings, sort_keys=True)):
        raise UsageError(
            f"batch {batch_id} was started with different settings (judges, strategy, rubric, votes...); "
            "use the same settings to continue it, or another --batch-id"
        )
    return True


def batch_exists(store: Backend, batch_id: str) -> bool:
    return bool(list(store.db.query("SELECT id FROM batches WHERE id = ?", [batch_id])))


def batch_ids(store: Backend, *, since: str | None = None) -> list[str]:
    """The ids of the batches opened on or after ``since`` (every one without it), oldest first."""
    sql, params = "SELECT id FROM batches", []
    if since is not None:
        sql, params = sql + " WHERE created_at >= ?", [since]
    return [r["id"] for r in store.db.query(sql + " ORDER BY created_at, id", params)]


def find_batch(store: Backend, source: str, settings: Mapping[str, Any]) -> str | None:
    """The latest batch started from the file ``source`` with these settings, if any."""
    wanted = json.loads(json.dumps(settings, sort_keys=True))
    rows = store.db.query("SELECT id, settings FROM batches WHERE source = ? ORDER BY created_at DESC", [source])
    return next((r["id"] for r in rows if json.loads(r["settings"]) == wanted), None)


def reconcile_batch_items(
    store: Backend, batch_id: str, items: Mapping[str, tuple[str, int]], *, content_sha256: str
) -> tuple[int, int]:
    """Match the recorded items of a batch with its file as it is now (``item_id -> (content
    digest, line)``): an item whose content changed, or that is gone from the file, leaves the
    batch (its judgment run stays on record) so a changed one is judged again; the others
    keep their results and move to their new line. Returns ``(changed, removed)``."""
    changed = removed = 0
    with store.immediate() as db:
        (old_content,) = db.execute("SELECT content_sha256 FROM batches WHERE id = ?", [batch_id]).fetchone()
        rows = db.execute("SELECT item_id, content_sha256 FROM batch_items WHERE batch_id = ?", [batch_id]).fetchall()
        kept: list[list[Any]] = []
        dropped: list[list[Any]] = []
        for item_id, digest in rows:
            current = items.get(item_id)
            # Items recorded before digests were kept: unchanged only if the whole file is.
            same = current is not None and (digest == current[0] if digest else old_content == content_sha256)
            if same:
                kept.append([current[1], current[0], batch_id, item_id])
                continue
            dropped.append([batch_id, item_id])
            if current is None:
                removed += 1
            else:
                changed += 1
        # One executemany each (on PostgreSQL a pipeline, not a round trip per item).
        if kept:
            db.conn.executemany(
                "UPDATE batch_items SET position = ?, content_sha256 = ? WHERE batch_id = ? AND item_id = ?", kept
            )
        if dropped:
            db.conn.executemany("DELETE FROM batch_items WHERE batch_id = ? AND item_id = ?", dropped)
        db.execute(
            "UPDATE batches SET content_sha256 = ?, items = ? WHERE id = ?", [content_sha256, len(items), batch_id]
        )
    return changed, removed


def batch_item_status(store: Backend, batch_id: str) -> dict[str, str]:
    """``item_id -> status`` of the items recorded so far."""
    rows = store.db.query("SELECT item_id, status FROM batch_items WHERE batch_id = ?", [batch_id])
    return {r["item_id"]: r["status"] for r in rows}


#: Items read at a time at the end of a batch (its summary, its results file, ``council batch
#: results``): what they hold in memory is a page's, whatever the batch's size.
BATCH_PAGE = 500

_BATCH_ROWS = """
    SELECT bi.item_id, bi.position, bi.mode, bi.status, bi.run_id, bi.metadata, bi.label, bi.gold_score,
           r.error, r.winner, r.unstable,
           r.flagged, r.calls, r.calls_saved, r.prompt_tokens, r.completion_tokens, r.cost_usd,
           r.elapsed_ms, r.result, r.length_a, r.length_b
    FROM batch_items bi JOIN judgment_runs r ON r.id = bi.run_id
    WHERE bi.batch_id = ?"""


def batch_rows(store: Backend, batch_id: str) -> Iterator[dict[str, Any]]:
    """Every recorded item of the batch with its run, in batch-file order; a finished
    labelled pair also carries its ``passes`` (:func:`batch_label_passes`), a pair its answers'
    lengths (``length_a``, ``length_b``; None when recorded before m015).

    Read :data:`BATCH_PAGE` items at a time (:func:`pages.in_pages`, by line, then id), each row
    let go once yielded: a batch's parsed results (~25 kB an item) are never all in memory."""
    passes: dict[str, list[dict[str, Any]]] = {}

    def passes_of(page: deque[dict[str, Any]]) -> None:
        ids = {row["item_id"] for row in page}
        for p in batch_label_passes(store, batch_id, (page[0]["position"], page[-1]["position"])):
            if p["item_id"] in ids:
                passes.setdefault(p["item_id"], []).append(p)

    from pydantic_core import from_json

    rows = pages.in_pages(
        store.db.query, _BATCH_ROWS, [batch_id], order=("bi.position", "bi.item_id"),
        key=lambda row: (row["position"], row["item_id"]), size=BATCH_PAGE, each_page=passes_of,
    )  # fmt: skip
    for row in rows:
        # pydantic-core's parser: half json.loads's time on a stored result (~6 kB).
        row["result"] = from_json(row["result"]) if row["result"] else None
        if row["item_id"] in passes:
            row["passes"] = passes.pop(row["item_id"])
        yield row


def batch_label_passes(store: Backend, batch_id: str, lines: tuple[Any, Any]) -> list[dict[str, Any]]:
    """Every pairwise pass of the batch's finished, labelled items on ``lines`` (the first and
    the last position): which response was shown first, whether the pass was valid, and its
    winner in the original labels."""
    return list(
        store.db.query(
            """
            SELECT bi.item_id, j.judge, j.vote, j.shown_first, j.valid, j.winner
            FROM batch_items bi JOIN judgments j ON j.run_id = bi.run_id
            WHERE bi.batch_id = ? AND bi.position BETWEEN ? AND ?
                  AND bi.status = 'ok' AND bi.label IS NOT NULL AND j.kind = 'pairwise'
            ORDER BY bi.position, j.id
            """,
            [batch_id, *lines],
        )
    )


_BATCH_PASSES = """
    SELECT bi.item_id, j.judge, j.vote, j.shown_first, j.winner, j.id
    FROM batch_items bi JOIN judgments j ON j.run_id = bi.run_id
    WHERE bi.batch_id = ? AND bi.status = 'ok' AND j.kind = 'pairwise' AND j.valid <> 0
          AND j.winner IS NOT NULL AND j.shown_first IS NOT NULL"""


def batch_passes(store: Backend, batch_id: str) -> Iterator[dict[str, Any]]:
    """Every valid pairwise pass of the batch's finished items (``item_id, judge, vote,
    shown_first, winner``; ``winner`` in the original labels), in the order recorded: what a
    combination over the whole batch needs (council.judging.jury). Read
    :data:`pages.ROWS_PAGE` passes at a time, as tuples (a few values a pass)."""

    def read(statement: str, values: list[Any]) -> Iterable[tuple[Any, ...]]:
        return store.db.execute(statement, values)

    rows = pages.in_pages(read, _BATCH_PASSES, [batch_id], order=("j.id",), key=lambda r: (r[5],), size=pages.ROWS_PAGE)
    for item_id, judge, vote, shown_first, winner, _ in rows:
        yield {"item_id": item_id, "judge": judge, "vote": vote, "shown_first": shown_first, "winner": winner}

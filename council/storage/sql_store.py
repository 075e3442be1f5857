"""The operations of every SQL store, each written once (council.storage.dialect says what differs).

:class:`SQLStore` holds the operations both databases run with the same statements: the call
log, sessions, session events, settings, and (bound from the statement modules) judgments,
batches, the batch queue, spend caps, the call cache and provider batch rounds. A backend
(``SQLiteStore``, ``PostgresStore``) subclasses it with its connection: opening and closing,
its transactions (``immediate``, ``_write_transaction``, ``db`` for reads), process ownership
and its clock, and the few operations it words for its own database (claims, which lock rows
differently; bulk loads of bias records; the bias report's snapshot; spend-cap reservations).
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from council._util.clock import parse_since, utc_now
from council.errors import NotFoundError
from council.storage import budgets, calibration_maps, call_cache, judgments, pages, queue, reviewer_agreement
from council.storage import provider_batches as batch_rounds  # not council.storage.rounds (deliberation)
from council.storage.group_commit import GroupCommit, call_row
from council.storage.reviewer_agreement import agreement_rows
from council.storage.rounds import round_rows
from council.untrusted.redaction import redact, redact_document, redacted_model_json

if TYPE_CHECKING:  # pydantic's slow import is not every command's: a listing reads no call record
    from council.accounting.usage import CallJournal, CallRecord
    from council.storage.dialect import Dialect

#: The shortest id prefix a session can be found by (the tables show 8 characters).
MIN_ID_PREFIX = 8
_CALL_COLUMNS = ("call_id", "session_id", "owner", "stage", "member", "model", "started_at", "latency_ms",
                 "prompt_tokens", "completion_tokens", "cost_usd", "attempt", "ok", "error", "cached",
                 "saved_usd", "usage_untrusted")  # fmt: skip
_CALL_OUTCOME = frozenset(
    {"latency_ms", "prompt_tokens", "completion_tokens", "cost_usd", "ok", "error", "cached", "saved_usd",
     "usage_untrusted"}
)  # fmt: skip


#: The keys a row written with ``replace`` replaces a stored one by (``_write_rows``).
_REPLACED_BY = {
    "answers": ("session_id", "member"),
    "reviews": ("session_id", "reviewer"),
    "round_answers": ("session_id", "round", "member"),
    "round_reviews": ("session_id", "round", "reviewer"),
    "reviewer_agreement": ("session_id", "reviewer", "other"),
}


class SQLStore(GroupCommit):
    """The operations of :class:`council.storage.protocol.Store` both backends share. A backend
    sets ``dialect`` and ``threadsafe`` and provides ``db`` (reads), ``immediate()`` (a write
    transaction, its connection given), ``_write_transaction(carry=...)``, ``_owner()`` and
    ``clock()``."""

    dialect: ClassVar[Dialect]
    threadsafe: ClassVar[bool]
    db: Any

    def ping(self) -> None:
        """Ask the database the most trivial question (a server's readiness probe); raises as
        any read does when it cannot answer."""
        self.db.execute("SELECT 1").fetchall()

    # -- cost: spend caps, the call cache, provider batch rounds -------------------------
    batch_spent = budgets.batch_spent
    settle_budget = budgets.settle_budget
    shrink_budget = budgets.shrink_budget
    budget_totals = budgets.budget_totals
    cached_reply = call_cache.cached_reply
    cache_stats = call_cache.cache_stats
    clear_cache = call_cache.clear_cache
    batch_cache_savings = call_cache.batch_cache_savings
    round_intent = batch_rounds.round_intent
    round_submitted = batch_rounds.round_submitted
    round_progress = batch_rounds.round_progress
    rounds_holding = batch_rounds.rounds_holding
    provider_batches = batch_rounds.provider_batches

    # -- judgments and batches, the batch queue's claims ---------------------------------
    save_judgment = judgments.save_judgment
    record_and_claim = judgments.record_and_claim
    runs_recorded = judgments.runs_recorded
    judged_pairs = judgments.judged_pairs
    iter_sessions = pages.iter_sessions  # the exports
    bias_record_rows = pages.bias_record_rows
    judgment_run = judgments.get_run
    judgment_passes = judgments.run_passes
    position_audit = judgments.position_audit
    open_batch = judgments.open_batch
    batch_exists = judgments.batch_exists
    batch_ids = judgments.batch_ids
    find_batch = judgments.find_batch
    reconcile_batch_items = judgments.reconcile_batch_items
    batch_item_status = judgments.batch_item_status
    batch_rows = judgments.batch_rows
    batch_passes = judgments.batch_passes
    enqueue_batch = queue.enqueue_batch
    renew_claims = queue.renew_claims
    release_claims = queue.release_claims
    claims_of = queue.claims_of
    batch_spec = queue.batch_spec
    batch_status = queue.queue_status
    queue_depth = queue.queue_depth
    cache_reply = call_cache.cache_reply
    save_calibration_map = calibration_maps.save_calibration_map
    calibration_map = calibration_maps.calibration_map
    reviewer_agreement_sums = reviewer_agreement.reviewer_agreement_sums

    # -- the call log ---------------------------------------------------------
    def journal(self, session_id: str) -> CallJournal:
        """Writes a run's attempts as they start and finish (``calls.session_id`` = ``session_id``)."""
        return _Journal(self, session_id)

    def write_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert call-log rows (``group_commit.call_row``'s: redacted where they were made), or
        complete the rows already written for them (by ``call_id``). Run inside the caller's
        transaction."""
        # One statement per shape of row. A call's finished row completes its started row; a
        # started row (``ok`` NULL) never overwrites a row already there, so the order they are
        # written in does not matter (group commits on several threads may land a started row
        # after its finished one), and a started row whose finished row is here is left out.
        finished = {row["call_id"] for row in rows if row.get("ok") is not None}
        kept = [row for row in rows if row.get("ok") is not None or row["call_id"] not in finished]
        if self.threadsafe:
            # Several transactions write call rows at once here (PostgreSQL): each writes its rows
            # in one order, their call_id's, so none waits for a row another holds while that one
            # waits for a row it holds (a deadlock, seen under load). Started and
            # finished rows go in one statement (a started row updates nothing), and a row without
            # an owner (a final write's, a record's) has a NULL one, as it would unwritten: the rows
            # stay one statement, not one each time the kind or the columns change along the order.
            kept.sort(key=lambda row: row["call_id"])
            for columns, same in itertools.groupby(kept, key=_owned_columns):
                self._insert_calls(columns, _complete_call(columns, started_too=True), same)
            return
        shapes: dict[tuple[tuple[str, ...], bool], list[dict[str, Any]]] = {}
        for row in kept:
            shapes.setdefault(_call_shape(row), []).append(row)
        for (columns, started), shaped in shapes.items():
            self._insert_calls(columns, "NOTHING" if started else _complete_call(columns), shaped)

    def _insert_calls(self, columns: tuple[str, ...], on_conflict: str, rows: Iterable[dict[str, Any]]) -> None:
        self.db.conn.executemany(
            f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
            f"ON CONFLICT (call_id) DO {on_conflict}",
            [[row.get(c) for c in columns] for row in rows],
        )

    # -- sessions ------------------------------------------------------------
    def begin_session(
        self,
        session_id: str,
        *,
        council: str,
        question: str | None = None,
        query_hash: str | None = None,
        seed: int | None = None,
        offline: bool = False,
        members: Sequence[str] = (),
        created_at: str | None = None,
        kind: str = "council",
    ) -> None:
        row = {
            "id": session_id,
            "kind": kind,
            "council": council,
            "question": question,
            "query_hash": query_hash,
            "seed": seed,
            "offline": int(offline),
            "members": json.dumps(list(members)),
            "created_at": created_at or utc_now(),
        }
        row = {"status": "running", **self._owner(), **row}
        # Nothing read: one round trip on PostgreSQL. A store written from several threads writes
        # the new row alone, carrying no call-log rows: it then waits on no other transaction (the
        # session starts on whichever thread, beside the write thread's commits of those rows).
        with self._write_transaction(carry=not self.threadsafe):
            self._write_rows("sessions", [row])  # one prepared statement (sqlite-utils' insert costs more)

    def save_session(
        self, result: Any, records: Sequence[Any], *, keep_text: bool, calls: Sequence[CallRecord]
    ) -> None:
        self._finish_session(
            result.session_id,
            status=result.status,
            **_result_rows(result, keep_text),
            bias_records=[rec.row() for rec in records],
            calls=_call_rows(result.session_id, calls),
        )

    def fail_session(
        self,
        session_id: str,
        *,
        status: str,
        error: str,
        calls: Sequence[CallRecord],
        result: Any | None = None,
        keep_text: bool = True,
    ) -> None:
        rows = _result_rows(result, keep_text) if result is not None else {"result": None}
        self._finish_session(session_id, status=status, error=error, calls=_call_rows(session_id, calls), **rows)

    def _finish_session(
        self,
        session_id: str,
        *,
        status: str,
        result: Any | None,
        error: str | None = None,
        structure: Any | None = None,
        answers: Sequence[dict[str, Any]] = (),
        reviews: Sequence[dict[str, Any]] = (),
        bias_records: Sequence[dict[str, Any]] = (),
        calls: Sequence[dict[str, Any]] = (),
        round_answers: Sequence[dict[str, Any]] = (),
        round_reviews: Sequence[dict[str, Any]] = (),
        agreement: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write the whole session and its final status in one transaction, every row and the
        result (a ``SessionResult``) redacted field by field (``redaction.redact_document``: no
        secrets, and no private text when transcripts are off; the user's own words kept)."""
        with self._write_transaction():  # nothing read: one round trip on PostgreSQL
            if answers:
                self._write_rows("answers", redact_document(list(answers)), replace=True)
            if reviews:
                self._write_rows("reviews", redact_document(list(reviews)), replace=True)
            for table, rows in (("round_answers", round_answers), ("round_reviews", round_reviews)):
                if rows:  # a session that deliberated: every round's (council.storage.rounds)
                    self._write_rows(table, redact_document(list(rows)), replace=True)
            if bias_records:
                self._write_session_bias_records(bias_records)
            if agreement:
                self._write_rows("reviewer_agreement", agreement, replace=True)
            calls = self.calls_to_record(calls)
            if calls:
                self.write_calls(calls)
            self.db.conn.execute(
                "UPDATE sessions SET status = ?, finished_at = ?, result = ?, error = ?, synthesis_structure = ? "
                "WHERE id = ?",
                [
                    status,
                    utc_now(),
                    # serialized once, for the redaction check and for storing
                    None if result is None else redacted_model_json(result),
                    redact(error) if error else error,
                    None if structure is None else redacted_model_json(structure),
                    session_id,
                ],
            )

    def save_late(self, session_id: str, *, answer: Any = None, review: Any = None, keep_text: bool = True) -> None:
        """A late answer or review (``stage_grace``), come after the session was written: its
        row, and its entry in the stored result, replaced (council.session.grace)."""
        if answer is not None:
            table, key, name = "answers", "member", answer.member
            item = answer if keep_text else answer.model_copy(update={"text": None})
            row = _answer_row(session_id, item, keep_text)
        else:
            table, key, name = "reviews", "reviewer", review.reviewer
            item = review if keep_text else review.model_copy(update={"reasoning": {}})
            row = _review_row(session_id, item, keep_text)
        with self.immediate():
            self._write_rows(table, redact_document([row]), replace=True)
            stored = self.db.execute("SELECT result FROM sessions WHERE id = ?", [session_id]).fetchone()
            if not stored or not stored[0]:
                return
            result = json.loads(stored[0])
            entry = json.loads(redacted_model_json(item))
            result[table] = [entry if old.get(key) == name else old for old in result.get(table) or []]
            self.db.execute("UPDATE sessions SET result = ? WHERE id = ?", [json.dumps(result), session_id])

    def _write_rows(self, table: str, rows: Sequence[dict[str, Any]], *, replace: bool = False) -> None:
        """Insert ``rows`` (plain values) into ``table`` inside the caller's transaction, one
        prepared statement per shape of row; ``replace``: a row with the same key replaces the
        stored one. (sqlite-utils' ``insert_all`` reads the table's columns and converts every
        value first, a cost a busy server pays per write: ``benchmarks/bench_serve_sessions.py``.)"""
        shapes: dict[tuple[str, ...], list[list[Any]]] = {}
        for row in rows:
            columns = tuple(row)
            shapes.setdefault(columns, []).append([row[c] for c in columns])
        for columns, values in shapes.items():
            self.db.conn.executemany(_insert_statement(table, columns, replace), values)

    def list_sessions(
        self, *, limit: int = 20, since: str | None = None, council: str | None = None, search: str | None = None
    ) -> list[dict[str, Any]]:
        """Newest first. ``search``: text the question contains (any case; literal, never a pattern)."""
        where, params = [], []
        if search:
            where.append(self.dialect.contains("lower(question)", "lower(?)"))
            params.append(search)
        if since:
            where.append("created_at >= ?")
            params.append(parse_since(since))
        if council:
            where.append("council = ?")
            params.append(council)
        sql = "select id, created_at, finished_at, status, kind, council, question, members, error from sessions"
        if where:
            sql += " where " + " and ".join(where)
        sql += " order by created_at desc limit ?"
        params.append(limit)
        return list(self.db.query(sql, params))

    def get_session(self, session_id: str) -> dict[str, Any]:
        """A session by its id, or by a literal prefix of at least ``MIN_ID_PREFIX`` characters
        that only one session has (people copy the short ids the table shows)."""
        rows = list(self.db.query("select * from sessions where id = ?", [session_id]))
        if not rows and len(session_id) >= MIN_ID_PREFIX:
            # A range, not LIKE: the prefix is text, never a pattern ("%" and "_" match only themselves).
            upper = session_id[:-1] + chr(ord(session_id[-1]) + 1) if ord(session_id[-1]) < 0x10FFFF else None
            sql = "select * from sessions where id >= ? and substr(id, 1, ?) = ?"
            params: list[Any] = [session_id, len(session_id), session_id]
            if upper is not None:
                sql += " and id < ?"
                params.append(upper)
            rows = list(self.db.query(sql + " limit 2", params))
        if len(rows) != 1:
            hint = f" (give the id or at least {MIN_ID_PREFIX} characters of it)"
            raise NotFoundError(f"no session with id {session_id!r}{'' if len(session_id) >= MIN_ID_PREFIX else hint}")
        session = rows[0]
        sid = session["id"]
        session["answers"] = list(self.db.query("select * from answers where session_id = ?", [sid]))
        session["reviews"] = list(self.db.query("select * from reviews where session_id = ?", [sid]))
        return session

    def session_calls(self, session_id: str) -> list[dict[str, Any]]:
        """The call log of one session, every attempt, in the order they started. Not the rows'
        ids: a transaction may write several attempts' rows at once, and on PostgreSQL it writes
        them in call-id order (:meth:`write_calls`), so that two never deadlock."""
        rows = self.db.query("select * from calls where session_id = ? order by started_at, id", [session_id])
        return list(rows)

    def session_rounds(self, session_id: str) -> dict[str, list[dict[str, Any]]]:
        return {
            table: list(
                self.db.query(f"select * from {table} where session_id = ? order by round, {who}", [session_id])
            )
            for table, who in (("round_answers", "member"), ("round_reviews", "reviewer"))
        }

    def swap_setting(self, key: str, value: str) -> str | None:
        """Store ``value`` under ``key`` and return what was stored before (None: nothing)."""
        with self.immediate():
            row = self.db.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchone()
            self.db.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
        return row[0] if row else None

    def has_query_hashes(self) -> bool:
        """Whether any session or judged pair (its ``prompt_id``, m018) on record carries a query
        hash (made with the salt of the time)."""
        sql = ("SELECT 1 FROM sessions WHERE query_hash IS NOT NULL UNION ALL "
               "SELECT 1 FROM judgment_runs WHERE prompt_id IS NOT NULL LIMIT 1")  # fmt: skip
        return bool(list(self.db.execute(sql)))

    # -- session events ------------------------------------------------------
    def append_events(self, session_id: str, events: Sequence[dict[str, Any]]) -> None:
        """Store a batch of a session's events (council.storage.events) by the call log's group
        commit: every batch of every session in one turn of the event loop in one transaction (a
        server running many sessions would otherwise commit for each of their events)."""
        self.queue_events(session_id, events)

    def events_after(self, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(seq, type, JSON) of the session's events numbered above ``after`` (this process's
        events still waiting for their commit included)."""
        if self._pending_events:
            self.flush_calls()
        return self.read_events(session_id, after, limit)

    def read_events(self, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(seq, type, JSON) of the session's committed events numbered above ``after``."""
        from council.storage.events import events_after

        return events_after(self.db, session_id, after, limit)

    def count(self, table: str) -> int:
        quoted = '"' + table.replace('"', '""') + '"'
        return int(self.db.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])


def _result_rows(result: Any, keep_text: bool) -> dict[str, Any]:
    """A ``SessionResult`` and its rows (texts only when ``keep_text``): what ``_finish_session``
    writes for it."""
    # The structured synthesis (m026; its texts None when transcripts are off): None when plain or failed.
    structure = result.synthesis.structure
    if structure is not None and not keep_text:
        structure = structure.without_text()
    rounds = round_rows(result, keep_text, _answer_review_rows) if getattr(result, "deliberation", None) else {}
    return {"result": result, "structure": structure, **_answer_review_rows(result, keep_text),
            "agreement": agreement_rows(result), **rounds}  # fmt: skip


def _answer_review_rows(result: Any, keep_text: bool) -> dict[str, list[dict[str, Any]]]:
    """The ``answers`` and ``reviews`` rows of a session's result, or of one deliberation round."""
    answers = [_answer_row(result.session_id, a, keep_text) for a in result.answers]
    reviews = [_review_row(result.session_id, r, keep_text) for r in result.reviews]
    return {"answers": answers, "reviews": reviews}


def _answer_row(session_id: str, a: Any, keep_text: bool) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "member": a.member,
        "model": a.model,
        "text": a.text if keep_text else None,
        "length_chars": a.length_chars,
        "status": a.status,  # ok | failed | candidate | late
        "error": a.error,
        "latency_ms": a.latency_ms,
    }


def _review_row(session_id: str, r: Any, keep_text: bool) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "reviewer": r.reviewer,
        "model": r.model,
        "display_order": json.dumps(r.display_order),
        "labels": json.dumps(r.labels),
        "scores": json.dumps(r.scores),
        "ranking": json.dumps(r.ranking),
        "reasoning": json.dumps(r.reasoning) if keep_text else None,
        "valid": int(r.valid),
        "attempts": r.attempts,
        "error": r.error,
        "late": int(r.late),  # m025
    }


def _call_shape(row: dict[str, Any]) -> tuple[tuple[str, ...], bool]:
    """A call-log row's columns, and whether it is a started row (``ok`` NULL)."""
    return _columns_of(tuple(row)), row.get("ok") is None


def _owned_columns(row: dict[str, Any]) -> tuple[str, ...]:
    """A call-log row's columns, ``owner`` among them even where the row has none (NULL)."""
    return _columns_of(tuple(row), owned=True)


@functools.lru_cache(maxsize=64)  # rows come in a few shapes; a busy server writes ~30 a session
def _columns_of(keys: tuple[str, ...], *, owned: bool = False) -> tuple[str, ...]:
    """The call-log columns a row with these keys has, in the table's order (with ``owned``,
    ``owner`` whether it has one or not)."""
    return tuple(c for c in _CALL_COLUMNS if c in keys or (owned and c == "owner"))


@functools.lru_cache(maxsize=64)
def _complete_call(columns: tuple[str, ...], *, started_too: bool = False) -> str:
    """The upsert of a finished call's row: its outcome replaces what is stored, unless that is
    already the same outcome. A final write records its calls again after the call log's group
    commit wrote most of them finished, and an UPDATE that changes nothing still writes a new row
    (on PostgreSQL a new version, with an entry in each of the table's indexes). The comparison
    treats two NULLs as equal, in words both databases take. ``started_too``: the statement also
    takes started rows (``ok`` NULL), which never update a row already there."""
    outcome = [c for c in columns if c in _CALL_OUTCOME]
    same = " AND ".join(f"(calls.{c} = excluded.{c} OR (calls.{c} IS NULL AND excluded.{c} IS NULL))" for c in outcome)
    finished = "excluded.ok IS NOT NULL AND " if started_too else ""
    return f"UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in outcome)} WHERE {finished}({same}) IS NOT TRUE"


def _call_rows(session_id: str, calls: Sequence[CallRecord]) -> list[dict[str, Any]]:
    return [call_row(c, session_id=session_id) for c in calls]


class _Journal:
    """A run's attempts, written as they start (``ok`` NULL: in flight) and as they finish."""

    def __init__(self, store: SQLStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def _row(self, record: CallRecord) -> dict[str, Any]:
        return call_row(record, session_id=self.session_id, **self.store._owner())

    def call_started(self, record: CallRecord) -> None:
        self.store.journal_calls([{**self._row(record), "ok": None, "latency_ms": None, "error": None}])

    def call_finished(self, record: CallRecord) -> None:
        self.store.journal_calls([self._row(record)])


@functools.lru_cache(maxsize=64)  # a few tables, a few shapes of row each
def _insert_statement(table: str, columns: tuple[str, ...], replace: bool) -> str:
    sql = judgments.insert_statement(table, columns)
    if not replace:
        return sql
    key = _REPLACED_BY[table]
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return f"{sql} ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"

"""What a storage backend provides: the named operations the rest of council uses.

Nothing outside council/storage writes SQL, holds a connection or shapes a row: it
calls these. Two backends implement every operation, both over the one set of statements in
:class:`council.storage.sql_store.SQLStore`: SQLite (:class:`council.storage.sqlite_store.SQLiteStore`)
and PostgreSQL (:class:`council.storage.postgres.PostgresStore`); each passes
tests/storage/test_storage_contract.py.

Arguments typed ``Any`` are council's own result objects (a session result, a judging
outcome, a batch item), read by attribute: storage sits below the packages that define
them, so it names them only for type checkers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from council.storage.data import BiasQuery, BiasSums, ComparisonData

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from council.accounting.usage import CallJournal, CallRecord
    from council.errors import ItemAlreadyRecorded, ItemRefused
    from council.methods.consensus_agreement import AgreementSums
    from council.storage.judgments import JudgmentSave


@runtime_checkable
class Store(Protocol):
    """Every read and write of council's data (sessions, bias records, judgments, batches)."""

    #: Whether the store's operations may run on several threads at once (PostgreSQL's connection
    #: pool). Such a store is called off the event loop, where each round trip would hold every
    #: session and item in flight; one that may not (SQLite's one connection) is called on it.
    threadsafe: bool

    # -- lifecycle and ownership ------------------------------------------------
    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""

    def recover_interrupted(self) -> list[str]:
        """Mark sessions and calls whose owning process has ended ``interrupted``; their ids."""

    def recover_while_open(self) -> None:
        """From now on, recover as :meth:`recover_interrupted` does at each heartbeat of this
        process's lease, until the store is closed (a long-running process: a server, a worker)."""

    def clock(self) -> float:
        """Now, in epoch seconds, on the clock every process sharing the store reads (leases)."""

    def ping(self) -> None:
        """Ask the database a trivial query; raises when it cannot answer (readiness probes)."""

    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float:
        """Reserve ``increment`` seconds of the rate budget ``key`` (shared by every process of
        the store); seconds to wait before the call may start (council.storage.rate_limits)."""

    def adjust_rate(self, key: str, delta: float) -> None:
        """Settle a reservation of ``key`` at its real size: ``delta`` seconds more (or less)."""

    def journal(self, session_id: str) -> CallJournal:
        """Writes a run's attempts as they start and finish (the call log of ``session_id``)."""

    def write_thread(self) -> Executor | None:
        """The one thread a store whose operations may run on several threads writes from (its
        group commits, a session's final write): off the event loop, one write after another.
        None: writes stay on the caller's thread (council.storage.group_commit)."""

    # -- sessions ---------------------------------------------------------------
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
        """Record a session as ``running`` (its own short transaction; ``created_at``: now)."""

    def save_session(
        self, result: Any, records: Sequence[Any], *, keep_text: bool, calls: Sequence[CallRecord]
    ) -> None:
        """Finish a session: its answers, reviews, bias records (``BiasRecord``), call log and
        final status from ``result`` (a ``SessionResult``, already scrubbed when ``keep_text``
        is off), all in one transaction. Error texts are redacted."""

    def save_late(self, session_id: str, *, answer: Any = None, review: Any = None, keep_text: bool = True) -> None:
        """Store a late answer (``MemberAnswer``, status ``late``) or review (``Review``, ``late``)
        that arrived after its session was written: its row and its entry in the stored result."""

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
        """Finish a session that stopped early (failed, interrupted, stopped by a cap) with its
        call log, its ``error`` and, when it got that far, ``result``: the ``SessionResult`` of
        what it had done (the answers that came), stored as ``save_session`` stores one."""

    def list_sessions(
        self, *, limit: int = 20, since: str | None = None, council: str | None = None, search: str | None = None
    ) -> list[dict[str, Any]]:
        """The newest sessions first: id, created_at, finished_at, status, kind, council,
        question, members, error. ``since`` as ``clock.parse_since`` reads it; ``search``: text
        the question contains (any case; literal, never a pattern)."""

    def get_session(self, session_id: str) -> dict[str, Any]:
        """A session row with its ``answers`` and ``reviews``, by id or a unique prefix of at
        least ``MIN_ID_PREFIX`` characters; ``NotFoundError`` otherwise."""

    def session_calls(self, session_id: str) -> list[dict[str, Any]]:
        """The call log of one session (or judging run), every attempt, in the order they started."""

    def session_rounds(self, session_id: str) -> dict[str, list[dict[str, Any]]]:
        """A deliberating session's ``round_answers`` and ``round_reviews`` rows (by full id), in
        round order (council.storage.rounds); empty lists for any other session."""

    def iter_sessions(self, *, since: str | None = None) -> Iterator[dict[str, Any]]:
        """Every session row, oldest first (exports)."""

    def has_query_hashes(self) -> bool:
        """Whether any session or judged pair on record carries a query hash."""

    def swap_setting(self, key: str, value: str) -> str | None:
        """Store ``value`` under ``key`` (an installation setting) and return what was stored
        before (None: nothing)."""

    def append_events(self, session_id: str, events: Sequence[dict[str, Any]]) -> None:
        """Store a batch of a session's events (dicts with ``seq`` and ``type``), all in one
        transaction, by the call log's group commit (council.storage.group_commit); an event
        already stored (same seq) is kept. Events the database refuses are lost, never the
        write that carries them."""

    def events_after(self, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(seq, type, JSON text) of the session's events numbered above ``after``, in order
        (this process's events waiting for their commit included)."""

    def count(self, table: str) -> int:
        """Rows of one of council's tables (sessions, answers, reviews, bias_records, calls, ...)."""

    # -- bias records -------------------------------------------------------------
    def insert_bias_records(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 10_000) -> int:
        """Bulk insert bias record rows (``BiasRecord.row()``) in one transaction; how many."""

    def load_bias_records(
        self, scored: Iterable[Mapping[str, Any]], unscored: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        """Fill a temporary store from records files: ``scored`` rows carry an ``id``;
        ``unscored`` rows (id < 0, session_id, reviewer_id, position, timestamp, council)
        hold a position without a score and enter only the review checks. May be called
        several times (each call adds)."""

    def bias_record_rows(self, fields: Sequence[str], *, since: str | None = None) -> Iterator[tuple[Any, ...]]:
        """Every bias record as a tuple of ``fields``, in insertion order (exports); ``since``:
        stored-form UTC time (``clock.parse_since``)."""

    def bias_sums(self, query: BiasQuery) -> BiasSums:
        """Every sum the bias report needs, read in one snapshot (see :class:`BiasSums`)."""

    # -- judgments and batches ----------------------------------------------------
    def save_judgment(
        self,
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
        """Write a finished comparison or grade (``outcome``), its passes and call log, and
        inside a batch its item (``item``: a ``BatchItem``; ``item_digest``: a digest of its
        content; ``prompt_id``: its prompt's query hash, or None) in one transaction. A failed
        item is replaced (a resumed batch); a finished one raises ``CouncilFailure``."""

    def expect_write(self) -> Callable[[], None]:
        """A write transaction is on its way: the call-log rows waiting for a group commit are left
        to it until the function returned is called (then any left are committed as usual)."""

    def record_and_claim(
        self,
        saves: Sequence[JudgmentSave],
        worker: str,
        *,
        batch_id: str | None = None,
        limit: int = 0,
        lease_seconds: float,
    ) -> tuple[list[ItemAlreadyRecorded | ItemRefused | None], list[dict[str, Any]]]:
        """Batch items that finished together, each recorded as ``save_judgment`` records it, and
        up to ``limit`` more claimed for ``worker`` as ``claim_items`` claims them, in one
        transaction. Per save: None (recorded), why it was not (``ItemAlreadyRecorded``), or
        ``ItemRefused`` (the database refused its data: recorded as failed instead); and the
        rows claimed."""

    def runs_recorded(self, run_ids: Sequence[str]) -> set[str]:
        """Which of these judgment runs are stored (a save's: ``save.outcome.run_id``)."""

    def judged_pairs(self, *, since: str | None = None) -> Iterator[dict[str, Any]]:
        """Every judged pair the leaderboard counts, oldest first (read a page at a time), with
        its answers' lengths and markdown counts (None when recorded before they were kept), as
        a judgments-file line."""

    def judgment_run(self, run_id: str) -> dict[str, Any] | None:
        """A judging run's row (``result`` decoded), or None."""

    def judgment_passes(self, run_id: str) -> list[dict[str, Any]]:
        """The passes of one run, in order (``output`` decoded)."""

    def position_audit(self, *, judge_model: str | None = None) -> list[dict[str, Any]]:
        """Per judge model: swapped pass pairs, how often they agree, how often the first shown won."""

    def open_batch(
        self,
        batch_id: str,
        *,
        source: str,
        content_sha256: str,
        settings: Mapping[str, Any],
        items: int,
        replace: bool = False,
    ) -> bool:
        """Register a batch, or check that it was started from the same file (or one holding the
        same, or ``replace``) and settings (``UsageError`` if not). True when it already existed."""

    def batch_exists(self, batch_id: str) -> bool:
        """Whether a batch of this id was opened."""

    def batch_ids(self, *, since: str | None = None) -> list[str]:
        """The ids of the batches opened on or after ``since`` (every one without it), oldest first."""

    def find_batch(self, source: str, settings: Mapping[str, Any]) -> str | None:
        """The latest batch started from the file ``source`` with these settings, if any."""

    def reconcile_batch_items(
        self, batch_id: str, items: Mapping[str, tuple[str, int]], *, content_sha256: str
    ) -> tuple[int, int]:
        """Match a batch's recorded items with its file as it is now (``item_id -> (content
        digest, line)``): changed or removed items leave the batch, the others move to their
        new line. Returns ``(changed, removed)``."""

    def batch_item_status(self, batch_id: str) -> dict[str, str]:
        """``item_id -> status`` of the items recorded so far."""

    def batch_rows(self, batch_id: str) -> Iterator[dict[str, Any]]:
        """Every recorded item with its run, in batch-file order (labelled pairs carry ``passes``),
        read a page at a time (council.storage.judgments.BATCH_PAGE)."""

    def batch_passes(self, batch_id: str) -> Iterator[dict[str, Any]]:
        """Every valid pairwise pass of the batch's finished items, in file order: ``item_id,
        judge, vote, shown_first, winner`` (in the original labels)."""

    # -- the batch queue (council.storage.queue) ------------------------------------
    def enqueue_batch(
        self,
        batch_id: str,
        *,
        source: str,
        content_sha256: str,
        settings: Mapping[str, Any],
        spec: Mapping[str, Any],
        items: Sequence[Mapping[str, Any]],
        replace: bool = False,
    ) -> dict[str, int]:
        """Register the batch (its judging ``spec``) and queue its items (``item_id, position,
        digest, item``), matched with those already queued by id and content; how many are
        ``new, changed, unchanged, retried, removed``. Other ``settings`` under the id, or another
        file ``source`` (absolute path) holding other items without ``replace``: ``UsageError``."""

    def claim_items(
        self, worker: str, *, batch_id: str | None = None, limit: int = 1, lease_seconds: float
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` queued items (or running ones whose lease has passed), now held by
        ``worker`` for ``lease_seconds``; each ``batch_id, item_id, digest, item``. Two workers
        never hold one item."""

    def renew_claims(self, worker: str, *, lease_seconds: float) -> int:
        """The heartbeat: ``worker``'s running items held ``lease_seconds`` from now; how many."""

    def release_claims(self, worker: str) -> int:
        """``worker``'s running items back in the queue at once; how many."""

    def claims_of(self, worker: str) -> list[dict[str, Any]]:
        """The items ``worker`` holds now (running), as ``claim_items`` returns them."""

    def batch_spec(self, batch_id: str) -> dict[str, Any] | None:
        """The judging spec stored with the batch, or None."""

    def batch_status(self, batch_id: str) -> dict[str, Any] | None:
        """``batch_id, items, queued, running, done, failed, cost_usd``; None for an unknown batch."""

    def queue_depth(self) -> dict[str, int]:
        """``queued`` and ``running`` items of every batch (a claim whose lease has passed: queued)."""

    # -- leaderboard ---------------------------------------------------------------
    def comparisons(
        self,
        *,
        since: str | None = None,
        council: str | None = None,
        sessions: bool = True,
        judgments: bool = True,
    ) -> ComparisonData:
        """The pairwise outcomes between models on record (council ballots and judged pairs)."""

    # -- cost: spend caps, the call cache, provider batches (docs/methods.md) -----------
    def batch_spent(self, batch_id: str) -> float:
        """What the successful calls of a batch's recorded items cost."""

    def open_budget(self, key: str, *, cap_usd: float | None, spent_usd: float = 0.0) -> float | None:
        """Set the cap of budget ``key`` (a new cap replaces the old one; a new budget starts at
        ``spent_usd``) or, with ``cap_usd`` None, read it. Reservations of processes that have
        ended count as spent. The cap in force (None: no budget)."""

    def reserve_budget(self, key: str, amount_usd: float) -> tuple[Any, float, float]:
        """Reserve ``amount_usd`` if spent + reserved + it stays within the cap, atomically
        across every process using the store: (a reservation token, or None when refused;
        spent; cap)."""

    def settle_budget(self, key: str, reservation: Any, actual_usd: float) -> None:
        """End a reservation: ``actual_usd`` was spent."""

    def shrink_budget(self, key: str, reservation: Any, amount_usd: float) -> None:
        """Hold ``amount_usd`` (less than before) for a reservation: the rest is free again."""

    def budget_totals(self, key: str) -> tuple[float, float]:
        """(spent, cap) of budget ``key``."""

    def cached_reply(self, key: str, version: int) -> dict[str, Any] | None:
        """The call cache's entry of ``key`` written under ``version``, or None (absent,
        another version, unreadable)."""

    def cache_reply(self, key: str, version: int, entry: Mapping[str, Any]) -> None:
        """Write (or replace) the call cache's entry of ``key``."""

    def cache_stats(self) -> dict[str, Any]:
        """The call cache: entries, bytes, oldest, newest, models (entries per model),
        cached_calls (calls answered from it) and saved_usd (None when a saving is unknown)."""

    def clear_cache(self, *, older_than_days: float | None = None) -> int:
        """Delete every cache entry, or those written more than ``older_than_days`` ago; how many."""

    def batch_cache_savings(self, batch_id: str) -> tuple[int, float | None]:
        """Calls of a batch's recorded items answered from the cache, and what they saved."""

    def round_intent(self, batch_id: str, token: str, provider: str, custom_ids: Sequence[str]) -> None:
        """Journal a provider batch round of ``batch_id`` (``submitting``) before it is sent."""

    def round_submitted(self, token: str, provider_batch_id: str) -> None:
        """The provider accepted the round ``token`` as ``provider_batch_id``."""

    def round_progress(self, token: str, status: str, done: int, failed: int) -> None:
        """A poll of the round ``token``: its status and counts."""

    def rounds_holding(self, batch_id: str, custom_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Rounds of ``batch_id`` (``token``, ``provider_batch_id``, ``status``, ``custom_ids``),
        neither failed nor cancelled, holding any of ``custom_ids``; newest first."""

    def provider_batches(self, batch_id: str) -> list[dict[str, Any]]:
        """The rounds of a batch: ``id, provider, status, requests, done, failed`` (oldest first)."""

    def save_calibration_map(
        self, name: str, *, batch_id: str, combine: str, items: int, points: Sequence[Sequence[float]]
    ) -> None:
        """Keep the calibration map ``name`` (replacing one of that name)."""

    def calibration_map(self, name: str) -> dict[str, Any] | None:
        """The calibration map ``name``: ``name, batch_id, combine, items, points, created_at``."""

    def reviewer_agreement_sums(
        self, *, since: str | None = None, council: str | None = None, reviewers: Sequence[str] = ()
    ) -> list[AgreementSums]:
        """Per (reviewer, other: None for the consensus) over the stored council sessions created
        since ``since``, of ``council``: the sums of their agreement (council.storage.reviewer_agreement)."""

"""Schema of council.db, as named migrations applied in one transaction each.

Append new migrations at the end; never edit one that has shipped.
"""

from __future__ import annotations

from council.storage import bias_rows, bias_summaries
from council.storage.sqlite import Database, Migrations

migrations = Migrations("council")


# Long as the first schema is: its DDL, never edited since databases ran it (changes are new migrations).
@migrations()
def m001_core(db: Database) -> None:
    db["sessions"].create(
        {
            "id": str,
            "created_at": str,
            "finished_at": str,
            "status": str,  # running -> complete | partial | failed
            "kind": str,  # council | compare | grade
            "council": str,
            "question": str,  # NULL when transcripts are off
            "query_hash": str,
            "seed": int,
            "offline": int,
            "members": str,  # JSON list of member ids
            "result": str,  # JSON of the whole result (text scrubbed when transcripts are off)
            "error": str,
        },
        pk="id",
    )
    db["sessions"].create_index(["created_at"])
    db["sessions"].create_index(["council", "created_at"])

    db["answers"].create(
        {
            "session_id": str,
            "member": str,
            "model": str,
            "text": str,
            "length_chars": int,
            "status": str,  # ok | failed | candidate
            "error": str,
            "latency_ms": float,
        },
        pk=("session_id", "member"),
        foreign_keys=[("session_id", "sessions", "id")],
    )

    db["reviews"].create(
        {
            "session_id": str,
            "reviewer": str,
            "model": str,
            "display_order": str,  # JSON: member ids in the order this reviewer saw them
            "labels": str,  # JSON: label -> member id
            "scores": str,  # JSON: member id -> integer score
            "ranking": str,  # JSON: member ids, best first
            "reasoning": str,  # JSON: member id -> reasoning (NULL when transcripts are off)
            "valid": int,
            "attempts": int,
            "error": str,
        },
        pk=("session_id", "reviewer"),
        foreign_keys=[("session_id", "sessions", "id")],
    )

    db["bias_records"].create(
        {
            "id": int,
            "schema_version": str,
            "session_id": str,
            "reviewer_id": str,
            "model_id": str,
            "position": int,
            "response_length_chars": int,
            "score_value": float,
            "query_hash": str,
            "timestamp": str,
            "scale_min": int,
            "scale_max": int,
            "self_review": int,
            "council": str,
        },
        pk="id",
    )
    # Covering indexes: the cross-session report is GROUP BY over these columns.
    db["bias_records"].create_index(["reviewer_id", "score_value"])
    db["bias_records"].create_index(["position", "score_value"])
    db["bias_records"].create_index(["session_id", "model_id", "score_value", "response_length_chars"])
    db["bias_records"].create_index(["timestamp"])

    db["calls"].create(
        {
            "id": int,
            "session_id": str,
            "stage": str,
            "member": str,
            "model": str,
            "started_at": str,
            "latency_ms": float,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "attempt": int,
            "ok": int,
            "error": str,
        },
        pk="id",
    )
    db["calls"].create_index(["session_id"])


@migrations()
def m002_bias_report_indexes(db: Database) -> None:
    # The cross-session bias report groups by review (session, reviewer) and by
    # answer (session, model); these covering indexes let both GROUP BYs stream
    # over an index instead of sorting the table (``benchmarks/bench_report_scan.py``);
    # the small scale index answers "are scales mixed?".
    # The answer index supersedes m001's (session_id, model_id, score_value,
    # response_length_chars) index, which is dropped to keep writes cheap.
    db["bias_records"].create_index(
        ["session_id", "reviewer_id", "score_value", "position"], index_name="idx_bias_records_review"
    )
    db["bias_records"].create_index(
        ["session_id", "model_id", "self_review", "score_value", "response_length_chars"],
        index_name="idx_bias_records_answer",
    )
    db["bias_records"].create_index(["scale_min", "scale_max"], index_name="idx_bias_records_scale")
    db.execute("DROP INDEX IF EXISTS idx_bias_records_session_id_model_id_score_value_response_length_chars")


@migrations()
def m003_judgments(db: Database) -> None:
    # One row per finished comparison or grade (standalone or a batch item).
    db["judgment_runs"].create(
        {
            "id": str,
            "kind": str,  # compare | grade
            "status": str,  # ok | failed
            "error": str,
            "judges": str,  # JSON list of judge model strings
            "winner": str,  # A | B | TIE for comparisons; NULL for grades
            "unstable": int,
            "flagged": int,
            "calls": int,
            "calls_saved": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "elapsed_ms": float,
            "result": str,  # JSON of the whole outcome
            "created_at": str,
        },
        pk="id",
    )
    db["judgment_runs"].create_index(["created_at"])

    # One row per judge pass, so position consistency per judge can be audited later.
    db["judgments"].create(
        {
            "id": int,
            "run_id": str,
            "kind": str,  # pairwise | grade
            "judge": str,
            "judge_model": str,
            "vote": int,
            "pass": int,  # 1 = A shown first, 2 = B shown first; grades: 1
            "shown_first": str,  # A | B (NULL for grades)
            "valid": int,
            "attempts": int,
            "winner_as_seen": str,  # in the labels the judge saw
            "winner": str,  # mapped back to the original labels
            "a_total": float,
            "b_total": float,
            "score_total": int,
            "problem": str,  # why the pass is invalid
            "output": str,  # JSON of the validated output (NULL when invalid)
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "judgment_runs", "id")],
    )
    db["judgments"].create_index(["run_id"])
    db["judgments"].create_index(["judge_model", "kind", "run_id", "judge", "vote", "pass"])

    db["batches"].create(
        {"id": str, "source": str, "content_sha256": str, "settings": str, "items": int, "created_at": str},
        pk="id",
    )
    # The primary key is the guarantee that a batch item is never recorded twice.
    db["batch_items"].create(
        {
            "batch_id": str,
            "item_id": str,
            "position": int,  # line number in the batch file: results are written in this order
            "mode": str,  # pairwise | grade
            "run_id": str,
            "status": str,  # ok | failed
            "metadata": str,  # JSON: the item's "metadata", copied to its result line
            "finished_at": str,
        },
        pk=("batch_id", "item_id"),
        foreign_keys=[("batch_id", "batches", "id"), ("run_id", "judgment_runs", "id")],
    )
    db["batch_items"].create_index(["batch_id", "position"])


@migrations()
def m004_session_ownership(db: Database) -> None:
    # Who runs a session: the process's lease (council.storage.ownership), with its pid and
    # host for people. A session whose owner died is marked "interrupted" by the next
    # process that opens the database.
    db["sessions"].add_column("owner", str)
    db["sessions"].add_column("owner_pid", int)
    db["sessions"].add_column("owner_host", str)
    # Calls are written when they start (ok NULL) and again when they finish, keyed by
    # call_id, so a call in flight at a crash is on record; owner finds the orphans.
    db["calls"].add_column("call_id", str)
    db["calls"].add_column("owner", str)
    db.execute("CREATE UNIQUE INDEX idx_calls_call_id ON calls (call_id)")
    # Only unfinished work is ever looked up by owner: partial indexes stay tiny.
    db.execute("CREATE INDEX idx_sessions_running_owner ON sessions (owner) WHERE status = 'running'")
    db.execute("CREATE INDEX idx_calls_in_flight_owner ON calls (owner) WHERE ok IS NULL")


def _bias_record_problem(row: str) -> str:
    """SQL: why the bias record ``row`` (a table alias or NEW) is invalid, or NULL.

    The rules of ``council.bias.records.BiasRecord``, frozen here as m005 shipped them."""
    r = row + "." if row else ""
    return f"""CASE
      WHEN {r}session_id IS NULL OR {r}session_id = '' OR {r}reviewer_id IS NULL OR {r}reviewer_id = ''
           OR {r}model_id IS NULL OR {r}model_id = '' THEN 'a session, reviewer or model id is missing'
      WHEN {r}score_value IS NULL OR typeof({r}score_value) NOT IN ('integer', 'real')
           THEN 'score_value is not a number'
      WHEN {r}score_value > 1e308 OR {r}score_value < -1e308 THEN 'score_value is not finite'
      WHEN ({r}scale_min IS NULL) != ({r}scale_max IS NULL) THEN 'scale_min and scale_max go together'
      WHEN {r}scale_min IS NOT NULL AND {r}scale_min >= {r}scale_max THEN 'scale_min is not below scale_max'
      WHEN {r}scale_min IS NOT NULL AND ({r}score_value < {r}scale_min OR {r}score_value > {r}scale_max)
           THEN 'score_value ' || {r}score_value || ' is outside the scale ' || {r}scale_min || '-' || {r}scale_max
      WHEN {r}scale_min IS NULL AND ({r}score_value < 1 OR {r}score_value > 10)
           THEN 'score_value ' || {r}score_value || ' is outside 1-10 (no scale_min/scale_max given)'
      WHEN {r}position IS NULL OR typeof({r}position) != 'integer' OR {r}position < 0
           THEN 'position is not a whole number >= 0'
      WHEN {r}response_length_chars IS NULL OR typeof({r}response_length_chars) != 'integer'
           OR {r}response_length_chars < 0 THEN 'response_length_chars is not a whole number >= 0'
      WHEN {r}response_length_words IS NOT NULL
           AND (typeof({r}response_length_words) != 'integer' OR {r}response_length_words < 0)
           THEN 'response_length_words is not a whole number >= 0'
    END"""


@migrations()
def m005_bias_length_words(db: Database) -> None:
    # Bias records gain the answer's length in words (the unit of the length–score
    # correlation); rows written before keep NULL there and are reported as such. The
    # per-answer covering index gains the column so the report still reads only the index;
    # it supersedes m002's answer index.
    db["bias_records"].add_column("response_length_words", int)
    db["bias_records"].create_index(
        ["session_id", "model_id", "self_review", "score_value", "response_length_chars", "response_length_words"],
        index_name="idx_bias_records_answer_words",
    )
    db.execute("DROP INDEX IF EXISTS idx_bias_records_answer")
    # Every row is valid from now on: triggers refuse what BiasRecord refuses, whoever writes.
    # Rows already stored are checked once here; the invalid ones are listed (never deleted),
    # and the report stops on them or, when asked, leaves them out.
    for event in ("INSERT", "UPDATE"):
        db.execute(
            f"""CREATE TRIGGER bias_records_valid_{event.lower()} BEFORE {event} ON bias_records
                WHEN ({_bias_record_problem("NEW")}) IS NOT NULL
                BEGIN SELECT RAISE(ABORT, 'invalid bias record (the rules of council.bias.records.BiasRecord)'); END"""
        )
    db["bias_records_invalid"].create({"id": int, "problem": str}, pk="id")
    db.execute(
        f"""INSERT INTO bias_records_invalid (id, problem)
            SELECT id, problem FROM (SELECT id, {_bias_record_problem("")} AS problem FROM bias_records)
            WHERE problem IS NOT NULL"""
    )


@migrations()
def m006_batch_labels(db: Database) -> None:
    # A batch item may carry a person's verdict on the pair ("label": A | B | TIE) or a gold
    # score for the graded response; kept with the item, so the batch summary can measure
    # the judge against them (and a resumed batch against the same labels).
    db["batch_items"].add_column("label", str)
    db["batch_items"].add_column("gold_score", float)
    # The models that wrote responses A and B, when the item names them: a judged pair then
    # counts towards the leaderboard. On the run, where any comparison can carry them.
    db["judgment_runs"].add_column("model_a", str)
    db["judgment_runs"].add_column("model_b", str)
    # The leaderboard maps every ranked member to its model: a covering index answers that
    # lookup from the index alone, quicker than the primary key (``benchmarks/bench_leaderboard.py``).
    db["answers"].create_index(["session_id", "member", "status", "model"], index_name="idx_answers_model")


@migrations()
def m007_settings(db: Database) -> None:
    # Facts about the installation that belong to the database: the query-hash salt's
    # fingerprint (an HMAC of a constant under the salt, never the salt itself), so a
    # replaced salt is noticed instead of silently regrouping hashes.
    db["settings"].create({"key": str, "value": str}, pk="key")


@migrations()
def m008_batch_item_digests(db: Database) -> None:
    # Each batch item remembers a digest of its content: resuming an edited batch file judges
    # again only the items that changed (matched by id) and keeps the others' results.
    db["batch_items"].add_column("content_sha256", str)
    db["batches"].create_index(["source", "created_at"])


@migrations()
def m009_session_events(db: Database) -> None:
    # What a session told the world as it ran (council.session.events), so any server replica can
    # stream a session another one runs: one row per event, seq = the SSE event id.
    db.execute(
        "CREATE TABLE session_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, "
        "at TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID"
    )


@migrations()
def m010_budgets(db: Database) -> None:
    # A spend cap kept with what it caps (a batch: key "batch:<id>"), shared by every process
    # using the store: what was spent, and one row per call in flight holding its worst case
    # (docs/methods.md, "Spend caps"). A reservation whose process died counts as spent.
    db["budgets"].create({"key": str, "cap_usd": float, "spent_usd": float, "updated_at": str}, pk="key")
    db["budget_reservations"].create(
        {"id": int, "key": str, "amount_usd": float, "owner": str, "created_at": str},
        pk="id",
        foreign_keys=[("key", "budgets", "key")],
    )
    db["budget_reservations"].create_index(["key"])


@migrations()
def m011_call_cache(db: Database) -> None:
    # The call cache (docs/methods.md, "Call cache"): one reply per request key, with the
    # version that wrote it (another version's entries are ignored and replaced) and what the
    # reply cost. A call answered from it is logged with cached = 1 and what it saved.
    db["call_cache"].create(
        {"key": str, "version": int, "model": str, "reply": str, "cost_usd": float, "created_at": str}, pk="key"
    )
    db["call_cache"].create_index(["created_at"])
    db["calls"].add_column("cached", int, not_null_default=0)
    db["calls"].add_column("saved_usd", float)


@migrations()
def m012_provider_batches(db: Database) -> None:
    # The rounds of a batch sent through a provider's batch API: written before the submit
    # (token, custom ids), then the provider's id, then its progress, so a process killed in
    # between finds its provider batch again (docs/methods.md, "Provider batches").
    db["provider_batches"].create(
        {"token": str, "batch_id": str, "provider": str, "provider_batch_id": str, "status": str,
         "requests": int, "done": int, "failed": int, "custom_ids": str, "created_at": str, "updated_at": str},
        pk="token",
    )  # fmt: skip
    db["provider_batches"].create_index(["batch_id"])


@migrations()
def m013_rate_limits(db: Database) -> None:
    # One row per rate budget (a model's rpm), shared by every process using this database:
    # tat = the GCRA's theoretical arrival time, epoch seconds (council.storage.rate_limits).
    db["rate_limits"].create({"key": str, "tat": float}, pk="key")


@migrations()
def m014_batch_queue(db: Database) -> None:
    # The distributed batch (council.storage.queue): a batch keeps what a worker on another
    # machine needs to judge it (spec: judging settings, model specs without secrets, rubric
    # contents), and each of its items waits in batch_queue until a worker has recorded it.
    db["batches"].add_column("spec", str)
    db["batch_queue"].create(
        {
            "batch_id": str,
            "item_id": str,
            "position": int,
            "digest": str,  # the item's content (council.storage.queue.item_digest)
            "item": str,  # the item as JSON; NULL once done when transcripts are off
            "state": str,  # queued | running | done | failed
            "worker": str,  # who holds the claim while running
            "lease_until": float,  # epoch seconds: the claim returns to the queue after this
            "attempts": int,
        },
        pk=("batch_id", "item_id"),
        foreign_keys=[("batch_id", "batches", "id")],
    )
    db["batch_queue"].create_index(["batch_id", "state", "position"])
    db["batch_queue"].create_index(["worker"])


@migrations()
def m015_judged_pair_styles(db: Database) -> None:
    # A judged pair keeps its two answers' lengths (characters) and markdown counts
    # (council.methods.style_counts), so the stored leaderboard can hold style equal
    # (docs/methods.md, "Style control"). Pairs recorded before stay NULL: unknown, never 0.
    for side in "ab":
        for name in ("length", "headers", "lists", "bold"):
            db["judgment_runs"].add_column(f"{name}_{side}", int)


@migrations()
def m016_leases(db: Database) -> None:
    # Session ownership by leases, as on PostgreSQL (council.storage.ownership): one row per
    # live process, pushed forward by its heartbeat; expires_at in epoch seconds.
    db["leases"].create({"id": str, "pid": int, "host": str, "expires_at": float}, pk="id", not_null={"expires_at"})


@migrations()
def m017_bias_record_constraints(db: Database) -> None:
    # Writing 1 M records ran at 50,000 a second: the validity triggers ran a statement per
    # row and six indexes were kept up. The table is rebuilt with the same rules (m005's, the
    # one text both use) as a CHECK constraint, which SQLite evaluates inline, and with only
    # the indexes the report's passes read (council.storage.bias_rows.INDEXES): the reviewer
    # sums now come from the per-review pass, and the timestamp index served only --since,
    # which scans anyway. Rows stored before m005 that break the rules stay, listed in
    # bias_records_invalid as before: SQLite checks a CHECK on writes only, as the triggers did,
    # so they are copied with checking switched off.
    db.execute(
        f"""CREATE TABLE bias_records_m017 (
            id INTEGER PRIMARY KEY, schema_version TEXT, session_id TEXT, reviewer_id TEXT, model_id TEXT,
            position INTEGER, response_length_chars INTEGER, score_value REAL, query_hash TEXT,
            timestamp TEXT, scale_min INTEGER, scale_max INTEGER, self_review INTEGER, council TEXT,
            response_length_words INTEGER,
            CONSTRAINT "invalid bias record" CHECK (({_bias_record_problem("")}) IS NULL))"""
    )
    columns = ", ".join(bias_rows.COLUMNS)
    db.execute("PRAGMA ignore_check_constraints = ON")
    try:
        db.execute(f"INSERT INTO bias_records_m017 ({columns}) SELECT {columns} FROM bias_records ORDER BY id")
    finally:
        db.execute("PRAGMA ignore_check_constraints = OFF")
    db.execute("DROP TABLE bias_records")  # its triggers and indexes go with it
    db.execute("ALTER TABLE bias_records_m017 RENAME TO bias_records")
    for name, on in bias_rows.M017_INDEXES.items():
        db.execute(f"CREATE INDEX {name} ON bias_records ({on})")


@migrations()
def m018_judged_pair_prompt_ids(db: Database) -> None:
    # A judged pair's prompt identity: the salted query hash of its prompt (council.bias.records.
    # QueryHasher), NULL when queries are not hashed, so the stored lc_win_rate can fit
    # instruction difficulty (docs/methods.md, "Length-controlled win rate").
    db["judgment_runs"].add_column("prompt_id", str)


@migrations()
def m019_bias_summaries(db: Database) -> None:
    # The bias report's sums per review (council.storage.bias_summaries), kept by every later
    # write of records and built here from the rows already stored (every row kept): the
    # per-review pass reads one row per review instead of every record, so the per-review
    # and scale indexes, which cost every write, go.
    for statement in bias_summaries.M019:
        db.execute(statement)


@migrations()
def m020_bias_session_summaries(db: Database) -> None:
    # The bias report's summaries per session, review and self-reviewed answer
    # (council.storage.bias_summaries), recomputed for the sessions every later write touches
    # and computed here from the rows already stored; m019's per-review sums, which they
    # replace, dropped.
    for statement in bias_summaries.migration(postgres=False):
        db.execute(statement)


@migrations()
def m021_lease_processes(db: Database) -> None:
    # Where a lease's pid means something and when its process started (council.storage.ownership):
    # a process of this machine that has ended is found at once, not when its lease expires.
    db["leases"].add_column("machine", str)
    db["leases"].add_column("started", int)


@migrations()
def m022_call_usage_untrusted(db: Database) -> None:
    # A call whose reported usage could not be trusted (unreadable, or more than the call could
    # take) is logged at its bounds and worst-case cost, and flagged (docs/methods.md, "Spend caps").
    db["calls"].add_column("usage_untrusted", int, not_null_default=0)


@migrations()
def m023_bias_review_gaps(db: Database) -> None:
    # Each review's and self-reviewed answer's gaps to the other reviewers on the answers they
    # share (council.storage.bias_summaries.gap_columns): calibration and self-preference compare
    # reviewers on them. The summaries are made again and computed from the rows already stored.
    for statement in bias_summaries.gap_migration(postgres=False):
        db.execute(statement)


@migrations()
def m024_calibration_maps(db: Database) -> None:
    # Calibration maps by name (council.storage.calibration_maps): the isotonic map's breakpoints
    # as JSON [[probability, calibrated], ...], the batch and combination they were fitted on.
    db["calibration_maps"].create(
        {"name": str, "batch_id": str, "combine": str, "items": int, "points": str, "created_at": str},
        pk="name",
        not_null={"batch_id", "combine", "items", "points", "created_at"},
    )


@migrations()
def m025_late_reviews(db: Database) -> None:
    # A review still running when its stage closed (stage_grace, council.session.grace): stored
    # when it arrives, never counted. A late answer needs no column: its status is "late".
    db["reviews"].add_column("late", int, not_null_default=0)


@migrations()
def m026_synthesis_structure(db: Database) -> None:
    # The chairman's structured synthesis (council.session.structured.SynthesisStructure) as JSON,
    # members by id: the agreements, disagreements, minority view, unique insights and blind spots,
    # readable without decoding the whole result. NULL for a plain synthesis or none.
    db["sessions"].add_column("synthesis_structure", str)


@migrations()
def m027_deliberation_rounds(db: Database) -> None:
    # Every round's answers and reviews of a session that deliberated (council.storage.rounds):
    # round 0 the first ones; each member's log of a round beside its answer. The answers and
    # reviews tables keep the last round's, which the consensus ranks.
    db["round_answers"].create(
        {
            "session_id": str,
            "round": int,
            "member": str,
            "model": str,
            "text": str,  # NULL when transcripts are off
            "length_chars": int,
            "status": str,
            "error": str,
            "latency_ms": float,
            "changed": int,  # NULL for round 0
            "similarity_to_own": float,
            "similarity_to_peers": str,  # JSON: member id -> word-bigram Jaccard index
            "adopted_from": str,
            "reason": str,  # NULL when transcripts are off
            "capitulation": int,
        },
        pk=("session_id", "round", "member"),
        foreign_keys=[("session_id", "sessions", "id")],
    )
    db["round_reviews"].create(
        {
            "session_id": str,
            "round": int,
            "reviewer": str,
            "model": str,
            "display_order": str,
            "labels": str,
            "scores": str,
            "ranking": str,
            "reasoning": str,
            "valid": int,
            "attempts": int,
            "error": str,
            "late": int,  # as reviews.late (m025)
        },
        pk=("session_id", "round", "reviewer"),
        foreign_keys=[("session_id", "sessions", "id")],
    )


@migrations()
def m028_reviewer_agreement(db: Database) -> None:
    # Each council session's reviewers' agreement with its consensus (other = "") and with each
    # other reviewer (council.storage.reviewer_agreement): Kendall's tau-b, top-1 agreement, the
    # answers both ranked. Sessions stored before have none.
    db["reviewer_agreement"].create(
        {"session_id": str, "reviewer": str, "other": str, "kendall_tau": float, "top1": int, "items": int},
        pk=("session_id", "reviewer", "other"),
        not_null={"items"},
        foreign_keys=[("session_id", "sessions", "id")],
    )

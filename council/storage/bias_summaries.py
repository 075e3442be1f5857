"""The bias report's summaries, kept as the records are written (migration m020).

Four tables hold what the report's passes would otherwise compute from every record
(docs/methods.md, "Bias audit"; ``benchmarks/bench_report_scan.py`` measures the report):

* ``bias_session_sums``, one row per session: its record and answer counts, the sums of the
  length correlation over its answers (n, Σx, Σy, Σx², Σy², Σxy, x = length in words and in
  characters, y = the mean score an answer received), and what a filter needs to know of its
  records: the range of their timestamps and councils, and whether they share one scale;
* ``bias_review_outcomes``, one row per review (session, reviewer): its size k, its outcome
  for the top-position test (bad, left out, or the top-scored position: :func:`review_code`),
  the sums of its scores, and its gaps to the other reviewers on the answers they share
  (:func:`gap_columns`);
* ``bias_self_sums``, one row per answer its own model reviewed: its own score, the mean of
  the other reviewers' scores, and the same reviewer's gaps on the session's other answers;
* ``bias_position_sums``: n, Σs, Σs² per (position, reviewer, council), added to by every
  write (records are never changed, so sums of what was written stay exact).

The first three are not additive over records: a review's outcome and a session's correlation
are known only once the review or session is whole, and a later write may complete it. So
every write *recomputes* the rows of each session it touches from all of that session's
records, in the same transaction: the summaries always equal what the rows give. A session's
records are normally written at once (its final write, a bulk load); then the new rows are all
its rows and nothing is read back. A write adding to a session already stored reads that
session's records again by the per-answer index.

On SQLite the rows of the review and self tables are appended (a key of random session ids
would cost every write a random page), each session's in one
run of ids that its session row names; council.storage.bias_summary_rows computes them. On
PostgreSQL the statements below compute them from the write's staging table and find a
session's rows by an index on the session id.

The report (council.storage.bias_sums) reads the summaries when they answer its query exactly
(every stored record counted, no filter cutting through a session, one scale, no bad review)
and the rows otherwise.
"""

from __future__ import annotations

from typing import Any

# Packs (score, position) into one number so that one MAX finds the top score with its
# highest position and one MIN (of position − score·M) the top score with its lowest
# position: the top is unique when the two agree. Exact for positions below M and scores
# that differ by more than (max position)/M, i.e. any real score scale.
PACK = 1 << 20
# Positions 0..MASK_BITS-1 fit a review's position mask exactly in a float sum (53-bit mantissa).
MASK_BITS = 53

SESSION_TABLE = "bias_session_sums"
REVIEW_TABLE = "bias_review_outcomes"
SELF_TABLE = "bias_self_sums"
POSITION_TABLE = "bias_position_sums"
ALL_TABLES = (SESSION_TABLE, REVIEW_TABLE, SELF_TABLE, POSITION_TABLE)
#: The position sums' key: a council's absence is a flag (a key column cannot be NULL).
POSITION_KEY = ("position", "reviewer_id", "has_council", "council_key")

#: Length units of the correlation's sums: column prefix → the records' column.
LENGTHS = {"words": "response_length_words", "chars": "response_length_chars"}
#: The sums of one unit, in the order the report's session rows carry them (after n).
LENGTH_SUMS = ("x", "y", "xx", "yy", "xy")
#: A session row's columns, in order (the last four: its rows' id runs in the review and
#: self tables, SQLite only).
SESSION_COLUMNS = (
    "session_id", "records", "answers", "ts_min", "ts_max", "ts_nulls", "council_min", "council_max",
    "council_nulls", "scale_min", "scale_max", "scale_uniform",
    *(f"{unit}_{s}" for unit in LENGTHS for s in ("n", *LENGTH_SUMS)),
    "reviews_from", "reviews_to", "selves_from", "selves_to",
)  # fmt: skip
REVIEW_COLUMNS = (
    "id", "session_id", "reviewer_id", "ts_min", "council_min", "k", "code", "total", "total_sq", "gap",
)  # fmt: skip
SELF_COLUMNS = ("id", "model_id", "session_id", "ts_min", "council_min", "own", "others", "gap")


def review_aggregates(score: str) -> dict[str, str]:
    """What a review's outcome is computed from, as aggregates over its records whose score is
    ``score`` (SQL): the report's pass over the rows and the summaries use these same
    expressions, so the two give the same outcomes."""
    return {
        "k": "COUNT(*)",
        "mask": f"TOTAL(CASE WHEN position BETWEEN 0 AND {MASK_BITS - 1} "
        f"THEN CAST(1 AS BIGINT) << CAST(position AS INTEGER) END)",
        "top": f"MAX({score})",
        "a": f"MAX({score} * {PACK} + position)",
        "b": f"MIN(position - {score} * {PACK})",
        "total": f"TOTAL({score})",
        "total_sq": f"TOTAL({score} * {score})",
    }


def mask_check(k: str, mask: str) -> str:
    """SQL: whether a review's positions are wrong, from its size and position mask; NULL for a
    review too big to tell this way (more than ``MASK_BITS`` answers).

    A review's positions are right when they are 0..k-1, each once: the sum of 2^position
    over its positions equals 2^k - 1 only then (k powers of two add up to a number with k
    one-bits only when no two are equal, and none may be k or more)."""
    return f"CASE WHEN {k} > {MASK_BITS} THEN NULL ELSE {mask} <> (CAST(1 AS BIGINT) << CAST({k} AS INTEGER)) - 1 END"


def review_code(k: str, scored: str, top: str, a: str, b: str, *, bad: str) -> str:
    """One review's outcome as one SQL integer, from its aggregates (:func:`review_aggregates`)
    and ``bad``, the SQL of its positions check (:func:`mask_check`, or an exact one): NULL
    when the check cannot tell, -1 bad, -2 left out of the top-position test (a tied top
    score, or an answer without a score), else the top-scored position."""
    usable = f"round({a} - {top} * {PACK}) = round({b} + {top} * {PACK}) AND {scored} = {k}"
    return (
        f"CASE WHEN ({bad}) IS NULL THEN NULL WHEN {bad} THEN -1 "
        f"WHEN {usable} THEN CAST(round({b} + {top} * {PACK}) AS INTEGER) ELSE -2 END"
    )


def create_statements(*, postgres: bool) -> list[str]:
    """The four tables (and on PostgreSQL the review and self rows' session index)."""
    whole, real = "BIGINT NOT NULL", "DOUBLE PRECISION NOT NULL"
    types = {"session_id": "TEXT NOT NULL", "reviewer_id": "TEXT NOT NULL", "model_id": "TEXT NOT NULL",
             "ts_min": "TEXT", "ts_max": "TEXT", "council_min": "TEXT", "council_max": "TEXT",
             "scale_min": "BIGINT", "scale_max": "BIGINT", "code": "BIGINT",
             "reviews_from": "BIGINT", "reviews_to": "BIGINT", "selves_from": "BIGINT", "selves_to": "BIGINT",
             "total": real, "total_sq": real, "own": real, "others": real,
             "gap": "DOUBLE PRECISION"}  # fmt: skip
    for unit in LENGTHS:
        types.update({f"{unit}_{s}": real for s in LENGTH_SUMS})

    def columns(names: tuple[str, ...]) -> str:
        return ", ".join(f"{c} {types.get(c, whole)}" for c in names)

    identity = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if postgres else "INTEGER PRIMARY KEY"
    no_rowid = "" if postgres else " WITHOUT ROWID"
    # PostgreSQL: session ids in code-point order, as the report lists them on both backends.
    session_key = 'session_id TEXT COLLATE "C" NOT NULL' if postgres else "session_id TEXT NOT NULL"
    statements = [
        f"CREATE TABLE {SESSION_TABLE} ({session_key}, {columns(SESSION_COLUMNS[1:])}, "
        f"PRIMARY KEY (session_id)){no_rowid}",
        f"CREATE TABLE {REVIEW_TABLE} (id {identity}, {columns(REVIEW_COLUMNS[1:])})",
        f"CREATE TABLE {SELF_TABLE} (id {identity}, {columns(SELF_COLUMNS[1:])})",
        f"CREATE TABLE {POSITION_TABLE} (position {whole}, reviewer_id TEXT NOT NULL, has_council {whole}, "
        f"council_key TEXT NOT NULL, n {whole}, total {real}, total_sq {real}, "
        f"PRIMARY KEY ({', '.join(POSITION_KEY)})){no_rowid}",
    ]
    if postgres:
        statements += [
            f"CREATE INDEX idx_{table}_session ON {table} (session_id)" for table in (REVIEW_TABLE, SELF_TABLE)
        ]
    return statements


def _answer_columns() -> str:
    lengths = ", ".join(f"AVG(CAST({column} AS DOUBLE PRECISION)) AS x_{unit}" for unit, column in LENGTHS.items())
    return (
        "session_id, model_id, COUNT(*) AS n, TOTAL(score_value) AS total, "
        f"{lengths}, TOTAL(self_review) AS self_n, TOTAL(self_review * score_value) AS self_total, "
        'MIN("timestamp") AS ts_min, MAX("timestamp") AS ts_max, COUNT(*) - COUNT("timestamp") AS ts_nulls, '
        "MIN(council) AS council_min, MAX(council) AS council_max, COUNT(*) - COUNT(council) AS council_nulls, "
        "COUNT(scale_min) AS scaled, MIN(scale_min) AS smin_lo, MAX(scale_min) AS smin_hi, "
        "MIN(scale_max) AS smax_lo, MAX(scale_max) AS smax_hi"
    )


def _session_columns() -> str:
    """A session's row from its answers (x the answer's mean length, y its mean score): the
    same sums, in the same order, as the report's pass over the rows (bias_sums._Answers)."""
    parts = [
        "session_id", "SUM(n)", "COUNT(*)",
        "MIN(ts_min)", "MAX(ts_max)", "SUM(ts_nulls)",
        "MIN(council_min)", "MAX(council_max)", "SUM(council_nulls)",
    ]  # fmt: skip
    one_scale = "(MIN(smin_lo) = MAX(smin_hi) AND MIN(smax_lo) = MAX(smax_hi))"
    parts += [
        f"CASE WHEN SUM(scaled) = SUM(n) AND {one_scale} THEN MIN(smin_lo) END",
        f"CASE WHEN SUM(scaled) = SUM(n) AND {one_scale} THEN MIN(smax_lo) END",
        f"CASE WHEN SUM(scaled) = 0 OR (SUM(scaled) = SUM(n) AND {one_scale}) THEN 1 ELSE 0 END",
    ]
    y = "(total / n)"
    for unit in LENGTHS:
        x = f"x_{unit}"
        parts += [
            f"COUNT({x})", f"TOTAL({x})", f"TOTAL(CASE WHEN {x} IS NOT NULL THEN {y} END)", f"TOTAL({x} * {x})",
            f"TOTAL(CASE WHEN {x} IS NOT NULL THEN {y} * {y} END)", f"TOTAL({x} * {y})",
        ]  # fmt: skip
    return ", ".join(parts)


def gap_columns(source: str) -> str:
    """SQL selecting, per review (session, reviewer) of ``source``'s records, its ``gap``: over
    its scores of answers it did not write that at least one other reviewer also scored
    (self-reviews left out on both sides), the mean of (its score − the mean of the other
    reviewers' scores of the answer); a review with none has no row. Calibration compares
    reviewers on these, and self-preference a reviewer's gap on its own answer with its gap here
    (docs/methods.md, "Reviewer calibration")."""
    others = (
        "SELECT session_id, model_id, COUNT(*) AS n, TOTAL(score_value) AS total "
        f"FROM (SELECT * FROM {source}) s WHERE COALESCE(self_review, 0) = 0 GROUP BY session_id, model_id"
    )
    return f"""SELECT r.session_id, r.reviewer_id,
                      TOTAL(r.score_value - (o.total - r.score_value) / (o.n - 1)) / COUNT(*) AS gap
               FROM (SELECT * FROM {source}) r
               JOIN ({others}) o ON o.session_id = r.session_id AND o.model_id = r.model_id
               WHERE COALESCE(r.self_review, 0) = 0 AND o.n >= 2
               GROUP BY r.session_id, r.reviewer_id"""


def fold_statements(source: str, *, replace: str | None = None) -> list[str]:
    """The summaries of every session in ``source`` (``bias_records``, or a write's staging
    table) computed from ``source``'s rows, each session's review and self rows inserted in
    one run of ids. ``replace``: SQL selecting the ``session_id`` of sessions whose rows go
    first (``source`` must then hold every record of them); otherwise none of them has rows
    yet but a placeholder session row (council.storage.bias_summaries.fold_staged), which the
    session's row replaces.

    The per-answer sums are a common table expression of each statement that reads them, not
    a temporary table: no statement here creates or drops anything (psycopg forgets every
    prepared statement of a connection when it sees a DROP)."""
    agg = review_aggregates("score_value")
    code = review_code("k", "k", "top", "a", "b", bad=mask_check("k", "mask"))
    statements = []
    if replace is not None:
        touched = f"session_id IN ({replace})"
        statements += [f"DELETE FROM {table} WHERE {touched}" for table in (SESSION_TABLE, REVIEW_TABLE, SELF_TABLE)]
    answers = f"WITH a AS (SELECT {_answer_columns()} FROM {source} GROUP BY session_id, model_id)"
    session_columns = SESSION_COLUMNS[:-4]
    replaced = ", ".join(f"{c} = excluded.{c}" for c in session_columns[1:])
    gaps = gap_columns(source)
    statements += [
        f"""INSERT INTO {REVIEW_TABLE} ({", ".join(REVIEW_COLUMNS[1:])})
            SELECT r.session_id, r.reviewer_id, ts_min, council_min, k, {code}, total, total_sq,
                   g.gap
            FROM (SELECT session_id, reviewer_id, MIN("timestamp") AS ts_min, MIN(council) AS council_min,
                         {", ".join(f"{sql} AS {name}" for name, sql in agg.items())}
                  FROM {source} GROUP BY session_id, reviewer_id) r
            LEFT JOIN ({gaps}) g ON g.session_id = r.session_id AND g.reviewer_id = r.reviewer_id
            ORDER BY r.session_id, r.reviewer_id""",
        # WHERE TRUE: an upsert's SELECT needs a WHERE for SQLite to parse it.
        f"{answers} INSERT INTO {SESSION_TABLE} ({', '.join(session_columns)}) "
        f"SELECT {_session_columns()} FROM a WHERE TRUE GROUP BY session_id "
        f"ON CONFLICT (session_id) DO UPDATE SET {replaced}",
        # d = own score − mean of the other reviewers' scores, and the reviewer's gaps on the
        # session's other answers (the report's pass over the rows computes the same, bias_sums._Answers).
        f"""{answers} INSERT INTO {SELF_TABLE} ({", ".join(SELF_COLUMNS[1:])})
            SELECT a.model_id, a.session_id, a.ts_min, a.council_min, a.self_total,
                   (a.total - a.self_total) / (a.n - a.self_n), g.gap
            FROM a LEFT JOIN ({gaps}) g ON g.session_id = a.session_id AND g.reviewer_id = a.model_id
            WHERE a.self_n = 1 AND a.n > 1 ORDER BY a.session_id, a.model_id""",
    ]
    return statements


def fold_staged(conn: Any, staged: str) -> None:
    """PostgreSQL: the summaries of every session with a record in the staging table
    ``staged`` (this write's rows, already inserted into ``bias_records``) recomputed inside
    the write's transaction, and the staged scores added to the position sums.

    Writers run at once, so each first takes its sessions' summary rows (inserting a
    placeholder for a new one, in key order so two writers never wait on each other in a
    circle): a second writer of the same session waits until the first commits, then reads
    the rows it added. When none of the sessions was summarized yet (the usual case: a
    session's records are written at once) they are computed from the staged rows alone;
    otherwise from all of their records."""
    taken = conn.execute(_take_sessions(staged)).fetchall()  # the store's connections return dicts
    stored = any(row["records"] >= 0 for row in taken)
    if stored:
        sessions = f"SELECT session_id FROM {staged}"
        statements = fold_statements(f"bias_records WHERE session_id IN ({sessions})", replace=sessions)
    else:
        statements = fold_statements(staged)
    for statement in [*statements, add_positions(staged)]:
        conn.execute(statement)


def _take_sessions(staged: str) -> str:
    """PostgreSQL: lock the summary rows of ``staged``'s sessions, with a placeholder (records =
    -1, seen by no other transaction) for a session not summarized yet; returns their records."""
    zero = [c for c in SESSION_COLUMNS[2:-4] if c.endswith(("_nulls", "_uniform", "answers")) or c.startswith(
        tuple(f"{unit}_" for unit in LENGTHS))]  # fmt: skip
    return (
        f"INSERT INTO {SESSION_TABLE} (session_id, records, {', '.join(zero)}) "
        f"SELECT DISTINCT session_id, -1, {', '.join('0' for _ in zero)} FROM {staged} ORDER BY session_id "
        f"ON CONFLICT (session_id) DO UPDATE SET records = {SESSION_TABLE}.records RETURNING records"
    )


def _position_upsert(rows: str) -> str:
    keys = ", ".join(POSITION_KEY)
    return (
        f"INSERT INTO {POSITION_TABLE} ({keys}, n, total, total_sq) {rows} "
        f"ON CONFLICT ({keys}) DO UPDATE SET n = {POSITION_TABLE}.n + excluded.n, "
        f"total = {POSITION_TABLE}.total + excluded.total, total_sq = {POSITION_TABLE}.total_sq + excluded.total_sq"
    )


def add_positions(source: str) -> str:
    """An upsert adding the scores of ``source``'s records (only ever new ones: records are
    never changed) to the position sums, per (position, reviewer, council)."""
    where = "" if " WHERE " in f" {source} ".upper() else " WHERE TRUE"  # an upsert's SELECT needs one
    return _position_upsert(
        "SELECT position, reviewer_id, CASE WHEN council IS NULL THEN 0 ELSE 1 END, COALESCE(council, ''), "
        f"COUNT(*), TOTAL(score_value), TOTAL(score_value * score_value) FROM {source}{where} GROUP BY 1, 2, 3, 4"
    )


#: The same upsert for one key's sums computed elsewhere (council.storage.bias_summary_rows).
ADD_POSITION_SUMS = _position_upsert(f"VALUES ({', '.join('?' for _ in range(len(POSITION_KEY) + 3))})")


def rebuild_statements(*, postgres: bool) -> list[str]:
    """The summaries emptied and computed again from every stored record (m020, a store
    copy); on SQLite each session row names its run of review and self rows."""
    statements = [
        *(f"DELETE FROM {table}" for table in ALL_TABLES),
        *fold_statements("bias_records"),
        add_positions("bias_records"),
    ]
    if not postgres:
        for table, first, last in (
            (REVIEW_TABLE, "reviews_from", "reviews_to"),
            (SELF_TABLE, "selves_from", "selves_to"),
        ):
            statements.append(
                f"UPDATE {SESSION_TABLE} SET {first} = runs.lo, {last} = runs.hi "
                f"FROM (SELECT session_id, MIN(id) AS lo, MAX(id) AS hi FROM {table} GROUP BY session_id) runs "
                f"WHERE {SESSION_TABLE}.session_id = runs.session_id"
            )
    return statements


def migration(*, postgres: bool) -> list[str]:
    """m020 on either backend: the tables, computed from the rows already stored; m019's
    per-review sums and the position index, which they replace, dropped."""
    return [
        *create_statements(postgres=postgres),
        *rebuild_statements(postgres=postgres),
        "DROP TABLE IF EXISTS bias_review_sums",
        "DROP INDEX IF EXISTS idx_bias_records_position_score_value",
    ]


def gap_migration(*, postgres: bool) -> list[str]:
    """m023 on either backend: the tables made again with the reviews' and self-reviewed
    answers' gaps to the other reviewers (:func:`gap_columns`), computed from the rows stored."""
    return [*(f"DROP TABLE IF EXISTS {table}" for table in ALL_TABLES), *migration(postgres=postgres)]


#: m019 as it shipped (frozen): per-review sums kept by an additive upsert, dropped by m020.
M019 = [
    'CREATE TABLE bias_review_sums (session_id TEXT, reviewer_id TEXT, "timestamp" TEXT, council TEXT, '
    "scale_min BIGINT, scale_max BIGINT, k BIGINT NOT NULL, mask DOUBLE PRECISION NOT NULL, "
    "top DOUBLE PRECISION NOT NULL, a DOUBLE PRECISION NOT NULL, b DOUBLE PRECISION NOT NULL, "
    "total DOUBLE PRECISION NOT NULL, total_sq DOUBLE PRECISION NOT NULL)",
    "CREATE UNIQUE INDEX idx_bias_review_sums_key ON bias_review_sums "
    '(session_id, reviewer_id, "timestamp", council, scale_min, scale_max)',
    "DELETE FROM bias_review_sums",
    'INSERT INTO bias_review_sums (session_id, reviewer_id, "timestamp", council, scale_min, scale_max, k, mask, '
    'top, a, b, total, total_sq) SELECT session_id, reviewer_id, "timestamp", council, scale_min, scale_max, '
    "COUNT(*), TOTAL(CASE WHEN position BETWEEN 0 AND 52 THEN CAST(1 AS BIGINT) << CAST(position AS INTEGER) END), "
    "MAX(score_value), MAX(score_value * 1048576 + position), MIN(position - score_value * 1048576), "
    "TOTAL(score_value), TOTAL(score_value * score_value) FROM bias_records WHERE TRUE "
    'GROUP BY session_id, reviewer_id, "timestamp", council, scale_min, scale_max '
    'ON CONFLICT (session_id, reviewer_id, "timestamp", council, scale_min, scale_max) DO UPDATE SET '
    "k = bias_review_sums.k + excluded.k, mask = bias_review_sums.mask + excluded.mask, "
    "top = CASE WHEN excluded.top IS NULL OR bias_review_sums.top >= excluded.top THEN bias_review_sums.top "
    "ELSE excluded.top END, "
    "a = CASE WHEN excluded.a IS NULL OR bias_review_sums.a >= excluded.a THEN bias_review_sums.a "
    "ELSE excluded.a END, "
    "b = CASE WHEN excluded.b IS NULL OR bias_review_sums.b <= excluded.b THEN bias_review_sums.b "
    "ELSE excluded.b END, "
    "total = bias_review_sums.total + excluded.total, total_sq = bias_review_sums.total_sq + excluded.total_sq",
    "DROP INDEX IF EXISTS idx_bias_records_review",
    "DROP INDEX IF EXISTS idx_bias_records_scale",
]

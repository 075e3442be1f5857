"""The bias report's queries over ``bias_records``: per-group sums, read in one snapshot.

Every statistic is reduced to per-group sums (n, Σx, Σx², Σxy) by ``GROUP BY`` queries
that the covering indexes answer without touching the table (migrations m002, m005);
council.bias combines the groups into the report. Records from files are loaded into an
in-memory store with the same schema and go through the same queries: one code path.

Checks that one record alone cannot show are made here too (docs/methods.md,
"Record validation"): rows listed invalid by migration m005, and reviews — the records of one
(session, reviewer) — whose positions are not one answer per position. The per-review
pass is one ``GROUP BY`` over the review index that also yields the top-position test,
so the check costs no extra pass unless it finds something.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from council.storage.data import MAX_MESSAGES, BadRecords, BiasQuery, BiasSums

# The statements below are written so PostgreSQL runs them too (council.storage.postgres
# translates the few SQLite words): TRUE rather than 1, every subquery named.

if TYPE_CHECKING:
    from council.storage.sqlite import Database
    from council.storage.sqlite_store import SQLiteStore

INVALID_TABLE = "bias_records_invalid"
UNSCORED_TABLE = "temp.bias_unscored"

# Packs (score, position) into one number so that one MAX finds the top score with
# its highest position and one MIN (of position − score·M) the top score with its
# lowest position: the top is unique when the two agree. Exact for positions below M
# and scores that differ by more than (max position)/M, i.e. any real score scale.
PACK = 1 << 20


class _Filter:
    """WHERE clauses: ``base`` = since + council; ``full`` adds the reviewer filter."""

    def __init__(self, since: str | None, reviewers: Sequence[str], council: str | None) -> None:
        self.reviewers = list(reviewers)
        self.since, self.council = since, council
        base: list[str] = []
        self.base_params: list[Any] = []
        if since:
            base.append("timestamp >= ?")
            self.base_params.append(since)
        if council:
            base.append("council = ?")
            self.base_params.append(council)
        full = list(base)
        self.full_params = list(self.base_params)
        if reviewers:
            full.append(f"reviewer_id IN ({', '.join('?' for _ in reviewers)})")
            self.full_params.extend(reviewers)
        self.base = " AND ".join(base) or "TRUE"
        self.full = " AND ".join(full) or "TRUE"

    def exclude(self, clause: str) -> None:
        """Leave out records matching nothing in ``clause`` (bad rows and reviews) everywhere."""
        if clause:
            self.base = f"{self.base} AND {clause}"
            self.full = f"{self.full} AND {clause}"

    def unscored_where(self) -> str:
        """The base filter without the exclusion clauses (the unscored table has no ``id`` to match)."""
        parts = []
        if self.since:
            parts.append("timestamp >= ?")
        if self.council:
            parts.append("council = ?")
        return " AND ".join(parts) or "TRUE"


def _score_expr(normalize: bool, reference: tuple[int, int]) -> str:
    """The score as SQL: raw, or rescaled to the reference scale when records use different scales."""
    if not normalize:
        return "score_value"
    lo, hi = reference
    smin, smax = f"COALESCE(scale_min, {lo})", f"COALESCE(scale_max, {hi})"
    return f"({lo}.0 + {hi - lo}.0 * (score_value - {smin}) / ({smax} - {smin}))"


def _scales(db: Database, f: _Filter) -> list[tuple[int | None, int | None]]:
    sql = f"SELECT DISTINCT scale_min, scale_max FROM bias_records WHERE {f.base}"
    return [(r[0], r[1]) for r in db.execute(sql, f.base_params).fetchall()]


def _reviewer_sums(db: Database, f: _Filter, s: str) -> dict[str, tuple[int, float, float]]:
    sql = f"""SELECT reviewer_id, COUNT(*), TOTAL({s}), TOTAL({s} * {s})
              FROM bias_records WHERE {f.base} GROUP BY reviewer_id"""
    return {r[0]: (r[1], r[2], r[3]) for r in db.execute(sql, f.base_params)}


def _position_sums(db: Database, f: _Filter, s: str) -> dict[int, tuple[int, float, float]]:
    sql = f"""SELECT position, COUNT(*), TOTAL({s}), TOTAL({s} * {s})
              FROM bias_records WHERE {f.full} GROUP BY position ORDER BY position"""
    return {r[0]: (r[1], r[2], r[3]) for r in db.execute(sql, f.full_params)}


class _AnswerTable:
    """A temporary table with one row per answer (session, model), from one index pass.

    Columns: ``n``/``total`` over all reviewers (base filter), ``fn``/``ftotal`` over
    the selected reviewers, ``x`` the response length, ``self_n``/``self_total`` the
    self-review scores. It feeds the per-session length correlation, the
    self-preference and the scatter points.
    """

    def __init__(self, db: Database, f: _Filter, s: str, length_column: str) -> None:
        self.db = db
        self.name = f"temp.bias_answers_{secrets.token_hex(6)}"
        self.reviewers = f.reviewers
        params: list[Any] = []
        selected = ""
        if f.reviewers:
            chosen = f"reviewer_id IN ({', '.join('?' for _ in f.reviewers)})"
            selected = (
                f"COUNT(CASE WHEN {chosen} THEN 1 END) AS fn, TOTAL(CASE WHEN {chosen} THEN {s} END) AS ftotal,"
            )
            params += [*f.reviewers, *f.reviewers]
            self.fn, self.ftotal = "fn", "ftotal"
        else:  # every reviewer is selected: the same columns
            self.fn, self.ftotal = "n", "total"
        # Keyed by (session, model) without a rowid: the rows arrive in key order from the
        # covering index, so the per-session pass below reads them in order instead of sorting.
        db.execute(
            f"""CREATE TABLE {self.name} (session_id, model_id, n, total, {"fn, ftotal, " if selected else ""}
                x, self_n, self_total, PRIMARY KEY (session_id, model_id)) WITHOUT ROWID"""
        )
        db.execute(
            f"""INSERT INTO {self.name}
                SELECT session_id, model_id, COUNT(*) AS n, TOTAL({s}) AS total, {selected}
                       AVG({length_column}) AS x, TOTAL(self_review) AS self_n,
                       TOTAL(self_review * {s}) AS self_total
                FROM bias_records WHERE {f.base} AND session_id IS NOT NULL AND model_id IS NOT NULL
                GROUP BY session_id, model_id""",
            [*params, *f.base_params],
        )

    def drop(self) -> None:
        self.db.execute(f"DROP TABLE IF EXISTS {self.name}")

    def session_sums(self) -> list[Any]:
        """Per session: answers, records, then over the answers with a length: n, Σx, Σy, Σx², Σy², Σxy;
        x = length, y = mean score received."""
        fn, ftotal = self.fn, self.ftotal
        sql = f"""SELECT COUNT(*), SUM({fn}), COUNT(x), TOTAL(x), TOTAL(CASE WHEN x IS NOT NULL THEN y END),
                         TOTAL(x * x), TOTAL(CASE WHEN x IS NOT NULL THEN y * y END), TOTAL(x * y)
                  FROM (SELECT session_id, {fn}, x, {ftotal} / {fn} AS y FROM {self.name} WHERE {fn} > 0) a
                  GROUP BY session_id"""
        return self.db.execute(sql).fetchall()

    def points(self, limit: int) -> list[tuple[float, float]]:
        # The first ``limit`` answers in (session id, model) order: session ids are
        # random UUIDs, so an arbitrary subset.
        fn, ftotal = self.fn, self.ftotal
        sql = f"""SELECT x, {ftotal} / {fn} FROM {self.name} WHERE {fn} > 0 AND x IS NOT NULL
                  ORDER BY session_id, model_id LIMIT ?"""
        return [(float(x), float(y)) for x, y in self.db.execute(sql, [limit])]

    def self_preference(self) -> dict[str, tuple[int, float, float, float, float]]:
        """reviewer → (n, Σself, Σothers, Σd, Σd²), d = own score − mean of the others' scores.

        In a self-review the reviewer and the answer are the same model, so the
        reviewer is the answer's ``model_id``. The reviewer filter selects whose
        self-scores count; the others' scores are everyone else's."""
        where, params = "self_n = 1 AND n > 1", []
        if self.reviewers:
            where += f" AND model_id IN ({', '.join('?' for _ in self.reviewers)})"
            params = list(self.reviewers)
        sql = f"""SELECT model_id, COUNT(*), TOTAL(own), TOTAL(others), TOTAL(own - others),
                         TOTAL((own - others) * (own - others))
                  FROM (SELECT model_id, self_total AS own, (total - self_total) / (n - self_n) AS others
                        FROM {self.name} WHERE {where}) a
                  GROUP BY model_id"""
        return {r[0]: tuple(r[1:]) for r in self.db.execute(sql, params)}  # type: ignore[misc]


class Reviews:
    """The per-review pass: one ``GROUP BY (session, reviewer)`` over the records matching
    ``where`` (plus the unscored records, which occupy a position without a score), leaving
    out the invalid rows when ``skip_rows``.

    :meth:`scan` streams it once and returns both the top-position counts and the number
    of bad reviews; only when there are bad reviews does :meth:`bad` list them (a second
    pass, on the rare path). ``s`` is the SQL score expression (raw or rescaled)."""

    def __init__(
        self, db: Database, where: str, params: Sequence[Any], s: str, *, skip_rows: bool, unscored: bool = False
    ) -> None:
        self.db = db
        source = f"SELECT id, session_id, reviewer_id, position, {s} AS score FROM bias_records WHERE {where}"
        source_params = list(params)
        if skip_rows:
            source += f" AND id NOT IN (SELECT id FROM {INVALID_TABLE})"
        if unscored:
            source += (
                f" UNION ALL SELECT id, session_id, reviewer_id, position, NULL FROM {UNSCORED_TABLE} WHERE {where}"
            )
            source_params += list(params)
        self.source, self.source_params = source, source_params
        self.bad_count = 0

    def _grouped(self, excluded: str | None) -> tuple[str, list[Any]]:
        m = PACK
        skip = ""
        if excluded:
            skip = (
                f"WHERE NOT EXISTS (SELECT 1 FROM {excluded} e WHERE e.session_id = r.session_id "
                f"AND e.reviewer_id = r.reviewer_id)"
            )
        sql = f"""SELECT r.reviewer_id, COUNT(*) AS k, COUNT(score) AS scored, MIN(position) AS lo,
                         MAX(position) AS hi, COUNT(DISTINCT position) AS distinct_n, MAX(score) AS top,
                         MAX(score * {m} + position) AS a, MIN(position - score * {m}) AS b
                  FROM ({self.source}) r {skip} GROUP BY r.session_id, r.reviewer_id"""
        return sql, list(self.source_params)

    def scan(
        self, reviewers: Sequence[str], excluded: str | None = None
    ) -> tuple[int, int, dict[int, list[int]]]:
        """(reviews, reviews left out, review size k → counts of the top-scored position), and
        ``bad_count`` set to the number of bad reviews (over every reviewer).

        Only the selected reviewers' valid reviews with a score count. A review is left out
        of the test when its top score is tied or not every answer in it has a score."""
        m = PACK
        grouped, params = self._grouped(excluded)
        selected = "TRUE"
        if reviewers:
            selected = f"reviewer_id IN ({', '.join('?' for _ in reviewers)})"
            params += list(reviewers)
        sql = f"""
            SELECT lo < 0 OR hi >= k OR distinct_n < k AS bad, {selected} AND scored > 0 AS counted, k,
                   CAST(round(b + top * {m}) AS INTEGER) AS pos,
                   round(a - top * {m}) = round(b + top * {m}) AND scored = k AS usable, COUNT(*)
            FROM ({grouped}) g GROUP BY 1, 2, 3, 4, 5"""
        reviews = left_out = self.bad_count = 0
        tables: dict[int, list[int]] = {}
        for bad, counted, k, pos, usable, count in self.db.execute(sql, params):
            if bad:
                self.bad_count += count
                continue
            if not counted:
                continue
            reviews += count
            if not usable:
                left_out += count
                continue
            tables.setdefault(k, [0] * k)[pos] += count
        return reviews, left_out, tables

    def bad(self) -> list[tuple[str, str]]:
        sql = f"""SELECT session_id, reviewer_id FROM ({self.source}) r GROUP BY session_id, reviewer_id
                  HAVING MIN(position) < 0 OR MAX(position) >= COUNT(*) OR COUNT(DISTINCT position) < COUNT(*)"""
        return [(s, r) for s, r in self.db.execute(sql, self.source_params)]

    def positions(self, session: str, reviewer: str) -> list[tuple[int, int]]:
        sql = f"SELECT position, id FROM ({self.source}) r WHERE session_id = ? AND reviewer_id = ?"
        return [(p, i) for p, i in self.db.execute(sql, [*self.source_params, session, reviewer])]


def _find_bad(db: Database, f: _Filter, reviews: Reviews) -> BadRecords:
    """The listed invalid rows and (when :meth:`Reviews.scan` counted any) the bad reviews."""
    found = BadRecords()
    sql = f"""SELECT id, session_id, reviewer_id, (SELECT problem FROM {INVALID_TABLE} i WHERE i.id = bias_records.id)
              FROM bias_records WHERE id IN (SELECT id FROM {INVALID_TABLE}) AND {f.base} ORDER BY id"""
    for rid, session, reviewer, problem in db.execute(sql, f.base_params):
        found.rows.append(rid)
        if len(found.row_details) < MAX_MESSAGES:
            found.row_details.append((rid, problem, session, reviewer))
    found.reviews = reviews.bad() if reviews.bad_count else []
    for key in found.reviews[:MAX_MESSAGES]:
        found.review_positions[key] = reviews.positions(*key)
    return found


def _has_invalid_rows(db: Database) -> bool:
    return db.execute(f"SELECT EXISTS (SELECT 1 FROM {INVALID_TABLE})").fetchone()[0] == 1


def _exclusion(db: Database, bad: BadRecords) -> tuple[str, str | None]:
    """A WHERE clause leaving out the bad rows and reviews, and the temp table of bad reviews."""
    clauses, table = [], None
    if bad.rows:
        clauses.append(f"id NOT IN (SELECT id FROM {INVALID_TABLE})")
    if bad.reviews:
        table = f"temp.bias_bad_reviews_{secrets.token_hex(4)}"
        db.execute(f"CREATE TABLE {table} (session_id, reviewer_id, PRIMARY KEY (session_id, reviewer_id))")
        db.conn.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?, ?)", bad.reviews)
        clauses.append(
            f"NOT EXISTS (SELECT 1 FROM {table} e WHERE e.session_id = bias_records.session_id "
            f"AND e.reviewer_id = bias_records.reviewer_id)"
        )
    return " AND ".join(clauses), table


def _count(db: Database, f: _Filter) -> int:
    return db.execute(f"SELECT COUNT(*) FROM bias_records WHERE {f.base}", f.base_params).fetchone()[0]


def sum_bias_records(store: SQLiteStore, query: BiasQuery) -> BiasSums:
    """Every sum of the bias report (:class:`BiasSums`), in one read snapshot (with the
    records without a score, when the store was loaded from files that had some)."""
    db = store.db
    unscored = store._unscored
    f = _Filter(query.since, query.reviewers, query.council)
    out = BiasSums()
    conn = db.conn
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")  # one read snapshot for every query below
    answers: _AnswerTable | None = None
    try:
        out.scales = _scales(db, f)
        lo_ref, hi_ref = query.reference_scale  # records without a scale are taken to be on it
        effective = {(lo if lo is not None else lo_ref, hi if hi is not None else hi_ref) for lo, hi in out.scales}
        out.normalized = len(effective) > 1
        s = _score_expr(out.normalized, query.reference_scale)
        # One pass per review: the positions check and the top-position test together.
        reviews = Reviews(db, f.base, f.base_params, s, skip_rows=_has_invalid_rows(db), unscored=unscored)
        out.orderings, out.left_out, out.top_positions = reviews.scan(f.reviewers)
        out.bad = _find_bad(db, f, reviews)
        if out.bad and not query.skip_bad:
            return out
        if out.bad:
            before = _count(db, f)
            clause, excluded_reviews = _exclusion(db, out.bad)
            f.exclude(clause)
            out.skipped_records = before - _count(db, f)
            if excluded_reviews:
                out.orderings, out.left_out, out.top_positions = reviews.scan(f.reviewers, excluded_reviews)
        if unscored:
            out.unscored = db.execute(
                f"SELECT COUNT(*) FROM {UNSCORED_TABLE} WHERE {f.unscored_where()}", f.base_params
            ).fetchone()[0]
        out.reviewers = _reviewer_sums(db, f, s)
        out.positions = _position_sums(db, f, s)
        out.length_unit = query.length_unit or "words"
        answers = _AnswerTable(db, f, s, f"response_length_{out.length_unit}")
        out.sessions = answers.session_sums()
        if query.length_unit is None and out.sessions and not any(row[2] for row in out.sessions):
            answers.drop()  # no word count anywhere: characters, which every record has
            out.length_unit = "chars"
            answers = _AnswerTable(db, f, s, "response_length_chars")
            out.sessions = answers.session_sums()
        out.self_preference = answers.self_preference()
        out.points = answers.points(query.max_points) if query.max_points > 0 else []
    finally:
        if answers is not None:
            answers.drop()
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
    return out

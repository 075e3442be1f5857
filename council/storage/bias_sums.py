"""The bias report's queries over ``bias_records``: per-group sums, read in one snapshot.

Every statistic is reduced to per-group sums (n, Σx, Σx², Σxy) by ``GROUP BY`` queries
that covering indexes answer without touching the table (council.storage.bias_rows.INDEXES);
council.bias combines the groups into the report. The rows are read in two passes, per
review and per answer, plus the narrow position index; everything else is
computed from the groups those passes return. The per-review pass reads the review sums kept
as records are written (council.storage.bias_summaries: one row per review instead of one per
record) whenever they answer the query exactly, and the rows otherwise. Records from files
are loaded into an in-memory store with the same schema and go through the same queries:
one code path.

Checks that one record alone cannot show are made here too (docs/methods.md,
"Record validation"): rows listed invalid by migration m005, and reviews — the records of one
(session, reviewer) — whose positions are not one answer per position. The per-review
pass is one ``GROUP BY`` that also yields the top-position test and the reviewers' sums, so
the check costs no extra pass unless it finds something.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from council.storage.bias_summaries import MASK_BITS, PACK, REVIEW_TABLE, review_aggregates
from council.storage.data import MAX_MESSAGES, BadRecords, BiasQuery, BiasSums
from council.storage.second_reader import Background, open_in_snapshot

# The statements below are written so PostgreSQL runs them too (council.storage.postgres
# translates the few SQLite words): TRUE rather than 1, every subquery named.

if TYPE_CHECKING:
    from council.storage.sqlite import Database
    from council.storage.sqlite_store import SQLiteStore

INVALID_TABLE = "bias_records_invalid"
UNSCORED_TABLE = "temp.bias_unscored"


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


def _scales(db: Database, f: _Filter, table: str) -> list[tuple[int | None, int | None]]:
    sql = f"SELECT DISTINCT scale_min, scale_max FROM {table} WHERE {f.base}"
    return [(r[0], r[1]) for r in db.execute(sql, f.base_params).fetchall()]


def _position_sums(db: Database, f: _Filter, s: str) -> dict[int, tuple[int, float, float]]:
    sql = f"""SELECT position, COUNT(*), TOTAL({s}), TOTAL({s} * {s})
              FROM bias_records WHERE {f.full} GROUP BY position ORDER BY position"""
    return {r[0]: (r[1], r[2], r[3]) for r in db.execute(sql, f.full_params)}


class _Answers:
    """The per-answer pass: one ``GROUP BY (session, model)`` over the answer index, kept as
    one materialized table inside a single statement that reads it three ways: the
    per-session sums of the length correlation, the self-preference per model and the first
    scatter points. Columns of an answer: ``n``/``total`` over all reviewers (base filter),
    ``fn``/``ftotal`` over the selected reviewers, ``x`` the response length,
    ``self_n``/``self_total`` the self-review scores."""

    def __init__(self, db: Database, f: _Filter, s: str, length_column: str, max_points: int) -> None:
        params: list[Any] = []
        selected = ""
        if f.reviewers:
            chosen = f"reviewer_id IN ({', '.join('?' for _ in f.reviewers)})"
            selected = (
                f"COUNT(CASE WHEN {chosen} THEN 1 END) AS fn, TOTAL(CASE WHEN {chosen} THEN {s} END) AS ftotal,"
            )
            params += [*f.reviewers, *f.reviewers]
            fn, ftotal = "fn", "ftotal"
        else:  # every reviewer is selected: the same columns
            fn, ftotal = "n", "total"
        params += f.base_params
        # In a self-review the reviewer and the answer are the same model, so the reviewer is
        # the answer's ``model_id``. The reviewer filter selects whose self-scores count; the
        # others' scores are everyone else's. d = own score − mean of the others' scores.
        own_where = "self_n = 1 AND n > 1"
        if f.reviewers:
            own_where += f" AND model_id IN ({', '.join('?' for _ in f.reviewers)})"
            params += list(f.reviewers)
        # Session sums, x = length, y = mean score received: answers, records, then over the
        # answers with a length n, Σx, Σy, Σx², Σy², Σxy. Points: the first answers in (session
        # id, model) order; session ids are random UUIDs, so an arbitrary subset.
        sql = f"""
            WITH a AS MATERIALIZED (
                SELECT session_id, model_id, COUNT(*) AS n, TOTAL({s}) AS total, {selected}
                       AVG({length_column}) AS x, TOTAL(self_review) AS self_n, TOTAL(self_review * {s}) AS self_total
                FROM bias_records WHERE {f.base} AND session_id IS NOT NULL AND model_id IS NOT NULL
                GROUP BY session_id, model_id)
            SELECT 0, NULL, COUNT(*), SUM({fn}), COUNT(x), TOTAL(x), TOTAL(CASE WHEN x IS NOT NULL THEN y END),
                   TOTAL(x * x), TOTAL(CASE WHEN x IS NOT NULL THEN y * y END), TOTAL(x * y)
            FROM (SELECT session_id, {fn}, x, {ftotal} / {fn} AS y FROM a WHERE {fn} > 0) p GROUP BY session_id
            UNION ALL
            SELECT 1, model_id, COUNT(*), TOTAL(own), TOTAL(others), TOTAL(own - others),
                   TOTAL((own - others) * (own - others)), NULL, NULL, NULL
            FROM (SELECT model_id, self_total AS own, (total - self_total) / (n - self_n) AS others
                  FROM a WHERE {own_where}) o GROUP BY model_id
            UNION ALL
            SELECT 2, NULL, x, y, NULL, NULL, NULL, NULL, NULL, NULL
            FROM (SELECT x, {ftotal} / {fn} AS y FROM a WHERE {fn} > 0 AND x IS NOT NULL
                  ORDER BY session_id, model_id LIMIT ?) q"""
        params.append(max(0, max_points))
        self.sessions: list[Any] = []
        self.self_preference: dict[str, tuple[int, float, float, float, float]] = {}
        self.points: list[tuple[float, float]] = []
        for part, model, *v in db.execute(sql, params).fetchall():
            if part == 0:
                self.sessions.append((int(v[0]), int(v[1]), int(v[2]), *v[3:]))
            elif part == 1:
                self.self_preference[model] = (int(v[0]), v[1], v[2], v[3], v[4])
            else:
                self.points.append((float(v[0]), float(v[1])))


class Reviews:
    """The per-review pass: one ``GROUP BY (session, reviewer)`` over the records matching
    ``where`` (plus the unscored records, which occupy a position without a score), leaving
    out the invalid rows when ``skip_rows``.

    :meth:`scan` streams it once and returns the top-position counts, the number of bad
    reviews and every reviewer's sums (so no other pass reads the rows by reviewer); only
    when there are bad reviews does :meth:`bad` list them (a second pass, on the rare path).
    ``s`` is the SQL score expression (raw or rescaled)."""

    def __init__(
        self,
        db: Database,
        where: str,
        params: Sequence[Any],
        s: str,
        *,
        skip_rows: bool,
        unscored: bool = False,
        summaries: bool = False,
    ) -> None:
        self.db = db
        self.where, self.summaries = where, summaries
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
        self.unscored = unscored
        self.needs_rows = False
        self.bad_count = 0
        self.reviewer_sums: dict[str, tuple[int, float, float]] = {}

    def _grouped(self, excluded: str | None, exact: bool) -> tuple[str, list[Any]]:
        """Per review: its size k, what the positions check needs, the packed top scores, the sums.

        A review's positions are right when they are 0..k-1, each once. Fast form: the sum of
        2^position over its positions 0..52 equals 2^k - 1 only then (k powers of two add up
        to a number with k one-bits only when no two are equal, and none may be k or more);
        ``exact`` (reviews of more than 53 answers) counts the distinct positions instead.
        From the summaries (``summaries``, never ``exact``): the same columns, added up."""
        if self.summaries:
            sql = f"""SELECT reviewer_id, CAST(SUM(k) AS BIGINT) AS k, TOTAL(mask) AS mask, MAX(top) AS top,
                             MAX(a) AS a, MIN(b) AS b, TOTAL(total) AS total, TOTAL(total_sq) AS total_sq
                      FROM {REVIEW_TABLE} WHERE {self.where} GROUP BY session_id, reviewer_id"""
            return sql, list(self.source_params)
        skip = ""
        if excluded:
            skip = (
                f"WHERE NOT EXISTS (SELECT 1 FROM {excluded} e WHERE e.session_id = r.session_id "
                f"AND e.reviewer_id = r.reviewer_id)"
            )
        agg = review_aggregates("score")  # the summaries' own expressions, over these rows
        if exact:
            check = "MIN(position) AS lo, MAX(position) AS hi, COUNT(DISTINCT position) AS distinct_n"
        else:
            check = f"{agg['mask']} AS mask"
        # Without unscored records every record has a score: k counts them, with no second count.
        scored = "COUNT(score) AS scored," if self.unscored else ""
        sql = f"""SELECT r.reviewer_id, {agg["k"]} AS k, {scored} {check}, {agg["top"]} AS top,
                         {agg["a"]} AS a, {agg["b"]} AS b, {agg["total"]} AS total, {agg["total_sq"]} AS total_sq
                  FROM ({self.source}) r {skip} GROUP BY r.session_id, r.reviewer_id"""
        return sql, list(self.source_params)

    def scan(
        self, reviewers: Sequence[str], excluded: str | None = None, *, exact: bool = False
    ) -> tuple[int, int, dict[int, list[int]]]:
        """(reviews, reviews left out, review size k → counts of the top-scored position), and
        ``bad_count`` set to the number of bad reviews (over every reviewer), ``reviewer_sums``
        to every reviewer's (n, Σs, Σs²) over the good reviews.

        Only the selected reviewers' valid reviews with a score count. A review is left out
        of the test when its top score is tied or not every answer in it has a score."""
        m = PACK
        grouped, params = self._grouped(excluded, exact)
        if exact:
            bad = "lo < 0 OR hi >= k OR distinct_n < k"
        else:  # NULL: too big a review for the fast check
            bad = (
                f"CASE WHEN k > {MASK_BITS} THEN NULL "
                f"WHEN mask = (CAST(1 AS BIGINT) << CAST(k AS INTEGER)) - 1 THEN FALSE ELSE TRUE END"
            )
        scored = "scored" if self.unscored else "k"
        # One code per review instead of four grouping columns (a third less to sort): NULL too
        # big for the fast check, -1 bad, -2 left out of the test (a tied top score, or an
        # answer without a score), else the top-scored position. Which reviewers are selected
        # is decided below, per reviewer, so no filter value is bound in this statement.
        usable = f"round(a - top * {m}) = round(b + top * {m}) AND {scored} = k"
        top_position = f"CAST(round(b + top * {m}) AS INTEGER)"
        code = f"CASE WHEN ({bad}) IS NULL THEN NULL WHEN {bad} THEN -1 WHEN {usable} THEN {top_position} ELSE -2 END"
        sql = f"""
            SELECT reviewer_id, k, {code} AS code, {scored} > 0 AS scored, COUNT(*),
                   SUM({scored}), TOTAL(total), TOTAL(total_sq)
            FROM ({grouped}) g GROUP BY 1, 2, 3, 4"""
        rows = self.db.execute(sql, params).fetchall()
        if not exact and any(row[2] is None for row in rows):
            if self.summaries:  # the exact check needs the rows: the caller reads them instead
                self.needs_rows = True
                return 0, 0, {}
            return self.scan(reviewers, excluded, exact=True)
        selected = set(reviewers)
        reviews = left_out = self.bad_count = 0
        tables: dict[int, list[int]] = {}
        sums: dict[str, list[Any]] = {}
        for reviewer, k, code, has_scores, count, n, total, total_sq in rows:
            if code == -1:
                self.bad_count += count
                continue
            acc = sums.setdefault(reviewer, [0, 0.0, 0.0])
            acc[0] += int(n)  # PostgreSQL's SUM of integers is a numeric
            acc[1] += total
            acc[2] += total_sq
            if not has_scores or (selected and reviewer not in selected):
                continue
            reviews += count
            if code == -2:
                left_out += count
                continue
            tables.setdefault(k, [0] * k)[code] += count
        # In reviewer order whatever order the database grouped in (PostgreSQL hashes): the
        # report adds the reviewers' figures up in this order, to the last digit.
        ordered = sorted(sums.items(), key=lambda item: (item[0] is not None, item[0] or ""))
        self.reviewer_sums = {r: (n, total, total_sq) for r, (n, total, total_sq) in ordered if n}
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


def _summaries_complete(db: Database) -> bool:
    """Whether the summaries (council.storage.bias_summaries) count every stored record and
    no listed invalid row is among them, so they answer the report exactly."""
    sql = f"""SELECT (SELECT COUNT(*) FROM bias_records) = (SELECT COALESCE(SUM(k), 0) FROM {REVIEW_TABLE})
                     AND NOT EXISTS (SELECT 1 FROM {INVALID_TABLE})"""
    return bool(db.execute(sql).fetchone()[0])


def sum_bias_records(store: SQLiteStore, query: BiasQuery) -> BiasSums:
    """Every sum of the bias report (:class:`BiasSums`), in one read snapshot (with the
    records without a score, when the store was loaded from files that had some).

    The per-review pass reads the sums kept as records are written (council.storage.
    bias_summaries) when those answer the query exactly (every record counted, one scale, no
    invalid row, no bad review, none of more than 53 answers); the rows otherwise."""
    db = store.db
    unscored = store._unscored
    f = _Filter(query.since, query.reviewers, query.council)
    out = BiasSums()
    conn = db.conn
    own_transaction = not conn.in_transaction
    summarized = False

    def begin() -> None:
        nonlocal summarized
        if own_transaction:
            conn.execute("BEGIN")  # one read snapshot for every query below
        summarized = not unscored and _summaries_complete(db)  # its first read: the snapshot begins here
        out.scales = _scales(db, f, REVIEW_TABLE if summarized else "bias_records")

    # On a SQLite file the per-answer pass runs on a second connection in the same snapshot,
    # at the same time as the per-review pass (council.storage.second_reader).
    second = None
    if own_transaction and getattr(store, "path", None) is not None and not unscored:
        second = open_in_snapshot(store.path, begin)
    else:
        begin()
    ahead: Background | None = None
    try:
        lo_ref, hi_ref = query.reference_scale  # records without a scale are taken to be on it
        effective = {(lo if lo is not None else lo_ref, hi if hi is not None else hi_ref) for lo, hi in out.scales}
        out.normalized = len(effective) > 1
        summarized = summarized and not out.normalized  # the summaries hold raw scores
        s = _score_expr(out.normalized, query.reference_scale)
        unit = query.length_unit or "words"
        if second is not None:  # with the filter as it is now: used unless bad records change it
            ahead_filter = copy.copy(f)
            ahead = Background(
                second,
                lambda c: _Answers(c, ahead_filter, s, f"response_length_{unit}", query.max_points),
            )
        # One pass per review: the positions check and the top-position test together.
        skip_rows = _has_invalid_rows(db)
        reviews = Reviews(db, f.base, f.base_params, s, skip_rows=skip_rows, unscored=unscored, summaries=summarized)
        out.orderings, out.left_out, out.top_positions = reviews.scan(f.reviewers)
        if summarized and (reviews.bad_count or reviews.needs_rows):  # found, listed and left out from the rows
            reviews = Reviews(db, f.base, f.base_params, s, skip_rows=skip_rows, unscored=unscored)
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
        out.reviewers = reviews.reviewer_sums
        out.positions = _position_sums(db, f, s)
        out.length_unit = unit
        if ahead is not None and not out.bad:
            answers = ahead.result()
        else:
            answers = _Answers(db, f, s, f"response_length_{unit}", query.max_points)
        if query.length_unit is None and answers.sessions and not any(row[2] for row in answers.sessions):
            out.length_unit = "chars"  # no word count anywhere: characters, which every record has
            answers = _Answers(db, f, s, "response_length_chars", query.max_points)
        out.sessions, out.self_preference, out.points = answers.sessions, answers.self_preference, answers.points
    finally:
        if ahead is not None:
            try:
                ahead.result()  # never left running past the snapshot (its errors surfaced above if used)
            except Exception:
                pass
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
    return out

"""The bias report's queries: per-group sums, read in one snapshot.

Every statistic is reduced to per-group sums (n, Σx, Σx², Σxy); council.bias combines the
groups into the report. The sums come from one of two places:

* the summaries kept as records are written (council.storage.bias_summaries: one row per
  session, per review and per self-reviewed answer, and sums per position), whenever they
  answer the query exactly: every stored record counted, no filter cutting through a
  session, one scale, no bad review, no invalid row; the per-answer sums of a report with a
  reviewer filter, and the positions' of one with ``--since``, come from the rows;
* the rows otherwise: one pass per review, one per answer (over the covering per-answer
  index) and one per position, each a ``GROUP BY``.

Records from files are loaded into an in-memory store with the same schema and go through the
same queries: one code path.

Checks that one record alone cannot show are made here too (docs/methods.md,
"Record validation"): rows listed invalid by migration m005, and reviews — the records of one
(session, reviewer) — whose positions are not one answer per position. The per-review pass
yields the top-position test and the reviewers' sums together with that check, so the check
costs no extra pass unless it finds something.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from council.storage.bias_summaries import (
    LENGTH_SUMS,
    LENGTHS,
    MASK_BITS,
    POSITION_TABLE,
    REVIEW_TABLE,
    SELF_TABLE,
    SESSION_TABLE,
    mask_check,
    review_aggregates,
    review_code,
)
from council.storage.data import MAX_MESSAGES, BadRecords, BiasQuery, BiasSums
from council.storage.second_reader import Background, open_in_snapshot

# The statements below are written so PostgreSQL runs them too (the few words that differ are
# the dialect's, council.storage.dialect): TRUE rather than 1, every subquery named.

if TYPE_CHECKING:
    from council.storage.connection import Backend
    from council.storage.connection import Connection as Database
    from council.storage.dialect import Dialect

INVALID_TABLE = "bias_records_invalid"


class _Filter:
    """WHERE clauses: ``base`` = since + council; ``full`` adds the reviewer filter;
    ``summary`` is ``base`` over the summaries' columns (the earliest timestamp and council
    of a summary row's records: when no session is cut through, they stand for all of them)."""

    def __init__(self, since: str | None, reviewers: Sequence[str], council: str | None, dialect: Dialect) -> None:
        self.dialect = dialect
        self.reviewers = list(reviewers)
        self.since, self.council = since, council
        base: list[str] = []
        summary: list[str] = []
        self.base_params: list[Any] = []
        if since:
            base.append("timestamp >= ?")
            summary.append("ts_min >= ?")
            self.base_params.append(since)
        if council:
            base.append("council = ?")
            summary.append("council_min = ?")
            self.base_params.append(council)
        full = list(base)
        self.full_params = list(self.base_params)
        if reviewers:
            full.append(f"reviewer_id IN ({', '.join('?' for _ in reviewers)})")
            self.full_params.extend(reviewers)
        self.base = " AND ".join(base) or "TRUE"
        self.full = " AND ".join(full) or "TRUE"
        self.summary = " AND ".join(summary) or "TRUE"

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

    def cuts_a_session(self) -> tuple[str, list[Any]]:
        """SQL over the session summaries: a session some of whose records the filter keeps
        and others it leaves out (conservatively, for councils). Then the summaries, which
        stand for whole sessions, cannot answer it."""
        parts: list[str] = []
        params: list[Any] = []
        if self.since:
            parts.append("(ts_max >= ? AND (ts_min < ? OR ts_nulls > 0))")
            params += [self.since, self.since]
        if self.council:
            parts.append(
                "(council_min <= ? AND council_max >= ? AND (council_nulls > 0 OR council_min <> council_max))"
            )
            params += [self.council, self.council]
        return " OR ".join(parts) or "FALSE", params


def _score_expr(normalize: bool, reference: tuple[int, int]) -> str:
    """The score as SQL: raw, or rescaled to the reference scale when records use different scales."""
    if not normalize:
        return "score_value"
    lo, hi = reference
    smin, smax = f"COALESCE(scale_min, {lo})", f"COALESCE(scale_max, {hi})"
    return f"({lo}.0 + {hi - lo}.0 * (score_value - {smin}) / ({smax} - {smin}))"


def _scales(db: Database, f: _Filter, summarized: bool) -> list[tuple[int | None, int | None]]:
    if summarized:  # every selected session has one scale (checked by _summaries_answer)
        sql = f"SELECT DISTINCT scale_min, scale_max FROM {SESSION_TABLE} WHERE {f.summary}"
    else:
        sql = f"SELECT DISTINCT scale_min, scale_max FROM bias_records WHERE {f.base}"
    return [(r[0], r[1]) for r in db.execute(sql, f.base_params).fetchall()]


def _position_sums(db: Database, f: _Filter, s: str) -> dict[str, dict[int, tuple[int, float, float]]]:
    sql = f"""SELECT reviewer_id, position, COUNT(*), TOTAL({s}), TOTAL({s} * {s})
              FROM bias_records WHERE {f.full} GROUP BY reviewer_id, position"""
    return _by_reviewer(db.execute(sql, f.full_params))


def _by_reviewer(rows: Iterable[Sequence[Any]]) -> dict[str, dict[int, tuple[int, float, float]]]:
    """(reviewer, position, n, Σs, Σs²) rows → reviewer → position → sums, both in order (PostgreSQL
    hashes its groups: the report adds them up in this order, to the last digit)."""
    out: dict[str, dict[int, tuple[int, float, float]]] = {}
    for reviewer, position, n, total, total_sq in sorted(rows, key=lambda r: (r[0], r[1])):
        out.setdefault(reviewer, {})[int(position)] = (int(n), total, total_sq)
    return out


def _pooled_positions(
    by_reviewer: dict[str, dict[int, tuple[int, float, float]]],
) -> dict[int, tuple[int, float, float]]:
    """Every selected reviewer's position sums added up, positions in ascending order."""
    pooled: dict[int, list[Any]] = {}
    for positions in by_reviewer.values():
        for position, (n, total, total_sq) in positions.items():
            acc = pooled.setdefault(position, [0, 0.0, 0.0])
            acc[0] += n
            acc[1] += total
            acc[2] += total_sq
    return {p: (n, total, total_sq) for p, (n, total, total_sq) in sorted(pooled.items())}


def _in_session_order(rows: Iterable[tuple[str, Sequence[Any]]]) -> list[tuple[Any, ...]]:
    """(session id, (answers, records, n, Σx, Σy, Σx², Σy², Σxy)) rows as the report takes
    them: in session id order (code points, whatever the database's collation or grouping:
    SQLite's rows come sorted already), without the id, the counts as ints (PostgreSQL's SUM
    of integers is a numeric)."""
    ordered = sorted(rows, key=lambda row: row[0])
    return [(int(v[0]), int(v[1]), int(v[2]), *v[3:]) for _, v in ordered]


class _Answers:
    """The per-answer sums: per session, the length correlation's; per model, self-preference;
    and the first scatter points. :meth:`from_rows` reads them in one ``GROUP BY (session,
    model)`` over the answer index; :meth:`from_summaries` from the summary tables."""

    sessions: list[Any]
    self_preference: dict[str, tuple[Any, ...]]
    points: list[tuple[float, float]]
    offsets: dict[str, tuple[int, float, float]]

    def __init__(self) -> None:
        self.sessions, self.self_preference, self.points, self.offsets = [], {}, [], {}

    @classmethod
    def from_rows(
        cls, db: Database, f: _Filter, s: str, length_column: str, max_points: int, *, gaps: bool = True
    ) -> _Answers:
        """One ``GROUP BY (session, model)``, kept as one materialized table inside a single
        statement that reads it several ways. Columns of an answer: ``n``/``total`` over all
        reviewers (base filter), ``fn``/``ftotal`` over the selected reviewers, ``x`` the
        response length, ``self_n``/``self_total`` the self-review scores. With ``gaps``, also
        every review's gaps to the other reviewers (as council.storage.bias_summaries.gap_columns
        computes them), for self-preference and, per reviewer, for calibration."""
        params: list[Any] = []
        selected = ""
        if f.reviewers:
            chosen = f"reviewer_id IN ({', '.join('?' for _ in f.reviewers)})"
            selected = f"COUNT(CASE WHEN {chosen} THEN 1 END) AS fn, TOTAL(CASE WHEN {chosen} THEN {s} END) AS ftotal,"
            params += [*f.reviewers, *f.reviewers]
            fn, ftotal = "fn", "ftotal"
        else:  # every reviewer is selected: the same columns
            fn, ftotal = "n", "total"
        params += f.base_params
        # In a self-review the reviewer and the answer are the same model, so the reviewer is
        # the answer's ``model_id``. The reviewer filter selects whose self-scores count; the
        # others' scores are everyone else's. d = own score − mean of the others' scores.
        own_where = "a.self_n = 1 AND a.n > 1"
        own_params: list[Any] = []
        if f.reviewers:
            own_where += f" AND a.model_id IN ({', '.join('?' for _ in f.reviewers)})"
            own_params = list(f.reviewers)
        # Session sums, x = length, y = mean score received: answers, records, then over the
        # answers with a length n, Σx, Σy, Σx², Σy², Σxy (council.storage.bias_summaries keeps
        # the same sums per session). Points: the first answers in (session id, model) order;
        # session ids are random UUIDs, so an arbitrary subset.
        # A review's gaps: each score of an answer it did not write less the mean of the other
        # reviewers' (not the answer's own model's) scores of it, where there are any.
        gap_cte = self_part = offsets_part = ""
        if gaps:
            gap_cte = f""", g AS MATERIALIZED (
                SELECT bias_records.session_id, reviewer_id,
                       TOTAL({s} - (a.total - a.self_total - {s}) / (a.n - a.self_n - 1)) / COUNT(*) AS gap
                FROM bias_records
                JOIN a ON a.session_id = bias_records.session_id AND a.model_id = bias_records.model_id
                WHERE {f.base} AND COALESCE(self_review, 0) = 0 AND a.n - a.self_n >= 2
                GROUP BY bias_records.session_id, reviewer_id)"""
            params += f.base_params
            self_part = f"""
            UNION ALL
            SELECT 1, model_id, {_SELF_SUMS}
            FROM (SELECT a.model_id, a.self_total AS own, (a.total - a.self_total) / (a.n - a.self_n) AS others,
                         g.gap FROM a LEFT JOIN g ON g.session_id = a.session_id AND g.reviewer_id = a.model_id
                  WHERE {own_where}) o GROUP BY model_id"""
            offsets_part = f"""
            UNION ALL
            SELECT 3, reviewer_id, {_OFFSET_SUMS}, NULL, NULL, NULL, NULL, NULL, NULL FROM g GROUP BY reviewer_id"""
            params += own_params
        sql = f"""
            WITH a AS MATERIALIZED (
                SELECT session_id, model_id, COUNT(*) AS n, TOTAL({s}) AS total, {selected}
                       {f.dialect.float_avg(length_column)} AS x, TOTAL(self_review) AS self_n,
                       TOTAL(self_review * {s}) AS self_total
                FROM bias_records WHERE {f.base} AND session_id IS NOT NULL AND model_id IS NOT NULL
                GROUP BY session_id, model_id){gap_cte}
            SELECT 0, session_id, COUNT(*), SUM({fn}), COUNT(x), TOTAL(x), TOTAL(CASE WHEN x IS NOT NULL THEN y END),
                   TOTAL(x * x), TOTAL(CASE WHEN x IS NOT NULL THEN y * y END), TOTAL(x * y), NULL
            FROM (SELECT session_id, {fn}, x, {ftotal} / {fn} AS y FROM a WHERE {fn} > 0) p GROUP BY session_id
            {self_part}{offsets_part}
            UNION ALL
            SELECT 2, NULL, x, y, NULL, NULL, NULL, NULL, NULL, NULL, NULL
            FROM (SELECT x, {ftotal} / {fn} AS y FROM a WHERE {fn} > 0 AND x IS NOT NULL
                  ORDER BY session_id, model_id LIMIT ?) q"""
        params.append(max(0, max_points))
        out = cls()
        sessions = []
        for part, key, *v in db.execute(sql, params).fetchall():
            if part == 0:
                sessions.append((key, v[:-1]))
            elif part == 1:
                out.self_preference[key] = _self_sums(v)
            elif part == 3:
                out.offsets[key] = (int(v[0]), v[1], v[2])
            else:
                out.points.append((float(v[0]), float(v[1])))
        out.offsets = dict(sorted(out.offsets.items()))
        out.sessions = _in_session_order(sessions)
        return out

    @classmethod
    def from_summaries(cls, db: Database, f: _Filter, unit: str | None, max_points: int) -> tuple[_Answers, str]:
        """The same sums from the summaries (no reviewer filter: every reviewer's scores), and
        the length unit: ``unit``, else words unless no selected answer has a word count.
        The points are the rows' first answers (the per-answer index, read in order and
        stopped after ``max_points``)."""
        if unit is None:
            sql = f"""SELECT EXISTS (SELECT 1 FROM {SESSION_TABLE} WHERE {f.summary}),
                             EXISTS (SELECT 1 FROM {SESSION_TABLE} WHERE {f.summary} AND words_n > 0)"""
            any_session, any_words = db.execute(sql, [*f.base_params, *f.base_params]).fetchone()
            unit = "chars" if any_session and not any_words else "words"
        # In key order: session id order (code points: the column's collation on PostgreSQL).
        columns = ", ".join(f"{unit}_{c}" for c in ("n", *LENGTH_SUMS))
        sql = f"SELECT answers, records, {columns} FROM {SESSION_TABLE} WHERE {f.summary} ORDER BY session_id"
        out = cls()
        out.sessions = db.execute(sql, f.base_params).fetchall()
        out.self_preference = _summary_self(db, f)
        if max_points > 0:
            mean = f.dialect.float_avg(LENGTHS[unit])
            sql = f"""SELECT {mean} AS x, TOTAL(score_value) / COUNT(*) AS y FROM bias_records
                      WHERE {f.base} GROUP BY session_id, model_id HAVING {mean} IS NOT NULL
                      ORDER BY session_id, model_id LIMIT ?"""
            out.points = [(float(x), float(y)) for x, y in db.execute(sql, [*f.base_params, max_points])]
        return out, unit


def _answers_from_rows(
    db: Database, f: _Filter, s: str, query: BiasQuery, first: _Answers | None = None, *, gaps: bool = True
) -> tuple[_Answers, Any]:
    """The per-answer pass over the rows (``first``, when it ran already, in words unless the
    query named the unit) and its length unit: the query's, else words unless no answer has a
    word count, then characters, which every record has."""
    unit = query.length_unit or "words"
    answers = first if first is not None else _Answers.from_rows(db, f, s, LENGTHS[unit], query.max_points, gaps=gaps)
    if query.length_unit is None and answers.sessions and not any(row[2] for row in answers.sessions):
        unit = "chars"
        answers = _Answers.from_rows(db, f, s, LENGTHS[unit], query.max_points, gaps=gaps)
    return answers, unit


# Self-preference per model from (own, others, gap) per answer: n, Σown, Σothers, Σd, Σd², then over
# the answers whose reviewer has a gap on the session's other answers (the aggregates skip a NULL
# gap), n, Σg, Σc, Σc² with c = d − g (docs/methods.md, "Self-preference").
_SELF_SUMS = (
    "COUNT(*), TOTAL(own), TOTAL(others), TOTAL(own - others), TOTAL((own - others) * (own - others)), "
    "COUNT(gap), TOTAL(gap), TOTAL(own - others - gap), TOTAL((own - others - gap) * (own - others - gap))"
)
# A reviewer's offsets from its reviews' gaps: reviews with one, Σg, Σg² (docs/methods.md,
# "Reviewer calibration").
_OFFSET_SUMS = "COUNT(gap), TOTAL(gap), TOTAL(gap * gap)"


def _self_sums(v: Sequence[Any]) -> tuple[Any, ...]:
    return (int(v[0]), v[1], v[2], v[3], v[4], int(v[5]), v[6], v[7], v[8])


def _summary_self(db: Database, f: _Filter) -> dict[str, tuple[Any, ...]]:
    """Self-preference per model from the self-reviewed answers' summaries (the selected
    reviewers' own answers when the query names reviewers)."""
    where, params = f.summary, list(f.base_params)
    if f.reviewers:
        where += f" AND model_id IN ({', '.join('?' for _ in f.reviewers)})"
        params += f.reviewers
    sql = f"SELECT model_id, {_SELF_SUMS} FROM {SELF_TABLE} WHERE {where} GROUP BY model_id"
    return {model: _self_sums(v) for model, *v in sorted(db.execute(sql, params).fetchall())}


class Tally(NamedTuple):
    reviews: int
    left_out: int
    bad: int
    tables: dict[int, list[int]]
    reviewer_sums: dict[str, tuple[int, float, float]]
    blocks: dict[tuple[str, tuple[int, ...]], tuple[int, float, float]]
    unblocked: int
    offsets: dict[str, tuple[int, float, float]]


def _tally(rows: Iterable[Sequence[Any]], reviewers: Sequence[str]) -> Tally:
    """Reviews grouped by (reviewer, k, outcome code, has scores, mask of the positions with a
    score or NULL when all have one) → (reviews, reviews left out, bad reviews, review size k →
    counts of the top-scored position, every reviewer's (n, Σs, Σs²) over the good reviews, the
    selected reviewers' valid reviews as blocks of positions, reviews whose positions cannot be
    told, and every reviewer's offsets over its valid reviews when the rows carry them: reviews
    with a gap, Σ and Σ² of their mean gaps). Only the selected reviewers' valid reviews with a
    score count in the test; a review is left out of it when its top score is tied or not every
    answer in it has a score."""
    selected = set(reviewers)
    reviews = left_out = bad = unblocked = 0
    tables: dict[int, list[int]] = {}
    sums: dict[str, list[Any]] = {}
    blocks: dict[tuple[str, tuple[int, ...]], list[Any]] = {}
    offsets: dict[str, list[Any]] = {}
    for reviewer, k, code, has_scores, count, n, total, total_sq, totals_sq, mask, *gaps in rows:
        if code == -1:
            bad += count
            continue
        acc = sums.setdefault(reviewer, [0, 0.0, 0.0])
        acc[0] += int(n)  # PostgreSQL's SUM of integers is a numeric
        acc[1] += total
        acc[2] += total_sq
        if gaps and gaps[0]:
            off = offsets.setdefault(reviewer, [0, 0.0, 0.0])
            off[0] += int(gaps[0])
            off[1] += gaps[1]
            off[2] += gaps[2]
        if not has_scores or (selected and reviewer not in selected):
            continue
        if mask is None:  # every answer scored: positions 0..k-1 (the positions check)
            scored: tuple[int, ...] | None = tuple(range(k))
        elif k > MASK_BITS:
            scored = None
        else:
            scored = tuple(p for p in range(k) if int(mask) >> p & 1)
        if scored is None:
            unblocked += count
        else:
            block = blocks.setdefault((reviewer, scored), [0, 0.0, 0.0])
            block[0] += count
            block[1] += total
            block[2] += totals_sq
        reviews += count
        if code == -2:
            left_out += count
            continue
        tables.setdefault(k, [0] * k)[code] += count
    # In reviewer order whatever order the database grouped in (PostgreSQL hashes): the
    # report adds the reviewers' figures up in this order, to the last digit.
    ordered = sorted(sums.items(), key=lambda item: (item[0] is not None, item[0] or ""))
    reviewer_sums = {r: (n, total, total_sq) for r, (n, total, total_sq) in ordered if n}
    in_order = {key: (n, total, totals_sq) for key, (n, total, totals_sq) in sorted(blocks.items())}
    offset_sums = {r: (n, total, total_sq) for r, (n, total, total_sq) in sorted(offsets.items())}
    return Tally(reviews, left_out, bad, tables, reviewer_sums, in_order, unblocked, offset_sums)


class Reviews:
    """The per-review pass over the rows: one ``GROUP BY (session, reviewer)`` over the records
    matching ``where`` (plus the unscored records, which occupy a position without a score),
    leaving out the invalid rows when ``skip_rows``.

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
        unscored: str | None = None,
    ) -> None:
        self.db = db
        source = f"SELECT id, session_id, reviewer_id, position, {s} AS score FROM bias_records WHERE {where}"
        source_params = list(params)
        if skip_rows:
            source += f" AND id NOT IN (SELECT id FROM {INVALID_TABLE})"
        if unscored:
            source += f" UNION ALL SELECT id, session_id, reviewer_id, position, NULL FROM {unscored} WHERE {where}"
            source_params += list(params)
        self.source, self.source_params = source, source_params
        self.unscored = unscored is not None
        self.bad_count = 0

    def _grouped(self, excluded: str | None, exact: bool) -> str:
        """Per review: its size k, what the positions check needs, the packed top scores, the
        sums; ``exact`` (reviews of more than 53 answers) counts the distinct positions for
        the check instead of the fast mask (council.storage.bias_summaries.review_code)."""
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
        # Without unscored records every record has a score: k counts them, with no second count
        # and no mask of the positions that have one.
        scored = (
            "COUNT(score) AS scored, TOTAL(CASE WHEN score IS NOT NULL AND position BETWEEN 0 AND "
            f"{MASK_BITS - 1} THEN CAST(1 AS BIGINT) << CAST(position AS INTEGER) END) AS smask,"
            if self.unscored
            else ""
        )
        return f"""SELECT r.reviewer_id, {agg["k"]} AS k, {scored} {check}, {agg["top"]} AS top,
                          {agg["a"]} AS a, {agg["b"]} AS b, {agg["total"]} AS total, {agg["total_sq"]} AS total_sq
                   FROM ({self.source}) r {skip} GROUP BY r.session_id, r.reviewer_id"""

    def scan(self, reviewers: Sequence[str], excluded: str | None = None, *, exact: bool = False) -> Tally:
        """:func:`_tally` of every review, and ``bad_count`` set to the number of bad reviews
        (over every reviewer)."""
        scored = "scored" if self.unscored else "k"
        bad = "lo < 0 OR hi >= k OR distinct_n < k" if exact else mask_check("k", "mask")
        code = review_code("k", scored, "top", "a", "b", bad=bad)  # NULL: too big for the fast check
        # The mask of the scored positions only matters for a review with an unscored answer.
        smask = "CASE WHEN scored < k THEN smask END" if self.unscored else "NULL"
        # One code per review instead of four grouping columns (a third less to sort). Which
        # reviewers are selected is decided in Python, per reviewer, so no filter value is
        # bound in this statement.
        sql = f"""
            SELECT reviewer_id, k, {code} AS code, {scored} > 0 AS scored, COUNT(*),
                   SUM({scored}), TOTAL(total), TOTAL(total_sq), TOTAL(total * total), {smask} AS scored_mask
            FROM ({self._grouped(excluded, exact)}) g GROUP BY 1, 2, 3, 4, 10"""  # the gaps: the answers' pass
        rows = self.db.execute(sql, self.source_params).fetchall()
        if not exact and any(row[2] is None for row in rows):
            return self.scan(reviewers, excluded, exact=True)
        tally = _tally(rows, reviewers)
        self.bad_count = tally.bad
        return tally

    def bad(self) -> list[tuple[str, str]]:
        sql = f"""SELECT session_id, reviewer_id FROM ({self.source}) r GROUP BY session_id, reviewer_id
                  HAVING MIN(position) < 0 OR MAX(position) >= COUNT(*) OR COUNT(DISTINCT position) < COUNT(*)"""
        return [(s, r) for s, r in self.db.execute(sql, self.source_params)]

    def positions(self, session: str, reviewer: str) -> list[tuple[int, int]]:
        sql = f"SELECT position, id FROM ({self.source}) r WHERE session_id = ? AND reviewer_id = ?"
        return [(p, i) for p, i in self.db.execute(sql, [*self.source_params, session, reviewer])]


def _summary_reviews(db: Database, f: _Filter, reviewers: Sequence[str]) -> Tally | None:
    """The per-review pass from the review outcomes kept as records are written: the same
    groups as :meth:`Reviews.scan`'s, one row per review read. None when a review is bad or
    too big for the fast check: the rows then tell which, and are read instead."""
    sql = f"""SELECT reviewer_id, k, code, TRUE, COUNT(*), SUM(k), TOTAL(total), TOTAL(total_sq),
                     TOTAL(total * total), NULL, {_OFFSET_SUMS}
              FROM {REVIEW_TABLE} WHERE {f.summary} GROUP BY reviewer_id, k, code"""
    rows = db.execute(sql, f.base_params).fetchall()
    if any(row[2] is None or row[2] == -1 for row in rows):
        return None
    return _tally(rows, reviewers)


def _summary_positions(db: Database, f: _Filter) -> dict[str, dict[int, tuple[int, float, float]]]:
    """The positions' sums from the position sums (no ``--since``: they hold no timestamps)."""
    where, params = [], []
    if f.council:
        where.append("has_council = 1 AND council_key = ?")
        params.append(f.council)
    if f.reviewers:
        where.append(f"reviewer_id IN ({', '.join('?' for _ in f.reviewers)})")
        params += f.reviewers
    sql = f"""SELECT reviewer_id, position, SUM(n), TOTAL(total), TOTAL(total_sq) FROM {POSITION_TABLE}
              WHERE {" AND ".join(where) or "TRUE"} GROUP BY reviewer_id, position"""
    return _by_reviewer(db.execute(sql, params))


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


def _exclusion(db: Database, bad: BadRecords, dialect: Dialect) -> tuple[str, str | None]:
    """A WHERE clause leaving out the bad rows and reviews, and the temp table of bad reviews."""
    clauses, table = [], None
    if bad.rows:
        clauses.append(f"id NOT IN (SELECT id FROM {INVALID_TABLE})")
    if bad.reviews:
        name = f"bias_bad_reviews_{secrets.token_hex(4)}"
        key = ("session_id", "reviewer_id")
        db.execute(dialect.temp_table(name, dict.fromkeys(key, "TEXT"), key))
        table = f"{dialect.temp_schema}.{name}"
        db.conn.executemany(f"INSERT INTO {table} VALUES (?, ?) ON CONFLICT DO NOTHING", bad.reviews)
        clauses.append(
            f"NOT EXISTS (SELECT 1 FROM {table} e WHERE e.session_id = bias_records.session_id "
            f"AND e.reviewer_id = bias_records.reviewer_id)"
        )
    return " AND ".join(clauses), table


def _count(db: Database, f: _Filter) -> int:
    return db.execute(f"SELECT COUNT(*) FROM bias_records WHERE {f.base}", f.base_params).fetchone()[0]


def _summaries_complete(db: Database) -> bool:
    """Whether the summaries (council.storage.bias_summaries) count every stored record and
    no listed invalid row is among them. They are recomputed from all of a session's rows at
    every write to it, so equal counts mean they give what the rows give; a row written past
    them (by hand, or by an older council) sends the report to the rows."""
    sql = f"""SELECT c = (SELECT COALESCE(SUM(records), 0) FROM {SESSION_TABLE})
                     AND c = (SELECT COALESCE(SUM(n), 0) FROM {POSITION_TABLE})
                     AND NOT EXISTS (SELECT 1 FROM {INVALID_TABLE})
              FROM (SELECT COUNT(*) AS c FROM bias_records) counted"""
    return bool(db.execute(sql).fetchone()[0])


def _summaries_answer(db: Database, f: _Filter) -> bool:
    """Whether the summaries answer this query exactly: complete, no session cut through by
    the filter, and every selected session on one scale (the summaries hold raw scores)."""
    if not _summaries_complete(db):
        return False
    cut, params = f.cuts_a_session()
    sql = f"""SELECT NOT EXISTS (SELECT 1 FROM {SESSION_TABLE} WHERE {cut})
                     AND NOT EXISTS (SELECT 1 FROM {SESSION_TABLE} WHERE scale_uniform = 0 AND {f.summary})"""
    return bool(db.execute(sql, [*params, *f.base_params]).fetchone()[0])


def sum_bias_records(store: Backend, query: BiasQuery) -> BiasSums:
    """Every sum of the bias report (:class:`BiasSums`), in one read snapshot (with the
    records without a score, when the store was loaded from files that had some).

    From the summaries kept as records are written when they answer the query exactly
    (:func:`_summaries_answer`, and no bad review), from the rows otherwise."""
    db = store.db
    unscored = store._unscored
    f = _Filter(query.since, query.reviewers, query.council, store.dialect)
    out = BiasSums()
    conn = db.conn
    own_transaction = not conn.in_transaction
    summarized = False

    def begin() -> None:
        nonlocal summarized
        if own_transaction:
            conn.execute("BEGIN")  # one read snapshot for every query below
        summarized = not unscored and _summaries_answer(db, f)  # its first read: the snapshot begins here
        out.scales = _scales(db, f, summarized)

    # On a SQLite file a pass runs on a second connection in the same snapshot, at the same
    # time as the others (council.storage.second_reader): the positions' when the summaries
    # answer, the per-answer pass's otherwise.
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
        if summarized:
            answered = _from_summaries(db, f, query, out, second)
            second = None  # taken by the positions' pass (closed once it is done)
            if answered:
                return out
        unit = query.length_unit or "words"
        if second is not None:  # with the filter as it is now: used unless bad records change it
            ahead_filter = copy.copy(f)
            ahead = Background(
                second, lambda c: _Answers.from_rows(c, ahead_filter, s, LENGTHS[unit], query.max_points)
            )
            second = None
        # One pass per review: the positions check and the top-position test together.
        reviews = Reviews(
            db,
            f.base,
            f.base_params,
            s,
            skip_rows=_has_invalid_rows(db),
            unscored=f.dialect.unscored_table if unscored else None,
        )
        tally = reviews.scan(f.reviewers)
        out.bad = _find_bad(db, f, reviews)
        if out.bad and not query.skip_bad:
            return out
        if out.bad:
            before = _count(db, f)
            clause, excluded_reviews = _exclusion(db, out.bad, f.dialect)
            f.exclude(clause)
            out.skipped_records = before - _count(db, f)
            if excluded_reviews:
                tally = reviews.scan(f.reviewers, excluded_reviews)
        if unscored:
            out.unscored = db.execute(
                f"SELECT COUNT(*) FROM {f.dialect.unscored_table} WHERE {f.unscored_where()}", f.base_params
            ).fetchone()[0]
        _take_tally(out, tally)
        _take_positions(out, _position_sums(db, f, s))
        first = ahead.result() if ahead is not None and not out.bad else None
        answers, out.length_unit = _answers_from_rows(db, f, s, query, first)
        _take_answers(out, answers, offsets=True)
    finally:
        if second is not None:
            second.close()
        if ahead is not None:
            try:
                ahead.result()  # never left running past the snapshot (its errors surfaced above if used)
            except Exception:
                pass
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
    return out


def _take_tally(out: BiasSums, tally: Tally) -> None:
    out.orderings, out.left_out, out.top_positions = tally.reviews, tally.left_out, tally.tables
    out.reviewers, out.review_blocks, out.unblocked = tally.reviewer_sums, tally.blocks, tally.unblocked
    out.reviewer_offsets = tally.offsets  # from the summaries; the rows' come with the answers'


def _take_answers(out: BiasSums, answers: _Answers, *, offsets: bool) -> None:
    """The per-answer sums, and with ``offsets`` the reviewers' offsets the rows' pass computed."""
    out.sessions, out.self_preference, out.points = answers.sessions, answers.self_preference, answers.points
    if offsets:
        out.reviewer_offsets = answers.offsets


def _take_positions(out: BiasSums, by_reviewer: dict[str, dict[int, tuple[int, float, float]]]) -> None:
    out.reviewer_positions = by_reviewer
    out.positions = _pooled_positions(by_reviewer)


def _from_summaries(db: Database, f: _Filter, query: BiasQuery, out: BiasSums, second: Any) -> bool:
    """``out`` filled from the summaries (raw scores, no bad review); False when a review is
    bad or too big for the fast check, which the rows tell (``out`` to be filled again from
    them). On ``second`` (closed after), when there is one, the longest other pass runs
    meanwhile: the per-review tally, or with ``--since`` the positions' pass over the rows
    (the position sums hold no timestamps)."""
    positions_from_rows = bool(f.since)
    ahead = None
    if second is not None:
        if positions_from_rows:
            ahead = Background(second, lambda c: _position_sums(c, f, "score_value"))
        else:
            ahead = Background(second, lambda c: _summary_reviews(c, f, f.reviewers))
    try:
        if ahead is None or positions_from_rows:
            tallied = _summary_reviews(db, f, f.reviewers)
            if tallied is None:
                return False
        if f.reviewers:  # the selected reviewers' own scores per answer: the rows'
            answers, unit = _answers_from_rows(db, f, "score_value", query, gaps=False)
            answers.self_preference = _summary_self(db, f)
        else:
            answers, unit = _Answers.from_summaries(db, f, query.length_unit, query.max_points)
        if positions_from_rows:
            positions = ahead.result() if ahead is not None else _position_sums(db, f, "score_value")
        else:
            positions = _summary_positions(db, f)
            if ahead is not None:
                tallied = ahead.result()
        ahead = None
        if tallied is None:
            return False
        _take_tally(out, tallied)
        out.length_unit = unit  # type: ignore[assignment]
        _take_answers(out, answers, offsets=False)
        _take_positions(out, positions)
        return True
    finally:
        if ahead is not None:
            try:
                ahead.result()
            except Exception:
                pass

"""Checks on stored bias records that one record alone cannot show.

A record is validated on its own by :class:`council.bias.records.BiasRecord` (strict
types, a score within its scale) when it is read from a file, and by the database's
triggers when it is written (migration m005); rows stored before m005 were checked once
by that migration and the invalid ones listed in ``bias_records_invalid``.

Here, at report time:

* the listed invalid rows (only a database from before m005 can have any);
* reviews — the records of one (session, reviewer) — whose positions are not one
  answer per position within the answers of that review: a position at or beyond
  the review's number of records, or two answers at one position.

The per-review pass is one ``GROUP BY`` over the review index that also yields the report's
top-position test, so the check costs no extra pass over the records unless it finds
something.

Problems stop the report with their location (``FILE:LINE`` for records files, the
record id for the database), or with ``skip_bad`` the offending rows and reviews are
left out of every statistic and counted.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from council.errors import InputError
from council.storage.sqlite import Database

INVALID_TABLE = "bias_records_invalid"
MAX_MESSAGES = 20

# Packs (score, position) into one number so that one MAX finds the top score with
# its highest position and one MIN (of position − score·M) the top score with its
# lowest position: the top is unique when the two agree. Exact for positions below M
# and scores that differ by more than (max position)/M, i.e. any real score scale.
PACK = 1 << 20


@dataclass
class Problems:
    """What the checks found: messages (the first few), and what to leave out."""

    messages: list[str] = field(default_factory=list)
    bad_rows: list[int] = field(default_factory=list)
    bad_reviews: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.bad_rows or self.bad_reviews)


def review_problem(positions: Sequence[tuple[int, int]]) -> tuple[int, str] | None:
    """(record id, reason) for the first bad record of one review's (position, id) pairs."""
    k = len(positions)
    seen: set[int] = set()
    for pos, rid in sorted(positions):
        if pos >= k:
            return rid, f"position {pos} is beyond the {k} answers of this review"
        if pos in seen:
            return rid, f"two answers at position {pos} in one review"
        seen.add(pos)
    return None


class Reviews:
    """The per-review pass: one ``GROUP BY (session, reviewer)`` over the records matching
    ``where`` (plus the unscored records of ``unscored_table``, which occupy a position
    without a score), leaving out the invalid rows when ``skip_rows``.

    :meth:`scan` streams it once and returns both the top-position counts and the number
    of bad reviews; only when there are bad reviews does :meth:`bad` list them (a second
    pass, on the rare path). ``s`` is the SQL score expression (raw or rescaled)."""

    def __init__(
        self,
        db: Database,
        where: str,
        params: Sequence[Any],
        s: str,
        *,
        skip_rows: bool,
        unscored_table: str | None = None,
    ) -> None:
        self.db = db
        source = f"SELECT id, session_id, reviewer_id, position, {s} AS score FROM bias_records WHERE {where}"
        source_params = list(params)
        if skip_rows:
            source += f" AND id NOT IN (SELECT id FROM {INVALID_TABLE})"
        if unscored_table:
            source += (
                f" UNION ALL SELECT id, session_id, reviewer_id, position, NULL FROM {unscored_table} WHERE {where}"
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
        selected = "1"
        if reviewers:
            selected = f"reviewer_id IN ({', '.join('?' for _ in reviewers)})"
            params += list(reviewers)
        sql = f"""
            SELECT lo < 0 OR hi >= k OR distinct_n < k AS bad, {selected} AND scored > 0 AS counted, k,
                   CAST(round(b + top * {m}) AS INTEGER) AS pos,
                   round(a - top * {m}) = round(b + top * {m}) AND scored = k AS usable, COUNT(*)
            FROM ({grouped}) GROUP BY 1, 2, 3, 4, 5"""
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
        sql = f"""SELECT session_id, reviewer_id FROM ({self.source}) GROUP BY session_id, reviewer_id
                  HAVING MIN(position) < 0 OR MAX(position) >= COUNT(*) OR COUNT(DISTINCT position) < COUNT(*)"""
        return [(s, r) for s, r in self.db.execute(sql, self.source_params)]

    def positions(self, session: str, reviewer: str) -> list[tuple[int, int]]:
        sql = f"SELECT position, id FROM ({self.source}) WHERE session_id = ? AND reviewer_id = ?"
        return [(p, i) for p, i in self.db.execute(sql, [*self.source_params, session, reviewer])]


def find_problems(
    db: Database, where: str, params: Sequence[Any], reviews: Reviews, *, locate: Callable[[int], str]
) -> Problems:
    """The listed invalid rows and (when :meth:`Reviews.scan` counted any) the bad reviews."""
    found = Problems()
    sql = f"""SELECT id, session_id, reviewer_id, (SELECT problem FROM {INVALID_TABLE} i WHERE i.id = bias_records.id)
              FROM bias_records WHERE id IN (SELECT id FROM {INVALID_TABLE}) AND {where} ORDER BY id"""
    for rid, session, reviewer, problem in db.execute(sql, list(params)):
        found.bad_rows.append(rid)
        if len(found.messages) < MAX_MESSAGES:
            found.messages.append(f"{locate(rid)}: {problem} (session {session}, reviewer {reviewer})")
    found.bad_reviews = reviews.bad() if reviews.bad_count else []
    for session, reviewer in found.bad_reviews[:MAX_MESSAGES]:
        bad = review_problem(reviews.positions(session, reviewer))
        if bad is not None and len(found.messages) < MAX_MESSAGES:
            found.messages.append(f"{locate(bad[0])}: {bad[1]} (session {session}, reviewer {reviewer})")
    return found


def has_invalid_rows(db: Database) -> bool:
    return db.execute(f"SELECT EXISTS (SELECT 1 FROM {INVALID_TABLE})").fetchone()[0] == 1


def exclusion(db: Database, problems: Problems) -> tuple[str, str | None]:
    """A WHERE clause leaving out the bad rows and reviews, and the temp table of bad reviews."""
    clauses, table = [], None
    if problems.bad_rows:
        clauses.append(f"id NOT IN (SELECT id FROM {INVALID_TABLE})")
    if problems.bad_reviews:
        table = f"temp.bias_bad_reviews_{secrets.token_hex(4)}"
        db.execute(f"CREATE TABLE {table} (session_id, reviewer_id, PRIMARY KEY (session_id, reviewer_id))")
        db.conn.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?, ?)", problems.bad_reviews)
        clauses.append(
            f"NOT EXISTS (SELECT 1 FROM {table} e WHERE e.session_id = bias_records.session_id "
            f"AND e.reviewer_id = bias_records.reviewer_id)"
        )
    return " AND ".join(clauses), table


def raise_first(problems: Problems, hint: str) -> None:
    more = len(problems.bad_rows) + len(problems.bad_reviews) - 1
    extra = f" ({more} more problems)" if more > 0 else ""
    first = problems.messages[0] if problems.messages else "invalid bias records"
    raise InputError(f"{first}{extra}; {hint}")

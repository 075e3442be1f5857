"""Checks on stored bias records that one record alone cannot show, in SQL.

A record is validated on its own by :class:`council.bias.records.BiasRecord` (strict
types, a score within its scale). Here, over the ``bias_records`` table:

* rows that would not pass that validation (a database written by an older version
  or another tool): a missing or non-numeric score, a score outside its scale (or
  outside 1–10 without one), a negative position or length, a missing id;
* reviews — the records of one (session, reviewer) — whose positions are not one
  answer per position within the answers of that review: a position at or beyond
  the review's number of records, or two answers at one position.

Problems stop the report with their location (``FILE:LINE`` for records files, the
record id for the database), or with ``skip_bad`` the offending rows and reviews are
left out of every statistic and counted.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlite_utils import Database

from council.bias.stats import REFERENCE_SCALE
from council.errors import InputError

_LO, _HI = REFERENCE_SCALE

# One reason per bad row, first match wins.
_ROW_PROBLEMS = f"""
    CASE
      WHEN session_id IS NULL OR session_id = '' OR reviewer_id IS NULL OR reviewer_id = ''
           OR model_id IS NULL OR model_id = '' THEN 'a session, reviewer or model id is missing'
      WHEN score_value IS NULL OR typeof(score_value) NOT IN ('integer', 'real') THEN 'score_value is not a number'
      WHEN score_value > 1e308 OR score_value < -1e308 THEN 'score_value is not finite'
      WHEN (scale_min IS NULL) != (scale_max IS NULL) THEN 'scale_min and scale_max go together'
      WHEN scale_min IS NOT NULL AND scale_min >= scale_max THEN 'scale_min is not below scale_max'
      WHEN scale_min IS NOT NULL AND (score_value < scale_min OR score_value > scale_max)
           THEN 'score_value ' || score_value || ' is outside the scale ' || scale_min || '-' || scale_max
      WHEN scale_min IS NULL AND (score_value < {_LO} OR score_value > {_HI})
           THEN 'score_value ' || score_value || ' is outside {_LO}-{_HI} (no scale_min/scale_max given)'
      WHEN position IS NULL OR typeof(position) != 'integer' OR position < 0 THEN 'position is not a whole number >= 0'
      WHEN response_length_chars IS NULL OR typeof(response_length_chars) != 'integer' OR response_length_chars < 0
           THEN 'response_length_chars is not a whole number >= 0'
      WHEN response_length_words IS NOT NULL
           AND (typeof(response_length_words) != 'integer' OR response_length_words < 0)
           THEN 'response_length_words is not a whole number >= 0'
    END"""

MAX_MESSAGES = 20


@dataclass
class Problems:
    """What the checks found: messages (the first few), and what to leave out."""

    messages: list[str] = field(default_factory=list)
    bad_rows: list[int] = field(default_factory=list)
    bad_reviews: list[tuple[str, str]] = field(default_factory=list)
    records_left_out: int = 0

    def __bool__(self) -> bool:
        return bool(self.bad_rows or self.bad_reviews)


def _review_problem(positions: Sequence[tuple[int, int]]) -> tuple[int, str] | None:
    """(record id, reason) for the first bad record of one review's (position, id) pairs."""
    k = len(positions)
    seen: dict[int, int] = {}
    for pos, rid in sorted(positions):
        if pos >= k:
            return rid, f"position {pos} is beyond the {k} answers of this review"
        if pos in seen:
            return rid, f"two answers at position {pos} in one review"
        seen[pos] = rid
    return None


def find_problems(
    db: Database,
    where: str,
    params: Sequence[Any],
    *,
    locate: Callable[[int], str],
    check_rows: bool = True,
    unscored_table: str | None = None,
) -> Problems:
    """Bad rows and bad reviews among the records matching ``where``.

    ``unscored_table``: a table of records that occupy a position but carry no score
    (id, session_id, reviewer_id, position, timestamp, council); they count in their
    review's check only. ``where`` must use only the columns both tables have.
    """
    found = Problems()
    if check_rows:
        sql = f"""SELECT id, session_id, reviewer_id, problem FROM
                    (SELECT id, session_id, reviewer_id, {_ROW_PROBLEMS} AS problem FROM bias_records WHERE {where})
                  WHERE problem IS NOT NULL ORDER BY id"""
        for rid, session, reviewer, problem in db.execute(sql, list(params)):
            found.bad_rows.append(rid)
            if len(found.messages) < MAX_MESSAGES:
                found.messages.append(f"{locate(rid)}: {problem} (session {session}, reviewer {reviewer})")
    source = f"SELECT id, session_id, reviewer_id, position FROM bias_records WHERE {where}"
    source_params = list(params)
    if found.bad_rows:
        source += " AND id NOT IN (SELECT id FROM temp.bias_bad_rows)"
        _temp_ids(db, "bias_bad_rows", found.bad_rows)
    if unscored_table:
        source += f" UNION ALL SELECT id, session_id, reviewer_id, position FROM {unscored_table} WHERE {where}"
        source_params += list(params)
    groups = f"""SELECT session_id, reviewer_id FROM ({source})
                 GROUP BY session_id, reviewer_id
                 HAVING MAX(position) >= COUNT(*) OR COUNT(DISTINCT position) < COUNT(*)"""
    found.bad_reviews = [(s, r) for s, r in db.execute(groups, source_params)]
    for session, reviewer in found.bad_reviews[:MAX_MESSAGES]:
        rows = db.execute(
            f"SELECT position, id FROM ({source}) WHERE session_id = ? AND reviewer_id = ?",
            [*source_params, session, reviewer],
        ).fetchall()
        bad = _review_problem([(p, i) for p, i in rows])
        if bad is not None and len(found.messages) < MAX_MESSAGES:
            found.messages.append(f"{locate(bad[0])}: {bad[1]} (session {session}, reviewer {reviewer})")
    return found


def _temp_ids(db: Database, name: str, ids: Sequence[int]) -> None:
    db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY)")
    db.execute(f"DELETE FROM temp.{name}")
    db.conn.executemany(f"INSERT OR IGNORE INTO temp.{name} (id) VALUES (?)", [(i,) for i in ids])


def exclusion(db: Database, problems: Problems) -> tuple[str, list[str]]:
    """A WHERE clause leaving out the bad rows and reviews, and the temp tables it uses."""
    clauses, tables = [], []
    if problems.bad_rows:
        clauses.append("id NOT IN (SELECT id FROM temp.bias_bad_rows)")
        tables.append("bias_bad_rows")
    if problems.bad_reviews:
        name = f"bias_bad_reviews_{secrets.token_hex(4)}"
        db.execute(f"CREATE TEMP TABLE {name} (session_id, reviewer_id, PRIMARY KEY (session_id, reviewer_id))")
        db.conn.executemany(f"INSERT OR IGNORE INTO temp.{name} VALUES (?, ?)", problems.bad_reviews)
        clauses.append(
            f"NOT EXISTS (SELECT 1 FROM temp.{name} e WHERE e.session_id = bias_records.session_id "
            f"AND e.reviewer_id = bias_records.reviewer_id)"
        )
        tables.append(name)
    return " AND ".join(clauses), tables


def raise_first(problems: Problems, hint: str) -> None:
    if problems.messages:
        more = len(problems.bad_rows) + len(problems.bad_reviews) - 1
        extra = f" ({more} more problems)" if more > 0 else ""
        raise InputError(f"{problems.messages[0]}{extra}; {hint}")
    if problems:
        raise InputError(f"invalid bias records; {hint}")

"""The bias report's summaries computed in Python from the records a write brings (SQLite).

A session's records are normally written at once, so a write usually brings whole new
sessions, whose summaries need nothing but the new rows: computed here from the rows already
in memory, they cost less than the ``GROUP BY`` statements of council.storage.bias_summaries,
which sort every new row twice (``benchmarks/bench_store_backends.py``). A write adding to a session
already summarized reads that session's records back (the per-answer index) and computes it
again. The values are the statements' own: the same aggregates, in the same types, with
SQLite's rounding; a hypothesis test holds the two to each other.

The review and self rows are appended, each session's in one run of ids that its session row
names, so that no write pays for a key of random session ids, and the rows a session loses
when it is computed again are found by their ids.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from council.storage.bias_rows import COLUMNS
from council.storage.bias_summaries import (
    ADD_POSITION_SUMS,
    MASK_BITS,
    PACK,
    REVIEW_COLUMNS,
    REVIEW_TABLE,
    SELF_COLUMNS,
    SELF_TABLE,
    SESSION_COLUMNS,
    SESSION_TABLE,
)

#: A record's columns as the summaries read them: the table's, without the id.
FIELDS = COLUMNS[1:]
_TEXT, _WHOLE = {str, type(None)}, {int, bool, type(None)}
# The Python types every value of a column must have to be summed as SQLite stores it (the
# columns the summaries do not read are not checked).
_TYPES = {
    "session_id": {str}, "reviewer_id": {str}, "model_id": {str}, "position": {int, bool},
    "score_value": {int, float, bool}, "timestamp": _TEXT, "council": _TEXT, "scale_min": _WHOLE,
    "scale_max": _WHOLE, "self_review": _WHOLE, "response_length_words": _WHOLE, "response_length_chars": _WHOLE,
}  # fmt: skip
_CHECKS = [(FIELDS.index(name), types) for name, types in _TYPES.items()]


def _round(x: float) -> float:
    """SQLite's round(): half away from zero (Python's rounds half to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def canonical(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]] | None:
    """``rows`` (tuples of ``columns``) as tuples of :data:`FIELDS` (the rows themselves when
    they are already), or None when a value is not of the type SQLite stores it as (a score
    given as the text "7" is stored as 7.0)."""
    if tuple(columns) != FIELDS:
        rows = list(map(itemgetter(*(columns.index(name) for name in FIELDS)), rows))
    for at, types in _CHECKS:
        if not set(map(type, map(itemgetter(at), rows))) <= types:
            return None
    return rows


def summary_rows(records: Sequence[Sequence[Any]]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The session, review and self rows (without ids or runs) of every session in ``records``
    (tuples of :data:`FIELDS`, every record of each session), in session order, and the
    records' position sums: (position, reviewer, has council, council or '', n, Σs, Σs²)."""
    reviews: dict[tuple[str, str], list[Any]] = {}
    answers: dict[tuple[str, str], list[Any]] = {}
    positions: dict[tuple[Any, ...], list[Any]] = {}
    bits = [1 << p for p in range(MASK_BITS)]
    for _, session, reviewer, model, position, chars, score, _, ts, lo, hi, own, council, words in records:
        s = float(score)  # score_value is a REAL column
        ss = s * s
        a, b = s * PACK + position, position - s * PACK
        r = reviews.get((session, reviewer))
        if r is None:  # k, mask, top, a, b, Σs, Σs², MIN(timestamp), MIN(council)
            bit = bits[position] if position < MASK_BITS else 0
            reviews[session, reviewer] = [1, bit, s, a, b, s, ss, ts, council]
        else:
            r[0] += 1
            if position < MASK_BITS:  # never negative: the table's CHECK
                r[1] += bits[position]
            if s > r[2]:
                r[2] = s
            if a > r[3]:
                r[3] = a
            if b < r[4]:
                r[4] = b
            r[5] += s
            r[6] += ss
            if ts != r[7] and ts is not None and (r[7] is None or ts < r[7]):
                r[7] = ts
            if council != r[8] and council is not None and (r[8] is None or council < r[8]):
                r[8] = council
        # n, Σs, Σwords, words counted, Σchars, chars counted, Σself, Σself·s, the first record's
        # other values, and all of the records' once one differs from it (None until then)
        t = answers.get((session, model))
        if t is None:
            answers[session, model] = [1, s, words or 0, words is not None, chars or 0, chars is not None,
                                       own or 0, (own or 0) * s, (ts, council, lo, hi), None]  # fmt: skip
        else:
            t[0] += 1
            t[1] += s
            if words is not None:
                t[2] += words
                t[3] += 1
            if chars is not None:
                t[4] += chars
                t[5] += 1
            if own:
                t[6] += own
                t[7] += own * s
            if t[9] is not None:
                t[9].append((ts, council, lo, hi))
            elif (ts, council, lo, hi) != t[8]:
                t[9] = [t[8]] * (t[0] - 1) + [(ts, council, lo, hi)]
        key = (position, reviewer, council)
        p = positions.get(key)
        if p is None:
            positions[key] = [1, s, ss]
        else:
            p[0] += 1
            p[1] += s
            p[2] += ss
    gaps = _gaps(records, answers)
    sessions, selves = _answer_rows(answers, gaps)
    return (
        sessions,
        [_review_row(key, reviews[key], _mean_gap(gaps, key)) for key in sorted(reviews)],
        selves,
        [(position, reviewer, 0 if council is None else 1, "" if council is None else council, *sums)
         for (position, reviewer, council), sums in positions.items()],
    )  # fmt: skip


_GAP_FIELDS = itemgetter(*(FIELDS.index(name) for name in ("session_id", "reviewer_id", "model_id", "score_value",
                                                              "self_review")))


def _gaps(records: Sequence[Sequence[Any]], answers: dict[tuple[str, str], list[Any]]) -> dict[Any, list[Any]]:
    """Per review (session, reviewer): [n, Σ] of the gaps over its scores of answers it did not write
    that another reviewer also scored, a gap being the score less the mean of the other
    reviewers' (self-reviews left out on both sides): bias_summaries.gap_columns. A second pass
    over the records, once every answer's sums are known."""
    # Per answer scored by N ≥ 2 reviewers (not its own model), total T: a score s's gap
    # s − (T − s)/(N − 1) is s·N/(N − 1) − T/(N − 1).
    shared = {
        key: ((a[0] - a[6]) / (a[0] - a[6] - 1), (a[1] - a[7]) / (a[0] - a[6] - 1))
        for key, a in answers.items()
        if a[0] - a[6] >= 2
    }
    lookup = shared.get
    gaps: dict[Any, list[Any]] = {}
    for session, reviewer, model, score, own in map(_GAP_FIELDS, records):
        answer = lookup((session, model))
        if own or answer is None:
            continue
        gap = float(score) * answer[0] - answer[1]
        g = gaps.get((session, reviewer))
        if g is None:
            gaps[session, reviewer] = [1, gap]
        else:
            g[0] += 1
            g[1] += gap
    return gaps


def _mean_gap(gaps: dict[Any, list[Any]], key: Any) -> float | None:
    """A review's gap (bias_summaries.gap_columns): the mean of its gaps, None without any."""
    gap = gaps.get(key)
    return None if gap is None else gap[1] / gap[0]


def _review_row(key: tuple[str, str], r: list[Any], gap: float | None) -> tuple[Any, ...]:
    """(session, reviewer, ts_min, council_min, k, code, Σs, Σs², gap): bias_summaries.review_code."""
    k, mask, top, a, b, total, total_sq, ts, council = r
    if k > MASK_BITS:
        code = None
    elif mask != (1 << k) - 1:
        code = -1
    elif _round(a - top * PACK) == _round(b + top * PACK):
        code = int(_round(b + top * PACK))
    else:
        code = -2
    return (*key, ts, council, k, code, float(total), float(total_sq), gap)


def _least(values: Any) -> Any:
    """MIN over SQL values: the smallest non-NULL one, or NULL."""
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _greatest(values: Any) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _answer_rows(
    answers: dict[tuple[str, str], list[Any]], gaps: dict[Any, list[Any]]
) -> tuple[list[Any], list[Any]]:
    """The session rows, from their answers in model order as the statements' GROUP BY sums
    them (bias_summaries._session_columns), and the self-reviewed answers' rows with their
    reviewer's ``gaps`` in the session."""
    sessions: dict[str, list[Any]] = {}
    selves = []
    for (session, model), (n, total, words, n_words, chars, n_chars, self_n, self_total, first, every) in sorted(
        answers.items()
    ):
        y = total / n
        row = sessions.get(session)
        if row is None:
            # records, answers, per unit n, Σx, Σy, Σx², Σy², Σxy, the first record's (ts, council,
            # scale), and all of the records' once one differs from it
            row = sessions[session] = [0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, first, None]
        if row[15] is not None:
            row[15] += every or [first] * n
        elif every is not None or first != row[14]:
            row[15] = [row[14]] * row[0] + (every or [first] * n)
        row[0] += n
        row[1] += 1
        for at, length, count in ((2, words, n_words), (8, chars, n_chars)):  # per unit, at its columns
            if count:
                x = length / count  # AVG of the non-NULL lengths
                row[at] += 1
                row[at + 1] += x
                row[at + 2] += y
                row[at + 3] += x * x
                row[at + 4] += y * y
                row[at + 5] += x * y
        if self_n == 1 and n > 1:  # d = own − mean of the others (bias_summaries.fold_statements)
            ts_min, council_min = (first[0], first[1]) if every is None else (
                _least([v[0] for v in every]), _least([v[1] for v in every]))  # fmt: skip
            selves.append((model, session, ts_min, council_min, float(self_total),
                           (total - self_total) / (n - float(self_n)), _mean_gap(gaps, (session, model))))  # fmt: skip
    out = []
    for session, row in sessions.items():
        records, first, every = row[0], row[14], row[15]
        if every is None:  # the usual session: one timestamp, council and scale
            ts, council, lo, hi = first
            nulls = records if ts is None else 0
            council_nulls = records if council is None else 0
            attributes = (ts, ts, nulls, council, council, council_nulls, lo, hi, 1)
        else:
            attributes = _attributes(records, every)
        out.append((session, records, row[1], *attributes, *row[2:14]))
    return out, selves


def _attributes(records: int, rest: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """(ts_min, ts_max, ts_nulls, council_min, council_max, council_nulls, scale_min, scale_max,
    scale_uniform) of a session's records' (timestamp, council, scale_min, scale_max)."""
    timestamps, councils, lows, highs = zip(*rest, strict=True)
    scaled = [v for v in lows if v is not None]
    present_hi = [v for v in highs if v is not None]
    one_scale = bool(scaled) and min(scaled) == max(scaled) and min(present_hi) == max(present_hi)
    all_scaled = len(scaled) == records and one_scale
    return (
        _least(timestamps), _greatest(timestamps), timestamps.count(None),
        _least(councils), _greatest(councils), councils.count(None),
        min(scaled) if all_scaled else None, min(present_hi) if all_scaled else None,
        1 if not scaled or all_scaled else 0,
    )  # fmt: skip


def write_summaries(conn: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]], before: int) -> None:
    """After ``rows`` (tuples of ``columns``) were inserted, the ids past ``before`` being
    theirs: their scores added to the position sums and their sessions summarized, inside
    the write's transaction. A session already summarized is computed again from all of its
    records, its old rows deleted by their runs of ids."""
    records = canonical(columns, rows)
    if records is None:  # as stored, which is what the statements would read
        records = conn.execute(
            f"SELECT {', '.join(FIELDS)} FROM bias_records NOT INDEXED WHERE id > ?", [before]
        ).fetchall()
    collecting = gc.isenabled()
    gc.disable()  # the tuples made here hold no cycles: collections would only scan them
    try:
        sessions = sorted({record[1] for record in records})  # FIELDS[1]: session_id
        stored = conn.execute(
            f"SELECT session_id, reviews_from, reviews_to, selves_from, selves_to FROM {SESSION_TABLE} "
            "WHERE session_id IN (SELECT value FROM json_each(?))",
            [json.dumps(sessions)],
        ).fetchall()
        summed, reviews, selves, positions = summary_rows(records)
        if stored:  # those sessions again, from all of their records (the new ones were inserted)
            again = [row[0] for row in stored]
            conn.executemany(f"DELETE FROM {SESSION_TABLE} WHERE session_id = ?", [(s,) for s in again])
            for table, at in ((REVIEW_TABLE, 1), (SELF_TABLE, 3)):
                runs = [(row[at], row[at + 1]) for row in stored if row[at] is not None]
                conn.executemany(f"DELETE FROM {table} WHERE id BETWEEN ? AND ?", runs)
            known = set(again)
            records = [r for r in records if r[1] not in known] + conn.execute(
                f"SELECT {', '.join(FIELDS)} FROM bias_records WHERE session_id IN (SELECT value FROM json_each(?))",
                [json.dumps(again)],
            ).fetchall()
            summed, reviews, selves, _ = summary_rows(records)
        conn.executemany(ADD_POSITION_SUMS, positions)  # the new records' scores only
        _insert(conn, summed, reviews, selves)
    finally:
        if collecting:
            gc.enable()


def _insert(conn: Any, sessions: list[Any], reviews: list[Any], selves: list[Any]) -> None:
    """The rows, each session's review and self rows given ids in one run its row names."""
    runs: dict[str, list[Any]] = {row[0]: [None, None, None, None] for row in sessions}
    numbered: dict[str, list[tuple[Any, ...]]] = {}
    for table, rows, session_at, run_at in ((REVIEW_TABLE, reviews, 0, 0), (SELF_TABLE, selves, 1, 2)):
        first = conn.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}").fetchone()[0]
        numbered[table] = [(first + i, *row) for i, row in enumerate(rows)]
        for i, row in enumerate(rows):  # rows come in session order: each session's are one run
            run = runs[row[session_at]]
            if run[run_at] is None:
                run[run_at] = first + i
            run[run_at + 1] = first + i
    for table, columns, values in (
        (SESSION_TABLE, SESSION_COLUMNS, [(*row, *runs[row[0]]) for row in sessions]),
        (REVIEW_TABLE, REVIEW_COLUMNS, numbered[REVIEW_TABLE]),
        (SELF_TABLE, SELF_COLUMNS, numbered[SELF_TABLE]),
    ):
        if values:
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})", values
            )

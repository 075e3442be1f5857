"""The bias report's per-review sums kept as the records are written (migration m019).

One summary table holds what the report's per-review pass needs, one row per review —
(session, reviewer) — and per every value a filter can select (timestamp, council, the
scale), so ``--since``, ``--council`` and the scale check read it exactly. Every write of
records folds its rows in, in the same transaction, by one additive upsert (counts and sums
add up, the packed top scores take the larger or smaller): records of one review written in
separate calls add up to the review's row. Migration m019 and
``council store copy`` build them from the rows already stored.

The report (council.storage.bias_sums) reads them when they answer its query exactly, and the
raw rows otherwise. They are complete when the records they count are as many as the stored
rows: a fold only ever adds rows that were written, once, and no code path updates or deletes
a record, so equal counts mean the same records (a row written past the folds, by hand or by
an older council, sends the report to the rows). A per-answer table was measured too and
left out: the answer pass reads 4 records per answer, and its sums saved less than their
upkeep cost each write (docs/benchmarks.md, section 23).
"""

from __future__ import annotations

# Packs (score, position) into one number so that one MAX finds the top score with its
# highest position and one MIN (of position − score·M) the top score with its lowest
# position: the top is unique when the two agree. Exact for positions below M and scores
# that differ by more than (max position)/M, i.e. any real score scale.
PACK = 1 << 20
# Positions 0..MASK_BITS-1 fit a review's position mask exactly in a float sum (53-bit mantissa).
MASK_BITS = 53

REVIEW_TABLE = "bias_review_sums"
FILTERED = ('"timestamp"', "council", "scale_min", "scale_max")
REVIEW_KEY = ("session_id", "reviewer_id", *FILTERED)

_ADD, _MAX, _MIN = "+", "max", "min"


def review_aggregates(score: str) -> dict[str, str]:
    """What the per-review pass takes of each review, as aggregates over its records whose score
    is ``score`` (SQL): the report's pass over the rows and the summaries' folds use these same
    expressions, so that the two read the same sums."""
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


# How two summary rows of one column combine.
_COMBINED = {"k": _ADD, "mask": _ADD, "top": _MAX, "a": _MAX, "b": _MIN, "total": _ADD, "total_sq": _ADD}
# column: (its aggregate over records, how two rows of it combine)
REVIEW_SUMS: dict[str, tuple[str, str]] = {
    column: (aggregate, _COMBINED[column]) for column, aggregate in review_aggregates("score_value").items()
}
_INTEGER = {"k"}
_TABLES = ((REVIEW_TABLE, REVIEW_KEY, REVIEW_SUMS),)


def create_statements() -> list[str]:
    """The table and its key, in SQL both databases take. A key column may be NULL
    (no council, no scale): such rows never conflict, so a fold adds a row, which the
    report's GROUP BY adds up like any other."""
    statements = []
    for table, key, sums in _TABLES:
        key_types = ["TEXT", "TEXT", "TEXT", "TEXT", "BIGINT", "BIGINT"]
        columns = [f"{c} {t}" for c, t in zip(key, key_types, strict=True)]
        columns += [f"{c} {'BIGINT' if c in _INTEGER else 'DOUBLE PRECISION'} NOT NULL" for c in sums]
        statements.append(f"CREATE TABLE {table} ({', '.join(columns)})")
        statements.append(f"CREATE UNIQUE INDEX idx_{table}_key ON {table} ({', '.join(key)})")
    return statements


def _combine(table: str, column: str, how: str) -> str:
    old, new = f"{table}.{column}", f"excluded.{column}"
    if how == _ADD:
        return f"{column} = {old} + {new}"
    keep = ">=" if how == _MAX else "<="
    return f"{column} = CASE WHEN {new} IS NULL OR {old} {keep} {new} THEN {old} ELSE {new} END"


def fold_statements(source: str) -> list[str]:
    """Upserts adding the records of ``source`` (a table, or ``bias_records WHERE …`` with its
    parameters) into the summaries."""
    statements = []
    for table, key, sums in _TABLES:
        keys = ", ".join(key)
        aggregates = ", ".join(agg for agg, _ in sums.values())
        updates = ", ".join(_combine(table, c, how) for c, (_, how) in sums.items())
        where = "" if " WHERE " in f" {source} ".upper() else " WHERE TRUE"  # an upsert's SELECT needs one
        statements.append(
            f"INSERT INTO {table} ({keys}, {', '.join(sums)}) SELECT {keys}, {aggregates} FROM {source}{where} "
            f"GROUP BY {keys} ON CONFLICT ({keys}) DO UPDATE SET {updates}"
        )
    return statements


def rebuild_statements() -> list[str]:
    """The summaries emptied and summed again from every stored record (m019, a store copy)."""
    return [f"DELETE FROM {table}" for table, _, _ in _TABLES] + fold_statements("bias_records")


#: m019 on both backends: the table, summed from the rows already stored; m017's per-review
#: and scale indexes, which the report no longer reads, dropped.
MIGRATION = [
    *create_statements(),
    *rebuild_statements(),
    "DROP INDEX IF EXISTS idx_bias_records_review",
    "DROP INDEX IF EXISTS idx_bias_records_scale",
]

"""The leaderboard's pairwise outcomes counted by PostgreSQL: the statements of
council.storage.comparisons (SQLite) in PostgreSQL's dialect, the same rows out."""

from __future__ import annotations

from typing import Any

from council.storage.comparisons import assemble_comparisons, session_filter
from council.storage.data import ComparisonData

# Models get integer ids inside the query (in byte order, as the models query lists them),
# so the per-session pattern text is digits and separators only.
_SESSION_PATTERNS = """
WITH ids AS MATERIALIZED (
    SELECT model, row_number() OVER (ORDER BY model COLLATE "C") - 1 AS idx
    FROM (SELECT DISTINCT model FROM answers WHERE status = 'ok' AND model IS NOT NULL) m
),
pairs AS (
    SELECT s.id AS unit, wi.idx AS w, li.idx AS l, COUNT(*) AS n
    FROM sessions s
    JOIN reviews r ON r.session_id = s.id
    CROSS JOIN LATERAL jsonb_array_elements_text(r.ranking::jsonb) WITH ORDINALITY AS jw(value, key)
    JOIN answers wa ON wa.session_id = r.session_id AND wa.member = jw.value
    JOIN ids wi ON wi.model = wa.model
    CROSS JOIN LATERAL jsonb_array_elements_text(r.ranking::jsonb) WITH ORDINALITY AS jl(value, key)
    JOIN answers la ON la.session_id = r.session_id AND la.member = jl.value
    JOIN ids li ON li.model = la.model
    WHERE r.valid = 1 AND jl.key > jw.key
      AND wa.status = 'ok' AND la.status = 'ok' AND wi.idx <> li.idx {where}
    GROUP BY s.id, wi.idx, li.idx
)
SELECT pattern, COUNT(*) AS units
FROM (SELECT string_agg(w || ',' || l || ',' || n, ';') AS pattern FROM pairs GROUP BY unit) p
GROUP BY pattern
"""

_SESSION_MODELS = """
SELECT model FROM (SELECT DISTINCT model FROM answers WHERE status = 'ok' AND model IS NOT NULL) m
ORDER BY model COLLATE "C"
"""

_JUDGED_PAIRS = """
SELECT model_a, model_b, winner, COUNT(*) AS units
FROM judgment_runs
WHERE kind = 'compare' AND status = 'ok' AND winner IN ('A', 'B', 'TIE')
  AND model_a IS NOT NULL AND model_b IS NOT NULL AND model_a <> model_b {where}
GROUP BY model_a, model_b, winner
"""


def count_comparisons(
    store: Any,  # the PostgreSQL store: its pooled connection()
    *,
    since: str | None = None,
    council: str | None = None,
    sessions: bool = True,
    judgments: bool = True,
) -> ComparisonData:
    """As council.storage.comparisons.count_comparisons, in one REPEATABLE READ snapshot."""
    from psycopg.rows import tuple_row

    local: list[str] = []
    session_rows: list[Any] = []
    judged_rows: list[Any] = []
    with store.connection() as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            cur = conn.cursor(row_factory=tuple_row)
            if sessions:
                where, params = session_filter(since, council, mark="%s")
                clause = "".join(f" AND {w}" for w in where)
                local = [row[0] for row in cur.execute(_SESSION_MODELS).fetchall()]
                session_rows = cur.execute(_SESSION_PATTERNS.format(where=clause), params).fetchall()
            if judgments:
                clause, params = ("", []) if since is None else (" AND created_at >= %s", [since])
                judged_rows = cur.execute(_JUDGED_PAIRS.format(where=clause), params).fetchall()
        finally:
            conn.execute("COMMIT")
    return assemble_comparisons(local, session_rows, judged_rows)

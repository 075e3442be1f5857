"""Pairwise outcomes between models on record, counted in SQL for the leaderboard.

Two sources, each a list of *units* (the bootstrap resamples units):

- a council session: every valid ballot (a reviewer's ranking) says that each answer beat
  every answer ranked below it; answers are mapped to the model that wrote them. Ballots
  are taken as stored, so self-review follows the council's setting (``exclude``: the
  reviewer's own answer is not on its ballot; ``include``/``flag``: it is, and counts).
  Candidate answers (``--candidates``) are left out: their ids name texts, not models. Two
  answers by the same model say nothing about models and are skipped.
- a judged pair (a ``compare`` run, standalone or in a batch) whose item named the models
  behind A and B: its final verdict, a tie as half a win each way.

SQL does the counting: per session, the wins of each model over each other model, then
sessions with identical counts are grouped, so Python receives one row per distinct
pattern (a few thousand for 100,000 sessions), never a row per ballot or pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from council.storage.data import ComparisonData, group_outcomes

if TYPE_CHECKING:
    from council.storage.connection import Backend

# Models get integer ids inside the query, so the per-session pattern text is digits and
# separators only, whatever a model string contains.
_SESSION_PATTERNS = """
WITH ids AS MATERIALIZED (
    SELECT model, row_number() OVER (ORDER BY model) - 1 AS idx
    FROM (SELECT DISTINCT model FROM answers WHERE status = 'ok' AND model IS NOT NULL)
),
pairs AS (
    SELECT s.rowid AS unit, wi.idx AS w, li.idx AS l, COUNT(*) AS n
    FROM sessions s
    CROSS JOIN reviews r ON r.session_id = s.id
    CROSS JOIN json_each(r.ranking) jw
    CROSS JOIN answers wa INDEXED BY idx_answers_model ON wa.session_id = r.session_id AND wa.member = jw.value
    CROSS JOIN ids wi ON wi.model = wa.model
    CROSS JOIN json_each(r.ranking) jl
    CROSS JOIN answers la INDEXED BY idx_answers_model ON la.session_id = r.session_id AND la.member = jl.value
    CROSS JOIN ids li ON li.model = la.model
    WHERE r.valid = 1 AND json_valid(r.ranking) AND jl.key > jw.key
      AND wa.status = 'ok' AND la.status = 'ok' AND wi.idx != li.idx {where}
    GROUP BY s.rowid, wi.idx, li.idx
)
SELECT pattern, COUNT(*) AS units
FROM (SELECT group_concat(w || ',' || l || ',' || n, ';') AS pattern FROM pairs GROUP BY unit)
GROUP BY pattern
"""

_SESSION_MODELS = """
SELECT model FROM (SELECT DISTINCT model FROM answers WHERE status = 'ok' AND model IS NOT NULL) ORDER BY model
"""

_JUDGED_PAIRS = """
SELECT model_a, model_b, winner, COUNT(*) AS units
FROM judgment_runs
WHERE kind = 'compare' AND status = 'ok' AND winner IN ('A', 'B', 'TIE')
  AND model_a IS NOT NULL AND model_b IS NOT NULL AND model_a != model_b {where}
GROUP BY model_a, model_b, winner
"""


def session_filter(since: str | None, council: str | None, *, mark: str = "?") -> tuple[list[str], list[Any]]:
    """The conditions (on sessions aliased ``s``) and parameters that keep the stored sessions a
    report reads: created since ``since``, of ``council`` (None: any); ``mark``: the driver's
    parameter mark, for a statement that does not pass through a dialect."""
    where: list[str] = []
    params: list[Any] = []
    if since is not None:
        where.append(f"s.created_at >= {mark}")
        params.append(since)
    if council is not None:
        where.append(f"s.council = {mark}")
        params.append(council)
    return where, params


@contextmanager
def _snapshot(store: Backend) -> Iterator[None]:
    """One read transaction, so the queries see the same database (WAL readers never block)."""
    conn = store.db.conn
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def count_comparisons(
    store: Backend,
    *,
    since: str | None = None,
    council: str | None = None,
    sessions: bool = True,
    judgments: bool = True,
) -> ComparisonData:
    """The pairwise outcomes on record. ``since``: stored-form UTC time (``clock.parse_since``);
    ``council`` restricts the sessions (judged pairs belong to no council)."""
    local: list[str] = []
    session_rows: list[Any] = []
    judged_rows: list[Any] = []
    with _snapshot(store):
        if sessions:
            where, params = session_filter(since, council)
            clause = "".join(f" AND {w}" for w in where)
            local = [row[0] for row in store.db.execute(_SESSION_MODELS).fetchall()]
            session_rows = store.db.execute(_SESSION_PATTERNS.format(where=clause), params).fetchall()
        if judgments:
            clause, params = ("", []) if since is None else (" AND created_at >= ?", [since])
            judged_rows = store.db.execute(_JUDGED_PAIRS.format(where=clause), params).fetchall()
    return assemble_comparisons(local, session_rows, judged_rows)


def assemble_comparisons(local: list[str], session_rows: list[Any], judged_rows: list[Any]) -> ComparisonData:
    """The outcomes from the counting queries' rows (every backend's): ``local``, the models
    in the order of their ids in the patterns; ``session_rows``, ``(pattern, units)``;
    ``judged_rows``, ``(model_a, model_b, winner, units)``."""
    # pattern "w,l,n;w,l,n;...": wins n of local model w over local model l in one session
    parsed = [(list(map(int, pattern.replace(";", ",").split(","))), units) for pattern, units in session_rows]
    seen: set[int] = set()
    for numbers, _ in parsed:
        seen.update(numbers[0::3], numbers[1::3])
    models = sorted({local[i] for i in seen} | {m for row in judged_rows for m in row[:2]})
    index = {m: i for i, m in enumerate(models)}
    to_global = [index.get(m, -1) for m in local]
    data = ComparisonData(models=models)
    data.sessions = group_outcomes(
        (
            (
                ((to_global[numbers[k]], to_global[numbers[k + 1]]), float(numbers[k + 2]))
                for k in range(0, len(numbers), 3)
            ),
            units,
        )
        for numbers, units in parsed
    )
    judged = []
    for model_a, model_b, winner, units in judged_rows:
        a, b = index[model_a], index[model_b]
        if winner == "TIE":
            judged.append(((((a, b), 0.5), ((b, a), 0.5)), units))
        else:
            judged.append(((((a, b) if winner == "A" else (b, a), 1.0),), units))
    data.judgments = group_outcomes(judged)
    return data

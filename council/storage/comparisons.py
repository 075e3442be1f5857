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
from dataclasses import dataclass, field
from typing import Any

from council.storage.store import Store

Pair = tuple[int, int]
Outcomes = dict[Pair, float]

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
    CROSS JOIN answers wa ON wa.session_id = r.session_id AND wa.member = jw.value
    CROSS JOIN ids wi ON wi.model = wa.model
    CROSS JOIN json_each(r.ranking) jl
    CROSS JOIN answers la ON la.session_id = r.session_id AND la.member = jl.value
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


@dataclass
class ComparisonData:
    """Every unit's outcomes, grouped: ``sessions``/``judgments`` are ``(units, outcomes)``
    lists over model indices into ``models``."""

    models: list[str] = field(default_factory=list)
    sessions: list[tuple[int, Outcomes]] = field(default_factory=list)
    judgments: list[tuple[int, Outcomes]] = field(default_factory=list)

    _positions: dict[str, int] = field(default_factory=dict, repr=False)

    def index(self, model: str) -> int:
        """The index of ``model``, added to ``models`` when first seen."""
        if model not in self._positions:
            self._positions[model] = len(self.models)
            self.models.append(model)
        return self._positions[model]


@contextmanager
def _snapshot(store: Store) -> Iterator[None]:
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


def _parse_pattern(pattern: str) -> Outcomes:
    outcomes: Outcomes = {}
    for part in pattern.split(";"):
        winner, loser, n = part.split(",")
        pair = (int(winner), int(loser))
        outcomes[pair] = outcomes.get(pair, 0.0) + float(n)
    return outcomes


def _canonical(data: ComparisonData) -> ComparisonData:
    """Models in alphabetical order and groups sorted, so the same comparisons give the same
    data (and the same bootstrap draws) whatever order the rows were stored in."""
    order = sorted(range(len(data.models)), key=lambda i: data.models[i])
    new_index = {old: new for new, old in enumerate(order)}

    def regroup(groups: list[tuple[int, Outcomes]]) -> list[tuple[int, Outcomes]]:
        merged: dict[tuple[tuple[Pair, float], ...], int] = {}
        for units, outcomes in groups:
            key = tuple(sorted(((new_index[i], new_index[j]), n) for (i, j), n in outcomes.items()))
            merged[key] = merged.get(key, 0) + units
        return [(merged[key], dict(key)) for key in sorted(merged)]

    return ComparisonData(
        models=[data.models[i] for i in order], sessions=regroup(data.sessions), judgments=regroup(data.judgments)
    )


def comparisons(
    store: Store,
    *,
    since: str | None = None,
    council: str | None = None,
    sessions: bool = True,
    judgments: bool = True,
) -> ComparisonData:
    """The pairwise outcomes on record. ``since``: stored-form UTC time (``clock.parse_since``);
    ``council`` restricts the sessions (judged pairs belong to no council)."""
    data = ComparisonData()
    with _snapshot(store):
        if sessions:
            where, params = [], []
            if since is not None:
                where.append("s.created_at >= ?")
                params.append(since)
            if council is not None:
                where.append("s.council = ?")
                params.append(council)
            clause = "".join(f" AND {w}" for w in where)
            local = [row[0] for row in store.db.execute(_SESSION_MODELS).fetchall()]
            for pattern, units in store.db.execute(_SESSION_PATTERNS.format(where=clause), params).fetchall():
                outcomes = {
                    (data.index(local[i]), data.index(local[j])): n for (i, j), n in _parse_pattern(pattern).items()
                }
                data.sessions.append((units, outcomes))
        if judgments:
            clause, params = ("", []) if since is None else (" AND created_at >= ?", [since])
            rows: list[Any] = store.db.execute(_JUDGED_PAIRS.format(where=clause), params).fetchall()
            for model_a, model_b, winner, units in rows:
                a, b = data.index(model_a), data.index(model_b)
                if winner == "TIE":
                    outcomes = {(a, b): 0.5, (b, a): 0.5}
                else:
                    outcomes = {(a, b) if winner == "A" else (b, a): 1.0}
                data.judgments.append((units, outcomes))
    return _canonical(data)

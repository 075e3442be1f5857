"""Bias records as rows for the bulk write paths: SQLite's ``executemany`` and PostgreSQL's
``COPY``, both in one transaction per call (``benchmarks/bench_bias_report.py`` writes them in bulk).

The rules a record must follow are the table's CHECK constraint (migrations m005 and m017),
so nothing is checked here but the field names: a misspelt one is refused, as an INSERT
naming a column that does not exist is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

#: The columns of ``bias_records`` in their stored order (m001, then m005's words at the end).
COLUMNS = (
    "id", "schema_version", "session_id", "reviewer_id", "model_id", "position", "response_length_chars",
    "score_value", "query_hash", "timestamp", "scale_min", "scale_max", "self_review", "council",
    "response_length_words",
)  # fmt: skip
_KNOWN = frozenset(COLUMNS)

#: The indexes m017 built, the same on both backends (kept as m017 shipped them).
M017_INDEXES = {
    "idx_bias_records_review": "session_id, reviewer_id, score_value, position",
    "idx_bias_records_answer_words": (
        "session_id, model_id, self_review, score_value, response_length_chars, response_length_words"
    ),
    "idx_bias_records_position_score_value": "position, score_value",
    "idx_bias_records_scale": "scale_min, scale_max",
}
#: The indexes of ``bias_records`` from m020 on: what the bias report reads of the rows
#: (council.storage.bias_sums) and nothing more, since each index costs every write: per
#: answer, covering (the pass over the rows with a reviewer filter, the scatter points, a
#: session's records when a write adds to it). The reviews, the scales and the positions
#: come from the summaries (council.storage.bias_summaries) instead of the per-review (m019),
#: scale (m019) and position (m020) indexes.
INDEXES = {name: on for name, on in M017_INDEXES.items() if name == "idx_bias_records_answer_words"}


def record_rows(records: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """(columns, one tuple per record): every column but ``id`` unless a record carries one;
    a field a record leaves out is NULL. A field that is not a column raises ``ValueError``."""
    records = records if isinstance(records, list) else list(records)
    columns = COLUMNS if any("id" in r for r in records) else COLUMNS[1:]
    whole = itemgetter(*columns)
    rows = []
    for record in records:
        if len(record) == len(columns):  # the usual case: every field given (BiasRecord.row())
            try:
                rows.append(whole(record))
                continue
            except KeyError:
                pass
        if not record.keys() <= _KNOWN:
            unknown = ", ".join(sorted(set(record) - _KNOWN))
            raise ValueError(f"a bias record has fields that are not columns of bias_records: {unknown}")
        rows.append(tuple(map(record.get, columns)))
    return columns, rows

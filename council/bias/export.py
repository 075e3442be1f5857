"""Export bias records in the record schema (JSONL or CSV), one record per line.

The export is what ``council bias-report --records`` reads back, so records from
several machines or other tools can be audited together. It carries exactly the
record fields (no database id, and never the salt behind ``query_hash``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, TextIO

from council.bias.records import BiasRecord
from council._util.clock import parse_since
from council.untrusted.csv_cells import csv_cell
from council.errors import InputError
from council.storage import Store

RECORD_FIELDS: tuple[str, ...] = tuple(BiasRecord.model_fields)
FORMATS = ("jsonl", "csv")


def export_bias_records(
    store: Store,
    out: TextIO | Path | str,
    fmt: str = "jsonl",
    since: str | None = None,
) -> int:
    """Write every bias record (``timestamp >= since`` if given) to ``out``; return the count.

    ``out`` is an open text file or a path. JSONL lines are BiasRecord objects; CSV has a
    header row and empty cells for nulls. ``self_review`` is true/false and a whole score an
    integer in both, so each field loads as the same value and type from either.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="") as fh:
            return export_bias_records(store, fh, fmt=fmt, since=since)
    since = parse_since(since) if since else None
    rows = (_record_values(row) for row in store.bias_record_rows(RECORD_FIELDS, since=since))
    count = 0
    if fmt == "jsonl":
        for values in rows:
            out.write(json.dumps(dict(zip(RECORD_FIELDS, values, strict=True)), ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RECORD_FIELDS)
    for values in rows:
        writer.writerow([csv_cell(v) for v in values])
        count += 1
    return count


_SELF = RECORD_FIELDS.index("self_review")
_SCORE = RECORD_FIELDS.index("score_value")


def _record_values(row: tuple[Any, ...]) -> list[Any]:
    """One stored row as both formats write it: ``self_review`` a boolean, a whole score an
    integer (the column is a float: ``8``, not ``8.0``, in JSONL and CSV alike)."""
    values = list(row)
    values[_SELF] = bool(values[_SELF])
    score = values[_SCORE]
    if isinstance(score, float) and score.is_integer() and abs(score) < 2**53:
        values[_SCORE] = int(score)
    return values

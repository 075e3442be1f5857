"""Export bias records in the record schema (JSONL or CSV), one record per line.

The export is what ``council bias-report --records`` reads back, so records from
several machines or other tools can be audited together. It carries exactly the
record fields (no database id, and never the salt behind ``query_hash``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TextIO

from council.bias.records import BiasRecord
from council.clock import parse_since
from council.csv_cells import csv_cell
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
    header row and empty cells for nulls. ``self_review`` is true/false in both, so it
    loads as the same boolean type from either.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="") as fh:
            return export_bias_records(store, fh, fmt=fmt, since=since)
    since = parse_since(since) if since else None
    self_index = RECORD_FIELDS.index("self_review")
    count = 0
    if fmt == "jsonl":
        for row in store.bias_record_rows(RECORD_FIELDS, since=since):
            record = dict(zip(RECORD_FIELDS, row, strict=True))
            record["self_review"] = bool(row[self_index])
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        return count
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RECORD_FIELDS)
    for row in store.bias_record_rows(RECORD_FIELDS, since=since):
        values = [csv_cell(v) for v in row]
        values[self_index] = csv_cell(bool(row[self_index]))
        writer.writerow(values)
        count += 1
    return count

"""``council export --judgments``: every batch's judged pairs as a flat table, one row per pair
and judge (:class:`council.exports.rows.JudgmentRow`), for pandas or DuckDB. Read a page of
items at a time, as ``council batch results`` reads them (a Dawid–Skene batch also reads its
passes, as its summary does); CSV text cells never start a formula (:mod:`council.untrusted.csv_cells`)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from typing import IO, Any

from council.errors import InputError
from council.exports.rows import JudgmentRow
from council.untrusted.csv_cells import csv_cell

FORMATS = ("jsonl", "csv")
JUDGMENT_COLUMNS: tuple[str, ...] = tuple(JudgmentRow.model_fields)


def _order_verdict(passes: list[str]) -> str | None:
    """One judge's verdict in one order: its votes' strict majority, ``TIE`` without one."""
    if not passes:
        return None
    from council.methods.voting import majority_vote

    return majority_vote(passes).winner


def judgment_rows(batch_id: str, row: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The rows of one recorded item (``judged_rows``'): one per judge of a finished pair, none otherwise."""
    result = row.get("result")
    if row["mode"] != "pairwise" or row["status"] != "ok" or not result:
        return
    orders: dict[tuple[str, str], list[str]] = {}
    for p in result.get("passes") or ():
        if p["valid"] and p["shown_first"] and p["winner"]:
            orders.setdefault((p["judge"], p["shown_first"]), []).append(p["winner"])
    for judge in result.get("judges") or ():
        name = judge["judge"]
        yield {
            "batch_id": batch_id,
            "item_id": row["item_id"],
            "label": row.get("label"),
            "judge": name,
            "model": judge["model"],
            "verdict_a_first": _order_verdict(orders.get((name, "A"), [])),
            "verdict_b_first": _order_verdict(orders.get((name, "B"), [])),
            "verdict": judge["result"]["winner"] if judge["success"] else None,
            "combined_verdict": row["winner"],
            "probability": result.get("probability"),
        }


def export_judgments(
    store: Any, out: IO[str], *, fmt: str = "jsonl", since: str | None = None, batch_id: str | None = None
) -> int:
    """Write the judged pairs of every batch opened on or after ``since`` (or of ``batch_id``
    only) to ``out`` in ``fmt``; return the number of rows written."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} (choose {' or '.join(FORMATS)})")
    from council.judging.batch import judged_rows, stored_judging

    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(JUDGMENT_COLUMNS)
    ids = [batch_id] if batch_id is not None else store.batch_ids(since=since)
    count = 0
    for the_id in ids:
        if not store.batch_exists(the_id):
            continue
        _, combine = stored_judging(store, the_id)
        for row in judged_rows(store, the_id, combine):
            for flat in judgment_rows(the_id, row):
                count += 1
                if writer is not None:
                    writer.writerow([csv_cell(flat[c]) for c in JUDGMENT_COLUMNS])
                else:
                    out.write(json.dumps(flat, ensure_ascii=False) + "\n")
    return count

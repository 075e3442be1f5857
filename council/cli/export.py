"""``council export``: session logs (JSONL/CSV, full or redacted) and bias records."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click

CSV_COLUMNS = [
    "session_id",
    "created_at",
    "status",
    "kind",
    "council",
    "members",
    "winner",
    "kendall_w",
    "kendall_w_p_value",
    "valid_reviews",
    "calls",
    "cost_usd",
    "question",
    "answer",
]


def session_export_row(row: dict[str, Any], redact: bool) -> dict[str, Any]:
    """One session as exported: its stored result (scrubbed of all text when ``redact``)."""
    from council.session import scrub_transcripts
    from council.session.results import SessionResult

    if row.get("result"):
        result = SessionResult.model_validate(json.loads(row["result"]))
        if redact:
            result = scrub_transcripts(result)
        return {"kind": row.get("kind") or "council", **result.model_dump(mode="json")}
    # failed/running sessions have no result: export their metadata only
    return {
        "kind": row.get("kind") or "council",
        "session_id": row["id"],
        "council": row["council"],
        "status": row["status"],
        "created_at": row["created_at"],
        "question": None if redact else row["question"],
        "error": row["error"],
        "members": json.loads(row["members"]) if row.get("members") else [],
    }


def csv_row(doc: dict[str, Any]) -> dict[str, Any]:
    consensus = doc.get("consensus") or {}
    ranking = consensus.get("ranking") or []
    usage = doc.get("usage") or {}
    return {
        "session_id": doc["session_id"],
        "created_at": doc.get("created_at"),
        "status": doc.get("status"),
        "kind": doc.get("kind"),
        "council": doc.get("council"),
        "members": " ".join(doc.get("members") or []),
        # tied winners are all named: "a = b"
        "winner": " = ".join(e["member"] for e in ranking if e.get("rank") == 1) if ranking else "",
        "kendall_w": consensus.get("kendall_w"),
        "kendall_w_p_value": consensus.get("kendall_w_p_value"),
        "valid_reviews": sum(1 for r in doc.get("reviews") or [] if r.get("valid")),
        "calls": usage.get("calls"),
        "cost_usd": usage.get("cost_usd"),
        "question": doc.get("question") or "",
        "answer": (doc.get("synthesis") or {}).get("text") or "",
    }


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    if path is None or path == "-":
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8", newline="") as fh:
        yield fh


@click.command()
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@click.option("--redact", is_flag=True, help="Leave out all question, answer, review and synthesis text.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), help="File to write (default: stdout).")
@click.option("--since", help="Only sessions (or records) on or after this ISO date.")
@click.option("--bias-records", is_flag=True, help="Export bias records (the record schema) instead of sessions.")
def export(fmt: str, redact: bool, output: str | None, since: str | None, bias_records: bool) -> None:
    """Export session logs or bias records from the database."""
    from council.storage import Store

    store = Store.open()
    if bias_records:
        from council.bias.export import export_bias_records

        with open_output(output) as fh:
            n = export_bias_records(store.db, fh, fmt=fmt, since=since)
        click.echo(f"exported {n} bias records", err=True)
        return
    count = 0
    with open_output(output) as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS) if fmt == "csv" else None
        if writer is not None:
            writer.writeheader()
        for row in store.iter_sessions(since=since):
            doc = session_export_row(row, redact)
            if writer is not None:
                writer.writerow(csv_row(doc))
            else:
                fh.write(json.dumps(doc) + "\n")
            count += 1
    click.echo(f"exported {count} sessions{' (redacted)' if redact else ''}", err=True)

"""``council export``: session logs (JSONL/CSV; per session, per review score or per answer;
full or redacted) and bias records. The rows are shaped in :mod:`council.exports`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import click

from council.cli.common import output_option, status
from council.exports import SHAPES


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    if path is None or path == "-":
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8", newline="") as fh:
        yield fh


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True, help="File format."
)
@click.option(
    "--shape",
    type=click.Choice(list(SHAPES)),
    default="sessions",
    show_default=True,
    help="One row per session (JSONL: the whole result), per review score, or per answer.",
)
@click.option("--redact", is_flag=True, help="Leave out all question, answer, review and synthesis text.")
@output_option("File to write (default: stdout).")
@click.option("--since", help="Only sessions (or records) on or after this ISO date.")
@click.option("--bias-records", is_flag=True, help="Export bias records (the record schema) instead of sessions.")
def export(fmt: str, shape: str, redact: bool, output: str | None, since: str | None, bias_records: bool) -> None:
    """Export session logs or bias records from the database."""
    from council.storage import open_store

    store = open_store()
    if bias_records:
        from council.bias.export import export_bias_records

        with open_output(output) as fh:
            n = export_bias_records(store, fh, fmt=fmt, since=since)
        status(f"exported {n} bias records")
        return
    from council.exports import export_sessions

    with open_output(output) as fh:
        count = export_sessions(store, fh, fmt=fmt, shape=shape, redact=redact, since=since)
    status(f"exported {count} sessions{' (redacted)' if redact else ''}")

"""``council export``: session logs (JSONL/CSV; per session, per review score or per answer;
full or redacted) and bias records. The rows are shaped in :mod:`council.exports.sessions`."""

from __future__ import annotations

import click

from council.api import EXPORT_SHAPES
from council.cli.common import open_output, output_option, status


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True, help="File format."
)
@click.option(
    "--shape",
    type=click.Choice(list(EXPORT_SHAPES)),
    default="sessions",
    show_default=True,
    help="One row per session (JSONL: the whole result), per review score, or per answer.",
)
@click.option("--redact", is_flag=True, help="Leave out all question, answer, review and synthesis text.")
@output_option("File to write (default: stdout).")
@click.option("--since", help="Only sessions (or records) on or after this ISO date.")
@click.option("--bias-records", is_flag=True, help="Export bias records (the record schema) instead of sessions.")
@click.option("--judged-pairs", is_flag=True,
              help="Export the judged pairs (JSON Lines) as a judgments file for `leaderboard --judgments`.")
@click.option("--judgments", is_flag=True,
              help="Export every batch's verdicts: one row per item and judge (JSONL or CSV).")
@click.option("--batch-id", help="With --judgments: only this batch.")
def export(
    fmt: str, shape: str, redact: bool, output: str | None, since: str | None, bias_records: bool, judged_pairs: bool,
    judgments: bool, batch_id: str | None,
) -> None:
    """Export session logs, bias records, judged pairs or batch judgments from the database."""
    from council._util.clock import parse_since
    from council.api import using_store
    from council.errors import UsageError

    if since:
        parse_since(since)  # bad input is refused before any file is touched
    if bias_records + judged_pairs + judgments > 1:
        raise UsageError("choose one of --bias-records, --judged-pairs and --judgments")
    if batch_id is not None and not judgments:
        raise UsageError("--batch-id goes with --judgments")
    if judgments:
        from council.api import export_judgments

        with using_store(True) as store, open_output(output) as fh:
            n = export_judgments(fh, fmt=fmt, since=parse_since(since) if since else None, batch_id=batch_id,
                                 store=store)  # fmt: skip
        status(f"exported {n} judgments")
        return
    if judged_pairs:
        if fmt != "jsonl":
            raise UsageError("--judged-pairs writes a judgments file: JSON Lines, without --format csv")
        from council.api import export_judged_pairs

        with using_store(True) as store, open_output(output) as fh:
            n = export_judged_pairs(fh, since=parse_since(since) if since else None, store=store)
        status(f"exported {n} judged pairs")
        return
    if bias_records:
        from council.api import export_bias_records

        with using_store(True) as store, open_output(output) as fh:
            n = export_bias_records(fh, fmt=fmt, since=since, store=store)
        status(f"exported {n} bias records")
        return
    from council.api import export_sessions

    with using_store(True) as store, open_output(output) as fh:
        count = export_sessions(fh, fmt=fmt, shape=shape, redact=redact, since=since, store=store)
    status(f"exported {count} sessions{' (redacted)' if redact else ''}")

"""``council bias-report`` — the cross-session bias audit (reads records only, no model SDKs)."""

from __future__ import annotations

from pathlib import Path

import click

from council.cli.common import output_option, status
from council.cli.reports import check_report_targets, write_report


@click.command("bias-report")
@click.option("--since", metavar="DATE", help="Only records on or after this ISO date or date-time (UTC).")
@click.option("--reviewer", "reviewers", multiple=True, metavar="ID", help="Only this reviewer (repeatable).")
@click.option("--council", "council_name", metavar="NAME", help="Only this council.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--html", "html", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help="The report as a self-contained HTML page with charts (to -o FILE or stdout). "
              "The older form --html FILE writes the page to FILE and still prints the report.")
@output_option("Write the report (text, --json or --html) to FILE instead of stdout.")
@click.option("--records", "records", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE.jsonl", help="Report from exported bias-record files instead of the database (repeatable).")
@click.option("--records-format", type=click.Choice(["auto", "council", "llm-council-core"]), default="auto",
              show_default=True, help="With --records: the files' record format (auto: detected per file).")
@click.option("--skip-bad", is_flag=True,
              help="Leave out and count invalid records (and the reviews they belong to) instead of stopping.")
@click.option("--length-unit", type=click.Choice(["words", "chars"]), default=None,
              help="What the length–score correlation counts [default: words, or chars when no record has words].")
def bias_report(
    since: str | None,
    reviewers: tuple[str, ...],
    council_name: str | None,
    as_json: bool,
    html: str | None,
    output: str | None,
    records: tuple[Path, ...],
    records_format: str,
    skip_bad: bool,
    length_unit: str | None,
) -> None:
    """Reviewer calibration, length bias, position bias and self-preference across sessions.

    Bias is reported, never corrected: no score is changed.
    """
    from council.api import DEFAULT_MAX_POINTS, render_bias_report_text, report_from_records_files, stored_bias_report
    from council.errors import UsageError

    if records_format != "auto" and not records:
        raise UsageError("--records-format only applies with --records")
    check_report_targets(output, html, as_json=as_json, what="report", inputs=records)
    points = DEFAULT_MAX_POINTS if html is not None else 0
    unit = {"words": "words", "chars": "chars"}.get(length_unit or "")
    if records:
        report = report_from_records_files(
            records, skip_bad=skip_bad, records_format=records_format, since=since, reviewers=reviewers,
            council=council_name, max_points=points, length_unit=unit,
        )
    else:
        report = stored_bias_report(
            since=since, reviewers=reviewers, council=council_name, max_points=points, length_unit=unit,
            skip_bad=skip_bad,
        )

    if report.skipped_lines:
        status(f"skipped {report.skipped_lines} invalid record lines")
    if report.skipped_reviews or report.skipped_records:
        status(f"left out {report.skipped_records} records ({report.skipped_reviews} reviews with invalid records)")

    def page() -> str:
        from council.api import render_bias_report_html

        return render_bias_report_html(report)

    write_report(
        output,
        html,
        as_json=as_json,
        page=page,
        json_text=lambda: report.model_dump_json(indent=2, exclude={"length_points"}) + "\n",
        render_text=lambda console: render_bias_report_text(report, console),
    )


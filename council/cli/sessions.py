"""``council sessions list|show ID`` — reads the database only (no model SDKs)."""

from __future__ import annotations

import json

import click

from council.cli.common import WholeNumber


@click.group()
def sessions() -> None:
    """List and inspect saved sessions."""


@sessions.command("list")
@click.option(
    "--limit", default=20, show_default=True, type=WholeNumber(1, 10**9), help="How many sessions to show."
)
@click.option("--since", help="Only sessions created on or after this ISO date.")
@click.option("--council", "council_name", help="Only this council.")
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as a JSON list.")
def list_sessions(limit: int, since: str | None, council_name: str | None, as_json: bool) -> None:
    """The most recent sessions, newest first."""
    from council.api import list_sessions

    rows = list_sessions(limit=limit, since=since, council=council_name)
    if as_json:
        from council.api import session_listing

        click.echo(json.dumps([session_listing(r) for r in rows], indent=2))
        return
    from rich.table import Table

    from council.cli.render import out

    table = Table()
    for col in ("id", "created", "status", "kind", "council", "question"):
        table.add_column(col)
    for r in rows:
        q = r["question"] or "(not stored)"
        table.add_row(r["id"][:8], r["created_at"][:19], r["status"], r["kind"] or "", r["council"] or "", q[:60])
    out.print(table)


@sessions.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole session as JSON.")
@click.option(
    "--show",
    metavar="PARTS",
    help="Which parts to print in full: question, answers, reviews, consensus, synthesis (comma-separated, or all; "
    "default: all). Not with --json, which prints the whole session.",
)
def show_session(session_id: str, as_json: bool, show: str | None) -> None:
    """One session (an id or an unambiguous prefix of one): the question, every answer, every
    review (order seen, each score with its reasoning, the ranking), the consensus and the
    synthesis, then the summary."""
    from council.cli.views import show_option_parts

    parts = show_option_parts("all" if show is None and not as_json else show, as_json)
    from council.api import get_session, session_listing, stored_result

    row = get_session(session_id)
    result = stored_result(row)
    if as_json:
        click.echo(json.dumps(result or session_listing(row), indent=2))
        return
    if result is None:
        from council.untrusted.terminal import visible

        error = f", error: {row['error']}" if row["error"] else ""
        click.echo(visible(f"session {row['id']}: status {row['status']}{error}"))
        return
    from council.api import SessionResult, events_from_result
    from council.cli.render import out, problems, render_header, render_result, styled
    from council.cli.views import SessionView

    session = SessionResult.model_validate(result)
    render_header(session)
    view = SessionView(parts)
    for event in events_from_result(session):
        view(event)
    out.print()
    render_result(session, shown=parts | {"header"})
    warnings, error = problems(session)
    for line in [*warnings, *([error] if error else [])]:
        out.print(styled(("warning:", "yellow"), f" {line}"), soft_wrap=True)
    if row.get("error"):  # a session that stopped early (no quorum, a deadline, the spend cap): why
        out.print(styled(("error:", "red"), f" session {row['status']}: {row['error']}"), soft_wrap=True)

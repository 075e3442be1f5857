"""``council leaderboard`` — which model wins across stored sessions and judged pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from council.cli.common import open_output, status, write_output

if TYPE_CHECKING:
    from rich.console import Console

    from council.leaderboard import Leaderboard


@click.command("leaderboard")
@click.option("--council", "council_name", metavar="NAME", help="Only this council's sessions.")
@click.option(
    "--since", metavar="DATE", help="Only sessions and judgments on or after this ISO date or date-time (UTC)."
)
@click.option(
    "--source",
    type=click.Choice(["sessions", "judgments", "all"]),
    default="all",
    show_default=True,
    help="Peer-review rankings of council sessions, judged pairs (batch items naming model_a/model_b), or both.",
)
@click.option(
    "--bootstrap",
    type=click.IntRange(0, 100_000),
    default=200,  # = council.leaderboard.DEFAULT_BOOTSTRAP (not imported here: it loads numpy)
    show_default=True,
    metavar="N",
    help="Bootstrap rounds for the 95% intervals (0: none; more: steadier interval ends, slower).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap draws.")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
@click.option("--html", "html", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help="The leaderboard as a self-contained HTML page with its chart (to -o FILE or stdout); "
              "--html FILE writes the page to FILE and still prints the leaderboard.")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Write the leaderboard (text, --json or --html) to FILE instead of stdout.")
def leaderboard(
    council_name: str | None,
    since: str | None,
    source: str,
    bootstrap: int,
    seed: int,
    as_json: bool,
    html: str | None,
    output: str | None,
) -> None:
    """Bradley–Terry ratings per model, with bootstrap intervals, from every stored ranking
    and judged pair (a tie is half a win)."""
    from council.errors import UsageError
    from council.leaderboard import leaderboard as build

    html_format = html == "-"
    if html_format and as_json:
        raise UsageError("--json and --html are two formats of the leaderboard: choose one")
    board = build(council=council_name, since=since, source=source, bootstrap=bootstrap, seed=seed)
    if html is not None:
        from council.bias.html import render_leaderboard_html

        page = render_leaderboard_html(board)
        if not html_format:  # --html FILE: the page beside the usual output
            write_output(html, page)
    if html_format:
        write_output(output, page)
    elif as_json:
        write_output(output, board.model_dump_json(indent=2) + "\n")
    elif output and output != "-":
        from rich.console import Console

        with open_output(output) as fh:
            render_text(board, Console(file=fh, width=120, no_color=True, highlight=False))
        status(f"wrote {output}")
    else:
        from council.cli.render import out

        render_text(board, out)


def render_text(board: Leaderboard, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    units = f"{board.sessions} sessions, {board.judgments} judged pairs, {board.comparisons} comparisons"
    if not board.models:
        for note in board.notes:
            console.print(note, markup=False, highlight=False)
        return
    intervals = f"{board.confidence:.0%} CI, {board.bootstrap} bootstrap rounds" if board.bootstrap else "no bootstrap"
    table = Table(title=f"Leaderboard: Bradley–Terry ({units}; {intervals})")
    for col in ("rank", "model", "rating", "95% CI", "comparisons", "win rate"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for rank, m in enumerate(board.models, 1):
        ci = "-" if m.ci is None else f"{m.ci[0]:.0f} – {m.ci[1]:.0f}"
        rate = "-" if m.win_rate is None else f"{m.win_rate:.1%}"
        table.add_row(str(rank), Text(m.model), f"{m.rating:.0f}", ci, str(m.comparisons), rate)
    console.print(table)
    console.print(
        "Scale: Elo-style, mean rating 1000; a 400-point gap means 10:1 odds of winning a comparison.",
        markup=False,
        highlight=False,
    )
    for note in board.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    for i, group in enumerate(board.groups, 1):
        console.print(f"group {i}: {', '.join(group)}", markup=False, highlight=False)

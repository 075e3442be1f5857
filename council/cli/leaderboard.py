"""``council leaderboard`` — which model wins across stored sessions and judged pairs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from council.cli.common import WholeNumber
from council.cli.reports import check_report_targets, write_report
from council.untrusted.inputs import MAX_SEED

if TYPE_CHECKING:
    from rich.console import Console

    from council.leaderboard.stored import Leaderboard


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
    type=WholeNumber(0, 100_000),
    default=200,  # = council.leaderboard.shape.DEFAULT_BOOTSTRAP (not imported: the help loads no pydantic)
    show_default=True,
    metavar="N",
    help="Bootstrap rounds for the 95% intervals (0: none; more: steadier interval ends, slower).",
)
@click.option("--seed", type=WholeNumber(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the bootstrap draws.")
@click.option("--judgments", "judgments", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Rate the pairwise judgments in FILE (JSON Lines; repeatable) instead of the "
              "database.")
@click.option("--judgments-format", type=click.Choice(["council", "alpaca_eval"]), default="council",
              show_default=True, help="With --judgments: council's JSON Lines, or AlpacaEval's annotations.json.")
@click.option("--control", metavar="length[,markdown]",
              help="Hold these answer styles equal (Bradley–Terry with style covariates; judged pairs only).")
@click.option("--baseline", metavar="MODEL",
              help="Add each model's win rate against MODEL, raw and length-controlled.")
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
    judgments: tuple[Path, ...],
    judgments_format: str,
    control: str | None,
    baseline: str | None,
    as_json: bool,
    html: str | None,
    output: str | None,
) -> None:
    """Bradley–Terry ratings per model, with bootstrap intervals, from every stored ranking
    and judged pair (a tie is half a win)."""
    from council.errors import UsageError
    from council.leaderboard.stored import leaderboard as build

    check_report_targets(output, html, as_json=as_json, what="leaderboard", inputs=judgments)
    if judgments:
        clash = [f"--{name.removesuffix('_name')}" for name in ("council_name", "since", "source")
                 if _given(name)]
        if clash:
            raise UsageError(f"{', '.join(clash)} select(s) stored data; --judgments rates the files instead")
        from council.leaderboard.judged import judged_leaderboard, parse_control

        board = judged_leaderboard(judgments, judgments_format=judgments_format, control=parse_control(control),
                                   baseline=baseline, bootstrap=bootstrap, seed=seed)
    else:
        if _given("judgments_format"):
            raise UsageError("--judgments-format need(s) --judgments files")
        from council.leaderboard.judged import parse_control

        board = build(council=council_name, since=since, source=source, bootstrap=bootstrap, seed=seed,
                      baseline=baseline, control=parse_control(control))

    def page() -> str:
        from council.leaderboard.html import render_leaderboard_html

        return render_leaderboard_html(board)

    write_report(
        output,
        html,
        as_json=as_json,
        page=page,
        json_text=lambda: board.model_dump_json(indent=2) + "\n",
        render_text=lambda console: render_text(board, console),
    )


def _given(name: str) -> bool:
    """The option was typed on the command line (not its default)."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(name) is ParameterSource.COMMANDLINE


def render_text(board: Leaderboard, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    from council.untrusted.terminal import visible

    units = f"{board.sessions} sessions, {board.judgments} judged pairs, {board.comparisons} comparisons"
    if not board.models:
        for note in board.notes:
            console.print(visible(note), markup=False, highlight=False)
        return
    intervals = f"{board.confidence:.0%} CI, {board.bootstrap} bootstrap rounds" if board.bootstrap else "no bootstrap"
    table = Table(title=f"Leaderboard: Bradley–Terry ({units}; {intervals})")
    several = len(board.groups) > 1  # ranks are within a group: groups never compared have no order
    columns = ["group"] if several else []
    columns += ["rank", "model", "rating", "95% CI", "comparisons", "win rate"]
    if board.baseline is not None:
        columns += ["vs baseline", "LC vs baseline"]
    for col in columns:
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in board.models:
        ci = "-" if m.ci is None else f"{m.ci[0]:.0f} – {m.ci[1]:.0f}"
        rate = "-" if m.win_rate is None else f"{m.win_rate:.1%}"
        row = [str(m.group)] if several else []
        rating = f"{m.rating:.0f}" + ("" if m.identified else " *")
        row += [m.rank, Text(visible(m.model)), rating, ci, str(m.comparisons), rate]
        if board.baseline is not None:
            row += ["-" if v is None else f"{v:.1f}%" for v in (m.baseline_win_rate, m.lc_win_rate)]
        table.add_row(*row)
    console.print(table)
    for m in board.models:
        if not m.identified:  # the style decides its comparisons: say so beside the number
            console.print(f"* {visible(m.model)}: rating {m.not_identified or 'not identified'}",
                          markup=False, highlight=False)  # fmt: skip
    if board.control:
        console.print(f"Style held equal: {', '.join(board.control)}. Coefficients (log-odds per sd, 95% Wald CI):",
                      markup=False, highlight=False)
        for name, c in board.coefficients.items():
            line = (f"{c.estimate:+.3f} ({c.ci[0]:+.3f} to {c.ci[1]:+.3f})" if c.estimate is not None and c.ci
                    else c.not_estimable or "not estimable")  # fmt: skip
            console.print(f"  {name}: {line}", markup=False, highlight=False)
    if board.baseline is not None:
        console.print(f"Baseline: {visible(board.baseline)} (win rates in percent of games against it, ties half).",
                      markup=False, highlight=False)
        for m in board.models:
            if m.lc_reason is not None:  # null, or the other models' length slope: say why
                console.print(f"LC {visible(m.model)}: {visible(m.lc_reason)}", markup=False, highlight=False)
    console.print(
        "Scale: Elo-style, mean rating 1000; a 400-point gap means 10:1 odds of winning a comparison.",
        markup=False,
        highlight=False,
    )
    for note in board.notes:
        console.print(f"note: {visible(note)}", markup=False, highlight=False)
    for i, group in enumerate(board.groups, 1):
        console.print(f"group {i}: {visible(', '.join(group))}", markup=False, highlight=False)

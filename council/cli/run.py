"""``council run QUESTION`` (or ``-`` for standard input, or ``--file FILE``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from council.cli.common import WholeNumber, cache_options, max_cost_option
from council.errors import UsageError
from council.untrusted.inputs import MAX_SEED


@click.command()
@click.argument("question", required=False)
@click.option(
    "--file",
    "question_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help="Read the question from FILE ('-': standard input) instead of QUESTION.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Council TOML file (default: $COUNCIL_CONFIG, $COUNCIL_HOME/council.toml, else the offline default).",
)
@click.option("--council", "council_name", help="Which [councils.NAME] to run (default: [defaults] council).")
@click.option("--seed", type=WholeNumber(0, MAX_SEED),
              help="Seed for the reviewers' shuffles (recorded; same seed, same orders).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--no-synthesis", is_flag=True, help="Skip the chairman's synthesis.")
@click.option(
    "--show",
    metavar="PARTS",
    help="Print these parts in full as the session runs: answers, reviews, consensus, synthesis "
    "(comma-separated, or all).",
)
@click.option(
    "--candidates",
    "candidates_path",
    type=click.Path(dir_okay=False),
    help="Review these answers instead of asking the members (JSON/JSONL of {id, text}).",
)
@max_cost_option()
@cache_options
def run(
    question: str | None,
    question_file: str | None,
    config_path: str | None,
    council_name: str | None,
    seed: int | None,
    as_json: bool,
    no_synthesis: bool,
    candidates_path: str | None,
    max_cost: str | None,
    use_cache: bool,
    refresh: bool,
    show: str | None,
) -> None:
    """Ask the council QUESTION: answers, shuffled peer review, consensus, synthesis.

    QUESTION '-' reads the question from standard input. Exit status 1 when no quorum
    answered or a synthesis that was asked for is missing (the session is partial).
    """
    from council.api import Council, cap_in_force, check_cap, check_request, load_candidates, load_config
    from council.cli.common import cache_wanted, status
    from council.cli.show_parts import show_option_parts

    # Everything the user gave is checked before the database is opened or a model called.
    parts = show_option_parts(show, as_json)
    question, _ = check_request(read_question(question, question_file), seed=seed)
    candidates = load_candidates(candidates_path) if candidates_path else None
    if max_cost is not None:
        check_cap(max_cost)
    loaded = load_config(config_path)
    cached = cache_wanted(use_cache, refresh, loaded)
    # The cap in force over this invocation's one session: --max-cost, else the config's.
    cap = cap_in_force(max_cost, loaded)
    council = Council(loaded, council=council_name, max_cost=cap, cache=cached, refresh=refresh)
    if cached:
        status("note: the call cache repeats kept answers; answers sampled at temperature > 0 are meant to vary")
    result = _run_session(council, question, seed=seed, candidates=candidates, synthesis=not no_synthesis,
                          parts=parts, as_json=as_json)  # fmt: skip
    _print_result(council, result, parts=parts, as_json=as_json)


def _run_session(
    council: Any, question: str, *, seed: int | None, candidates: Any, synthesis: bool, parts: frozenset[str],
    as_json: bool,
) -> Any:  # fmt: skip
    """The session, with its live progress line or its parts printed as they arrive; a reached
    spend cap says the final figure (the calls in flight have settled since)."""
    from council.api import BudgetReached, import_ahead
    from council.cli.common import quiet
    from council.cli.progress import ProgressDisplay

    # The parts shown as they arrive are the progress; a live bar would interleave with them.
    progress = ProgressDisplay(council, enabled=not as_json and not quiet() and not parts)
    view = None
    if parts:
        from council.cli.views import SessionView

        view = SessionView(parts)
    import_ahead("council.cli.render")  # the result is rendered (or its problems told) once it is in

    def on_event(event):  # type: ignore[no-untyped-def]
        progress.on_event(event)
        if view is not None:
            view(event)

    async def go():  # type: ignore[no-untyped-def]
        try:
            with progress:
                return await council.run(
                    question, seed=seed, candidates=candidates, synthesis=synthesis, on_event=on_event
                )
        finally:
            await council.aclose()

    try:
        import asyncio

        return asyncio.run(go())
    except BudgetReached:
        if council.budget is not None:  # the final figure: calls in flight have settled since
            raise BudgetReached(*council.budget.totals()) from None
        raise


def _print_result(council: Any, result: Any, *, parts: frozenset[str], as_json: bool) -> None:
    """The result as JSON or for people; then a reached spend cap, then what went wrong (exit 1
    for a missing synthesis)."""
    from council.api import BudgetReached
    from council.cli.render import render_result, report_problems

    if as_json:
        import json

        # The result, and the text a user reads (a partial council's says so in its first line).
        whole = {**json.loads(result.model_dump_json()), "answer": result.answer}
        click.echo(json.dumps(whole, indent=2, ensure_ascii=False))
    else:
        if parts:
            from council.cli.render import out

            out.print()
        # With transcripts off the events carried no text: the chairman's answer is shown from the result.
        render_result(result, shown=parts if council.resolved.store_transcripts else parts - {"synthesis"})
    budget = council.budget
    if budget is not None and budget.reached is not None:
        raise BudgetReached(*budget.totals())
    report_problems(result)


def read_question(question: str | None, question_file: str | None) -> str:
    """The question from exactly one source: the argument, standard input ('-'), or a file."""
    from council.untrusted.inputs import read_text_file, read_text_stream

    if question is not None and question_file is not None:
        raise UsageError("give the question as QUESTION or with --file FILE, not both")
    if question is None and question_file is None:
        raise UsageError("missing QUESTION (or '-' to read it from standard input, or --file FILE)")
    if question == "-" or question_file == "-":
        return read_text_stream(sys.stdin.buffer, "the question on standard input")
    if question_file is not None:
        return read_text_file(question_file, "question file")
    assert question is not None
    return question

"""``council run QUESTION`` (or ``-`` for standard input, or ``--file FILE``)."""

from __future__ import annotations

import asyncio
import sys

import click

from council.errors import UsageError


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
@click.option("--seed", type=int, help="Seed for the reviewers' shuffles (recorded; same seed, same orders).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--no-synthesis", is_flag=True, help="Skip the chairman's synthesis.")
@click.option(
    "--candidates",
    "candidates_path",
    type=click.Path(dir_okay=False),
    help="Review these answers instead of asking the members (JSON/JSONL of {id, text}).",
)
def run(
    question: str | None,
    question_file: str | None,
    config_path: str | None,
    council_name: str | None,
    seed: int | None,
    as_json: bool,
    no_synthesis: bool,
    candidates_path: str | None,
) -> None:
    """Ask the council QUESTION: answers, shuffled peer review, consensus, synthesis.

    QUESTION '-' reads the question from standard input.
    """
    from council.api import Council
    from council.cli.common import quiet
    from council.cli.render import ProgressDisplay, render_result
    from council.session import load_candidates
    from council.session.runner import check_request

    # Everything the user gave is checked before the database is opened or a model called.
    question, _ = check_request(read_question(question, question_file), seed=seed)
    candidates = load_candidates(candidates_path) if candidates_path else None
    council = Council.from_config(config_path, council=council_name)
    progress = ProgressDisplay(council, enabled=not as_json and not quiet())

    async def go():  # type: ignore[no-untyped-def]
        try:
            with progress:
                return await council.run(
                    question, seed=seed, candidates=candidates, synthesis=not no_synthesis, on_event=progress.on_event
                )
        finally:
            await council.aclose()

    result = asyncio.run(go())
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        render_result(result)


def read_question(question: str | None, question_file: str | None) -> str:
    """The question from exactly one source: the argument, standard input ('-'), or a file."""
    from council.inputs import read_text_file, read_text_stream

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

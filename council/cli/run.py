"""``council run QUESTION``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from council.errors import InputError

if TYPE_CHECKING:
    from council.session import Candidate


def read_text_file(path: str, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_candidates(path: str) -> list[Candidate]:
    """A JSON list of {"id", "text"}, a JSON object {id: text}, or JSONL of {"id", "text"}."""
    from pydantic import ValidationError

    from council.session import Candidate

    raw = read_text_file(path, "candidates file")
    shape = 'expected a JSON list of {"id": ..., "text": ...}, a JSON object {id: text}, or JSONL'
    try:
        data = json.loads(raw)
        items = [{"id": k, "text": v} for k, v in data.items()] if isinstance(data, dict) else data
    except json.JSONDecodeError:
        items = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{n}: not JSON ({exc.msg}); {shape}") from None
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: no candidates; {shape}")
    candidates = []
    for n, item in enumerate(items, 1):
        try:
            cand = Candidate.model_validate(item)
        except ValidationError:
            raise InputError(f"{path}: candidate {n} is not {{\"id\": str, \"text\": str}}; {shape}") from None
        if not cand.text.strip():
            raise InputError(f"{path}: candidate {cand.id!r} has empty text")
        candidates.append(cand)
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        raise InputError(f"{path}: candidate ids must be unique")
    return candidates


@click.command()
@click.argument("question")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Council TOML file (default: $COUNCIL_CONFIG, $COUNCIL_HOME/council.toml, else the offline default).")
@click.option("--council", "council_name", help="Which [councils.NAME] to run (default: [defaults] council).")
@click.option("--seed", type=int, help="Seed for the reviewers' shuffles (recorded; same seed, same orders).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@click.option("--no-synthesis", is_flag=True, help="Skip the chairman's synthesis.")
@click.option("--candidates", "candidates_path", type=click.Path(dir_okay=False), help="Review these answers instead of asking the members (JSON/JSONL of {id, text}).")
def run(
    question: str,
    config_path: str | None,
    council_name: str | None,
    seed: int | None,
    as_json: bool,
    no_synthesis: bool,
    candidates_path: str | None,
) -> None:
    """Ask the council QUESTION: answers, shuffled peer review, consensus, synthesis."""
    from council.api import Council
    from council.cli.render import ProgressDisplay, render_result

    if not question.strip():
        raise InputError("the question is empty")
    candidates = load_candidates(candidates_path) if candidates_path else None
    council = Council.from_config(config_path, council=council_name)
    progress = ProgressDisplay(council, enabled=not as_json)

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

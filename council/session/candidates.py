"""Existing answers to review instead of asking the members (``--candidates``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, StringConstraints, ValidationError

from council.errors import InputError
from council.untrusted.inputs import read_text_file

_SHAPE = 'expected a JSON list of {"id": ..., "text": ...}, a JSON object {id: text}, or JSONL'


class Candidate(BaseModel):
    """An existing answer to review: ``id`` names it in the results, ``text`` is reviewed."""

    id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    text: str


def check_candidates(candidates: Sequence[Candidate], where: str = "candidates") -> list[Candidate]:
    """At least two answers (a review compares), each with text, ids unique."""
    candidates = list(candidates)
    if len(candidates) < 2:
        raise InputError(f"{where}: a council reviews at least two answers, got {len(candidates)}")
    for cand in candidates:
        if not cand.text.strip():
            raise InputError(f"{where}: candidate {cand.id!r} has empty text")
    ids = [c.id for c in candidates]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InputError(f"{where}: candidate ids must be unique; repeated: {', '.join(map(repr, repeated))}")
    return candidates


def parse_candidates(raw: str, where: str) -> list[Candidate]:
    """Candidates from JSON (a list of {id, text} or an object {id: text}) or JSONL text."""
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
                raise InputError(f"{where}:{n}: not JSON ({exc.msg}); {_SHAPE}") from None
    if not isinstance(items, list) or not items:
        raise InputError(f"{where}: no candidates; {_SHAPE}")
    candidates = []
    for n, item in enumerate(items, 1):
        try:
            candidates.append(Candidate.model_validate(item))
        except ValidationError:
            raise InputError(
                f'{where}: candidate {n} is not {{"id": non-empty text, "text": text}}; {_SHAPE}'
            ) from None
    return check_candidates(candidates, where)


def load_candidates(path: str | Path) -> list[Candidate]:
    """Candidates from a file (see :func:`parse_candidates`); one-line errors naming it."""
    return parse_candidates(read_text_file(path, "candidates file"), str(path))

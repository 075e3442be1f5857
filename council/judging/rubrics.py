"""Rubric and bias-checklist files, and the built-in criteria sets.

Rubrics are TOML files::

    name = "general"
    description = "..."
    scale = [1, 5]                  # required: integer scale, lo < hi

    [[criteria]]
    name = "accuracy"
    description = "..."
    weight = 1.0                    # optional number, 0 < weight <= 1000
    levels = { 1 = "...", 5 = "..." }   # optional: what a score means

Built-ins live in ``council/config/rubrics/`` (package data; ``config/rubrics`` links there)
and load by name (``load_rubric("general")``).
Errors are one line (``InputError``, or ``NotFoundError`` for a missing file).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from council.providers.asking import describe_validation_error
from council.errors import InputError, NotFoundError
from council.untrusted.inputs import parse_toml, read_text_file
from council.judging.schemas import BiasChecklist, Criterion, Rubric

BUILTIN_RUBRICS_DIR = Path(__file__).resolve().parents[1] / "config" / "rubrics"
BIAS_CHECKLIST_NAME = "bias-awareness"

#: The five depth dimensions for pairwise depth grading, 1-5 each, total /25 (docs/methods.md, "Criteria sets").
DEPTH_CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        name="Granularity",
        description="Specific, fine-grained analysis: concrete details, cases and distinctions, not generalities.",
    ),
    Criterion(
        name="Insight",
        description="Non-obvious conclusions, causes and implications, beyond restating known facts.",
    ),
    Criterion(
        name="Critique",
        description="Critical evaluation: weighs limitations, counter-arguments, trade-offs and uncertainty.",
    ),
    Criterion(
        name="Evidence",
        description="Claims are supported by data, sources, examples or explicit reasoning.",
    ),
    Criterion(
        name="Density",
        description="Substance per word: no padding, repetition or filler.",
    ),
)


# ---------------------------------------------------------------------------- files


def builtin_rubrics() -> list[str]:
    """Names of the shipped rubrics (``load_rubric(name)`` loads them)."""
    return sorted(p.stem for p in BUILTIN_RUBRICS_DIR.glob("*.toml") if p.stem != BIAS_CHECKLIST_NAME)


def _resolve(path_or_name: str | Path, kind: str) -> Path:
    path = Path(path_or_name)
    if path.exists():
        return path
    is_bare_name = isinstance(path_or_name, str) and path.suffix == "" and path.name == str(path_or_name)
    if is_bare_name and (BUILTIN_RUBRICS_DIR / f"{path_or_name}.toml").exists():
        return BUILTIN_RUBRICS_DIR / f"{path_or_name}.toml"
    hint = f" (built-in: {', '.join(builtin_rubrics())})" if kind == "rubric" else ""
    raise NotFoundError(f"{kind} {str(path_or_name)!r} not found{hint}")


def _read_toml(path: Path, kind: str) -> dict[str, Any]:
    return parse_toml(read_text_file(path, kind), f"{kind} {path}")


MAX_ERROR_CHARS = 400


def _one_line(text: str) -> str:
    """One line, and short: a file with thousands of mistakes still fails with one readable line."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 1] + "…"


def load_rubric(path_or_name: str | Path) -> Rubric:
    """A rubric from a TOML file, or a built-in by name; one-line errors."""
    path = _resolve(path_or_name, "rubric")
    data = _read_toml(path, "rubric")
    if "items" in data and "criteria" not in data:
        raise InputError(f"rubric {path}: this is a bias checklist, not a rubric (it has items, no criteria)")
    try:
        return Rubric.model_validate(data)
    except ValidationError as exc:
        raise InputError(_one_line(f"rubric {path}: {describe_validation_error(exc, limit=3)}")) from None


def load_bias_checklist(path: str | Path | None = None) -> BiasChecklist:
    """The bias-awareness checklist (the built-in one by default)."""
    if path is None:
        return _builtin_checklist()
    return _load_checklist(_resolve(path, "bias checklist"))


@lru_cache(maxsize=1)
def _builtin_checklist() -> BiasChecklist:
    return _load_checklist(BUILTIN_RUBRICS_DIR / f"{BIAS_CHECKLIST_NAME}.toml")


def _load_checklist(path: Path) -> BiasChecklist:
    data = _read_toml(path, "bias checklist")
    try:
        return BiasChecklist.model_validate(data)
    except ValidationError as exc:
        raise InputError(_one_line(f"bias checklist {path}: {describe_validation_error(exc, limit=3)}")) from None

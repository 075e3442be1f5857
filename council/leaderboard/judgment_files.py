"""Pairwise judgments from files (``council leaderboard --judgments``), ours or AlpacaEval's.

The council format is JSON Lines, one judgment a line::

    {"model_a": "x", "model_b": "y", "winner": "A" | "B" | "TIE"}        or "preference": P(B better) in [0, 1]
     + optional "prompt_id", "length_a", "length_b" (characters),
       "markdown_a", "markdown_b" ({"headers", "lists", "bold"} counts)

Other keys are ignored (tools add their own). ``alpaca_eval``: AlpacaEval's ``annotations.json``,
a JSON list of objects with ``generator_1`` (A, its baseline), ``generator_2`` (B),
``preference`` in [1, 2] (2: B better; 0 and 1.5: a tie; null: not judged, left out and
counted, as AlpacaEval does), ``output_1``/``output_2`` (lengths and markdown counts are
taken from them) and ``instruction`` (the prompt). Files are read through
:func:`council.untrusted.inputs.read_text_file`; a bad judgment stops the load with one line naming the
file and line (or item), nothing half-read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, model_validator

from council.bias.loading import explain
from council.errors import InputError, UsageError
from council.methods.style_counts import MARKDOWN_KEYS, answer_style  # noqa: F401  (found here too)
from council.untrusted.inputs import MAX_BATCH_BYTES, read_text_file

if TYPE_CHECKING:
    from council.storage import Store

JUDGMENT_FORMATS = ("council", "alpaca_eval")
#: The most judgments one rating reads from files: each is held as a validated object (0.6-2.3 kB),
#: so a file of the batch file's size in the shortest lines would otherwise take ~4.5 GB.
MAX_JUDGMENTS = 1_000_000


class MarkdownCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    headers: StrictInt = Field(ge=0)
    lists: StrictInt = Field(ge=0)
    bold: StrictInt = Field(ge=0)


class Judgment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model_a: str = Field(min_length=1, max_length=500)
    model_b: str = Field(min_length=1, max_length=500)
    winner: Literal["A", "B", "TIE"] | None = None
    preference: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=1)
    prompt_id: str | StrictInt | None = None
    length_a: StrictInt | None = Field(default=None, ge=0)
    length_b: StrictInt | None = Field(default=None, ge=0)
    markdown_a: MarkdownCounts | None = None
    markdown_b: MarkdownCounts | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> Judgment:
        if (self.winner is None) == (self.preference is None):
            raise ValueError('give exactly one of "winner" ("A", "B" or "TIE") and "preference" (P(B better), 0 to 1)')
        if self.preference is not None and not math.isfinite(self.preference):
            raise ValueError("preference must be a finite number from 0 to 1")
        if self.model_a == self.model_b:
            raise ValueError(f"model_a and model_b are the same model ({self.model_a!r})")
        return self

    @property
    def b_better(self) -> float:
        """P(B better): 1, 0, ½ for a tie, or the judge's probability."""
        if self.preference is not None:
            return float(self.preference)
        return {"A": 0.0, "B": 1.0, "TIE": 0.5}[self.winner or "TIE"]


class JudgedPairLine(BaseModel):
    """One line of ``council export --judged-pairs``: a judged pair on record in the council format
    (``leaderboard --judgments`` reads it back). Lengths and markdown counts are null for pairs
    recorded before council kept them: unknown, never 0."""

    run_id: str
    created_at: str
    model_a: str
    model_b: str
    winner: Literal["A", "B", "TIE"]
    length_a: int | None
    length_b: int | None
    markdown_a: MarkdownCounts | None
    markdown_b: MarkdownCounts | None
    #: The prompt's salted query hash (instruction difficulty); null when queries are not hashed.
    prompt_id: str | None


def export_judged_pairs(store: Store, out: TextIO, *, since: str | None = None) -> int:
    """Write every judged pair on record (created on or after ``since``, stored form) as JSON Lines.

    Each line is :class:`JudgedPairLine`'s own JSON, written from the store's row as it is: the
    store's query keeps only finished comparisons of two named models, its columns hold the
    counts council made, and the row's keys come in the line's order, so validating each row
    again would cost most of the export's time and change nothing."""
    from pydantic_core import to_json

    count = 0
    for row in store.judged_pairs(since=since):
        out.write(to_json(row).decode() + "\n")
        count += 1
    return count


@dataclass
class LoadedJudgments:
    judgments: list[Judgment] = field(default_factory=list)
    #: AlpacaEval items without a preference (not judged), left out.
    unjudged: int = 0
    files: list[str] = field(default_factory=list)


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{where}: not valid JSON ({getattr(exc, 'msg', 'nested too deeply')})") from None


def _council_lines(path: Path, text: str) -> Iterator[Judgment]:
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        data = _parse(line, f"{path}:{lineno}")
        if not isinstance(data, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object, got {type(data).__name__}")
        try:
            yield Judgment.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"{path}:{lineno}: {explain(exc)}") from None


def _alpaca_items(path: Path, text: str, loaded: LoadedJudgments) -> Iterator[Judgment]:
    data = _parse(text, str(path))
    if not isinstance(data, list):
        raise InputError(f"{path}: an AlpacaEval annotations file is a JSON list, got {type(data).__name__}")
    for number, item in enumerate(data, 1):
        where = f"{path}: item {number}"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(item).__name__}")
        pref = item.get("preference")
        if pref is None or (isinstance(pref, float) and math.isnan(pref)):
            loaded.unjudged += 1
            continue
        if isinstance(pref, bool) or not isinstance(pref, int | float) or not (pref == 0 or 1 <= pref <= 2):
            raise InputError(f"{where}: preference must be a number from 1 to 2 (or 0 for a tie), got {pref!r}")
        outputs = [item.get("output_1"), item.get("output_2")]
        fields: dict[str, Any] = {
            "model_a": item.get("generator_1"),
            "model_b": item.get("generator_2"),
            "preference": 0.5 if pref == 0 else float(pref) - 1,
            "prompt_id": item.get("instruction"),
        }
        if all(isinstance(o, str) for o in outputs):
            (fields["length_a"], fields["markdown_a"]), (fields["length_b"], fields["markdown_b"]) = map(
                answer_style, outputs
            )
        try:
            yield Judgment.model_validate(fields)
        except ValidationError as exc:
            reason = explain(exc).replace("model_a", "generator_1").replace("model_b", "generator_2")
            raise InputError(f"{where}: {reason}") from None


def load_judgments(paths: Iterable[Path | str], judgments_format: str = "council") -> LoadedJudgments:
    """Every judgment of every file, or a one-line :class:`InputError` naming the bad line."""
    if judgments_format not in JUDGMENT_FORMATS:
        raise UsageError(f"unknown judgments format {judgments_format!r}; choose one of: {', '.join(JUDGMENT_FORMATS)}")
    loaded = LoadedJudgments()
    for raw in paths:
        path = Path(raw)
        # Many judgments a file, as a batch file holds many items: the batch file's cap, not a question's.
        text = read_text_file(path, "judgments file", max_bytes=MAX_BATCH_BYTES)
        loaded.files.append(str(path))
        items = _council_lines(path, text) if judgments_format == "council" else _alpaca_items(path, text, loaded)
        for judgment in items:
            if len(loaded.judgments) == MAX_JUDGMENTS:
                raise InputError(f"{path}: more than {MAX_JUDGMENTS:,} judgments in the files; rate at most that many")
            loaded.judgments.append(judgment)
    return loaded

"""The shape of every export line, as pydantic models: the one source of the flat tables'
columns and of the JSON Schemas published in docs/schemas/ (``scripts/write_export_schemas.py``).

A line never changes shape with the data: what the stored result keeps as a map keyed by a
member, a model or a position (``models``, a review's ``scores``/``reasoning``/``labels``,
``bias.calibration``, ``bias.position_bias.means``) is a list of records here, and every key is
present in every line (a failed session has empty lists and nulls). The schemas say so: every
object names all its keys as required and allows no others.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from council.accounting.usage import Usage
from council.bias.records import BiasRecord, LengthCorrelation, SelfPreference
from council.exports.rows import AnswerRow, JudgmentRow, ScoreRow, SessionRow
from council.leaderboard.judgment_files import JudgedPairLine
from council.methods.bias_indicators import HonestyRow
from council.methods.consensus_agreement import Agreement
from council.methods.ranking import Consensus
from council.methods.significance import SignificanceTest
from council.session.results import Failure, MemberAnswer, Synthesis

SCHEMA_DIR = "docs/schemas"
SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"


class ModelEntry(BaseModel):
    id: str
    """A member's or reviewer's id (its alias, or the model string itself)."""
    model: str


class ScoreEntry(BaseModel):
    member: str
    score: int


class ReasoningEntry(BaseModel):
    member: str
    text: str | None


class LabelEntry(BaseModel):
    label: str
    """The anonymous label the reviewer saw."""
    member: str


class ReviewLine(BaseModel):
    reviewer: str
    model: str
    display_order: list[str]
    labels: list[LabelEntry]
    valid: bool
    scores: list[ScoreEntry]
    reasoning: list[ReasoningEntry]
    ranking: list[str]
    attempts: int
    error: str | None
    self_reviewed: bool


class CalibrationEntry(BaseModel):
    reviewer: str
    mean: float
    std: float
    z_score: float
    classification: str
    samples: int


class PositionEntry(BaseModel):
    position: int
    """0-based display position."""
    mean: float
    count: int


class PositionBiasLine(BaseModel):
    positions: list[PositionEntry]
    variance: float
    bias_detected: bool
    orderings: int


class BiasLine(BaseModel):
    records: int
    calibration: list[CalibrationEntry]
    calibration_test: SignificanceTest | None
    length_correlation: LengthCorrelation
    position_bias: PositionBiasLine
    self_preference: list[SelfPreference]
    honesty: list[HonestyRow]
    flags: list[str]
    note: str | None
    reviewer_agreement: list[Agreement] | None
    """Each valid reviewer against the consensus (``other`` null) and each other reviewer: Kendall's
    τ_b and top-1 agreement; null without a consensus (and in sessions stored before it was kept)."""


class SessionLine(BaseModel):
    """``--shape sessions`` in JSONL: one session, its whole result."""

    kind: str
    session_id: str
    council: str | None
    status: str
    error: str | None
    question: str | None
    seed: int | None
    members: list[str]
    reviewers: list[str]
    models: list[ModelEntry]
    scale: tuple[int, int] | None
    self_review: str | None
    answers: list[MemberAnswer]
    reviews: list[ReviewLine]
    consensus: Consensus | None
    synthesis: Synthesis | None
    bias: BiasLine | None
    flags: list[str]
    failures: list[Failure]
    partial_reasons: list[str]
    usage: Usage
    offline_default: bool
    notice: str | None
    config_source: str | None
    created_at: str
    finished_at: str | None
    duration_ms: float | None


#: Schema name → the model of one line (``export-NAME.schema.json``).
LINES: dict[str, type[BaseModel]] = {
    "sessions": SessionLine,
    "sessions-csv": SessionRow,
    "scores": ScoreRow,
    "answers": AnswerRow,
    "bias-records": BiasRecord,
    "judged-pairs": JudgedPairLine,
    "judgments": JudgmentRow,
}


def _strict(node: Any) -> Any:
    """Every object names all its keys as required and allows no others; titles dropped."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if k not in ("title", "default", "properties", "$defs")}
    for named in ("properties", "$defs"):  # maps of names to schemas: every name kept
        if named in node:
            out[named] = {name: _strict(sub) for name, sub in node[named].items()}
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def export_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one line of export ``name`` (see :data:`LINES`)."""
    schema = _strict(LINES[name].model_json_schema(mode="serialization"))
    return {"$schema": SCHEMA_URI, "$id": f"export-{name}.schema.json", **schema}


def export_schemas() -> dict[str, dict[str, Any]]:
    return {name: export_schema(name) for name in LINES}


def _type_text(prop: dict[str, Any]) -> str:
    kinds = [option.get("type", "object") for option in prop.get("anyOf", [prop])]
    nullable = "null" in kinds
    named = [k for k in kinds if k != "null"]
    return " or ".join(named) + (" or null" if nullable else "")


def column_types(name: str) -> list[tuple[str, str]]:
    """(column, JSON type as the docs' table writes it) of a flat export, in column order."""
    schema = export_schema(name)
    return [(column, _type_text(prop)) for column, prop in schema["properties"].items()]

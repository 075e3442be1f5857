"""Privacy-safe bias records, query hashing, and per-session bias metadata.

A bias record is one reviewer's score of one answer: who reviewed, whose answer,
where it was shown, how long it was, what it scored. It never carries raw text —
a record with a key that looks like text (``query``, ``response``...) is refused,
and ``query_hash`` must be a 64-hex digest. Query hashes are opt-in: HMAC-SHA256
under a per-installation secret salt that never leaves ``$COUNCIL_HOME``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from council._util.clock import to_utc_iso
from council.bias.query_hash import (  # noqa: F401  # importable from here, as before
    FINGERPRINT_MESSAGE,
    SALT_BYTES,
    SALT_FILE,
    SHARED_SALT_MIN_BYTES,
    QueryHasher,
    read_shared_salt,
)
from council.methods import exact_moments
from council.methods.bias_indicators import (
    INDICATORS_NOTE,
    REFERENCE_SCALE,
    HonestyRow,
    audit_reviewer_calibration,
    calculate_length_correlation,
    calculate_position_bias,
    honesty_row,
    position_scores,
)
from council.methods.consensus_agreement import Agreement, session_agreement
from council.methods.significance import GroupSums, SignificanceTest, one_way_anova

SCHEMA_VERSION = "1.2.0"
"""1.2.0 added ``response_length_words``; 1.1.0 records (without it) are still read."""

LengthUnit = Literal["words", "chars"]
LENGTH_UNITS: tuple[LengthUnit, ...] = ("words", "chars")


def count_words(text: str) -> int:
    """Whitespace-separated tokens, ``len(text.split())`` (docs/methods.md, "Length-score correlation")."""
    return len(text.split())


# Keys that would carry raw text. A key is refused when one of its words is one of
# these, unless its last word says it is a measurement or an identifier
# (``response_length_chars``, ``query_hash``, ``answer_id``).
RAW_TEXT_WORDS = frozenset(
    {
        "query",
        "question",
        "response",
        "answer",
        "text",
        "prompt",
        "reasoning",
        "completion",
        "content",
        "message",
        "messages",
        "synthesis",
        "transcript",
    }
)
SAFE_LAST_WORDS = frozenset(
    {"id", "ids", "hash", "chars", "len", "length", "count", "tokens", "words", "position", "version"}
)


def _key_words(key: str) -> list[str]:
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [w for w in re.split(r"[^a-z0-9]+", key.lower()) if w]


@lru_cache(maxsize=1024)  # every record checks the same few keys, and the regexes are the cost
def raw_text_key(key: str) -> bool:
    """True when a record key looks like it carries raw query or answer text."""
    words = _key_words(key)
    if not words or words[-1] in SAFE_LAST_WORDS:
        return False
    return any(w in RAW_TEXT_WORDS for w in words)


@lru_cache(maxsize=256)  # records come with the same few sets of keys: checked once per set, not per record
def _raw_text_keys(keys: tuple[Any, ...]) -> tuple[str, ...]:
    """The keys among ``keys`` that look like raw text (:func:`raw_text_key`), sorted."""
    return tuple(sorted(k for k in keys if isinstance(k, str) and raw_text_key(k)))


@lru_cache(maxsize=256)  # a session's records share one timestamp: read and written again once
def _utc_iso(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"timestamp {value!r} is not an ISO-8601 date-time") from exc
    return to_utc_iso(parsed)  # as every stored timestamp (a naive one taken as UTC); ValueError past year 9999


class BiasRecord(BaseModel):
    """One (reviewer, answer) score. Unknown keys are ignored; raw-text keys are refused.

    Types are strict: ``"7"`` or ``true`` is not a number, ``1`` is not a boolean. A
    record without a scale is read on the 1–10 scale, so its score must lie there.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    schema_version: str = SCHEMA_VERSION
    session_id: str = Field(min_length=1)
    reviewer_id: str = Field(min_length=1)
    model_id: str = Field(min_length=1)
    position: int = Field(ge=0)
    """0-based display position in this reviewer's shuffled order."""
    response_length_chars: int = Field(ge=0)
    response_length_words: int | None = Field(default=None, ge=0)
    """Whitespace-separated words of the answer (None in records written before 1.2.0)."""
    score_value: float = Field(allow_inf_nan=False)
    query_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    timestamp: str | None = None
    """ISO-8601, normalised to UTC."""
    scale_min: int | None = None
    scale_max: int | None = None
    self_review: bool = False
    """The reviewer scored its own answer."""
    council: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_raw_text(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            bad = _raw_text_keys(tuple(data))
            if bad:
                raise ValueError(f"bias records never carry raw text; remove the key(s) {', '.join(map(repr, bad))}")
        return data

    @field_validator("schema_version")
    @classmethod
    def _major_version(cls, value: str) -> str:
        if value != SCHEMA_VERSION and not re.fullmatch(r"1\.\d+(\.\d+)?", value):
            raise ValueError(f"unsupported schema_version {value!r} (this version reads 1.x)")
        return value

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        return None if value is None else _utc_iso(value)

    @model_validator(mode="after")
    def _scale(self) -> BiasRecord:
        lo, hi = self.scale_min, self.scale_max
        if (lo is None) != (hi is None):
            raise ValueError("scale_min and scale_max go together")
        if lo is not None and hi is not None:
            if lo >= hi:
                raise ValueError(f"scale_min {lo} must be below scale_max {hi}")
            if not lo <= self.score_value <= hi:
                raise ValueError(f"score_value {self.score_value} is outside the scale {lo}–{hi}")
        else:
            lo, hi = REFERENCE_SCALE
            if not lo <= self.score_value <= hi:
                raise ValueError(
                    f"score_value {self.score_value:g} is outside {lo}–{hi}, the scale assumed for a record "
                    "without scale_min and scale_max"
                )
        return self

    def row(self) -> dict[str, Any]:
        """The database row (booleans as 0/1)."""
        data = self.model_dump()
        data["self_review"] = int(self.self_review)
        return data


# ---------------------------------------------------------------------------
# Per-session bias metadata
# ---------------------------------------------------------------------------


class ReviewerCalibration(BaseModel):
    mean: float
    std: float
    z_score: float
    classification: str
    samples: int


class LengthCorrelation(BaseModel):
    r: float
    interpretation: str
    pairs: int
    """Models with a length and a mean score used for r (0 when r could not be computed: fewer than 3)."""
    unit: LengthUnit = "chars"
    """What length counts: words (the method's unit, the default) or characters."""


class PositionBias(BaseModel):
    means: dict[int, float]
    """Mean score per 0-based display position."""
    counts: dict[int, int]
    variance: float
    bias_detected: bool
    orderings: int


class SelfPreference(BaseModel):
    reviewer_id: str
    self_score: float
    others_mean: float | None
    """Mean score the other reviewers gave the same answer (None if nobody else scored it)."""
    difference: float | None
    others_n: int


class SessionBiasMetadata(BaseModel):
    """Bias indicators from one session's records. Diagnostic only: no score is changed."""

    records: int
    calibration: dict[str, ReviewerCalibration]
    calibration_test: SignificanceTest | None = None
    """One-way ANOVA of scores across reviewers: are the reviewers' means different at all?"""
    length_correlation: LengthCorrelation
    position_bias: PositionBias
    self_preference: list[SelfPreference]
    honesty: list[HonestyRow]
    flags: list[str]
    note: str | None = None
    reviewer_agreement: list[Agreement] | None = None
    """Each valid reviewer's ranking against the consensus (``other`` null) and against each other
    reviewer's: Kendall's τ_b and top-1 agreement, no text (:func:`consensus_agreement`); None
    without a consensus."""


def consensus_agreement(reviews: Sequence[Any], consensus: Any | None) -> list[Agreement] | None:
    """The agreement of ``reviews``' rankings (valid ``Review``s) with the session's ``consensus``
    (a ``Consensus``) and with each other (docs/methods.md, "Reviewer agreement")."""
    if consensus is None:
        return None
    return session_agreement({r.reviewer: r.ranking for r in reviews}, {e.member: e.rank for e in consensus.ranking})


EXTREME_LENGTH_R = 0.9
"""A single session can detect only extreme anomalies, |r| > 0.9 (docs/methods.md, "Length-score correlation")."""


def _length(rec: BiasRecord, unit: LengthUnit) -> int | None:
    return rec.response_length_words if unit == "words" else rec.response_length_chars


def session_bias_metadata(records: Sequence[BiasRecord], length_unit: LengthUnit = "words") -> SessionBiasMetadata:
    """Calibration, length–score correlation, position bias and self-preference for one session.

    The length correlation counts words by default; answers whose records carry no length
    in ``length_unit`` are left out of it (docs/methods.md, "Length-score correlation")."""
    by_reviewer: dict[str, list[BiasRecord]] = defaultdict(list)
    for rec in records:
        by_reviewer[rec.reviewer_id].append(rec)
    calibration, calibration_test = _calibration(by_reviewer)
    length = _length_correlation(records, length_unit)
    position = _position_bias(by_reviewer)

    harsh_generous = sorted(
        f"{rid}: {c.classification}" for rid, c in calibration.items() if c.classification != "neutral"
    )
    p_text = f" (ANOVA p = {calibration_test.p_value:.3g})" if calibration_test.p_value is not None else ""
    if harsh_generous and not calibration_test.significant:
        harsh_generous = [*harsh_generous, "differences between reviewers not significant" + p_text]
    honesty = [
        honesty_row("length_correlation", length.pairs, length.interpretation, estimated=length.pairs > 0),
        honesty_row(
            "position_bias", position.orderings, "position bias" if position.bias_detected else "no position bias"
        ),
        honesty_row("reviewer_calibration", len(records), "; ".join(harsh_generous) or "no outlying reviewer"),
    ]

    flags = []
    r = length.r
    if length.interpretation != "insufficient_data" and abs(r) > EXTREME_LENGTH_R:
        rewarding = "verbosity" if r > 0 else "brevity"
        flags.append(
            f"extreme length–score correlation (r = {r:+.3f}, length in {length_unit}): "
            f"reviewers may be rewarding {rewarding}"
        )

    note = INDICATORS_NOTE if any(h.status == "insufficient" for h in honesty) else None
    return SessionBiasMetadata(
        records=len(records),
        calibration=calibration,
        calibration_test=calibration_test,
        length_correlation=length,
        position_bias=position,
        self_preference=_self_preference(records),
        honesty=honesty,
        flags=flags,
        note=note,
    )


def _calibration(
    by_reviewer: Mapping[str, list[BiasRecord]],
) -> tuple[dict[str, ReviewerCalibration], SignificanceTest]:
    """Each reviewer's calibration against the others, and whether their means differ at all.
    Items are (model, position) so two answers by the same model stay distinct."""
    calibration_raw = audit_reviewer_calibration(
        {rid: {f"{r.model_id}#{r.position}": r.score_value for r in recs} for rid, recs in by_reviewer.items()}
    )
    calibration = {rid: ReviewerCalibration(**c, samples=len(by_reviewer[rid])) for rid, c in calibration_raw.items()}
    calibration_test = one_way_anova(
        [
            GroupSums(len(recs), sum(r.score_value for r in recs), sum(r.score_value**2 for r in recs))
            for recs in by_reviewer.values()
        ],
        name="one-way ANOVA across reviewers",
    )
    return calibration, calibration_test


def _length_correlation(records: Sequence[BiasRecord], length_unit: LengthUnit) -> LengthCorrelation:
    """Each model's answer length vs the mean score it received in this session."""
    received: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, float] = {}
    for rec in records:
        received[rec.model_id].append(rec.score_value)
        size = _length(rec, length_unit)
        if size is not None:
            lengths.setdefault(rec.model_id, size)
    avg_scores = {m: exact_moments.mean(s) for m, s in received.items()}
    r, interpretation = calculate_length_correlation(lengths, avg_scores)
    used = sum(1 for m in avg_scores if m in lengths) if interpretation != "insufficient_data" else 0
    return LengthCorrelation(r=r, interpretation=interpretation, pairs=used, unit=length_unit)


def _position_bias(by_reviewer: Mapping[str, list[BiasRecord]]) -> PositionBias:
    """Mean score by display position: one ordering per reviewer, keyed by recorded position."""
    session_data = []
    for recs in by_reviewer.values():
        slots: list[str | None] = [None] * (max(r.position for r in recs) + 1)
        scores = {}
        for rec in recs:
            key = f"{rec.model_id}#{rec.position}"
            slots[rec.position] = key
            scores[key] = rec.score_value
        session_data.append({"display_order": slots, "scores": scores})
    variance, detected = calculate_position_bias(session_data)
    by_position = position_scores(session_data)
    return PositionBias(
        means={p: exact_moments.mean(s) for p, s in sorted(by_position.items())},
        counts={p: len(s) for p, s in sorted(by_position.items())},
        variance=variance,
        bias_detected=detected,
        orderings=len(session_data),
    )


def _self_preference(records: Sequence[BiasRecord]) -> list[SelfPreference]:
    """Each self-review's score against the other reviewers' mean on the same answer."""
    self_pref = []
    for rec in records:
        if not rec.self_review:
            continue
        others = [o.score_value for o in records if o.model_id == rec.model_id and not o.self_review]
        others_mean = exact_moments.mean(others) if others else None
        self_pref.append(
            SelfPreference(
                reviewer_id=rec.reviewer_id,
                self_score=rec.score_value,
                others_mean=others_mean,
                difference=None if others_mean is None else rec.score_value - others_mean,
                others_n=len(others),
            )
        )
    return self_pref

"""Bias records written by other tools, mapped onto ours.

Formats (``council bias-report --records-format``):

* ``council`` — our own records (:class:`council.bias.records.BiasRecord`).
* ``llm-council-core`` — the ``bias_metrics.jsonl`` lines of the ``llm-council-core``
  package (its ``BiasMetricRecord``), schema 1.2.x. The mapping, field by field:

  ======================  ==================================================================
  theirs                  ours
  ======================  ==================================================================
  schema_version          must be 1.x with x ≥ 2: before 1.2.0 ``position`` held the
                          reviewer's *ranking* of the answer, not its display position, so
                          older records are refused (a position-bias audit would be wrong)
  session_id, reviewer_id, model_id, position, response_length_chars, timestamp — as they are
  score_scale "1-10"      scale_min 1, scale_max 10 (any "lo-hi" of integers)
  score_value 0.0         "no score": their builder writes 0.0 when the reviewer gave none.
                          The record still occupies its display position (it is checked with
                          its review) but carries no score and enters no statistic
  reviewer_id == model_id self_review true (their records mark self-reviews no other way)
  query_hash (16 hex)     dropped: a 16-hex truncation collides and was keyed by another
                          installation's secret, so it cannot group with ours
  query_metadata          dropped: it describes the query (category, length bucket), and
                          our records carry nothing about the query
  consent_level, council_config_version — dropped (not used by the audit)
  ======================  ==================================================================

  Types stay strict (``"7"`` is not a score); ``response_length_words`` is absent, so a
  words-based length correlation leaves these records out and says so.

A file's format is detected from its first record when not named: llm-council-core
records have ``score_scale``/``consent_level``/``council_config_version`` and none of
our ``scale_min``/``scale_max``/``self_review``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

RecordFormat = Literal["council", "llm-council-core"]
RECORD_FORMATS: tuple[str, ...] = ("auto", "council", "llm-council-core")

_THEIR_KEYS = frozenset({"score_scale", "consent_level", "council_config_version"})
_OUR_KEYS = frozenset({"scale_min", "scale_max", "self_review"})
_DROPPED = ("query_hash", "query_metadata", "consent_level", "council_config_version", "score_scale")
_SCALE = re.compile(r"^\s*(-?\d{1,6})\s*-\s*(-?\d{1,6})\s*$", re.ASCII)  # int() takes "٣" too
_VERSION = re.compile(r"^(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?$", re.ASCII)
_THEIR_HASH = re.compile(r"^[0-9a-f]{16}$|^[0-9a-f]{64}$")
MIN_VERSION = (1, 2, 0)


def detect_format(obj: Mapping[str, Any]) -> RecordFormat:
    keys = set(obj)
    if keys & _THEIR_KEYS and not keys & _OUR_KEYS:
        return "llm-council-core"
    return "council"


class Mapped:
    """One foreign record as our record's fields, and whether it carries a score."""

    __slots__ = ("data", "scored", "dropped_hash")

    def __init__(self, data: dict[str, Any], scored: bool, dropped_hash: bool) -> None:
        self.data = data
        self.scored = scored
        self.dropped_hash = dropped_hash


def _version(value: Any) -> tuple[int, int, int]:
    if not isinstance(value, str) or not (m := _VERSION.match(value.strip())):
        raise ValueError(f"schema_version {value!r} is not a version like 1.2.0")
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def from_llm_council_core(obj: Mapping[str, Any]) -> Mapped:
    """Map one llm-council-core ``BiasMetricRecord`` (schema 1.2.x) to our record's fields.

    Raises ValueError with a one-line reason for records we refuse."""
    version = _version(obj.get("schema_version", "1.0.0"))  # their reader's default for a missing version
    if version[0] != 1:
        raise ValueError(f"llm-council-core schema_version {obj.get('schema_version')!r} is not supported (1.2.x is)")
    if version < MIN_VERSION:
        raise ValueError(
            f"llm-council-core schema_version {obj.get('schema_version')!r} is refused: before 1.2.0 its "
            "'position' is the reviewer's ranking of the answer, not where the answer was shown"
        )
    scale = obj.get("score_scale", "1-10")
    if not isinstance(scale, str) or not (m := _SCALE.match(scale)):
        raise ValueError(f"score_scale {scale!r} is not a range like '1-10'")
    lo, hi = int(m.group(1)), int(m.group(2))
    query_hash = obj.get("query_hash")
    if query_hash is not None and not (isinstance(query_hash, str) and _THEIR_HASH.match(query_hash)):
        raise ValueError("query_hash is not a 16- or 64-hex digest")
    metadata = obj.get("query_metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError("query_metadata is not an object")
    data = {k: v for k, v in obj.items() if k not in _DROPPED}
    data["scale_min"], data["scale_max"] = lo, hi
    if data.get("timestamp") == "":
        data["timestamp"] = None
    reviewer, model = obj.get("reviewer_id"), obj.get("model_id")
    data["self_review"] = isinstance(reviewer, str) and reviewer == model
    score = obj.get("score_value")
    # Their builder writes 0.0 for "no score" (a missing or unreadable score); 0 is outside
    # any 1-based scale. Strictness still applies: a bool or a string is an error, not "no score".
    scored = not (type(score) in (int, float) and score == 0 and lo > 0)
    if not scored:
        data["score_value"] = float(lo)  # a placeholder that passes validation; never counted
    return Mapped(data, scored, query_hash is not None)

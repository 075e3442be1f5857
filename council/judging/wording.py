"""A verdict's measures in words, one name per measure, for every front-end (the CLI's
``compare``, the MCP tools): the judges' stated confidence is a number from 0 to 1, the
agreement of the votes or judges a level; said side by side, never as one ("confidence 0.32,
high"). Pure: no rich, no I/O."""

from __future__ import annotations


def verdict_measures(judge_confidence: float, agreement_level: str) -> str:
    """``judge confidence 0.32, agreement high``: each number named for what it is."""
    return f"judge confidence {judge_confidence:.2f}, agreement {agreement_level}"

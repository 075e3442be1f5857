"""What "length" and "markdown count" of an answer mean, the one definition (pure, no numpy).

Used for judgment files (``council leaderboard --judgments``) and for council's own judged
pairs, recorded when a judgment is saved, so both give the same style covariates
(docs/methods.md, "Style control"). Length is in characters (Unicode code points, as
AlpacaEval counts ``len(output)``); the markdown counts are Chatbot Arena's: headers, list
items and bold spans.
"""

from __future__ import annotations

import re

MARKDOWN_KEYS = ("headers", "lists", "bold")

_HEADER = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def markdown_counts(text: str) -> dict[str, int]:
    """Markdown headers, list items and bold spans in ``text`` (Chatbot Arena's style counts)."""
    return {
        "headers": len(_HEADER.findall(text)),
        "lists": len(_LIST.findall(text)),
        "bold": len(_BOLD.findall(text)),
    }


def answer_style(text: str) -> tuple[int, dict[str, int]]:
    """An answer's length in characters and its markdown counts."""
    return len(text), markdown_counts(text)

"""Text on a terminal: what a user or a model wrote is shown, never obeyed.

Rich markup is switched off on council's consoles (``council.cli.render``); this module
makes control characters visible, so an ANSI or OSC escape in a question, an answer or a
provider's error shows as ``\\x1b[31m`` instead of recolouring the terminal or hiding a
link. Bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069
isolates, the U+200E/U+200F and U+061C marks) are shown the same way: otherwise
``gpt-4o\u202e1-inim\u202c`` would print as ``gpt-4omini-1``. Newlines and tabs stay as
they are.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab, and every bidi control, written as an escape."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def literal(value: object, style: str = "") -> Text:
    """``value`` as rich text shown exactly as written (for places rich would read as markup, e.g.
    panel titles and table cells)."""
    from rich.text import Text

    return Text(visible(str(value)), style=style)

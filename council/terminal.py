"""Text on a terminal: what a user or a model wrote is shown, never obeyed.

Rich markup is switched off on council's consoles (``council.cli.render``); this module
makes control characters visible, so an ANSI or OSC escape in a question, an answer or a
provider's error shows as ``\\x1b[31m`` instead of recolouring the terminal or hiding a
link. Newlines and tabs stay as they are.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control character but newline and tab written as an escape."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)

"""Streamed text handed to a listener one turn of the event loop at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class OneTurn:
    """Text handed over in one turn of the event loop, emitted as one piece at its end.

    A stream read from a full buffer (a provider sending faster than it is read, a busy
    server) hands over many chunks in one turn: each became an event, stored and sent on
    its own (57 for a 350-character synthesis). They are joined instead; chunks that arrive
    turns apart still go out one by one, and nothing waits longer than the turn it came in."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.pieces: list[str] = []

    def add(self, text: str) -> None:
        if not self.pieces:
            asyncio.get_running_loop().call_soon(self.flush)
        self.pieces.append(text)

    def flush(self) -> None:
        if self.pieces:
            text, self.pieces = "".join(self.pieces), []
            self.emit(text)

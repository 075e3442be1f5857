"""The live progress line of ``council run`` on stderr.

rich (``council.cli.render``) is imported only when the line can show, i.e. stderr may be a
terminal: a piped run sends its first call without it (docs/benchmarks.md, section 20).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from council.api import Council
    from council.session import SessionEvent


def may_be_terminal(stream: Any) -> bool:
    """False only where rich's ``Console.is_terminal`` is False too: no TTY, and none forced
    by the environment (``TTY_COMPATIBLE``, ``FORCE_COLOR``)."""
    forced = os.environ.get("TTY_COMPATIBLE")
    if forced in ("0", "1"):
        return forced == "1"
    if os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class ProgressDisplay:
    """A live progress line on stderr while a session runs (off when not a terminal)."""

    def __init__(self, council: Council, enabled: bool = True) -> None:
        r = council.resolved
        self.total = {"answer": len(r.members), "review": len(r.reviewers), "synthesis": 1}
        self.done = {"answer": 0, "review": 0, "synthesis": 0}
        self.enabled = False
        self._progress: Any = None
        self._task: Any = None
        if enabled and (r.offline_default or may_be_terminal(sys.stderr)):
            from council.cli.render import err

            self.enabled = err.is_terminal
            if r.offline_default:
                err.print("No configuration found: running the small offline default (local models).", style="yellow")

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            from council.cli.render import err

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("starting", total=sum(self.total.values()))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def on_event(self, event: SessionEvent) -> None:
        if self._progress is None:
            return
        kind = event.type
        if kind in self.done:
            self.done[kind] += 1
            self._progress.advance(self._task)
            stage = kind
        elif kind == "stage":
            stage = event.stage
        else:
            return
        desc = f"{stage}: {self.done[stage]}/{self.total[stage]}"
        if kind == "stage" and event.detail:
            desc = f"{event.detail} ({self.done[stage]}/{self.total[stage]})"
        self._progress.update(self._task, description=desc)

"""The live progress line of ``council run`` on stderr.

rich (``council.cli.render``) is imported only when the line can show, i.e. stderr may be a
terminal, and then in a worker thread while the first calls are in flight: no run's first call
waits for it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from council.api import Council, SessionEvent


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
    """A live progress line on stderr while a session runs (off when not a terminal). It shows
    once the session's first calls are in flight and a worker thread has imported rich for it
    (``council.api.import_ahead``): the calls do not wait for the import."""

    def __init__(self, council: Council, enabled: bool = True) -> None:
        r = council.resolved
        self.total = {"answer": len(r.members), "review": len(r.reviewers), "synthesis": 1}
        self.done = {"answer": 0, "review": 0, "synthesis": 0}
        self.wanted = enabled and (r.offline_default or may_be_terminal(sys.stderr))
        self.description = "starting"
        self._open = False
        self._progress: Any = None
        self._task: Any = None
        if self.wanted and r.offline_default:
            from council.cli.render import err

            err.print("No configuration found: running the small offline default (local models).", style="yellow")

    def __enter__(self) -> ProgressDisplay:
        self._open = True
        if self.wanted:
            from council.api import import_ahead

            import_ahead("council.cli.render", "rich.progress", then=self.start)
        return self

    def start(self) -> None:
        """Show the line as far as the session has got (on the event loop; a no-op once it is over)."""
        if not self._open or self._progress is not None:
            return
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from council.cli.render import err

        if not err.is_terminal:
            return
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        self._progress.__enter__()
        self._task = self._progress.add_task(
            self.description, total=sum(self.total.values()), completed=sum(self.done.values())
        )

    def __exit__(self, *exc: object) -> None:
        self._open = False
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def on_event(self, event: SessionEvent) -> None:
        kind = event.type
        if kind == "round_started":  # a deliberation round: its reviews are counted afresh
            self.done["review"] = 0
        if kind in self.done:
            self.done[kind] += 1
            stage = kind
        elif kind == "stage":
            stage = event.stage
        else:
            return
        desc = f"{stage}: {self.done[stage]}/{self.total[stage]}"
        if kind == "stage" and event.detail:
            desc = f"{event.detail} ({self.done[stage]}/{self.total[stage]})"
        self.description = desc
        if self._progress is None:
            return
        if kind in self.done:
            self._progress.advance(self._task)
        self._progress.update(self._task, description=desc)

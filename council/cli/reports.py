"""The one output path of the report commands (``bias-report``, ``leaderboard``): the report as
text, ``--json`` or ``--html``, to ``-o FILE`` or stdout; ``--html FILE`` writes the page to FILE
beside the usual output."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from council.cli.common import open_output, status, write_output
from council._util.outputs import check_output

if TYPE_CHECKING:
    from rich.console import Console


def check_report_targets(
    output: str | None, html: str | None, *, as_json: bool, what: str, inputs: Iterable[str | Path]
) -> None:
    """Before any work: one format at a time, and no target that is one of the files read."""
    from council.errors import UsageError

    if html == "-" and as_json:
        raise UsageError(f"--json and --html are two formats of the {what}: choose one")
    for target in (output, html):
        check_output(target, inputs)


def write_report(
    output: str | None,
    html: str | None,
    *,
    as_json: bool,
    page: Callable[[], str],
    json_text: Callable[[], str],
    render_text: Callable[[Console], None],
) -> None:
    """Write the report in the form asked for (``html``: None, '-' for the page as the report, or
    the file the page goes to beside it); the text is plain in a file, styled on a terminal."""
    html_format = html == "-"
    if html is not None and not html_format:
        write_output(html, page())
    if html_format:
        write_output(output, page())
    elif as_json:
        write_output(output, json_text())
    elif output and output != "-":
        from rich.console import Console

        with open_output(output) as fh:
            render_text(Console(file=fh, width=120, no_color=True, highlight=False))
        status(f"wrote {output}")
    else:
        from council.cli.render import out

        render_text(out)

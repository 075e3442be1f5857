"""What every command shares: ``--debug`` and ``--quiet`` (before or after the subcommand),
the ``-o/--output FILE`` option and the one way its file is written, and the one switch that
decides whether status lines print.

``tests/test_cli_conventions.py`` walks the command tree and holds every command to these.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import click

DEBUG_HELP = "Show full tracebacks and debug logs."
QUIET_HELP = "No progress or status lines on stderr (results, warnings and errors still print)."


def _root_obj(ctx: click.Context) -> dict[str, Any]:
    root = ctx.find_root()
    root.ensure_object(dict)
    return root.obj  # type: ignore[no-any-return]


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not _root_obj(ctx).get("debug"):
        _root_obj(ctx)["debug"] = True
        from council.logs import configure_logging

        configure_logging(debug=True)


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        _root_obj(ctx)["quiet"] = True


def _shared_options() -> list[click.Option]:
    return [
        click.Option(
            ["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_set_debug, help=DEBUG_HELP
        ),
        click.Option(
            ["--quiet", "-q"], is_flag=True, expose_value=False, is_eager=True, callback=_set_quiet, help=QUIET_HELP
        ),
    ]


def add_shared_options(command: click.Command) -> click.Command:
    """Give ``command`` (and, for a group, each of its commands) ``--debug`` and ``--quiet``."""
    if not any("--debug" in p.opts for p in command.params):
        command.params.extend(_shared_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_shared_options(sub)
    return command


def output_option(help: str, *, allow_dash: bool = True) -> Any:
    """``-o/--output FILE``: the file a command writes (``allow_dash``: '-' means stdout)."""
    return click.option(
        "--output",
        "-o",
        "output",
        type=click.Path(dir_okay=False, allow_dash=allow_dash),
        metavar="FILE",
        help=help,
    )


def quiet() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and _root_obj(ctx).get("quiet"))


def status(message: str) -> None:
    """A status line on stderr ("wrote FILE", "exported 3 sessions"), unless ``--quiet``."""
    if not quiet():
        from council.terminal import visible

        click.echo(visible(message), err=True)


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """The text file ``-o FILE`` names (stdout for none or '-'), written whole or not at all.

    A regular file is written beside itself under a temporary name and renamed over the
    target only when the command succeeded, so a failed command leaves the old file as it
    was (it keeps its mode; a new file gets the usual one). Devices and pipes are written
    in place. A file that cannot be written is a ``UsageError`` naming it (one line, exit 2).
    """
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    try:
        mode = target.stat().st_mode if target.exists() else None
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    if mode is not None and _is_the_database(target):
        from council.errors import UsageError

        raise UsageError(f"refusing to write {path}: it is council's database")
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(target, "w", encoding="utf-8", newline="") as fh:
                yield fh
        except OSError as exc:
            raise _cannot_write(path, exc) if _writing_failed(exc) else exc from None
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError) and _writing_failed(exc):
            raise _cannot_write(path, exc) from None
        raise


def write_output(path: str | None, text: str) -> None:
    """Write ``text`` to ``-o FILE`` (see :func:`open_output`) and say so, or print it."""
    with open_output(path) as fh:
        fh.write(text)
    if path and path != "-":
        status(f"wrote {path}")


def _is_the_database(target: Path) -> bool:
    from council.home import council_home

    database = council_home() / "council.db"
    names = [database, *(database.with_name(database.name + suffix) for suffix in ("-wal", "-shm"))]
    return any(name.exists() and os.path.samefile(target, name) for name in names)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _writing_failed(exc: OSError) -> bool:
    # Failures of the file being written (a full or read-only disk), not of what the command reads.
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def _cannot_write(path: str, exc: OSError) -> Exception:
    from council.errors import UsageError

    return UsageError(f"cannot write {path}: {exc.strerror or exc}")

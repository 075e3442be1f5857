"""Log events: the library emits them, the host decides where they go.

Library modules log through :func:`get_logger`: structlog bound to the standard library's
``logging`` under the ``council`` logger, which has a ``NullHandler``. Used from Python,
council therefore prints nothing unless the application configures logging (it then gets
council's events like any other library's). Every event is redacted
(:mod:`council.untrusted.redaction`) before any handler sees it.

The CLI and the server call :func:`configure_logging`: human-readable lines on stderr, or JSON
lines appended to ``$COUNCIL_LOG_FILE`` (created 0600), at ``COUNCIL_LOG_LEVEL`` (default
WARNING; ``--debug``: DEBUG; a name that is not a level is a ``ConfigError``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import Any

from council._util.refused_imports import refused
from council.untrusted.redaction import REDACTED, redact, redact_data


def _structlog() -> Any:
    """structlog, imported at the first event logged or rendered, not with this module: with
    asyncio it is a large part of a command's start-up (``benchmarks/bench_startup.py``), and a
    command that logs nothing (a bias report, a listing) need not pay it. It imports rich (slow
    too) when rich is installed, only
    to render exceptions: rich is refused to it (to this thread only: another thread's import of
    rich meanwhile goes on), and the console renderer is given plain tracebacks in any case (rich
    may have been imported by the time structlog is).

    Once, under a lock: the first events may come from several threads at once (a batch's store
    threads), and a module another thread is still importing is in ``sys.modules`` half made."""
    global _imported
    if _imported is None:
        with _import_lock:
            if _imported is None:
                with refused("rich", why="structlog's import (council._util.logs)"):
                    import structlog
                _imported = structlog
    return _imported


_imported: Any = None
_import_lock = threading.Lock()


ROOT = "council"
#: The levels ``COUNCIL_LOG_LEVEL`` accepts (any case); anything else is refused, not ignored.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# "prompt_tokens", "max_tokens": counts, not credentials (a name ending in "tokens" is shown).
_SECRET_KEYS = re.compile(r"(api[_-]?key|token(?!s$)|secret|authorization|password)", re.IGNORECASE)

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def redact_event(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Values of secret-named keys are dropped; every string is redacted (secrets, private text)."""
    for key, value in list(event.items()):
        if _SECRET_KEYS.search(key):
            event[key] = REDACTED
        elif isinstance(value, str):
            event[key] = redact(value)
        elif isinstance(value, dict | list | tuple):
            event[key] = redact_data(value)
    return event


class _Logger:
    """A structlog logger made at its first use (:func:`_structlog`)."""

    __slots__ = ("_name", "_logger")

    def __init__(self, name: str) -> None:
        self._name, self._logger = name, None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            self._logger = _wrap(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> Any:
    """A structlog logger over ``logging.getLogger(name)`` (``name`` under ``council``), made at
    its first use."""
    return _Logger(name)


def _wrap(name: str) -> Any:
    structlog = _structlog()
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_logger_name,
            redact_event,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


class CurrentStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` (or ``sys.stdout``: ``name``) is when the event happens
    (test runners swap them)."""

    def __init__(self, name: str = "stderr") -> None:
        self._which = name
        super().__init__(getattr(sys, name))

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return getattr(sys, self._which)

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _visible(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    from council.untrusted.terminal import visible

    return {k: visible(v) if isinstance(v, str) else v for k, v in event.items()}


def _open_private(path: str) -> Any:
    """The log file, appended to; created 0600 (and its directory 0700) if it does not exist."""
    from pathlib import Path

    from council.errors import ConfigError

    try:
        Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"COUNCIL_LOG_FILE {path}: cannot open it ({exc.strerror})") from None
    return os.fdopen(fd, "a", encoding="utf-8")


def configure_logging(level: str | None = None, debug: bool = False, *, file: bool = True) -> None:
    """Send council's events to stderr (or ``$COUNCIL_LOG_FILE`` as JSON lines). Idempotent:
    a second call replaces what the first installed. ``file=False`` ignores the log file."""
    level_name = (level or os.environ.get("COUNCIL_LOG_LEVEL") or ("DEBUG" if debug else "WARNING")).strip().upper()
    if level_name not in LEVELS:
        from council.errors import ConfigError

        source = "log level" if level else "COUNCIL_LOG_LEVEL"
        raise ConfigError(f"{source} {level_name!r} is not a level: use one of {', '.join(LEVELS)}")
    numeric = logging.getLevelName(level_name)
    unconfigure_logging()
    log_file = os.environ.get("COUNCIL_LOG_FILE") if file else None
    handler: logging.Handler
    if log_file:
        handler = logging.StreamHandler(_open_private(log_file))
    else:
        handler = CurrentStreamHandler()
    colors = sys.stderr.isatty()

    def formatter() -> logging.Formatter:
        structlog = _structlog()
        stamp = [structlog.stdlib.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]
        if log_file:
            renderer: list[Any] = [structlog.processors.JSONRenderer()]
        else:
            console = structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=structlog.dev.plain_traceback)
            renderer = [_visible, console]
        return structlog.stdlib.ProcessorFormatter(  # type: ignore[no-any-return]
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *stamp, *renderer],
            foreign_pre_chain=stamp,
        )

    handler.setFormatter(_LazyFormatter(formatter))
    handler._council_cli = True  # type: ignore[attr-defined]
    logger = logging.getLogger(ROOT)
    logger.addHandler(handler)
    logger.setLevel(numeric)


class _LazyFormatter(logging.Formatter):
    """structlog's formatter, built when the first event is written (:func:`_structlog`)."""

    def __init__(self, build: Any) -> None:
        super().__init__()
        self._build, self._formatter = build, None

    def format(self, record: logging.LogRecord) -> str:
        if self._formatter is None:
            self._formatter = self._build()
        return self._formatter.format(record)  # type: ignore[no-any-return]


def unconfigure_logging() -> None:
    """Undo :func:`configure_logging`: council's events go nowhere again (library default)."""
    logger = logging.getLogger(ROOT)
    for handler in [h for h in logger.handlers if getattr(h, "_council_cli", False)]:
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.NOTSET)

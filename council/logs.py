"""structlog setup for the CLI and server (the library itself only calls get_logger()).

Console: human-readable lines on stderr. ``COUNCIL_LOG_FILE``: JSON lines appended to
that file. Secrets are redacted before anything is rendered.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any


def _import_structlog_without_rich() -> Any:
    """structlog imports rich (~50 ms) when it is installed, only to render exceptions; the CLI
    imports this module first, so structlog is loaded for the whole process with plain
    tracebacks. rich itself still imports normally afterwards (the CLI renders with it)."""
    if "structlog" in sys.modules:
        return sys.modules["structlog"]
    hidden = "rich" not in sys.modules
    if hidden:
        sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog
    finally:
        if hidden and sys.modules.get("rich", ...) is None:
            del sys.modules["rich"]
    return structlog


structlog = _import_structlog_without_rich()

_SECRET_KEYS = re.compile(r"(api[_-]?key|token|secret|authorization|password)", re.IGNORECASE)
_SECRET_VALUES = re.compile(r"(Bearer\s+)[A-Za-z0-9._\-]+|\b(sk-[A-Za-z0-9_\-]{8,})")


def redact_value(value: str) -> str:
    return _SECRET_VALUES.sub(lambda m: (m.group(1) or "") + "[redacted]", value)


def redact_secrets(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    for key, value in list(event.items()):
        if _SECRET_KEYS.search(key):
            event[key] = "[redacted]"
        elif isinstance(value, str):
            event[key] = redact_value(value)
    return event


def configure_logging(level: str | None = None, debug: bool = False) -> None:
    level_name = (level or os.environ.get("COUNCIL_LOG_LEVEL") or ("DEBUG" if debug else "WARNING")).upper()
    numeric = logging.getLevelName(level_name)
    if not isinstance(numeric, int):
        numeric = logging.WARNING
    log_file = os.environ.get("COUNCIL_LOG_FILE")
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    if log_file:
        stream: Any = open(log_file, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        processors.append(structlog.processors.JSONRenderer())
    else:
        stream = sys.stderr
        processors.append(structlog.dev.ConsoleRenderer(colors=stream.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )

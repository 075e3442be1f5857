"""What a running service tells its operator: one line per HTTP request, per session start and
finish, per batch item and claim (``council serve``, ``council worker``), JSON on stdout by
default (``--log-format json|console``), apart from council's other events (:mod:`.logs`, stderr).

A line holds only what its caller passes: ids, route templates, statuses, counts, durations,
never a question, an answer or a secret (the callers pass none; ``tests/server`` scrapes a real
server's stdout for canaries). The stdlib's ``logging`` carries it, under the ``council.ops``
logger, which does not propagate: an application embedding council sees these lines only if it
configures that logger itself. Each line is one ``json.dumps`` of a flat dict, formatted by a
formatter built once (:func:`configure_ops_log`); with nothing configured, :func:`emit` is one
level test.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, TextIO

from council._util.logs import CurrentStreamHandler
from council.accounting.observers import Observer

NAME = "council.ops"
FORMATS = ("json", "console")

_log = logging.getLogger(NAME)
_log.propagate = False
_log.addHandler(logging.NullHandler())


_second: list[Any] = [None, ""]  # the last whole second formatted, and its text: most lines share one


def _stamp(created: float) -> str:
    """``created`` in UTC, ISO 8601 to the millisecond."""
    second = int(created)
    if _second[0] != second:
        _second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_second[1]}.{int(created % 1 * 1000):03d}Z"


class JsonLines(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``event``, then the caller's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": _stamp(record.created), "level": record.levelname.lower(), "event": record.msg}
        if isinstance(record.args, dict):
            line.update(record.args)
        return json.dumps(line, default=str)


class ConsoleLines(logging.Formatter):
    """``TIME LEVEL EVENT key=value ...`` for a person at a terminal (control characters made visible)."""

    def format(self, record: logging.LogRecord) -> str:
        from council.untrusted.terminal import visible

        fields = record.args if isinstance(record.args, dict) else {}
        pairs = " ".join(f"{k}={visible(v) if isinstance(v, str) else v}" for k, v in fields.items() if v is not None)
        return f"{_stamp(record.created)} {record.levelname.lower():<7} {record.msg} {pairs}".rstrip()


def configure_ops_log(fmt: str = "json", stream: TextIO | None = None) -> None:
    """Write the service's lines to ``stream`` (default: stdout) in ``fmt``; replaces an earlier call."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}")
    unconfigure_ops_log()
    handler = CurrentStreamHandler("stdout") if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(JsonLines() if fmt == "json" else ConsoleLines())
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)


def unconfigure_ops_log() -> None:
    for handler in [h for h in _log.handlers if not isinstance(h, logging.NullHandler)]:
        _log.removeHandler(handler)
        handler.close()
    _log.setLevel(logging.NOTSET)


def emit(event: str, fields: dict[str, Any], level: int = logging.INFO) -> None:
    """One line: ``event`` and ``fields`` (ids, counts, statuses: never text or a secret). The
    record is made here, without ``Logger.log``'s walk up the stack for the caller's source line
    (no line shows it): that walk cost more than the rest of the line."""
    if _log.isEnabledFor(level):
        _log.handle(_log.makeRecord(NAME, level, NAME, 0, event, (fields,), None))


class WorkerLines(Observer):
    """A queue worker's lines (``council worker``): one per claim and per finished item, with ids,
    status and duration, never the item's text."""

    def items_claimed(self, batch_ids: list[str]) -> None:
        emit("items_claimed", {"count": len(batch_ids), "batch_ids": sorted(set(batch_ids))})

    def item_finished(self, batch_id: str, item_id: str, status: str, seconds: float) -> None:
        emit("item_finished", {"batch_id": batch_id, "item_id": item_id, "status": status,
                               "duration_ms": round(seconds * 1000, 2)})  # fmt: skip

"""Bias records from JSONL files (ours or another tool's) into a temporary store.

Each line is parsed, mapped from its format (:mod:`council.bias.foreign`) and validated
as a :class:`BiasRecord`; a bad line stops the load with ``FILE:LINE: reason``, or with
``skip_bad`` is counted and left out. A file is read a line at a time, whatever its format:
a line longer than ``MAX_RECORD_LINE_BYTES`` is a bad line, not read into memory (a record
is a few hundred bytes), and a file longer than ``MAX_RECORDS_FILE_BYTES`` stops the load
(``/dev/zero`` is a file too, and ``skip_bad`` would otherwise skip its one line for ever).
The records go into an in-memory store, so the report asks the same questions of files as
of ``council.db``; each row remembers its file and line, so checks made later by the store
(a review's positions) can still point at the line.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from council.bias.foreign import RECORD_FORMATS, RecordFormat, detect_format, from_llm_council_core
from council.bias.records import BiasRecord
from council.errors import InputError, UsageError
from council.untrusted.inputs import check_json_text, parse_json_line
from council.storage import Store, memory_store


def explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _out_of_range(row: dict[str, Any]) -> str | None:
    """The first integer a database column cannot hold (SQLite and PostgreSQL: 64 bits)."""
    for key, value in row.items():
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return f"{key}: {value if len(str(value)) < 30 else str(value)[:12] + '…'} is out of range"
    return None


@dataclass
class Line:
    """One parsed line: a record (or None when the line is bad) and where it came from."""

    path: Path
    lineno: int
    record: BiasRecord | None = None
    scored: bool = True
    problem: str | None = None
    dropped_hash: bool = False
    fmt: RecordFormat = "council"


#: The longest line of a records file read (a record is a few hundred bytes; llm-council-core's a few kB).
MAX_RECORD_LINE_BYTES = 1024 * 1024
#: The largest records file read: several million records.
MAX_RECORDS_FILE_BYTES = 2 * 1024**3


def _raw_lines(fh: BinaryIO, path: Path) -> Iterator[bytes | None]:
    """Each line of ``fh`` (None for one longer than MAX_RECORD_LINE_BYTES: told before the rest of
    it is skipped, unkept), up to MAX_RECORDS_FILE_BYTES in all."""
    read = 0
    while raw := fh.readline(MAX_RECORD_LINE_BYTES + 1):
        read += len(raw)
        if len(raw) > MAX_RECORD_LINE_BYTES and not raw.endswith(b"\n"):
            yield None  # a load that stops at a bad line stops here, reading no further
            while raw and not raw.endswith(b"\n") and read <= MAX_RECORDS_FILE_BYTES:
                raw = fh.readline(MAX_RECORD_LINE_BYTES)
                read += len(raw)
        elif read <= MAX_RECORDS_FILE_BYTES:
            yield raw
        if read > MAX_RECORDS_FILE_BYTES:
            raise InputError(f"records file {path} is larger than {_size(MAX_RECORDS_FILE_BYTES)}")


def _size(n: int) -> str:
    return f"{n // 1024**3} GiB" if n >= 1024**3 else f"{n // 1024**2} MiB" if n >= 1024**2 else f"{n // 1024} KiB"


def iter_lines(path: Path | str, records_format: str = "auto") -> Iterator[Line]:
    """Every non-blank line of ``path`` as a :class:`Line` (bad lines carry their problem)."""
    if records_format not in RECORD_FORMATS:
        raise UsageError(f"unknown records format {records_format!r}; choose one of: {', '.join(RECORD_FORMATS)}")
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    fmt: RecordFormat | None = None if records_format == "auto" else records_format  # type: ignore[assignment]
    with fh:
        for lineno, raw in enumerate(_raw_lines(fh, path), 1):
            line = Line(path, lineno)
            if raw is None:
                line.problem = f"a line longer than {_size(MAX_RECORD_LINE_BYTES)} (not read)"
                yield line
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                line.problem = f"not UTF-8 text (byte {exc.start})"
                yield line
                continue
            if not text.strip():
                continue
            try:
                data: Any = parse_json_line(text, "")
                check_json_text(data, "a string in it")
            except InputError as exc:
                line.problem = str(exc).removeprefix(": ")
                yield line
                continue
            if not isinstance(data, dict):
                line.problem = f"expected a JSON object, got {type(data).__name__}"
                yield line
                continue
            if fmt is None:
                fmt = detect_format(data)
            line.fmt = fmt
            try:
                if fmt == "llm-council-core":
                    mapped = from_llm_council_core(data)
                    line.scored, line.dropped_hash = mapped.scored, mapped.dropped_hash
                    data = mapped.data
                line.record = BiasRecord.model_validate(data)
                line.problem = _out_of_range(line.record.row())
                if line.problem:
                    line.record = None
            except ValidationError as exc:
                line.problem = explain(exc)
            except ValueError as exc:
                line.problem = str(exc)
            yield line


@dataclass
class LoadedRecords:
    store: Store
    skipped: list[str] = field(default_factory=list)
    unscored: int = 0
    dropped_hashes: int = 0
    formats: dict[str, str] = field(default_factory=dict)
    _files: list[str] = field(default_factory=list)
    _file_of: array = field(default_factory=lambda: array("I"))
    _line_of: array = field(default_factory=lambda: array("I"))

    _scored: int = 0

    def locate(self, record_id: int) -> str:
        """``FILE:LINE`` of a loaded record (ids are 1-based load order; unscored ones are negative)."""
        i = record_id - 1 if record_id > 0 else self._scored - record_id - 1
        if 0 <= i < len(self._line_of):
            return f"{self._files[self._file_of[i]]}:{self._line_of[i]}"
        return f"record {record_id}"


def load_records_files(
    paths: Iterable[Path | str], *, skip_bad: bool = False, records_format: str = "auto"
) -> LoadedRecords:
    """A temporary store holding the files' records.

    Records without a score (llm-council-core's 0.0) are kept with their position only:
    they are checked with their review and enter no statistic.
    """
    store = memory_store()
    loaded = LoadedRecords(store=store)
    unscored_rows: list[dict[str, Any]] = []
    unscored_at: list[tuple[int, int]] = []

    # A record equal to an earlier one in every field is the same observation read twice (a
    # file given twice, or overlapping exports), never a second one: it is a bad line, and with
    # skip_bad only the repeat is left out. Keyed by the row's hash (64 bits: a false match
    # among a million records has odds of about 1 in 10^7).
    first_seen: dict[int, tuple[int, int]] = {}

    def rows() -> Iterator[dict[str, Any]]:
        for path in paths:
            loaded._files.append(str(path))
            file_index = len(loaded._files) - 1
            for line in iter_lines(path, records_format):
                loaded.formats.setdefault(str(path), line.fmt)
                rec = line.record
                row = rec.row() if rec is not None else None
                if row is not None:
                    first = first_seen.setdefault(hash(tuple(row.values())), (file_index, line.lineno))
                    if first != (file_index, line.lineno):
                        where = f"{loaded._files[first[0]]}:{first[1]}"
                        line.problem = f"the same record as {where} (a file read twice?)"
                        rec = row = None
                if rec is None or row is None:
                    message = f"{line.path}:{line.lineno}: {line.problem}"
                    if not skip_bad:
                        raise InputError(message)
                    loaded.skipped.append(message)
                    continue
                loaded.dropped_hashes += line.dropped_hash
                if not line.scored:
                    unscored_rows.append(
                        {"id": -(len(unscored_rows) + 1), "session_id": rec.session_id,
                         "reviewer_id": rec.reviewer_id, "position": rec.position, "timestamp": rec.timestamp,
                         "council": rec.council}
                    )  # fmt: skip
                    unscored_at.append((file_index, line.lineno))
                    continue
                loaded._file_of.append(file_index)
                loaded._line_of.append(line.lineno)
                yield {"id": len(loaded._line_of), **row}

    try:
        # The scored rows first (their generator fills unscored_rows as it goes), then the unscored.
        store.load_bias_records(rows(), [])
        store.load_bias_records((), unscored_rows)
    except BaseException:
        store.close()
        raise
    loaded._scored = len(loaded._line_of)
    for file_index, lineno in unscored_at:
        loaded._file_of.append(file_index)
        loaded._line_of.append(lineno)
    loaded.unscored = len(unscored_rows)
    return loaded

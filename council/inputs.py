"""Reading what users hand council: text files, checked and decoded in one place.

Every file a command or the library reads as text (responses to judge, references,
candidates, questions, batch files) goes through :func:`read_text_file`, and standard input
through :func:`read_text_stream`: UTF-8 of at most ``MAX_INPUT_BYTES`` or a one-line
``InputError`` naming the source, never a traceback (``/dev/zero`` is a file too). Text that
arrives as a string (a question on the command line, a chat message) goes through
:func:`check_text`: bytes that were not UTF-8 reach Python as unpaired surrogates, which
nothing downstream can store or send. A line of a JSONL file goes through
:func:`parse_json_line` (numbers of thousands of digits and nesting thousands deep are
refused, not crashed on) and its values through :func:`check_json_text`.

U+0000 (NUL) is refused by all of them (:data:`NUL_REFUSED`): PostgreSQL's text columns cannot
hold it, so a store on PostgreSQL would keep other text than one on SQLite; refused where it
comes in, it is the same one line on both. (What a provider sends is not refused: its NULs
become U+FFFD, council.providers.client.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, BinaryIO

from council.errors import InputError, UsageError

#: The largest text file or standard input council reads (a question, a response, a reference).
MAX_INPUT_BYTES = 10 * 1024 * 1024
#: A batch file holds many items: as large as a provider's batch file may be (OpenAI: 200 MB).
MAX_BATCH_BYTES = 256 * 1024 * 1024
#: Said of a text holding U+0000, after what it is.
NUL_REFUSED = "contains a NUL character (U+0000)"


def _read_capped(stream: BinaryIO, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{what} is larger than {max_bytes // (1024 * 1024)} MB")
    return data


def _without_nul(text: str, what: str) -> str:
    at = text.find("\x00")
    if at >= 0:
        raise InputError(f"{what} {NUL_REFUSED} on line {text.count(chr(10), 0, at) + 1}")
    return text


def read_text_file(path: str | Path, what: str, *, max_bytes: int = MAX_INPUT_BYTES) -> str:
    try:
        with Path(path).open("rb") as fh:
            return _without_nul(_read_capped(fh, f"{what} {path}", max_bytes).decode("utf-8"), f"{what} {path}")
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None


def read_text_stream(stream: BinaryIO, what: str) -> str:
    """All of a byte stream (standard input) as UTF-8 text, or a one-line ``InputError``."""
    try:
        return _without_nul(_read_capped(stream, what).decode("utf-8"), what)
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}") from None


def check_text(value: str, what: str, *, nul: bool = False) -> str:
    """``value`` if it is valid Unicode text without U+0000 (``nul``: with it allowed), else a
    one-line ``InputError`` naming ``what``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} is not valid UTF-8 text (an undecodable byte or unpaired surrogate at character {exc.start + 1})"
        ) from None
    if not nul and "\x00" in value:
        raise InputError(f"{what} {NUL_REFUSED}")
    return value


def check_visible(value: str, what: str) -> str:
    """``value`` if it has something a reader can see: not only whitespace and invisible
    characters (zero-width spaces, joiners, bidi controls: :data:`council.untrusted.slots.INVISIBLE`)."""
    from council.untrusted.slots import INVISIBLE

    if not re.sub(f"[\\s{INVISIBLE}]+", "", value):
        raise InputError(f"{what} has no visible text")
    return value


def parse_json_line(raw: str, where: str) -> Any:
    """One line of a JSONL file as a value, or a one-line ``InputError`` at ``where``."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise InputError(f"{where}: not valid JSON ({str(exc).split(';')[0]})") from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """A TOML document (a config file, a rubric), or a one-line ``InputError`` at ``where``."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: invalid TOML: nested too deeply") from None
    check_json_text(data, f"{where}: a string")  # a "\u0000" escape
    return data


def check_json_text(value: Any, what: str, *, nul: bool = False) -> None:
    """Every string in ``value`` (keys too) is valid Unicode text, without U+0000 unless ``nul``:
    JSON's ``\\ud800`` escapes decode to unpaired surrogates, which nothing downstream can store
    or send, and its ``\\u0000`` to NUL (:data:`NUL_REFUSED`)."""
    stack = [value]
    while stack:  # iterative: a deeply nested value cannot exhaust the stack here
        item = stack.pop()
        if isinstance(item, str):
            check_text(item, what, nul=nul)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


_ASCII_DIGITS = re.compile(r"[0-9]+")
#: Seeds are stored as SQLite integers (signed 64-bit) and sent to providers: 0 to 2**63 - 1.
MAX_SEED = 2**63 - 1


def whole_number(text: str, what: str, lo: int, hi: int, error: type[UsageError] = InputError) -> int:
    """``text`` (a query parameter, an option, a variable) as a whole number from ``lo`` to ``hi``,
    or a one-line ``error`` naming ``what``. ASCII digits only: ``int()`` and ``str.isdigit()``
    also take other scripts' digits (``²``, ``٣``, ``３``), signs, spaces and underscores, and a
    number of thousands of digits is refused before it is converted."""
    if _ASCII_DIGITS.fullmatch(text) is None or len(text.lstrip("0")) > len(str(hi)) or not lo <= int(text) <= hi:
        raise error(f"{what} must be a whole number from {lo} to {hi}, not {text[:40]!r}")
    return int(text)

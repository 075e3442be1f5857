"""Reading what users hand council: text files, checked and decoded in one place.

Every file a command or the library reads as text (responses to judge, references,
candidates, questions) goes through :func:`read_text_file`, and standard input through
:func:`read_text_stream`: UTF-8 or a one-line ``InputError`` naming the source, never a
traceback. Text that arrives as a string (a question on the command line, a chat message)
goes through :func:`check_text`: bytes that were not UTF-8 reach Python as unpaired
surrogates, which nothing downstream can store or send.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from council.errors import InputError


def read_text_file(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8")
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
        return stream.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}") from None


def check_text(value: str, what: str) -> str:
    """``value`` if it is valid Unicode text, else a one-line ``InputError`` naming ``what``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} is not valid UTF-8 text (an undecodable byte or unpaired surrogate at character {exc.start + 1})"
        ) from None
    return value

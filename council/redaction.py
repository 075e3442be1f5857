"""Secrets and private text, kept out of everything council stores, prints, logs or exports.

Two kinds of text must never leave a run through an error message, a log line, a stored
row or an export:

* **Secrets**, always: every configured API key and the server token, known *by value*
  (:func:`register_secret`, called where configuration resolves a key; also the values of
  environment variables named like keys, which provider SDKs read on their own), and anything
  shaped like a credential (``Bearer …``, ``sk-…``, ``api_key=…``).
* **Private text**, when transcripts are off (``COUNCIL_STORE_TRANSCRIPTS=0``): the question
  and the answers of the running session or judgment. A provider's error may echo the request
  and a validation message may quote the reply, so any run of :data:`PRIVATE_RUN` characters
  or more copied from private text (as written, or JSON-escaped as in a request body) is cut out.

A session or judgment declares its privacy and its private text with :func:`private_scope`;
everything below it (the model client, structured-output validation, the store, the log
processor) calls :func:`redact`, which knows the current scope. Without a scope only secrets
are redacted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"
#: Shorter values are not treated as secrets (redacting every "abc" would garble text).
MIN_SECRET_CHARS = 6
#: The shortest run copied from private text that is cut out of error text.
PRIVATE_RUN = 24
#: Private texts shorter than this are not searched for (too common to mean anything).
MIN_PRIVATE_CHARS = 8
# Private text is indexed by the _ANCHOR-character pieces starting at multiples of _ANCHOR,
# so any copied run of 2 * _ANCHOR - 1 characters or more contains a whole indexed piece.
_ANCHOR = 12
_MAX_CANDIDATES = 8  # offsets tried per piece (a long run of one character repeats its piece)
assert 2 * _ANCHOR - 1 <= PRIVATE_RUN

_registered: set[str] = set()
_KEY_NAME = re.compile(r"(API_?KEY|_TOKEN|_SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_CREDENTIAL = re.compile(
    r"(\bbearer\s+)[^\s\"',;}\]]+"
    r"|\bsk-[A-Za-z0-9_\-]{8,}"
    r"|((?:api[_-]?key|x-api-key|access[_-]?token|secret|password|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"(?!bearer\b)[^\s\"',;}\]]+",
    re.IGNORECASE,
)


def register_secret(value: str | None) -> None:
    """Redact ``value`` wherever it appears from now on (an API key, the server token)."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        _registered.add(value.strip())


def known_secrets(env: Mapping[str, str] | None = None) -> set[str]:
    """Registered secrets and the values of environment variables named like keys."""
    env = os.environ if env is None else env
    found = {v.strip() for k, v in env.items() if _KEY_NAME.search(k) and len(v.strip()) >= MIN_SECRET_CHARS}
    return _registered | found


def _forms(text: str) -> set[str]:
    """``text`` as written and as it appears inside a JSON string (ASCII-escaped or not)."""
    return {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


@lru_cache(maxsize=64)
def _secrets_pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    forms = sorted({form for secret in secrets for form in _forms(secret)}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, forms))) if forms else None


_CREDENTIAL_HINTS = ("bearer", "sk-", "key", "token", "secret", "password", "authorization")


def _credential(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2) or "") + REDACTED


def redact_secrets(text: str, secrets: frozenset[str] | None = None) -> str:
    """``text`` without any known secret (default: :func:`known_secrets`) or credential-shaped text."""
    pattern = _secrets_pattern(frozenset(known_secrets()) if secrets is None else secrets)
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    # Every credential shape contains one of these words; a casefolded substring test is far
    # cheaper than the regular expression, which most stored strings would never match.
    folded = text.casefold()
    if any(hint in folded for hint in _CREDENTIAL_HINTS):
        text = _CREDENTIAL.sub(_credential, text)
    return text


class PrivateText:
    """Texts whose copied runs are cut out of other text (see the module docstring)."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._sources: list[str] = []
        self._short: list[str] = []
        self._index: dict[str, list[tuple[int, int]]] | None = None
        self.add(*texts)

    def add(self, *texts: str | None) -> None:
        for text in texts:
            if not text or len(text.strip()) < MIN_PRIVATE_CHARS:
                continue
            for form in _forms(text.strip()):
                if len(form) < PRIVATE_RUN:
                    self._short.append(form)
                else:
                    self._sources.append(form)
            self._index = None

    def __bool__(self) -> bool:
        return bool(self._sources or self._short)

    def _pieces(self) -> dict[str, list[tuple[int, int]]]:
        if self._index is None:
            index: dict[str, list[tuple[int, int]]] = {}
            for s, source in enumerate(self._sources):
                for offset in range(0, len(source) - _ANCHOR + 1, _ANCHOR):
                    spots = index.setdefault(source[offset : offset + _ANCHOR], [])
                    if len(spots) < _MAX_CANDIDATES:
                        spots.append((s, offset))
            self._index = index
        return self._index

    def strip(self, text: str) -> str:
        """``text`` with every run copied from the private texts replaced by ``[redacted]``."""
        for short in sorted(self._short, key=len, reverse=True):
            text = text.replace(short, REDACTED)
        if not self._sources or len(text) < PRIVATE_RUN:
            return text
        index = self._pieces()
        spans: list[tuple[int, int]] = []
        i = 0
        while i <= len(text) - _ANCHOR:
            best_end = -1
            for s, offset in index.get(text[i : i + _ANCHOR], ()):
                source = self._sources[s]
                start, src = i, offset
                while start > 0 and src > 0 and text[start - 1] == source[src - 1]:
                    start, src = start - 1, src - 1
                end, src_end = i + _ANCHOR, offset + _ANCHOR
                while end < len(text) and src_end < len(source) and text[end] == source[src_end]:
                    end, src_end = end + 1, src_end + 1
                if end - start >= PRIVATE_RUN and end > best_end:
                    spans.append((start, end))
                    best_end = end
            i = best_end if best_end > i else i + 1
        if not spans:
            return text
        out, last = [], 0
        for start, end in sorted(spans):
            if start < last:  # overlapping runs merge
                last = max(last, end)
                continue
            out += [text[last:start], REDACTED]
            last = end
        out.append(text[last:])
        return "".join(out)


class Scope:
    """One session's or judgment's privacy: whether text is kept, and which text is private."""

    def __init__(self, keep_text: bool) -> None:
        self.keep_text = keep_text
        self.private = PrivateText()

    def add_private(self, *texts: str | None) -> None:
        if not self.keep_text:
            self.private.add(*texts)


_scope: ContextVar[Scope | None] = ContextVar("council_redaction_scope", default=None)


@contextmanager
def private_scope(*, keep_text: bool, texts: Iterable[str | None] = ()) -> Iterator[Scope]:
    """Run the block as one session or judgment with this privacy (tasks it starts inherit it)."""
    scope = Scope(keep_text)
    scope.add_private(*texts)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def current_scope() -> Scope | None:
    return _scope.get()


def keeps_text() -> bool:
    """False inside a scope with transcripts off."""
    scope = _scope.get()
    return scope is None or scope.keep_text


def redact(text: str, *, private: Iterable[str | None] = (), secrets: frozenset[str] | None = None) -> str:
    """``text`` without secrets and, inside a scope with transcripts off, without its private
    text or the extra ``private`` texts (e.g. the messages of the request that failed)."""
    if not text:
        return text
    text = redact_secrets(text, secrets)
    scope = _scope.get()
    if scope is not None and not scope.keep_text:
        text = scope.private.strip(text)
        extra = PrivateText(private)
        if extra:
            text = extra.strip(text)
    return text


def redact_data(value: Any, secrets: frozenset[str] | None = None) -> Any:
    """JSON-like ``value`` with :func:`redact` applied to every string in it."""
    if secrets is None:
        secrets = frozenset(known_secrets())
    if isinstance(value, str):
        return redact(value, secrets=secrets)
    if isinstance(value, dict):
        return {k: redact_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, secrets) for v in value]
    return value


def add_private(*texts: str | None) -> None:
    """More private text for the current scope (an answer as it arrives)."""
    scope = _scope.get()
    if scope is not None:
        scope.add_private(*texts)

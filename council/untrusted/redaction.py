"""Secrets and private text, kept out of everything council stores, prints, logs or exports.

Two kinds of text must never leave a run through an error message, a log line, a stored
row or an export:

* **Secrets**, always: every configured API key and the server token, known *by value*
  (:func:`register_secret`, called where configuration resolves a key; also the values of
  environment variables named like keys, which provider SDKs read on their own), the
  credentials of an ``api_base`` (``http://user:password@host``) with the Basic token HTTP
  clients send for them (:func:`register_url_credentials`), and anything shaped like a
  credential (``Bearer …``, ``Basic`` and a token, ``sk-…``, ``api_key=…``, a URL's ``:password@``).
* **Private text**, when transcripts are off (``COUNCIL_STORE_TRANSCRIPTS=0``): the question
  and the answers of the running session or judgment. A provider's error may echo the request
  and a validation message may quote the reply, so any run of :data:`PRIVATE_RUN` characters
  or more copied from private text (as written, or JSON-escaped as in a request body) is cut out.

Secrets are cut where they could appear, never by rewriting what the user wrote: local servers
document keys that are common words (Ollama's ``ollama``, LM Studio's ``lm-studio``), and cutting
those out of a question or a model name would garble the stored data for good. So:

* **Error text** — what a provider or an exception said, log events, printed errors
  (:func:`redact`): every secret, credential-shaped text and, in a scope with transcripts off,
  private text. A *strong* secret (:func:`is_strong`: long, or letters and digits mixed) is cut
  wherever it appears; a *weak* one (short, or a plain word) only as a whole word, and only if
  it was registered as a key: an environment variable that merely looks like a key
  (``SOME_TOKEN=answer``) counts only when its value is strong.
* **Stored documents and export rows** (:func:`redact_document`): fields named in
  :data:`ERROR_KEYS` are error text; fields named in :data:`USER_KEYS` (the question, names,
  model ids) are never rewritten; every other field (what a provider replied) loses strong
  secrets and, with transcripts off, private text.
* Council's own words are no credentials: ``bearer token``, ``Bearer TOKEN``,
  ``api_key=<your key>`` or ``$OPENAI_API_KEY`` name a placeholder, not a value.

A model's reply loses its strong secrets where it enters (``council.providers.client``), streamed
or not (:class:`SecretStream`), so no stored row, event, served route or output holds one; stored
documents (:func:`redact_document`) are redacted again as they are written.

A session or judgment declares its privacy and its private text with :func:`private_scope`;
everything below it (the model client, structured-output validation, the store, the log
processor) calls :func:`redact`, which knows the current scope. Without a scope only secrets
are redacted.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from council._util.speedups import EnvironMemo

if TYPE_CHECKING:
    from pydantic import BaseModel

REDACTED = "[redacted]"
#: Shorter values are not treated as secrets at all (redacting every "abc" would garble text).
MIN_SECRET_CHARS = 6
#: A secret this long, or at least MIN_MIXED_CHARS long with letters and digits, is strong.
MIN_STRONG_CHARS = 20
MIN_MIXED_CHARS = 10
#: The shortest run copied from private text that is cut out of error text.
PRIVATE_RUN = 24
#: Private texts shorter than this are not searched for (too common to mean anything).
MIN_PRIVATE_CHARS = 8
# Private text is indexed by the _ANCHOR-character pieces starting at multiples of _ANCHOR,
# so any copied run of 2 * _ANCHOR - 1 characters or more contains a whole indexed piece.
_ANCHOR = 12
_MAX_CANDIDATES = 8  # offsets tried per piece (a long run of one character repeats its piece)
assert 2 * _ANCHOR - 1 <= PRIVATE_RUN

#: Fields of stored documents and export rows holding the user's or the configuration's own
#: words: never rewritten, so every table and export keeps the same text and still joins.
USER_KEYS = frozenset(
    {
        "question", "council", "session_id", "run_id", "kind", "members", "reviewers", "models", "model",
        "member", "reviewer", "reviewer_model", "chairman", "labels", "label", "display_order", "ranking",
        "winner", "judge", "judge_model", "rubric", "criteria", "config_source", "created_at", "status",
    }
)  # fmt: skip
#: Fields that may quote a provider or an exception: redacted as error text.
ERROR_KEYS = frozenset({"error", "errors", "problem", "failures", "partial_reasons", "flags", "notice", "note"})

_registered: set[str] = set()
#: Registered secrets a machine made (a Basic token): strong however short they are.
_machine_made: set[str] = set()
_KEY_NAME = re.compile(r"(API_?KEY|_TOKEN|_SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_VALUE = r"[^\s\"',;}\]]+"
# Where a credential would go, a placeholder ("bearer token", "Bearer TOKEN", "<your key>",
# "$OPENAI_API_KEY", "${TOKEN}") is council's own help or error text, never a value; nor is
# "[redacted]" (already cut).
_NOT_PLACEHOLDER = r"(?!(?:token|key|secret|password|bearer|basic)\b|[<$({\[]|(?-i:[A-Z][A-Z_]*)(?![\w.\-]))"
# "Basic" and a token is a credential only when the token is base64 of "user:password"
# (:func:`_credential` decodes it): "basic training" stays.
_CREDENTIAL = re.compile(
    r"(?P<bearer>\bbearer\s+)" + _NOT_PLACEHOLDER + _VALUE
    + r"|(?P<basic>\bbasic\s+)(?P<token>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])"
    + r"|\bsk-[A-Za-z0-9_\-]{8,}"
    + r"|(?P<url>://[^\s/:@]*:)(?!\*+@)" + _NOT_PLACEHOLDER + r"[^\s/@]+(?=@)"
    + r"|(?P<named>(?:api[_-]?key|x-api-key|access[_-]?token|secret|password|authorization)[\"']?\s*[:=]\s*[\"']?)"
    + _NOT_PLACEHOLDER + _VALUE,
    re.IGNORECASE,
)  # fmt: skip
# A weak secret is cut only as a whole word, not inside a longer name: a model id
# ("ollama-llama3", "openai/ollama", "ollama:latest"), a host ("ollama.local"), a path; but
# in a URL's credentials ("//user:ollama@host") it is a word.
_WORD_BEFORE = r"(?<![\w\-./])"
_WORD_AFTER = r"(?![\w\-/]|[.:]\w)"


def register_secret(value: str | None, *, machine_made: bool = False) -> None:
    """Redact ``value`` wherever it could appear from now on (an API key, the server token);
    ``machine_made``: strong however short (a token derived from other secrets)."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        if machine_made:
            _machine_made.add(value.strip())
        _registered.add(value.strip())


def register_url_credentials(url: str | None) -> None:
    """Redact the credentials of ``url`` (``http://user:password@host``) from now on: the
    password (as written and decoded), ``user:password``, a user without a password (a token
    given as the user name), and the Basic token HTTP clients send for them."""
    try:
        parts = urlsplit(url or "")
        user, password = parts.username, parts.password
    except ValueError:
        return
    if user is None and password is None:
        return
    userinfo = parts.netloc.rpartition("@")[0]
    plain = f"{unquote(user or '')}:{unquote(password or '')}"
    for value in (userinfo, plain, password, unquote(password or "")) if password else (userinfo, unquote(userinfo)):
        register_secret(value)
    register_secret(base64.b64encode(plain.encode()).decode(), machine_made=True)


def is_strong(secret: str) -> bool:
    """Long, or letters and digits mixed: nothing a user writes by chance (nor a token a
    machine made)."""
    if len(secret) >= MIN_STRONG_CHARS or secret in _machine_made:
        return True
    return len(secret) >= MIN_MIXED_CHARS and any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)


def known_secrets(env: Mapping[str, str] | None = None) -> set[str]:
    """Registered secrets, and the strong values of environment variables named like keys."""
    if env is None:
        return set(_current_secrets())
    found = {value for name in env if _named_like_a_key(name) and is_strong(value := env[name].strip())}
    return _registered | found


#: The secrets of ``os.environ`` and the registry, computed again only when either changed.
_environ_secrets: EnvironMemo[frozenset[str]] = EnvironMemo()


def _current_secrets() -> frozenset[str]:
    """:func:`known_secrets` of ``os.environ``, read again only when the environment or the
    registered secrets changed: every stored document and error text asks."""
    # Registered secrets are only ever added (tests swap the whole set): the set itself and its size.
    return _environ_secrets.get((_registered, len(_registered)), _scan_environment_frozen)


def _scan_environment_frozen() -> frozenset[str]:
    return frozenset(_scan_environment())


def _scan_environment() -> set[str]:
    env = os.environ
    return _registered | {value for name in env if _named_like_a_key(name) and is_strong(value := env[name].strip())}


@lru_cache(maxsize=1024)
def _named_like_a_key(name: str) -> bool:
    # Every stored document asks (see known_secrets): the names are few, the question is the same.
    return _KEY_NAME.search(name) is not None


def _forms(text: str) -> set[str]:
    """``text`` as written and as it appears inside a JSON string (ASCII-escaped or not)."""
    return {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def _alternation(secrets: Iterable[str]) -> str:
    forms = sorted({form for secret in secrets for form in _forms(secret)}, key=len, reverse=True)
    return "|".join(map(re.escape, forms))


@lru_cache(maxsize=64)
def _secrets_patterns(secrets: frozenset[str]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """(strong secrets anywhere, weak secrets as whole words)."""
    strong = [s for s in secrets if is_strong(s)]
    weak = [s for s in secrets if not is_strong(s)]
    return (
        re.compile(_alternation(strong)) if strong else None,
        re.compile(f"{_WORD_BEFORE}(?:{_alternation(weak)}){_WORD_AFTER}") if weak else None,
    )


_CREDENTIAL_HINTS = ("bearer", "basic", "sk-", "key", "token", "secret", "password", "authorization", "://")


def _credential(match: re.Match[str]) -> str:
    if match.group("basic") is not None:
        try:
            decoded = base64.b64decode(match.group("token"), validate=True)
        except (binascii.Error, ValueError):
            return match.group(0)
        return match.group("basic") + REDACTED if b":" in decoded else match.group(0)
    return (match.group("bearer") or match.group("url") or match.group("named") or "") + REDACTED


def redact_secrets(text: str, secrets: frozenset[str] | None = None, *, error_text: bool = True) -> str:
    """``text`` without any known secret (default: :func:`known_secrets`) or credential-shaped
    text; ``error_text=False`` (a provider's reply): without strong secrets only."""
    strong, weak = _secrets_patterns(_current_secrets() if secrets is None else secrets)
    if strong is not None:
        text = strong.sub(REDACTED, text)
    if not error_text:
        return text
    if weak is not None:
        text = weak.sub(REDACTED, text)
    # Every credential shape contains one of these words; a casefolded substring test is far
    # cheaper than the regular expression, which most stored strings would never match.
    folded = text.casefold()
    if any(hint in folded for hint in _CREDENTIAL_HINTS):
        text = _CREDENTIAL.sub(_credential, text)
    return text


class SecretStream:
    """A reply streamed in pieces, without strong secrets: the end of a piece that may begin one
    is held back until the next piece (or :meth:`end`) settles it, so a secret split across
    pieces is cut too, and the pieces put together are the whole reply as :func:`redact_secrets`
    cuts it (``error_text=False``)."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        """What of the reply so far can be shown: ``piece`` after what was held, secrets cut."""
        text = self._held + piece
        secrets = _current_secrets()
        strong, _ = _secrets_patterns(secrets)
        if strong is None:
            self._held = ""
            return text
        cut = len(text) - _started_secret(text, _secret_starts(secrets))
        for match in strong.finditer(text):  # a whole secret across the cut goes out, cut
            if match.start() < cut < match.end():
                cut = match.end()
        self._held = text[cut:]
        return strong.sub(REDACTED, text[:cut])

    def end(self) -> str:
        """What was held back, once the reply is over."""
        text, self._held = self._held, ""
        return redact_secrets(text, error_text=False)


@lru_cache(maxsize=64)
def _secret_starts(secrets: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Every proper beginning of every form of the strong ``secrets``, by its last character,
    longest first."""
    starts: dict[str, set[str]] = {}
    for secret in secrets:
        if is_strong(secret):
            for form in _forms(secret):
                for end in range(1, len(form)):
                    starts.setdefault(form[end - 1], set()).add(form[:end])
    return {ch: tuple(sorted(found, key=len, reverse=True)) for ch, found in starts.items()}


def _started_secret(text: str, starts: Mapping[str, tuple[str, ...]]) -> int:
    """The length of the longest end of ``text`` that begins a secret (0: none)."""
    if not text:
        return 0
    return next((len(start) for start in starts.get(text[-1], ()) if text.endswith(start)), 0)


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


def redact(
    text: str, *, private: Iterable[str | None] = (), secrets: frozenset[str] | None = None, error_text: bool = True
) -> str:
    """Error text (a provider's or an exception's words, a log line) without secrets and, inside
    a scope with transcripts off, without its private text or the extra ``private`` texts (e.g.
    the messages of the request that failed). ``error_text=False``: a provider's reply, which
    loses strong secrets only (see the module docstring)."""
    if not text:
        return text
    text = redact_secrets(text, secrets, error_text=error_text)
    scope = _scope.get()
    if scope is not None and not scope.keep_text:
        text = scope.private.strip(text)
        extra = PrivateText(private)
        if extra:
            text = extra.strip(text)
    return text


def redact_data(value: Any, secrets: frozenset[str] | None = None) -> Any:
    """JSON-like ``value`` with :func:`redact` applied to every string in it (a log event)."""
    if secrets is None:
        secrets = _current_secrets()
    if isinstance(value, str):
        return redact(value, secrets=secrets)
    if isinstance(value, dict):
        return {k: redact_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v, secrets) for v in value]
    return value


def redact_document(value: Any, secrets: frozenset[str] | None = None, *, _kind: str = "reply") -> Any:
    """A stored document or an export row (JSON-like) redacted field by field: :data:`ERROR_KEYS`
    as error text, :data:`USER_KEYS` never, the rest as a provider's reply. A value's nearest
    named key decides (in ``models: {alias: model}`` both are the user's). A document in which
    nothing could be redacted is returned as it is (see :func:`_nothing_to_redact`)."""
    if secrets is None:
        secrets = _current_secrets()
    if _kind == "reply" and isinstance(value, dict | list) and _nothing_to_redact(value, secrets):
        return value
    return _redact_fields(value, secrets, _kind)


def _redact_fields(value: Any, secrets: frozenset[str], kind: str) -> Any:
    if isinstance(value, str):
        return value if kind == "user" else redact(value, secrets=secrets, error_text=kind == "error")
    if isinstance(value, dict):
        return {k: _redact_fields(v, secrets, _kind_of(k, kind)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_fields(v, secrets, kind) for v in value]
    return value


def redacted_json(value: Any, secrets: frozenset[str] | None = None) -> str | None:
    """:func:`redact_document` of ``value`` as JSON text (None stays None). A document in which
    nothing could be redacted is serialized once, for the check and for storing. The text is
    pydantic-core's compact JSON whether or not anything was cut (the standard library's only
    for a value pydantic-core cannot serialize), so a file of such lines has one form.
    ``secrets``: those to cut (default: the ones known now)."""
    if value is None:
        return None
    if secrets is None:
        secrets = _current_secrets()
    if isinstance(value, dict | list):
        text = _json_text(value)
        if text is not None and _nothing_to_redact_in(text, secrets):
            return text
    redacted = _redact_fields(value, secrets, "reply")
    return _json_text(redacted) or json.dumps(redacted, ensure_ascii=False)


def redacted_model_json(model: BaseModel, secrets: frozenset[str] | None = None) -> str:
    """:func:`redacted_json` of ``model.model_dump(mode="json")``; when nothing could be redacted,
    the JSON is written straight from the model (the same text, without the dump in between)."""
    if secrets is None:
        secrets = _current_secrets()
    text = model.model_dump_json()
    if _nothing_to_redact_in(text, secrets):
        return text
    return redacted_json(model.model_dump(mode="json"), secrets) or "null"


def _json_text(value: Any) -> str | None:
    import pydantic_core  # here, not with the module: start-up time for a command that redacts nothing

    try:
        return pydantic_core.to_json(value).decode()
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return None


def _nothing_to_redact(value: dict[str, Any] | list[Any], secrets: frozenset[str]) -> bool:
    """True when no field of ``value`` can lose anything (see :func:`_nothing_to_redact_in`)."""
    text = _json_text(value)
    return text is not None and _nothing_to_redact_in(text, secrets)


def _nothing_to_redact_in(text: str, secrets: frozenset[str]) -> bool:
    """True when no field of the document whose JSON is ``text`` can lose anything, outside a
    private scope: the text holds no form of a strong secret and the value of each field under
    :data:`ERROR_KEYS` that holds text (its JSON, read from the text) no form of any secret and
    none of the words every credential shape contains (those go from error text only). Letters
    and ``-`` are never escaped in JSON and a secret's escaped forms are searched, so a field
    holding either shows in the text: the check can only err towards the field-by-field walk."""
    scope = _scope.get()
    if scope is not None and not scope.keep_text:
        return False
    strong = _any_form(frozenset(s for s in secrets if is_strong(s)))
    if strong is not None and strong.search(text) is not None:
        return False
    weak = _any_form(secrets)
    for match in _ERROR_FIELD.finditer(text):
        try:
            end = _JSON_VALUE.raw_decode(text, match.end())[1]
        except ValueError:
            return False  # not a value where one should be: the walk decides
        value = text[match.end() : end]
        folded = value.casefold()
        if any(hint in folded for hint in _CREDENTIAL_HINTS):
            return False
        if weak is not None and weak.search(value) is not None:
            return False
    return True


# Reads the one JSON value that starts at an index of a document's text (an error field's).
_JSON_VALUE = json.JSONDecoder()

# An error key whose value may hold text: anything but null, a boolean, a number or an empty list or object.
_ERROR_FIELD = re.compile(
    '"(?:' + "|".join(map(re.escape, sorted(ERROR_KEYS))) + r')":(?!null|true|false|-?\d|\[\]|\{\})'
)


@lru_cache(maxsize=64)
def _any_form(secrets: frozenset[str]) -> re.Pattern[str] | None:
    """Any form of any of ``secrets``, anywhere (no word boundaries: a superset of what is cut)."""
    import pydantic_core

    forms = {form for secret in secrets for form in _forms(secret)}
    forms |= {pydantic_core.to_json(secret).decode()[1:-1] for secret in secrets}
    return re.compile("|".join(map(re.escape, sorted(forms, key=len, reverse=True)))) if forms else None


def _kind_of(key: Any, inherited: str) -> str:
    if key in USER_KEYS:
        return "user"
    if key in ERROR_KEYS:
        return "error"
    return inherited


def add_private(*texts: str | None) -> None:
    """More private text for the current scope (an answer as it arrives)."""
    scope = _scope.get()
    if scope is not None:
        scope.add_private(*texts)

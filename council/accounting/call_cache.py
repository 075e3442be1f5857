"""The call cache's contract (docs/methods.md, "Call cache"): the key of a request and where
replies are kept.

The key is a SHA-256 of the whole request as it is sent — the model and the server it is
sent to, every message, every sampling parameter, the response schema and the seed that
carries a vote's number — never of its redacted text, so two requests share a reply only
when they are the same request. ``ModelClient`` answers from the cache and fills it; the
store keeps the entries (``Store.cached_reply``, ``council.storage.StoreReplies``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from council.errors import UsageError

#: Entries written under another version are ignored (and replaced by a fresh reply).
CACHE_VERSION = 1


def check_can_keep(store_transcripts: bool) -> None:
    """The cache keeps replies: with transcripts off it cannot be used (``UsageError``)."""
    if not store_transcripts:
        raise UsageError(
            "the call cache keeps replies, and transcripts are off (store_transcripts = false or "
            "COUNCIL_STORE_TRANSCRIPTS=0): drop --cache ([cache] enabled) or keep transcripts"
        )


def request_key(target: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The cache key of ``request`` (a ``ChatRequest`` as JSON) sent to ``target`` (model,
    server, transport): 64 hex digits."""
    text = json.dumps(
        {"v": CACHE_VERSION, "target": target, "request": request},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplyStore(Protocol):
    """Where cached replies live (the store): entries are JSON objects."""

    def get(self, key: str) -> Mapping[str, Any] | None:
        """The entry of ``key`` written by this ``CACHE_VERSION``, or None (absent, older,
        unreadable)."""

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        """Write (or replace) the entry of ``key``."""


@dataclass(frozen=True)
class CallCache:
    """A model client's cache: ``refresh`` asks again and replaces what is kept."""

    replies: ReplyStore
    refresh: bool = False

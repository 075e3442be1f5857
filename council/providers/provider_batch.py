"""Provider batch APIs: the calls of a batch sent through OpenAI's Files + Batches endpoints
(under the model's base URL, so ``api_base`` servers too), at the batch price
(docs/methods.md, "Provider batches").

``BatchedAPI`` stands in for a model's native transport inside ``ModelClient``: each request
waits in a ``BatchRounds`` collector; when no new request has arrived for a moment (every item
in flight is waiting for a reply), the waiting requests go out as one round — one provider batch
per model, split at the provider's limits — and each waiter gets its line's reply, parsed and
priced exactly like a direct call's, or a retryable error (a failed or expired line), which
``ModelClient`` retries: into the next round. Invalid replies are re-asked by the caller, also
into the next round; so pairwise passes and grading votes go in one round, adaptive voting one
round per wave of votes.

Before a round is submitted its intent is written to a journal (the store): a client token,
sent in the batch's metadata, and the custom ids (the call cache's request keys). A process
killed between submit and collect finds its provider batch again: a later run of the same
batch asks the same requests, finds the journalled round holding their keys, and collects it
instead of submitting again (by its recorded id, else by its token in the provider's list).

Whatever a provider sends back is read as hostile: a round's results are read a line at a time
(each line at most ``COUNCIL_MAX_REPLY_BYTES``, as a direct reply; the file at most that much a
line of the round, and never more than ``MAX_RESULTS_BYTES``), a line that cannot be read fails
that line alone, the ids it names must be plain ids, and requests (with the key) go to the
configured base URL only: a Message Batch's ``results_url`` elsewhere is never contacted.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from council.accounting.call_cache import request_key
from council.errors import ProviderError
from council._util.logs import get_logger
from council.providers.base import ChatRequest, ChatResponse, error_name
from council.providers.http_client import aiohttp
from council.providers.openai_compatible import (
    OpenAICompatibleAPI,
    max_reply_bytes,
    read_capped,
    status_error,
    too_large,
)
from council.accounting.usage import reported_usage

log = get_logger("council.providers.batch")

#: OpenAI: at most 50,000 requests or 200 MB in one batch file.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
#: The batch price, as a share of the list price (both OpenAI's and Anthropic's batch APIs).
BATCH_PRICE = 0.5
DONE = ("completed", "expired", "failed", "cancelled")
#: Anthropic: at most 100,000 requests or 256 MB in one batch.
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1024 * 1024
ANTHROPIC_VERSION = "2023-06-01"
#: The most of a round's results read, whatever the round (a broken or hostile server may send
#: a file without end): 1 GiB, five times the largest file a round sends.
MAX_RESULTS_BYTES = 1024**3
_HEAD = 4096  # a line's first bytes, where its custom id is
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,256})"')
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.:-]{0,255}")
_PORTS = {"http": 80, "https": 443}


def plain_id(value: Any, what: str, model: str) -> str:
    """An id the provider gave (a batch's, a file's), as it goes into a URL path: a plain token,
    never a path (``../``), a query or a URL of its own."""
    if isinstance(value, str) and _PLAIN_ID.fullmatch(value):
        return value
    shown = " ".join(str(value).split())[:80]
    raise ProviderError(f"{shown!r} is not a {what} (the provider's batch API gave it)", model=model)


def under_base(url: str, base: str) -> bool:
    """Whether ``url`` is on ``base``'s scheme, host and port, and under its path: where council
    may send the key. No user info, no ``.`` or ``..`` segment (escaped or not)."""
    try:
        there, here = urlsplit(url), urlsplit(base)
        there_port, here_port = there.port, here.port
    except ValueError:
        return False
    scheme = there.scheme.lower()
    if scheme != here.scheme.lower() or scheme not in _PORTS or not there.hostname:
        return False
    if there.username is not None or there.password is not None or there.hostname != here.hostname:
        return False
    if (there_port or _PORTS[scheme]) != (here_port or _PORTS[scheme]):
        return False
    path = unquote(there.path)
    if "\\" in path or any(part in (".", "..") for part in path.split("/")):
        return False
    return path.startswith(here.path.rstrip("/") + "/")


@asynccontextmanager
async def _request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    base: str,
    headers: Mapping[str, str],
    model: str,
    **kwargs: Any,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """The provider's reply, once it is known not to be an error (``ProviderError`` if it is, or if
    the connection fails, while it is read too). Only a URL under the configured ``base`` is
    contacted: the headers hold the key."""
    if not under_base(url, base):
        shown = " ".join(url.split())[:200]
        raise ProviderError(f"{shown} is not under the configured base {base}: not contacted", model=model)
    try:
        async with session.request(method, url, headers=headers, **kwargs) as reply:
            if reply.status >= 400:
                raise status_error(reply.status, await read_capped(reply, max_reply_bytes(), model), reply.reason,
                                   model)  # fmt: skip
            yield reply
    except aiohttp.ClientError as exc:
        raise ProviderError(f"APIConnectionError: {exc}", model=model, retryable=True) from exc


async def _json_reply(reply: aiohttp.ClientResponse, model: str) -> Any:
    raw = await read_capped(reply, max_reply_bytes(), model)  # a status or a listing: capped as a reply is
    return json.loads(raw)


class _ResultsTooLarge(Exception):
    pass


async def _result_lines(
    content: aiohttp.StreamReader, line_limit: int, total_limit: int
) -> AsyncIterator[tuple[bytes, bool]]:
    """Each line of a results file as it arrives, and whether it is whole: a line longer than
    ``line_limit`` comes as its first bytes only (False), the rest let go as it arrives. Past
    ``total_limit`` bytes in all, ``_ResultsTooLarge``, once the lines before have come."""
    received = size = 0
    line = bytearray()
    async for block in content.iter_any():
        received += len(block)
        start = 0
        while True:
            end = block.find(b"\n", start)
            piece = block[start:] if end < 0 else block[start:end]
            if size <= line_limit:
                line += piece[: line_limit + 1 - size]
            size += len(piece)
            if end < 0:
                break
            yield (bytes(line), True) if size <= line_limit else (bytes(line[:_HEAD]), False)
            line.clear()
            size, start = 0, end + 1
        if received > total_limit:
            raise _ResultsTooLarge
    if size:
        yield (bytes(line), True) if size <= line_limit else (bytes(line[:_HEAD]), False)


async def read_results(
    reply: aiohttp.ClientResponse,
    lines: int,
    model: str,
    outcome: Callable[[Mapping[str, Any]], ChatResponse | ProviderError],
    found: dict[str, ChatResponse | ProviderError],
) -> ProviderError | None:
    """The results file of a round of ``lines`` requests into ``found``, by custom id, each line's
    ``outcome(record)``, read a line at a time. A line longer than ``COUNCIL_MAX_REPLY_BYTES``
    fails as a direct reply that long does (not asked again); a line that is not a record fails
    alone, and is asked again (read again from the journalled round first: not paid twice); the
    file is read up to ``lines`` times that cap, at most ``MAX_RESULTS_BYTES``, and the error for
    the lines it did not reach is returned."""
    line_limit = max_reply_bytes()
    total_limit = min(max(lines, 1) * line_limit, MAX_RESULTS_BYTES)
    try:
        async for line, whole in _result_lines(reply.content, line_limit, total_limit):
            if not line.strip():
                continue
            if not whole:
                _failed(found, line, too_large(line_limit, model))
                continue
            try:
                record = json.loads(line)
                found[_custom_id_of(record)] = outcome(record)
            except (ValueError, TypeError, KeyError, AttributeError):  # a record it is not, or not of this shape
                unreadable = ProviderError("batch line unreadable: not a result record", model=model, retryable=True)
                _failed(found, line, unreadable)
    except _ResultsTooLarge:
        message = (f"APIError: the provider's results are larger than {total_limit} bytes ({lines} lines of at most "
                   f"{line_limit} bytes, COUNCIL_MAX_REPLY_BYTES); not read further")  # fmt: skip
        log.warning(message, model=model)
        return ProviderError(message, model=model)
    return None


def _custom_id_of(record: Any) -> str:
    value = record["custom_id"]
    if not isinstance(value, str):
        raise TypeError("a custom id is a string")
    return value


def _failed(found: dict[str, ChatResponse | ProviderError], line: bytes, error: ProviderError) -> None:
    """``error`` for the line's custom id, when its first bytes name one (else its request is
    missing from the results, and asked again)."""
    named = _CUSTOM_ID.search(line[:_HEAD])
    if named is not None:
        found.setdefault(named.group(1).decode("utf-8", "replace"), error)


@dataclass(frozen=True)
class Progress:
    """A provider batch as polled: status, whether it has ended, line counts, the raw object,
    and the provider's reason when it rejected the batch."""

    status: str
    ended: bool
    done: int
    failed: int
    total: int
    raw: Mapping[str, Any]
    rejected: str | None = None


class BatchJournal(Protocol):
    """Where rounds are recorded before they are submitted (the store)."""

    def intent(self, token: str, provider: str, custom_ids: Sequence[str]) -> None: ...

    def submitted(self, token: str, provider_batch_id: str) -> None: ...

    def progress(self, token: str, status: str, done: int, failed: int) -> None: ...

    def rounds_holding(self, custom_ids: Sequence[str]) -> list[Mapping[str, Any]]:
        """Journalled rounds (``token``, ``provider_batch_id``, ``status``, ``custom_ids``) that
        hold any of these ids, newest first."""
        ...


class OpenAIBatches:
    """OpenAI's Files + Batches API under one model's base URL (council's aiohttp transport)."""

    provider = "openai"
    max_requests, max_bytes = MAX_REQUESTS, MAX_BYTES

    def __init__(self, api: OpenAICompatibleAPI) -> None:
        self.api = api
        self.model = api.model
        self.base = api.endpoint.base_url
        self._auth = {k: v for k, v in api._headers.items() if k == "authorization"}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return self.api.body(request)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        session = self.api._session_for_loop()
        return _request(session, method, self.base + path, self.base, self._auth, self.model, **kwargs)

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        async with self._request(method, path, **kwargs) as reply:
            data = await _json_reply(reply, self.model)
        if not isinstance(data, dict):
            shown = json.dumps(data)[:200]
            raise ProviderError(f"{error_name(None)}: the batch API replied {shown}", model=self.model)
        return data

    async def submit(self, lines: Sequence[tuple[str, dict[str, Any]]], token: str) -> str:
        body = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": b}) + "\n"
            for cid, b in lines
        ).encode("utf-8")
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", body, filename=f"council-{token}.jsonl", content_type="application/jsonl")
        uploaded = await self._json("POST", "/files", data=form)
        batch = await self._json(
            "POST",
            "/batches",
            json={
                "input_file_id": plain_id(uploaded.get("id"), "file id", self.model),
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"council_token": token},
            },
        )
        return plain_id(batch.get("id"), "batch id", self.model)

    async def find(self, token: str) -> str | None:
        listing = await self._json("GET", "/batches", params={"limit": "100"})
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get("council_token") == token:
                return plain_id(batch.get("id"), "batch id", self.model)
        return None

    async def status(self, batch_id: str) -> Progress:
        batch = await self._json("GET", f"/batches/{plain_id(batch_id, 'batch id', self.model)}")
        counts = batch.get("request_counts") or {}
        status = str(batch.get("status"))
        reason = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or [{}]
            reason = errors[0].get("message") if isinstance(errors[0], dict) else str(errors[0])
        return Progress(status, status in DONE, counts.get("completed", 0), counts.get("failed", 0),
                        counts.get("total", 0), batch, reason)  # fmt: skip

    async def outcomes(
        self, batch: Mapping[str, Any], lines: int
    ) -> tuple[dict[str, ChatResponse | ProviderError], ProviderError | None]:
        """Each line's reply (priced at the batch price) or its error, by custom id (``read_results``:
        its output and error files, ``lines`` in all), and the error of lines not read, if any."""
        found: dict[str, ChatResponse | ProviderError] = {}
        unread = None
        for name in ("output_file_id", "error_file_id"):
            if not batch.get(name):
                continue
            async with self._request("GET", f"/files/{plain_id(batch[name], 'file id', self.model)}/content") as reply:
                unread = await read_results(reply, lines, self.model, self._outcome, found) or unread
        return found, unread

    def _outcome(self, record: Mapping[str, Any]) -> ChatResponse | ProviderError:
        response = record.get("response") or {}
        status = response.get("status_code")
        if record.get("error") or status != 200:
            error = record.get("error") or (response.get("body") or {}).get("error") or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            # Retryable: ModelClient asks again, into the next round.
            return ProviderError(f"batch line failed: {message or status}", model=self.api.model, retryable=True)
        try:
            reply = self.api._response(json.dumps(response.get("body")).encode("utf-8"))
        except ProviderError as exc:
            return exc
        cost = None if reply.cost_usd is None else reply.cost_usd * BATCH_PRICE
        return reply.model_copy(update={"cost_usd": cost})


class AnthropicBatches:
    """Anthropic's Message Batches (``POST /v1/messages/batches``, poll until ``ended``, read the
    JSONL at ``results_url``), on an aiohttp session of its own.

    A Message Batch carries no metadata, so a process that died between the submit and
    recording the batch's id cannot find it by its token: that round is submitted again."""

    provider = "anthropic"
    max_requests, max_bytes = ANTHROPIC_MAX_REQUESTS, ANTHROPIC_MAX_BYTES

    def __init__(
        self, model: str, wire_model: str, base: str, api_key: str | None, price: Any, max_tokens: int
    ) -> None:
        self.model, self.wire_model, self.base = model, wire_model, base
        self.price, self.max_tokens = price, max_tokens
        self._headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"AnthropicBatches({self.model!r}, {self.base!r})"

    @classmethod
    def for_model(cls, resolved: Any, env: Mapping[str, str] | None) -> AnthropicBatches:
        import os

        from council.providers import prices

        spec = resolved.spec
        env = os.environ if env is None else env
        key = resolved.api_key.get_secret_value() if resolved.api_key else None
        if key is None and spec.api_base is None:  # the provider's usual variable, for its own URL only
            key = env.get("ANTHROPIC_API_KEY")
        base = (spec.api_base or "https://api.anthropic.com").rstrip("/").removesuffix("/v1")
        wire = resolved.model.removeprefix("anthropic/")
        price = prices.configured_price(spec.input_cost_per_token, spec.output_cost_per_token)
        price = price or prices.mapped_price("anthropic", wire)
        return cls(resolved.model, wire, base, key, price, spec.max_tokens or 4096)

    def body(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m["content"] for m in request.messages if m.get("role") == "system")
        params: dict[str, Any] = {
            "model": self.wire_model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": [m for m in request.messages if m.get("role") != "system"],
        }
        if system:
            params["system"] = system
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.json_schema is not None:  # structured output as a forced tool call
            name = request.schema_name or "reply"
            params["tools"] = [
                {"name": name, "description": "The reply, as JSON.", "input_schema": request.json_schema}
            ]
            params["tool_choice"] = {"type": "tool", "name": name}
        return params  # the reply is validated by the caller, as a direct one

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return _request(self._session, method, url, self.base, self._headers, self.model, **kwargs)

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        async with self._request(method, url, **kwargs) as reply:
            return await _json_reply(reply, self.model)

    async def submit(self, lines: Sequence[tuple[str, dict[str, Any]]], token: str) -> str:
        requests = [{"custom_id": cid, "params": params} for cid, params in lines]
        batch = await self._json("POST", self.base + "/v1/messages/batches", json={"requests": requests})
        return plain_id(batch.get("id") if isinstance(batch, dict) else None, "batch id", self.model)

    async def find(self, token: str) -> str | None:
        return None  # no metadata to find it by (see the class docstring)

    async def status(self, batch_id: str) -> Progress:
        batch = await self._json("GET", f"{self.base}/v1/messages/batches/{plain_id(batch_id, 'batch id', self.model)}")
        counts = batch.get("request_counts") or {}
        failed = sum(counts.get(k, 0) for k in ("errored", "canceled", "expired"))
        total = failed + counts.get("succeeded", 0) + counts.get("processing", 0)
        status = str(batch.get("processing_status"))
        return Progress(status, status == "ended", counts.get("succeeded", 0), failed, total, batch)

    async def outcomes(
        self, batch: Mapping[str, Any], lines: int
    ) -> tuple[dict[str, ChatResponse | ProviderError], ProviderError | None]:
        """As ``OpenAIBatches.outcomes``, from the batch's results: at its ``results_url`` when that
        is under the configured base, else at the base's own results path for the batch (a URL
        elsewhere is never contacted: the key would go with the request)."""
        own = f"{self.base}/v1/messages/batches/{plain_id(batch.get('id'), 'batch id', self.model)}/results"
        url = batch.get("results_url")
        if not isinstance(url, str) or not under_base(url, self.base):
            if url:
                shown = " ".join(str(url).split())[:200]
                log.warning(f"the provider's results_url {shown} is not under the configured base {self.base}: "
                            f"not contacted; the results are read from {own}")  # fmt: skip
            url = own
        found: dict[str, ChatResponse | ProviderError] = {}
        async with self._request("GET", url) as reply:
            unread = await read_results(reply, lines, self.model, self._line_outcome, found)
        return found, unread

    def _line_outcome(self, record: Mapping[str, Any]) -> ChatResponse | ProviderError:
        return self._outcome(record.get("result") or {})

    def _outcome(self, result: Mapping[str, Any]) -> ChatResponse | ProviderError:
        if result.get("type") != "succeeded":
            error = result.get("error") or {}
            detail = (error.get("error") or error).get("message") if isinstance(error, dict) else None
            message = f"batch line {result.get('type') or 'failed'}" + (f": {detail}" if detail else "")
            return ProviderError(message, model=self.model, retryable=True)  # asked again in the next round
        message = result.get("message") or {}
        parts = [part for part in message.get("content") or [] if isinstance(part, dict)]
        tool = next((part for part in parts if part.get("type") == "tool_use"), None)
        text = json.dumps(tool.get("input")) if tool else "".join(part.get("text", "") for part in parts)
        tokens_in, tokens_out, trusted = reported_usage(message.get("usage"), "input_tokens", "output_tokens")
        cost = None if self.price is None else self.price.cost(tokens_in, tokens_out) * BATCH_PRICE
        return ChatResponse(text=text, prompt_tokens=tokens_in, completion_tokens=tokens_out, cost_usd=cost,
                            provider_model=message.get("model"), usage_untrusted=not trusted)  # fmt: skip

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclass
class _Waiter:
    api: BatchedAPI
    request: ChatRequest
    key: str
    future: asyncio.Future[ChatResponse]


@dataclass
class BatchRounds:
    """Collects the requests of every ``BatchedAPI`` and sends them in rounds."""

    journal: BatchJournal | None = None
    idle: float = 0.05
    """Seconds without a new request after which the waiting ones go out."""
    poll: float = 0.2
    poll_max: float = 30.0
    on_progress: Callable[[str, str, int, int, int], None] | None = None
    """(provider batch id, status, done, failed, total) at each poll."""
    rounds: int = 0
    _waiting: list[_Waiter] = field(default_factory=list)
    _last: float = 0.0
    _flusher: asyncio.Task[None] | None = None
    _sending: set[asyncio.Task[None]] = field(default_factory=set)

    async def ask(self, api: BatchedAPI, request: ChatRequest) -> ChatResponse:
        loop = asyncio.get_running_loop()
        key = request_key(api.target, request.model_dump(mode="json"))
        waiter = _Waiter(api, request, key, loop.create_future())
        self._waiting.append(waiter)
        self._last = loop.time()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_when_idle())
        return await waiter.future

    async def _flush_when_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(self.idle)
            if self._waiting and loop.time() - self._last >= self.idle:
                waiting, self._waiting = self._waiting, []
                task = asyncio.create_task(self._send_round(waiting))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _send_round(self, waiting: list[_Waiter]) -> None:
        self.rounds += 1
        by_target: dict[tuple[str, str], list[_Waiter]] = {}
        for w in waiting:
            by_target.setdefault((w.api.batches.base, w.api.batches.model), []).append(w)
        try:
            await asyncio.gather(*(self._send(group) for group in by_target.values()))
        except BaseException as exc:  # every waiter hears of it, never left hanging
            error = exc if isinstance(exc, ProviderError) else ProviderError(f"provider batch failed: {exc!r}")
            for w in waiting:
                if not w.future.done():
                    w.future.set_exception(error)
            if not isinstance(exc, Exception):
                raise

    async def _send(self, group: list[_Waiter]) -> None:
        batches = group[0].api.batches
        keys = list(dict.fromkeys(w.key for w in group))
        outcomes: dict[str, ChatResponse | ProviderError] = {}
        remaining = set(keys)
        for row in self.journal.rounds_holding(keys) if self.journal is not None else []:
            if not remaining & set(row["custom_ids"]):
                continue
            found = await self._collect(batches, row)
            # Replies only: a line that failed or expired there is sent again in a new round.
            replies = {k: v for k, v in (found or {}).items() if k in remaining and isinstance(v, ChatResponse)}
            outcomes.update(replies)
            remaining -= set(replies)
        bodies = {w.key: batches.body(w.request) for w in group}
        for chunk in _chunks([k for k in keys if k in remaining], bodies, batches.max_requests, batches.max_bytes):
            token = uuid.uuid4().hex
            if self.journal is not None:
                self.journal.intent(token, batches.provider, chunk)  # before submit: a kill cannot lose it
            provider_id = await batches.submit([(k, bodies[k]) for k in chunk], token)
            if self.journal is not None:
                self.journal.submitted(token, provider_id)
            row = {"token": token, "provider_batch_id": provider_id, "custom_ids": chunk}
            outcomes.update(await self._collect(batches, row) or {})
        for w in group:
            outcome = outcomes.get(w.key) or ProviderError(
                "batch line missing from the provider's results", model=batches.model, retryable=True
            )
            if not w.future.done():
                if isinstance(outcome, ProviderError):
                    w.future.set_exception(outcome)
                else:
                    w.future.set_result(outcome)

    async def _collect(self, batches: Any, row: Mapping[str, Any]) -> dict[str, ChatResponse | ProviderError] | None:
        """Poll a journalled round until it ends (with back-off) and read its lines; None when it
        was never submitted (journalled, then the process died before the provider had it)."""
        provider_id = row.get("provider_batch_id") or await batches.find(row["token"])
        if provider_id is None:
            return None
        if not row.get("provider_batch_id") and self.journal is not None:
            self.journal.submitted(row["token"], provider_id)
        wait = self.poll
        while True:
            progress = await batches.status(provider_id)
            if self.journal is not None:
                self.journal.progress(row["token"], progress.status, progress.done, progress.failed)
            if self.on_progress is not None:
                self.on_progress(provider_id, progress.status, progress.done, progress.failed, progress.total)
            if progress.ended:
                break
            await asyncio.sleep(wait)
            wait = min(wait * 2, self.poll_max)
        if progress.rejected is not None:
            raise ProviderError(f"the provider rejected the batch file: {progress.rejected}", model=batches.model)
        keys = row["custom_ids"]
        found, unread = await batches.outcomes(progress.raw, len(keys))
        if unread is not None:  # the lines past the results' cap
            for key in keys:
                found.setdefault(key, unread)
        return found


def _chunks(
    keys: list[str], bodies: Mapping[str, dict[str, Any]], max_requests: int, max_bytes: int
) -> list[list[str]]:
    """Split at the provider's limits (requests and bytes a batch)."""
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for key in keys:
        line = len(json.dumps(bodies[key])) + 200
        if current and (len(current) >= max_requests or size + line > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(key)
        size += line
    if current:
        chunks.append(current)
    return chunks


class BatchedAPI:
    """A model's calls, sent through its provider's batch API (``ModelAPI``)."""

    batched = True
    """No per-attempt deadline: a batch may take up to its completion window."""

    def __init__(self, api: Any, rounds: BatchRounds, target: Mapping[str, Any], batches: Any) -> None:
        self.api = api
        self.rounds = rounds
        self.batches = batches
        self.target = dict(target)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return await self.rounds.ask(self, request)

    async def aclose(self) -> None:
        await self.api.aclose()
        closer = getattr(self.batches, "aclose", None)
        if closer is not None:
            await closer()


def send_in_batches(clients: Sequence[Any], rounds: BatchRounds, env: Mapping[str, str] | None = None) -> None:
    """Send these model clients' calls through their providers' batch APIs (OpenAI-protocol
    models: Files + Batches; ``anthropic/`` models: Message Batches); any other model is refused
    (``UsageError``) before any is changed."""
    from council.errors import UsageError

    chosen = []
    for client in clients:
        if isinstance(client.api, OpenAICompatibleAPI):
            chosen.append(OpenAIBatches(client.api))
        elif client.model.startswith("anthropic/"):
            chosen.append(AnthropicBatches.for_model(client.resolved, env))
        else:
            raise UsageError(
                f"--provider-batch: {client.id} ({client.model}) has no batch API here; only OpenAI-protocol "
                "and anthropic/ models are sent through provider batches"
            )
    for client, batches in zip(clients, chosen, strict=True):
        client.api = BatchedAPI(client.api, rounds, client._target, batches)
        # A waiting line holds no connection and counts against no rate: every call of the batch
        # may wait in the same round.
        client._semaphore = asyncio.Semaphore(MAX_REQUESTS * 1000)
        client._rates = None

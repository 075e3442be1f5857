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
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from council.call_cache import request_key
from council.errors import ProviderError
from council.logs import get_logger
from council.providers.base import ChatRequest, ChatResponse, error_name
from council.providers.http_client import aiohttp
from council.providers.openai_compatible import OpenAICompatibleAPI
from council.usage import reported_usage

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

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        session = self.api._session_for_loop()
        try:
            async with session.request(method, self.base + path, headers=self._auth, **kwargs) as reply:
                raw = await reply.read()
                if reply.status >= 400:
                    from council.providers.openai_compatible import status_error

                    raise status_error(reply.status, raw, reply.reason, self.api.model)
        except aiohttp.ClientError as exc:
            raise ProviderError(f"APIConnectionError: {exc}", model=self.api.model, retryable=True) from exc
        if path.endswith("/content"):
            return {"content": raw}
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ProviderError(f"{error_name(None)}: the batch API replied {raw[:200]!r}", model=self.api.model)
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
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"council_token": token},
            },
        )
        return str(batch["id"])

    async def find(self, token: str) -> str | None:
        listing = await self._json("GET", "/batches", params={"limit": "100"})
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get("council_token") == token:
                return str(batch["id"])
        return None

    async def status(self, batch_id: str) -> Progress:
        batch = await self._json("GET", f"/batches/{batch_id}")
        counts = batch.get("request_counts") or {}
        status = str(batch.get("status"))
        reason = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or [{}]
            reason = errors[0].get("message") if isinstance(errors[0], dict) else str(errors[0])
        return Progress(status, status in DONE, counts.get("completed", 0), counts.get("failed", 0),
                        counts.get("total", 0), batch, reason)  # fmt: skip

    async def outcomes(self, batch: Mapping[str, Any]) -> dict[str, ChatResponse | ProviderError]:
        """Each line's reply (priced at the batch price) or its error, by custom id."""
        found: dict[str, ChatResponse | ProviderError] = {}
        for name in ("output_file_id", "error_file_id"):
            if not batch.get(name):
                continue
            content = (await self._json("GET", f"/files/{batch[name]}/content"))["content"]
            for line in content.splitlines():
                if line.strip():
                    record = json.loads(line)
                    found[str(record.get("custom_id"))] = self._outcome(record)
        return found

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

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.request(method, url, headers=self._headers, **kwargs) as reply:
                raw = await reply.read()
                if reply.status >= 400:
                    from council.providers.openai_compatible import status_error

                    raise status_error(reply.status, raw, reply.reason, self.model)
        except aiohttp.ClientError as exc:
            raise ProviderError(f"APIConnectionError: {exc}", model=self.model, retryable=True) from exc
        return raw if url.endswith("/results") else json.loads(raw)

    async def submit(self, lines: Sequence[tuple[str, dict[str, Any]]], token: str) -> str:
        requests = [{"custom_id": cid, "params": params} for cid, params in lines]
        batch = await self._json("POST", self.base + "/v1/messages/batches", json={"requests": requests})
        return str(batch["id"])

    async def find(self, token: str) -> str | None:
        return None  # no metadata to find it by (see the class docstring)

    async def status(self, batch_id: str) -> Progress:
        batch = await self._json("GET", f"{self.base}/v1/messages/batches/{batch_id}")
        counts = batch.get("request_counts") or {}
        failed = sum(counts.get(k, 0) for k in ("errored", "canceled", "expired"))
        total = failed + counts.get("succeeded", 0) + counts.get("processing", 0)
        status = str(batch.get("processing_status"))
        return Progress(status, status == "ended", counts.get("succeeded", 0), failed, total, batch)

    async def outcomes(self, batch: Mapping[str, Any]) -> dict[str, ChatResponse | ProviderError]:
        url = batch.get("results_url") or f"{self.base}/v1/messages/batches/{batch['id']}/results"
        found: dict[str, ChatResponse | ProviderError] = {}
        for line in (await self._json("GET", url)).splitlines():
            if line.strip():
                record = json.loads(line)
                found[str(record.get("custom_id"))] = self._outcome(record.get("result") or {})
        return found

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
        return await batches.outcomes(progress.raw)


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

"""The native backend: OpenAI-compatible chat completions over aiohttp.

For models that speak the OpenAI protocol (``openai/…``, OpenRouter, Groq, vLLM, Ollama's
``/v1``, llama.cpp, LM Studio…; see ``council.config.endpoints``). One POST per call, no SDK
(``stream`` sends the same POST with ``stream: true`` and reads OpenAI's SSE chunks):
a call costs a fraction of a millisecond of CPU where LiteLLM costs several (measured in
``benchmarks/bench_http_clients.py`` and ``benchmarks/bench_overhead.py``).

Connections: one pooled keep-alive ``aiohttp.ClientSession`` per base URL and event loop,
shared by every model that uses that server and closed when the last of them is closed
(``aclose``). The pool has no connection cap: ``ModelClient`` limits calls per model. The
environment's proxy settings (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) apply.

Errors become ``ProviderError`` as on the LiteLLM path: a name for the status
(``RateLimitError``, ``InternalServerError``…; ``base.error_name``), the provider's own message
from the error body, the status, and ``retryable`` for 408/409/425/429/5xx, timeouts and
connection errors. Retries, deadlines and the call log stay in ``ModelClient``.

Replies are read up to ``COUNCIL_MAX_REPLY_BYTES`` (default 16 MiB, far above any real
completion): a larger or endless one stops there with an error that is not retried (the same
server would send the same again), so a broken or hostile server cannot fill the memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic_core import from_json, to_json

from council.accounting.usage import reported_usage, token_count
from council.config.endpoints import NativeEndpoint
from council.errors import ConfigError, InputError, ProviderError
from council.providers import prices
from council.providers.base import ChatRequest, ChatResponse, error_name, retryable_status
from council.providers.http_client import aiohttp
from council.untrusted.inputs import check_json_text, whole_number

_MAX_MESSAGE = 500

# The response format of a request with a schema, around its name and its schema's JSON, as
# pydantic-core writes the dict ``body`` makes (OpenAICompatibleAPI.encoded_body).
_FORMAT_OPEN = b',"response_format":{"type":"json_schema","json_schema":{"name":'
_SCHEMA_KEY = b',"schema":'
_FORMAT_CLOSE = b',"strict":false}}}'

#: Schemas' JSON by the schema object's id, with the object (kept, so the id is not reused).
_SCHEMA_JSON: dict[int, tuple[dict[str, Any], bytes]] = {}
_SCHEMA_JSON_MAX = 256


def _schema_json(schema: dict[str, Any]) -> bytes:
    """``to_json(schema)``, made once per schema object. A judge's schema is one object for all
    its calls (council.judging.running.schema_of); one made afresh each call is encoded each call."""
    known = _SCHEMA_JSON.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    text = to_json(schema)
    if len(_SCHEMA_JSON) >= _SCHEMA_JSON_MAX:
        _SCHEMA_JSON.clear()
    _SCHEMA_JSON[id(schema)] = (schema, text)
    return text


DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024
_CHUNK = 1 << 16


def max_reply_bytes() -> int:
    """``COUNCIL_MAX_REPLY_BYTES``, else 16 MiB."""
    raw = os.environ.get("COUNCIL_MAX_REPLY_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_REPLY_BYTES
    return whole_number(raw, "COUNCIL_MAX_REPLY_BYTES (bytes)", 1, 10**18, ConfigError)


def too_large(limit: int, model: str) -> ProviderError:
    return ProviderError(
        f"APIError: the reply is larger than {limit} bytes (COUNCIL_MAX_REPLY_BYTES); not read further",
        model=model,
        retryable=False,
    )


async def read_capped(reply: aiohttp.ClientResponse, limit: int, model: str) -> bytes:
    """The reply's body, refused once it passes ``limit`` bytes (announced or read)."""
    if reply.content_length is not None and reply.content_length > limit:
        raise too_large(limit, model)
    body = bytearray()
    async for chunk in reply.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise too_large(limit, model)
    return bytes(body)


async def lines_capped(content: aiohttp.StreamReader, limit: int, model: str) -> AsyncIterator[bytes]:
    """The body's lines as they arrive (each with its line end; the last maybe without), however
    long, refused once they pass ``limit`` bytes in all, a line still arriving included.
    aiohttp's own line reader refuses a line over 512 KiB with an error of its own, and a
    provider, or a proxy that buffers a stream, may send a whole reply as one event."""
    received = 0
    pending = bytearray()
    async for block in content.iter_any():
        at = len(pending)  # what is pending holds no line end: look in the new block only
        pending += block
        start = 0
        while (end := pending.find(b"\n", at)) >= 0:
            line = bytes(pending[start : end + 1])
            received += len(line)
            if received > limit:
                raise too_large(limit, model)
            yield line
            start = at = end + 1
        del pending[:start]
        if received + len(pending) > limit:
            raise too_large(limit, model)
    if pending:
        yield bytes(pending)


def provider_message(body: bytes, fallback: str) -> str:
    """The provider's own words from an error body: OpenAI's ``{"error": {"message"}}``, or the
    shapes other servers use (``{"error": "..."}``, ``{"message"}``, ``{"detail"}``), else the text."""
    text = body.decode("utf-8", "replace").strip()
    message: Any = None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        if not message:
            message = data.get("message") or data.get("detail")
        if message is not None and not isinstance(message, str):
            message = json.dumps(message)
    elif data is None and text and not text.startswith("<"):  # plain text, not an HTML error page
        message = text
    return " ".join(str(message or fallback).split())[:_MAX_MESSAGE] or fallback


def status_error(status: int, body: bytes, reason: str | None, model: str) -> ProviderError:
    name = error_name(status)
    message = provider_message(body, reason or f"HTTP {status}")
    return ProviderError(f"{name}: {message}", model=model, status_code=status, retryable=retryable_status(status))


class _SessionPool:
    """One ``aiohttp.ClientSession`` per (event loop, base URL), counted by its users."""

    def __init__(self) -> None:
        # Weak: a finished event loop (``asyncio.run`` returned) takes its entries with it.
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, list[Any]]] = (
            weakref.WeakKeyDictionary()
        )

    def acquire(self, loop: asyncio.AbstractEventLoop, base_url: str) -> aiohttp.ClientSession:
        sessions = self._by_loop.setdefault(loop, {})
        entry = sessions.get(base_url)
        if entry is None or entry[0].closed:
            # No cap on connections (limit=0): ModelClient limits the calls in flight per model.
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            proxy, proxy_auth = _env_proxy(base_url)
            session = aiohttp.ClientSession(connector=connector, proxy=proxy, proxy_auth=proxy_auth)
            entry = sessions[base_url] = [session, 0]
        entry[1] += 1
        return entry[0]

    async def release(self, loop: asyncio.AbstractEventLoop, base_url: str, session: aiohttp.ClientSession) -> None:
        entry = self._by_loop.get(loop, {}).get(base_url)
        if entry is not None and entry[0] is session:
            entry[1] -= 1
            if entry[1] > 0:
                return
            del self._by_loop[loop][base_url]
        if not session.closed:
            await session.close()

    def open_sessions(self) -> int:
        """Sessions open in the running loop (for tests)."""
        return len(self._by_loop.get(asyncio.get_running_loop(), {}))


def _env_proxy(base_url: str) -> tuple[Any, Any]:
    """The proxy the environment gives this server (``HTTPS_PROXY``/``HTTP_PROXY``, unless
    ``NO_PROXY`` names it), looked up once per session: aiohttp's ``trust_env`` would look it up,
    and netrc, in worker threads on every request."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        return get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None, None


SESSIONS = _SessionPool()


class OpenAICompatibleAPI:
    """One model on an OpenAI-compatible server."""

    def __init__(
        self,
        model: str,
        endpoint: NativeEndpoint,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        input_cost_per_token: float | None = None,
        output_cost_per_token: float | None = None,
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        self.url = endpoint.base_url + "/chat/completions"
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        # No timer of aiohttp's: an attempt's deadline is ModelClient's (asyncio.timeout), which
        # cancels the request in its place. aiohttp's took a cancellation that came in the turn it
        # fired (a session's deadline) for its own timeout (aio-libs/aiohttp#5979): the call was
        # retried after its session had ended.
        self._timeout = aiohttp.ClientTimeout()
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes()
        self._configured_price = prices.configured_price(input_cost_per_token, output_cost_per_token)
        self._price: prices.Price | None = None
        self._price_known = self._configured_price is not None
        self._schema_ok: bool | None = None
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"OpenAICompatibleAPI({self.model!r}, {self.endpoint.base_url!r})"

    # -- request ------------------------------------------------------------------
    def _sends_schema(self) -> bool:
        if self._schema_ok is None:
            mode = self.endpoint.settings.structured
            self._schema_ok = mode == "json_schema" or (
                mode == "by_model" and prices.supports_response_schema(self.endpoint.provider, self.endpoint.wire_model)
            )
        return self._schema_ok

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body = self._without_format(request)
        if request.json_schema is not None and self._sends_schema():
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name or "reply",
                    "schema": request.json_schema,
                    "strict": False,  # strict mode rejects keywords we rely on (uniqueItems, minLength)
                },
            }
        elif request.json_schema is None and request.json_mode:
            # Any JSON object (a client's json_object format): the mode nearly every
            # OpenAI-compatible server honours, whatever it does with schemas.
            body["response_format"] = {"type": "json_object"}
        return body

    def _without_format(self, request: ChatRequest) -> dict[str, Any]:
        settings = self.endpoint.settings
        body: dict[str, Any] = {"model": self.endpoint.wire_model, "messages": request.messages}
        if request.max_tokens is not None:
            body[settings.max_tokens_param] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body[settings.seed_param] = request.seed
        return body

    def encoded_body(self, request: ChatRequest, *, stream: bool = False) -> bytes:
        """The bytes sent: ``to_json(self.body(request))`` (pydantic-core's encoder, quicker than
        json.dumps on judge prompts: ``benchmarks/bench_judge_cpu.py``), with ``stream`` asking for
        the reply in pieces and its usage at the end. A schema's JSON is made once per schema object
        and put in its place (the response format comes last): a judge's schema was much of the work
        of encoding its request."""
        if stream:
            return to_json({**self.body(request), "stream": True, "stream_options": {"include_usage": True}})
        schema = request.json_schema
        if schema is None or not self._sends_schema():
            return to_json(self.body(request))
        head = to_json(self._without_format(request))
        name = to_json(request.schema_name or "reply")
        return b"".join((head[:-1], _FORMAT_OPEN, name, _SCHEMA_KEY, _schema_json(schema), _FORMAT_CLOSE))

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            # A new event loop (each ``asyncio.run``) needs its own session: aiohttp's are bound to one.
            self._session = SESSIONS.acquire(loop, self.endpoint.base_url)
            self._loop = loop
        return self._session

    async def generate(self, request: ChatRequest) -> ChatResponse:
        session = self._session_for_loop()
        if not self._price_known:
            prices.load_in_background()
        data = self.encoded_body(request)
        with self._transport_errors():
            async with session.post(self.url, data=data, headers=self._headers, timeout=self._timeout) as reply:
                raw = await read_capped(reply, self.max_reply_bytes, self.model)
                status, reason = reply.status, reply.reason
        if status >= 400:
            raise status_error(status, raw, reason, self.model)
        return self._response(raw)

    async def stream(self, request: ChatRequest, on_delta: Callable[[str], None]) -> ChatResponse:
        """The same call with ``stream: true``: ``on_delta`` gets each piece of text as the server
        sends it (OpenAI's SSE chunks); the whole reply comes back as from ``generate``. Usage is
        asked for (``stream_options.include_usage``); a server that sends none costs 0 tokens. The
        reply is capped as ``generate``'s is (``COUNCIL_MAX_REPLY_BYTES``), counted as it streams."""
        session = self._session_for_loop()
        if not self._price_known:
            prices.load_in_background()
        headers = {**self._headers, "accept": "text/event-stream"}
        pieces: list[str] = []
        last: dict[str, Any] = {}  # the usage and the model name, from whichever chunk has them
        with self._transport_errors():
            data = self.encoded_body(request, stream=True)
            async with session.post(self.url, data=data, headers=headers, timeout=self._timeout) as reply:
                if reply.status >= 400:
                    raw = await read_capped(reply, self.max_reply_bytes, self.model)
                    raise status_error(reply.status, raw, reply.reason, self.model)
                if not reply.content_type.startswith("text/event-stream"):
                    # A server that ignores ``stream`` answers in one JSON body: one piece.
                    whole = self._response(await read_capped(reply, self.max_reply_bytes, self.model))
                    if whole.text:
                        on_delta(whole.text)
                    return whole
                async for line in lines_capped(reply.content, self.max_reply_bytes, self.model):
                    data = line.strip()
                    if not data.startswith(b"data:"):
                        continue  # blank lines, SSE comments, event names
                    data = data[5:].strip()
                    if data == b"[DONE]":
                        break
                    chunk = self._chunk(data)
                    if usage := chunk.get("usage"):  # (two lookups: this runs for every chunk)
                        last["usage"] = usage
                    if model := chunk.get("model"):
                        last["model"] = model
                    choices = chunk.get("choices")
                    delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
                    text = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(text, str) and text:
                        pieces.append(text)
                        on_delta(text)
        return self._reply("".join(pieces), last)

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """Timeouts and connection failures as retryable ``ProviderError``s."""
        try:
            yield
        except TimeoutError:
            raise ProviderError(
                f"Timeout: no reply within {self.timeout:g}s", model=self.model, retryable=True
            ) from None
        except aiohttp.ClientError as exc:
            message = " ".join(str(exc).split())[:_MAX_MESSAGE] or type(exc).__name__
            # No connection was made (refused, no such host, a TLS handshake that failed): the
            # request was never sent.
            unsent = isinstance(exc, aiohttp.ClientConnectorError)
            raise ProviderError(
                f"APIConnectionError: {message}", model=self.model, retryable=True, unsent=unsent
            ) from exc

    def _json(self, raw: bytes, what: str) -> Any:
        """Decoded JSON, or one line saying what is wrong with it (bad bytes are not "not JSON").

        Decoded as UTF-8, as JSON between systems must be (RFC 8259, 8.1; a BOM is let pass):
        ``json.loads(bytes)`` would guess UTF-16 or -32 from NUL bytes or a BOM and then
        name the wrong byte, or none. A ``\\ud800`` escape left unpaired decodes to half a
        character that nothing can store or show: said so too."""
        try:
            # pydantic-core's parser, several times faster than json's on every streamed chunk. It
            # takes no input that json.loads refuses; what it refuses and json takes (a BOM, an
            # unpaired surrogate escape) goes the way below, as does every error, to be named.
            return from_json(raw)
        except ValueError:
            pass
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start]
            message = f"APIError: {what} is not valid UTF-8 (byte {bad:#04x} at position {exc.start})"
            raise ProviderError(message, model=self.model) from None
        try:
            data = json.loads(text)
        except ValueError:
            snippet = " ".join(text[:200].split())
            raise ProviderError(f"APIError: {what} is not JSON: {snippet!r}", model=self.model) from None
        if "\\ud" in text or "\\uD" in text:  # a surrogate escape: rare, so only then is every string checked
            try:
                check_json_text(data, what, nul=True)  # a provider's NULs are replaced (ModelClient), not refused
            except InputError:
                message = f"APIError: {what} is not valid UTF-8 text (an unpaired surrogate escape in a string)"
                raise ProviderError(message, model=self.model) from None
        return data

    def _chunk(self, data: bytes) -> dict[str, Any]:
        """One SSE ``data:`` payload; an error sent mid-stream becomes a ``ProviderError``."""
        chunk = self._json(data, "a streamed chunk")
        if not isinstance(chunk, dict):
            raise ProviderError("APIError: a streamed chunk is not a JSON object", model=self.model)
        if chunk.get("error") is not None:
            error = chunk["error"]
            code = error.get("code") if isinstance(error, dict) else None
            status = code if isinstance(code, int) and 400 <= code <= 599 else 500
            raise status_error(status, data, None, self.model)
        return chunk

    # -- reply --------------------------------------------------------------------
    def _response(self, raw: bytes) -> ChatResponse:
        data = self._json(raw, "the reply")
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            # Some gateways (OpenRouter) report an upstream failure as a 200 with an error body.
            error = data.get("error") if isinstance(data, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            if isinstance(code, int) and 400 <= code <= 599:
                raise status_error(code, raw, None, self.model)
            words = provider_message(raw, "the reply has no choices")
            raise ProviderError(f"APIError: {words}", model=self.model, retryable=error is not None)
        message = choices[0].get("message")
        text = message.get("content") if isinstance(message, dict) else None
        return self._reply(text if isinstance(text, str) else "", data)

    def _reply(self, text: str, data: dict[str, Any]) -> ChatResponse:
        """The response from its text and the reply's (or the last chunks') ``usage`` and ``model``."""
        usage = data.get("usage")
        prompt_tokens, completion_tokens, trusted = reported_usage(usage)
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        cached = (token_count(details.get("cached_tokens")) or 0) if isinstance(details, dict) else 0
        reported = data.get("model")
        return ChatResponse(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.cost(prompt_tokens, completion_tokens, cached),
            provider_model=reported if isinstance(reported, str) else None,
            usage_untrusted=not trusted,
        )

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float | None:
        """Configured prices, else the price map's; None when neither knows the model."""
        if not self._price_known:
            self._price = prices.mapped_price(self.endpoint.provider, self.endpoint.wire_model)
            self._price_known = True
        price = self._configured_price or self._price
        return None if price is None else price.cost(prompt_tokens, completion_tokens, cached_tokens)

    async def aclose(self) -> None:
        session, loop, self._session, self._loop = self._session, self._loop, None, None
        if session is not None and loop is not None and loop is asyncio.get_running_loop():
            await SESSIONS.release(loop, self.endpoint.base_url, session)

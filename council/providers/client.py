"""The model wrapper: pacing, retries, deadlines and the call log around a backend.

One ``ModelClient`` per configured model, shared by every session of a ``Council``
(so concurrent sessions share a model's limits). A call is:
``semaphore (max_concurrency) → rate limiter (rpm) → backend, under a per-attempt
timeout``, retried with exponential backoff and jitter (tenacity) on 429/5xx/timeouts.
Every attempt, failed, cancelled or not, becomes a ``CallRecord`` for the call log.

A call given ``on_delta`` streams when the backend can (``StreamingAPI``): each piece of text
goes to ``on_delta`` as it arrives (a backend that cannot stream hands over the whole text once).
Once a piece has been handed over, a failure is not retried: the caller has shown it already.

A backend may have a synchronous ``prepare()`` (one-off setup such as LiteLLM's
~2.5 s import); it runs once, before the first attempt's deadline starts.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from council.clock import utc_now
from council.config import ResolvedModel
from council.errors import ProviderError
from council.logs import get_logger
from council.providers.base import ChatRequest, ChatResponse, ModelAPI
from council.redaction import redact
from council.usage import CallRecord, CallSink

log = get_logger("council.providers")


class RetryPolicy(BaseModel):
    """Backoff between retries; how many retries is per model (``[models.X] retries``)."""

    initial_wait: float = 1.0
    max_wait: float = 30.0
    jitter: float = 1.0


DEFAULT_RETRY = RetryPolicy()


def _without_secrets(exc: ProviderError, request: ChatRequest) -> ProviderError:
    """The provider's own words, which may echo the request: without keys, and with transcripts
    off, without the question and answers the request carried. Everything after this (result,
    database, log, terminal) only ever sees this version."""
    message = str(exc.args[0]) if exc.args else ""
    clean = redact(message, private=[m.get("content") for m in request.messages])
    if clean == message:
        return exc
    return ProviderError(clean, model=exc.model, status_code=exc.status_code, retryable=exc.retryable)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


class SharedLimits(Protocol):
    """A store's rate budgets, shared by every process using it (council.storage.rate_limits)."""

    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float: ...


class ModelClient:
    def __init__(
        self,
        resolved: ResolvedModel,
        api: ModelAPI,
        *,
        retry: RetryPolicy | None = None,
        shared_limits: SharedLimits | None = None,
    ) -> None:
        """``shared_limits``: a store; then ``rpm`` holds across every process sharing it
        (bursts up to ``max_concurrency``), else within this process only."""
        self.resolved = resolved
        self.api = api
        self.retry = retry or DEFAULT_RETRY
        spec = resolved.spec
        self._semaphore = asyncio.Semaphore(spec.max_concurrency)
        self._limiter: Any = None
        self._shared = shared_limits if spec.rpm and hasattr(shared_limits, "reserve_rate") else None
        self._prepared = False
        if spec.rpm and self._shared is None:
            from aiolimiter import AsyncLimiter

            # rpm as a leaky bucket; bursts up to max_concurrency are allowed.
            self._limiter = AsyncLimiter(spec.rpm, 60.0)

    @property
    def id(self) -> str:
        return self.resolved.id

    @property
    def model(self) -> str:
        return self.resolved.model

    def defaults(self) -> dict[str, Any]:
        spec = self.resolved.spec
        return {"max_tokens": spec.max_tokens, "temperature": spec.temperature}

    def _prepare(self) -> None:
        # Before any deadline starts: a healthy model with `timeout = 1` would otherwise
        # time out on the first call of a process, spent importing LiteLLM.
        prepare = getattr(self.api, "prepare", None)
        if prepare is not None:
            prepare()
        self._prepared = True

    async def _attempt(
        self,
        request: ChatRequest,
        stage: str,
        attempt: int,
        sink: CallSink | None,
        on_delta: Callable[[str], None] | None = None,
    ) -> ChatResponse:
        timeout = self.resolved.spec.timeout
        if not self._prepared:
            self._prepare()
        async with self._semaphore:
            if self._limiter is not None:
                await self._limiter.acquire()
            elif self._shared is not None:
                await self._reserve_shared()
            started = utc_now()
            call_id = uuid.uuid4().hex
            announce = getattr(sink, "started", None)
            if announce is not None:  # written before it is sent: a crash mid-call leaves it on record
                announce(self._call(call_id, stage, started, 0.0, attempt, None, None))
            t0 = time.perf_counter()
            response: ChatResponse | None = None
            error: ProviderError | None = None
            streamed = False

            def relay(piece: str) -> None:
                nonlocal streamed
                streamed = True
                on_delta(piece)  # type: ignore[misc]

            try:
                async with asyncio.timeout(timeout):
                    if on_delta is not None and hasattr(self.api, "stream"):
                        response = await self.api.stream(request, relay)
                    else:
                        response = await self.api.generate(request)
                        if on_delta is not None and response.text:
                            relay(response.text)
            except TimeoutError:
                error = ProviderError(f"Timeout: no reply within {timeout:g}s", model=self.model, retryable=True)
            except ProviderError as exc:
                error = _without_secrets(exc, request)
            except asyncio.CancelledError:
                # The session's deadline or Ctrl-C: the call was in flight (and may be billed),
                # so the call log keeps it.
                self._record(sink, call_id, stage, started, t0, attempt, None, "cancelled")
                raise
            if error is not None and streamed:
                # Part of the reply is out already: a retry would repeat it. The caller decides.
                error = ProviderError(
                    f"{error} (after part of the reply had arrived)",
                    model=error.model,
                    status_code=error.status_code,
                    retryable=False,
                )
            self._record(sink, call_id, stage, started, t0, attempt, response, str(error) if error else None)
            if error is not None:
                # Not a warning: the failure is retried, or reported in the result and the call log.
                log.info("model call failed", member=self.id, stage=stage, attempt=attempt, error=str(error))
                raise error
            assert response is not None
            return response

    async def _reserve_shared(self) -> None:
        spec = self.resolved.spec
        assert self._shared is not None and spec.rpm
        increment = 60.0 / spec.rpm
        # One budget per configured model ([models.X] rpm), whichever process calls it.
        key = f"rpm:{self.id}:{self.model}"
        wait = self._shared.reserve_rate(key, increment, (spec.max_concurrency - 1) * increment)
        if wait > 0:
            await asyncio.sleep(wait)

    def _record(
        self,
        sink: CallSink | None,
        call_id: str,
        stage: str,
        started: str,
        t0: float,
        attempt: int,
        response: ChatResponse | None,
        error: str | None,
    ) -> None:
        if sink is not None:
            sink(self._call(call_id, stage, started, (time.perf_counter() - t0) * 1000, attempt, response, error))

    def _call(
        self,
        call_id: str,
        stage: str,
        started: str,
        latency_ms: float,
        attempt: int,
        response: ChatResponse | None,
        error: str | None,
    ) -> CallRecord:
        return CallRecord(
            call_id=call_id,
            stage=stage,
            member=self.id,
            model=self.model,
            started_at=started,
            latency_ms=latency_ms,
            prompt_tokens=response.prompt_tokens if response else 0,
            completion_tokens=response.completion_tokens if response else 0,
            cost_usd=response.cost_usd if response else None,
            attempt=attempt,
            ok=error is None,
            error=error,
        )

    async def complete(
        self,
        request: ChatRequest,
        *,
        stage: str,
        sink: CallSink | None = None,
        on_delta: Callable[[str], None] | None = None,
    ) -> ChatResponse:
        """One logical call: retried on retryable provider errors, then raised as ProviderError.
        ``on_delta``: stream the reply's text to it as it arrives."""
        policy = self.retry
        attempt = 0
        async for state in AsyncRetrying(
            stop=stop_after_attempt(self.resolved.spec.retries + 1),
            wait=wait_exponential_jitter(multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter),
            retry=retry_if_exception(_retryable),
            reraise=True,
        ):
            with state:
                attempt += 1
                return await self._attempt(request, stage, attempt, sink, on_delta)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.api.aclose()

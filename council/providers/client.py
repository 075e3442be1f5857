"""The model wrapper: pacing, retries, deadlines and the call log around a backend.

One ``ModelClient`` per configured model, shared by every session of a ``Council``
(so concurrent sessions share a model's limits). A call is:
``semaphore (max_concurrency) → spend cap → rate budgets (rpm, tpm) → backend, under a
per-attempt timeout``, retried with exponential backoff and jitter (tenacity) on 429/5xx/timeouts.
Under ``tpm`` each attempt reserves its worst-case tokens (a bound of its prompt + its
max_tokens) before it is sent and settles at its real usage after (docs/methods.md,
"Shared rate budget"); one that could never fit is refused unsent (``RequestTooLarge``).
Every attempt, failed, cancelled or not, becomes a ``CallRecord`` for the call log.
What a backend sends back (the reply, each streamed piece, the model name it reports, its error
text) has U+0000 replaced by U+FFFD here, for every backend: nothing after (the store,
PostgreSQL's text columns included, a terminal, a client) gets one (:func:`provider_text`).
Under a spend cap (``budget``), each attempt reserves its worst case before it is sent
and settles at its real cost when it ends (``council.accounting.budget``; docs/methods.md, "Spend caps");
one refused while its own budget's calls hold the room (a batch's worker) waits for them.
With a ``cache``, an identical request is answered from it (logged ``cached``, cost 0), and
a reply the caller accepts is kept (docs/methods.md, "Call cache").

A backend may have a synchronous ``prepare()`` (one-off setup such as LiteLLM's slow
import); it runs once, before the first attempt's deadline starts.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from pydantic import BaseModel

from council._util.background import asking_store
from council._util.clock import utc_now
from council._util.logs import get_logger
from council.accounting import observers
from council.accounting.budget import (
    MESSAGE_OVERHEAD_TOKENS,
    REQUEST_OVERHEAD_TOKENS,
    Budget,
    CallPrice,
    RoomHeld,
    budget_in_force,
    prompt_tokens_bound,
)
from council.accounting.call_cache import CACHE_VERSION, CallCache, request_key
from council.accounting.usage import CallRecord, CallSink
from council.config import ResolvedModel
from council.errors import ProviderError, RequestTooLarge, UsageError
from council.methods import gcra
from council.providers.base import ChatRequest, ChatResponse, ModelAPI
from council.untrusted.redaction import REDACTED, SecretStream, redact, redact_secrets

log = get_logger("council.providers")


#: More tokens than any call takes: a count above it is not trusted even where the call's own
#: output limit is unknown (and would not fit a database's integer).
ABSURD_TOKENS = 10**9


def _surely_within(request: ChatRequest) -> int:
    """A prompt token count up to which a request is within its bound (:func:`_prompt_bound`), without
    encoding it: every character is at least one byte."""
    chars = sum(len(v) for m in request.messages for v in m.values() if isinstance(v, str))
    return chars + REQUEST_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS * len(request.messages)


def _prompt_bound(request: ChatRequest) -> int:
    return prompt_tokens_bound(request.messages, request.json_schema)


class RetryPolicy(BaseModel):
    """Backoff between retries; how many retries is per model (``[models.X] retries``)."""

    initial_wait: float = 1.0
    max_wait: float = 30.0
    jitter: float = 1.0


DEFAULT_RETRY = RetryPolicy()


def provider_text(text: str) -> str:
    """A provider's text, U+0000 replaced by U+FFFD (U+0000 is no text: PostgreSQL cannot store it)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _plain_reply(response: ChatResponse) -> ChatResponse:
    model = response.provider_model
    if "\x00" not in response.text and (model is None or "\x00" not in model):
        return response
    return response.model_copy(update={"text": provider_text(response.text),
                                       "provider_model": None if model is None else provider_text(model)})  # fmt: skip


def _without_secrets(exc: ProviderError, request: ChatRequest) -> ProviderError:
    """The provider's own words, which may echo the request: without keys, and with transcripts
    off, without the question and answers the request carried (and without U+0000). Everything
    after this (result, database, log, terminal) only ever sees this version."""
    message = str(exc.args[0]) if exc.args else ""
    clean = provider_text(redact(message, private=[m.get("content") for m in request.messages]))
    if clean == message:
        return exc
    return ProviderError(clean, model=exc.model, status_code=exc.status_code, retryable=exc.retryable,
                         unsent=exc.unsent)  # fmt: skip


def _reply_without_secrets(response: ChatResponse) -> ChatResponse:
    """A reply without the strong secrets known (a key the model was told and repeats): every
    reply enters here, so no answer, event, stored row or printed output holds one."""
    clean = redact_secrets(response.text, error_text=False)
    return response if clean == response.text else response.model_copy(update={"text": clean})


def _has_text(response: ChatResponse) -> bool:
    return bool(response.text.strip())


def _cached_reply(entry: Any) -> ChatResponse | None:
    """A kept entry as a reply; None for one of another version or that does not read as one."""
    if not isinstance(entry, dict) or entry.get("v") != CACHE_VERSION:
        return None
    try:
        return ChatResponse.model_validate({k: v for k, v in entry.items() if k not in ("v", "model")})
    except ValueError:
        return None


def _not_billed(exc: BaseException) -> bool:
    """A failed attempt that cost nothing: the provider answered it with an error (an HTTP status),
    or it was never sent (its connection was never made)."""
    return isinstance(exc, ProviderError) and (exc.status_code is not None or exc.unsent)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


class SharedLimits(Protocol):
    """A store's rate budgets, shared by every process using it (council.storage.rate_limits)."""

    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float: ...

    def adjust_rate(self, key: str, delta: float) -> None: ...


class ModelClient:
    def __init__(
        self,
        resolved: ResolvedModel,
        api: ModelAPI,
        *,
        retry: RetryPolicy | None = None,
        shared_limits: SharedLimits | None = None,
    ) -> None:
        """``shared_limits``: a store; then ``rpm`` and ``tpm`` hold across every process
        sharing it (``rpm`` with bursts up to ``max_concurrency``), else within this process."""
        self.resolved = resolved
        self.api = api
        self.retry = retry or DEFAULT_RETRY
        spec = resolved.spec
        self._semaphore = asyncio.Semaphore(spec.max_concurrency)
        self._rates: SharedLimits | None = None
        if spec.rpm or spec.tpm:
            from council.providers.rate_budget import ProcessRates

            shared = hasattr(shared_limits, "reserve_rate") and hasattr(shared_limits, "adjust_rate")
            self._rates = shared_limits if shared else ProcessRates()  # type: ignore[assignment]
        self._prepared = False
        self.budget: Budget | None = None
        """The spend cap this client's calls reserve against (None: no cap)."""
        self._call_price: CallPrice | None = None
        self._price_looked_up = False
        self.cache: CallCache | None = None
        """Where identical requests are answered from (None: every call is made)."""
        self._target = {"model": spec.model, "api_base": spec.api_base, "transport": resolved.transport}

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

    def check_budget(self) -> CallPrice:
        """What this model's calls may cost, or a ``UsageError`` saying why a cap cannot be
        kept for it (:func:`cappable_price`)."""
        if self._call_price is None:
            self._call_price = cappable_price(self.resolved)
        return self._call_price

    def _price(self) -> CallPrice | None:
        """What this model's calls may cost, as ``check_budget`` finds it; None: not known."""
        if self._call_price is None and not self._price_looked_up:
            from council.providers.prices import call_price

            self._price_looked_up = True
            price = call_price(self.resolved)
            if price is not None and math.isfinite(price.input) and math.isfinite(price.output):
                self._call_price = price
        return self._call_price

    def settled_usage(self, request: ChatRequest, response: ChatResponse) -> ChatResponse:
        """The reply with the usage its call is settled at: every reply passes here (docs/methods.md,
        "Spend caps"). Usage that cannot be trusted — counts the backend could not read
        (``council.accounting.usage.reported_usage``), a negative cost, more completion tokens than the
        request's ``max_tokens`` (else the model's output limit) allow, or more prompt tokens than
        the request's bound — is replaced by the call's bounds and its worst-case cost, which is
        what its reservation under a spend cap held, and flagged (``usage_untrusted``), with a warning.
        A local model's usage is this process's own count, reported by no one: it stands (a second,
        stricter pass of a cut-off JSON reply adds its tokens, past ``max_tokens``)."""
        if self.resolved.transport == "local":
            return response
        price = None
        limit = request.max_tokens
        if limit is None:
            price = self._price()
            limit = (price.max_output_tokens or None) if price is not None else None  # 0: a free model's, no limit
        untrusted = (
            response.usage_untrusted
            or (response.cost_usd is not None and response.cost_usd < 0)
            or response.completion_tokens > (limit if limit is not None else ABSURD_TOKENS)
            or (response.prompt_tokens > _surely_within(request) and response.prompt_tokens > _prompt_bound(request))
        )
        if not untrusted:
            return response
        price = price or self._price()
        prompt = _prompt_bound(request)
        worst = None if price is None else price.worst_case(prompt, limit)
        log.warning(
            "the usage the provider reported cannot be trusted: the call is counted at its worst case",
            member=self.id, model=self.model, prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens, cost_usd=response.cost_usd,
        )  # fmt: skip
        update = {"prompt_tokens": prompt, "completion_tokens": limit or 0, "cost_usd": worst, "usage_untrusted": True}
        return response.model_copy(update=update)

    def worst_case(self, request: ChatRequest) -> float:
        """The most this request can cost (docs/methods.md, "Spend caps")."""
        price = self.check_budget()
        bound = price.worst_case(prompt_tokens_bound(request.messages, request.json_schema), request.max_tokens)
        if bound is None:  # a request without max_tokens on a model that has one configured
            raise UsageError(f"{self.id}: a request without max_tokens cannot be kept within a spend cap")
        return bound

    async def _attempt(
        self,
        request: ChatRequest,
        stage: str,
        attempt: int,
        sink: CallSink | None,
        on_delta: Callable[[str], None] | None = None,
    ) -> ChatResponse:
        # A provider batch's line may take up to its completion window: no per-attempt deadline.
        timeout = None if getattr(self.api, "batched", False) else self.resolved.spec.timeout
        tokens = self.call_tokens(request)  # RequestTooLarge: refused before anything else
        if not self._prepared:
            self._prepare()

        def send() -> Awaitable[ChatResponse]:
            return self._send(request, stage, attempt, sink, timeout, on_delta)

        while True:
            try:
                async with self._semaphore:
                    return await self._spend(request, lambda: self._paced(tokens, send))
            except RoomHeld as held:
                # Refused while this budget's own calls hold the room (a batch's worker): asked again
                # once one of them has settled, holding no place of the semaphore meanwhile.
                await held.budget.room_freed(held.since)

    async def _paced(self, tokens: int, send: Callable[[], Awaitable[ChatResponse]]) -> ChatResponse:
        """``send()`` once its turn has come under ``rpm`` and ``tpm``; its tokens settled after."""
        if self._rates is not None:  # none for a provider batch's lines (council.providers.provider_batch)
            await self._pace(tokens)
        used = tokens  # a call that may have reached the model counts at its worst case
        try:
            response = await send()
            if response.prompt_tokens or response.completion_tokens:
                used = response.prompt_tokens + response.completion_tokens
            return response
        except (ProviderError, UsageError) as exc:
            # Not sent (a connection never made), or answered with an error: no tokens used.
            if isinstance(exc, UsageError) or _not_billed(exc):
                used = 0
            raise
        finally:
            if tokens and used != tokens and self._rates is not None:
                await asking_store(self._rates, self._settle_tokens, tokens, used)

    async def _spend(self, request: ChatRequest, send: Callable[[], Awaitable[ChatResponse]]) -> ChatResponse:
        """``send()`` the attempt under the spend cap, if any (docs/methods.md, "Spend caps")."""
        budget = budget_in_force(self.budget)
        if budget is None:
            return await send()
        worst = self.worst_case(request)
        token = budget.reserve(worst)  # BudgetReached: nothing is sent
        spent: float | None = worst  # a call that may have been billed counts at its worst case
        try:
            response = await send()
            spent = worst if response.cost_usd is None else response.cost_usd
            return response
        except ProviderError as exc:
            if _not_billed(exc):
                spent = None
            raise
        finally:
            if spent is None:
                budget.release(token)
            else:
                budget.settle(token, spent)

    async def _send(
        self,
        request: ChatRequest,
        stage: str,
        attempt: int,
        sink: CallSink | None,
        timeout: float | None,
        on_delta: Callable[[str], None] | None,
    ) -> ChatResponse:
        started = utc_now()
        call_id = uuid.uuid4().hex
        announce = getattr(sink, "started", None)
        if announce is not None:  # written before it is sent: a crash mid-call leaves it on record
            announce(self._call(call_id, stage, started, 0.0, attempt, None, None))
        t0 = time.perf_counter()
        response: ChatResponse | None = None
        error: ProviderError | None = None
        streamed = False
        shown = SecretStream()  # what the listener hears: a secret split across pieces is cut too

        def relay(piece: str) -> None:
            nonlocal streamed
            streamed = True
            if text := shown.feed(provider_text(piece)):
                on_delta(text)  # type: ignore[misc]

        try:
            async with asyncio.timeout(timeout):
                if on_delta is not None and hasattr(self.api, "stream"):
                    response = _plain_reply(await self.api.stream(request, relay))
                else:
                    response = _plain_reply(await self.api.generate(request))
                    if on_delta is not None and response.text:
                        relay(response.text)
        except TimeoutError:
            error = ProviderError(f"Timeout: no reply within {timeout or 0:g}s", model=self.model, retryable=True)
        except ProviderError as exc:
            error = _without_secrets(exc, request)
        except asyncio.CancelledError:
            # The session's deadline or Ctrl-C: the call was in flight (and may be billed),
            # so the call log keeps it.
            self._record(sink, call_id, stage, started, t0, attempt, None, "cancelled")
            raise
        if response is not None:
            response = self.settled_usage(request, response)
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
        if streamed and (rest := shown.end()):
            on_delta(rest)  # type: ignore[misc]
        return _reply_without_secrets(response)

    def call_tokens(self, request: ChatRequest) -> int:
        """The most tokens ``request`` can take (a bound of its prompt + its max_tokens) when
        its model has a ``tpm``, else 0; ``RequestTooLarge`` when that is more than ``tpm``."""
        spec = self.resolved.spec
        if spec.tpm is None:
            return 0
        prompt = prompt_tokens_bound(request.messages, request.json_schema)
        reply = request.max_tokens or spec.max_tokens or 0  # the config requires max_tokens with tpm
        if prompt + reply > spec.tpm:
            raise RequestTooLarge(
                f"a call of up to {prompt + reply} tokens ({prompt} of prompt, counted as bytes, + max_tokens "
                f"{reply}) is more than [models.{self.id}] tpm = {spec.tpm}; it was not sent",
                model=self.id,
            )
        return prompt + reply

    def _rate_keys(self) -> tuple[str, str]:
        # One budget per configured model ([models.X] rpm / tpm), whichever process calls it.
        return f"rpm:{self.id}:{self.model}", f"tpm:{self.id}:{self.model}"

    async def _pace(self, tokens: int) -> None:
        """Reserve the call's turn under rpm and its tokens under tpm; wait for the later."""
        spec, rates = self.resolved.spec, self._rates
        assert rates is not None
        rpm_key, tpm_key = self._rate_keys()

        def reserve() -> float:
            wait = 0.0
            if spec.rpm:
                wait = rates.reserve_rate(rpm_key, *gcra.call_slot(spec.rpm, spec.max_concurrency))
            if spec.tpm and tokens:
                wait = max(wait, rates.reserve_rate(tpm_key, *gcra.token_slot(tokens, spec.tpm)))
            return wait

        wait = await asking_store(rates, reserve)
        if wait > 0:
            observers.rate_waited(self.model, wait)
            await asyncio.sleep(wait)

    def _settle_tokens(self, reserved: int, used: int) -> None:
        """Give back what a call did not use of its reserved tokens (or take what it used more)."""
        assert self._rates is not None and self.resolved.spec.tpm
        try:
            self._rates.adjust_rate(self._rate_keys()[1], (used - reserved) * 60.0 / self.resolved.spec.tpm)
        except Exception as exc:  # the budget stays at the reservation: later calls wait longer, never shorter
            log.warning("could not settle a tpm reservation", member=self.id, error=str(exc))

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
            usage_untrusted=response.usage_untrusted if response else False,
        )

    async def complete(
        self,
        request: ChatRequest,
        *,
        stage: str,
        sink: CallSink | None = None,
        on_delta: Callable[[str], None] | None = None,
        accept: Callable[[ChatResponse], bool] | None = None,
    ) -> ChatResponse:
        """One logical call: retried on retryable provider errors, then raised as ProviderError.
        ``on_delta``: stream the reply's text to it as it arrives.

        With a cache: answered from it when an entry the caller would ``accept`` is kept
        (default: a reply with some text), else made and, if accepted and free of secrets, kept."""
        accept = accept or _has_text
        cache = self.cache
        if cache is None:
            return await self._complete(request, stage, sink, on_delta)
        key = request_key(self._target, request.model_dump(mode="json"))
        if not cache.refresh:
            hit = _cached_reply(await asking_store(cache.replies, cache.replies.get, key))
            if hit is not None:  # kept free of the secrets known then; the ones known now too
                hit = _reply_without_secrets(hit)
            if hit is not None and accept(hit):
                if sink is not None:
                    sink(self._cached_call(stage, hit))
                if on_delta is not None and hit.text:
                    on_delta(hit.text)
                return hit
        response = await self._complete(request, stage, sink, on_delta)
        if accept(response) and REDACTED not in response.text:  # a reply a secret was cut from is not kept
            entry = {"v": CACHE_VERSION, "model": self.model, **response.model_dump(mode="json")}
            await asking_store(cache.replies, cache.replies.put, key, entry)
        return response

    def _cached_call(self, stage: str, hit: ChatResponse) -> CallRecord:
        return CallRecord(
            stage=stage,
            member=self.id,
            model=self.model,
            started_at=utc_now(),
            latency_ms=0.0,
            prompt_tokens=hit.prompt_tokens,
            completion_tokens=hit.completion_tokens,
            cost_usd=0.0,
            cached=True,
            saved_usd=hit.cost_usd,
        )

    async def _complete(
        self, request: ChatRequest, stage: str, sink: CallSink | None, on_delta: Callable[[str], None] | None
    ) -> ChatResponse:
        try:
            return await self._attempt(request, stage, 1, sink, on_delta)
        except ProviderError as exc:
            if not _retryable(exc) or self.resolved.spec.retries < 1:
                raise
            failed = exc
        # Retries run in tenacity's loop, whose first attempt is the one that just failed (its
        # outcome replayed, not sent again): the backoff and the stop are tenacity's, and a call
        # that succeeds at once skips the loop's bookkeeping, which cost more than the call's own.
        # Imported here, by the first retry: a run's first call does not wait for it.
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

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
                if attempt == 1:
                    raise failed
                return await self._attempt(request, stage, attempt, sink, on_delta)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.api.aclose()


def cappable_price(resolved: ResolvedModel) -> CallPrice:
    """What a model's calls may cost, or a ``UsageError`` saying why a spend cap cannot be kept
    for it (no known price; no max_tokens and no known output limit)."""
    from council.providers.prices import call_price

    price = call_price(resolved)
    where = f"[models.{resolved.id}]"
    if price is None:
        raise UsageError(
            f"{resolved.id}: no known price for {resolved.model}, so a spend cap cannot be kept; "
            f"set input_cost_per_token and output_cost_per_token in {where}"
        )
    if not (math.isfinite(price.input) and math.isfinite(price.output)):
        raise UsageError(f"{resolved.id}: the price of {resolved.model} is not a finite number; fix it in {where}")
    if price.worst_case(0, resolved.spec.max_tokens) is None:
        raise UsageError(
            f"{resolved.id}: no max_tokens and no known output limit for {resolved.model}, so a spend cap "
            f"cannot be kept; set max_tokens in {where}"
        )
    return price


def share_limits(clients: Iterable[ModelClient], store: SharedLimits) -> None:
    """Keep the ``rpm`` and ``tpm`` of ``clients`` in ``store``'s budgets, shared by every
    process using it (made without a store, they keep them in this process)."""
    for client in clients:
        if client._rates is not None:
            client._rates = store


def cap_spending(clients: Iterable[ModelClient], budget: Budget) -> None:
    """Put every client's calls under ``budget``; a model whose calls cannot be bounded (no
    known price, no output limit) is refused here, before any call (``UsageError``)."""
    clients = list(clients)
    for client in clients:
        client.check_budget()
    for client in clients:
        client.budget = budget

"""The LiteLLM backend: any model LiteLLM supports, and OpenAI-compatible servers.

LiteLLM is imported on first use only (its import is slow), with its network lookups
at import switched off: the model-cost map and Anthropic beta headers come from the
copies shipped in the package, so a call never reaches anywhere but the model's host.
Retries are OFF here (``num_retries=0``, ``max_retries=0``): the one retry layer is
``ModelClient``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from typing import Any

from council.accounting.usage import reported_usage
from council.errors import ProviderError
from council.providers.base import ChatRequest, ChatResponse, error_name, retryable_status

# LiteLLM wraps a provider's message in its own and the SDK's class names
# ("litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached",
# "litellm.Timeout: Timeout Error: OpenAIException - ..."); one name is kept, in front, so the
# user reads the provider's words at once.
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+:\s*(?:\w+Error:\s*|Timeout Error:\s*)?(?:\w+(?:Exception|Error)\s+-\s+)?")
_litellm: Any = None


def import_litellm() -> Any:
    """Import and configure LiteLLM once, offline-safe and quiet."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
        os.environ.setdefault("LITELLM_LOG", "WARNING")
        import litellm

        # LiteLLM builds the request coroutine in a worker thread; a call cancelled in that
        # window (deadline, Ctrl-C) leaves it unawaited, and the warning would land on the
        # user's terminal after the one-line error.
        warnings.filterwarnings(
            "ignore", message=r"coroutine '\w+\.acompletion' was never awaited", category=RuntimeWarning
        )
        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True  # a provider that lacks e.g. `seed` ignores it instead of failing
        _litellm = litellm
    return _litellm


def _uses_openai_protocol(model: str, api_base: str | None) -> bool:
    return model.startswith(("openai/", "hosted_vllm/", "lm_studio/", "llamafile/")) and api_base is not None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and all(seen is not e for e in chain):
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


#: The HTTP libraries' errors for a connection that was never made: nothing was sent.
_NOT_CONNECTED = frozenset({"ConnectError", "ConnectTimeout", "ClientConnectorError"})


def _connection_failure(exc: BaseException) -> tuple[str, bool] | None:
    """The transport's own words when the call failed on its connection, and whether it was never
    sent (no connection was made). LiteLLM reports a refused connection as an
    InternalServerError with status 500; the chain says what it was."""
    words = None
    connection = unsent = False
    for seen in _chain(exc):
        module = type(seen).__module__.split(".")[0]
        connection = connection or type(seen).__name__ in ("APIConnectionError", "ConnectError", "ConnectTimeout")
        if module in ("aiohttp", "httpx", "httpcore"):
            unsent = unsent or any(c.__name__ in _NOT_CONNECTED for c in type(seen).__mro__)
            if str(seen):
                words = str(seen)  # the deepest HTTP-library message wins
    return ((words or "Connection error."), unsent) if connection or unsent else None


def _unreadable_reply(exc: BaseException) -> bool:
    """Whether the provider's reply came but LiteLLM could not read it (a usage block that does not
    validate: "Invalid response object"), which it reports as an InternalServerError with status
    500. The call may have been billed: it is no HTTP error."""
    return any(type(e).__name__ == "ValidationError" and type(e).__module__.startswith("pydantic") for e in _chain(exc))


def _usage(usage: Any) -> tuple[int, int, bool]:
    """LiteLLM's usage object, read as every backend reads a usage block (council.accounting.usage.reported_usage)."""
    if usage is None or isinstance(usage, dict):
        return reported_usage(usage)
    return reported_usage({key: getattr(usage, key, None) for key in ("prompt_tokens", "completion_tokens")})


def provider_error(exc: BaseException, model: str) -> ProviderError:
    """Keep the provider's own message and status; decide whether a retry can help. The name
    comes from the status (``base.error_name``), as on the native transport: LiteLLM's own
    class names depend on the wording of the error."""
    connection = _connection_failure(exc)
    if connection is not None:
        words, unsent = connection
        message = " ".join(words.split())[:500]
        return ProviderError(f"APIConnectionError: {message}", model=model, retryable=True, unsent=unsent)
    if _unreadable_reply(exc):
        return ProviderError("APIError: the reply could not be read (Invalid response object)", model=model)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    name = error_name(status) if status is not None else type(exc).__name__
    message = getattr(exc, "message", None) or str(exc) or name
    message = " ".join(_LITELLM_PREFIX.sub("", str(message), count=1).split())[:500] or name
    retryable = retryable_status(status) or name in {
        "Timeout", "APIConnectionError", "ServiceUnavailableError", "InternalServerError", "RateLimitError"
    }
    return ProviderError(f"{name}: {message}", model=model, status_code=status, retryable=retryable)


class LiteLLMAPI:
    """One model reached through ``litellm.acompletion``."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        input_cost_per_token: float | None = None,
        output_cost_per_token: float | None = None,
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.input_cost_per_token = input_cost_per_token
        self.output_cost_per_token = output_cost_per_token

    def _response_format(self, request: ChatRequest, litellm: Any) -> dict[str, Any] | None:
        if request.json_schema is None and not request.json_mode:
            return None
        native = _uses_openai_protocol(self.model, self.api_base)
        if not native:
            try:
                native = bool(litellm.supports_response_schema(model=self.model))
            except Exception:  # unknown model: fall back to prompt + parse
                native = False
        if not native:
            return None  # the prompt carries the schema; the reply is parsed and validated
        if request.json_schema is None:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema_name or "reply",
                "schema": dict(request.json_schema),  # a copy of its own: LiteLLM may change what it is given
                "strict": False,  # strict mode rejects keywords we rely on (uniqueItems, minLength)
            },
        }

    def prepare(self) -> None:
        """Import LiteLLM now, before ``ModelClient`` starts a call's deadline."""
        import_litellm()

    async def generate(self, request: ChatRequest) -> ChatResponse:
        litellm = import_litellm()
        try:
            response = await litellm.acompletion(**self._kwargs(request, litellm))
        except Exception as exc:
            raise provider_error(exc, self.model) from exc
        if not getattr(response, "choices", None):
            # LiteLLM 1.106.2 returns None for an HTTP 422 reply instead of raising.
            raise ProviderError("APIError: LiteLLM returned no reply", model=self.model)
        choice = response.choices[0]
        text = choice.message.content or ""
        prompt_tokens, completion_tokens, trusted = _usage(getattr(response, "usage", None))
        return ChatResponse(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self._cost(response, prompt_tokens, completion_tokens),
            provider_model=getattr(response, "model", None),
            usage_untrusted=not trusted,
        )

    async def stream(self, request: ChatRequest, on_delta: Callable[[str], None]) -> ChatResponse:
        """``acompletion(stream=True)``: each chunk's text to ``on_delta``, usage from the last chunk."""
        litellm = import_litellm()
        kwargs = {**self._kwargs(request, litellm), "stream": True, "stream_options": {"include_usage": True}}
        pieces: list[str] = []
        usage: Any = None
        reported: str | None = None
        try:
            response = await litellm.acompletion(**kwargs)
            async for chunk in response:
                usage = getattr(chunk, "usage", None) or usage
                reported = getattr(chunk, "model", None) or reported
                choices = getattr(chunk, "choices", None)
                text = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
                if isinstance(text, str) and text:
                    pieces.append(text)
                    on_delta(text)
        except Exception as exc:
            raise provider_error(exc, self.model) from exc
        prompt_tokens, completion_tokens, trusted = _usage(usage)
        return ChatResponse(
            text="".join(pieces),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self._stream_cost(litellm, prompt_tokens, completion_tokens),
            provider_model=reported if isinstance(reported, str) else None,
            usage_untrusted=not trusted,
        )

    def _stream_cost(self, litellm: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        # A stream has no response_cost: configured prices, else LiteLLM's price map; None if unknown.
        if self.input_cost_per_token is not None or self.output_cost_per_token is not None:
            return self._cost(None, prompt_tokens, completion_tokens)
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        except Exception:  # an unknown model has no price, never a guess
            return None
        return float(prompt_cost) + float(completion_cost)

    def _kwargs(self, request: ChatRequest, litellm: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        elif _uses_openai_protocol(self.model, self.api_base):
            kwargs["api_key"] = "unused"  # local OpenAI-compatible servers need no key, the SDK wants one
        for name in ("max_tokens", "temperature", "seed"):
            value = getattr(request, name)
            if value is not None:
                kwargs[name] = value
        response_format = self._response_format(request, litellm)
        if response_format is not None:
            kwargs["response_format"] = response_format
        return kwargs

    def _cost(self, response: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.input_cost_per_token is not None or self.output_cost_per_token is not None:
            return prompt_tokens * (self.input_cost_per_token or 0.0) + completion_tokens * (
                self.output_cost_per_token or 0.0
            )
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        return float(cost) if cost is not None else None  # unknown price: None, never a guess

    async def aclose(self) -> None:
        if _litellm is None:
            return
        try:
            from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

            await close_litellm_async_clients()
        except Exception:  # cleanup is best effort; it must not mask the session's outcome
            pass

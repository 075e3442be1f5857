"""The in-process fake provider: ``fake/NAME[+behaviour...]`` models, no network.

:class:`FakeAPI` answers from a script when it is given one (a reply, an exception to raise, or
a function of the request), like inspect_ai's ``mockllm``, and otherwise from the council's
deterministic replies (:class:`council.testing.replies.FakeResponder`; the ``+behaviour``
suffixes are listed there); ``stream`` hands a reply over a word at a time.
``scripts/mock_llm_server.py`` serves the same replies over HTTP.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable

from council.providers.base import ChatRequest, ChatResponse
from council.providers.prices import Price
from council.testing.replies import (
    FakeResponder,
    count_tokens,
    cutoff_error,
    parse_model_name,
    prompt_tokens,
    stream_pieces,
    truncate_to_tokens,
)

ScriptItem = str | BaseException | type[BaseException] | Callable[[ChatRequest], str]


class FakeScriptExhausted(RuntimeError):
    """A strict ``FakeAPI`` was called more often than its script allows (a test bug)."""


class FakeAPI:
    """``fake/NAME[+behaviour...]``: replies from ``FakeResponder``, or from a script.

    ``script`` items are used in order, before the responder: a string is the reply, an
    exception is raised, a callable gets the ``ChatRequest`` and returns the reply. When the
    script runs out the responder answers, unless ``strict`` (then ``FakeScriptExhausted``).
    Every request is kept in ``history``. No network.
    """

    def __init__(
        self,
        model_name: str,
        *,
        script: Iterable[ScriptItem] | None = None,
        strict: bool = False,
        responder: FakeResponder | None = None,
        latency: float = 0.0,
        slow_seconds: float = 0.5,
        price: Price | None = None,
    ) -> None:
        """``price``: configured per-token prices to bill at (a fake model is free otherwise)."""
        self.model = model_name
        self.price = price
        self.name, self.behaviours = parse_model_name(model_name)
        self.strict = strict
        self.responder = responder or FakeResponder()
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.history: list[ChatRequest] = []
        self._script: deque[ScriptItem] = deque(script or ())
        self._scripted = 0

    def enqueue(self, *outputs: ScriptItem) -> None:
        self._script.extend(outputs)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        response = await self._reply(request)
        if "cutoff" in self.behaviours:
            raise cutoff_error(self.model)
        return response

    async def stream(self, request: ChatRequest, on_delta: Callable[[str], None]) -> ChatResponse:
        """The reply in word-sized pieces (``+slow`` spreads ``slow_seconds`` over them)."""
        slow = "slow" in self.behaviours
        response = await self._reply(request, slow=False)  # the wait goes between the pieces
        pieces = stream_pieces(response.text)
        if "cutoff" in self.behaviours:
            pieces = pieces[: len(pieces) // 2]
        for piece in pieces:
            await asyncio.sleep(self.slow_seconds / max(len(pieces), 1) if slow else 0)
            on_delta(piece)
        if "cutoff" in self.behaviours:
            raise cutoff_error(self.model)
        return response

    async def _reply(self, request: ChatRequest, *, slow: bool = True) -> ChatResponse:
        self.history.append(request)
        delay = self.latency + (self.slow_seconds if slow and "slow" in self.behaviours else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        text = self._next_scripted(request)
        if text is None:
            text = self.responder.reply(
                self.model,
                request.messages,
                json_schema=request.json_schema,
                schema_name=request.schema_name,
                seed=request.seed,
                json_mode=request.json_mode,
            )
        text, _ = truncate_to_tokens(text, request.max_tokens)
        used_in, used_out = prompt_tokens(request.messages), count_tokens(text)
        return ChatResponse(
            text=text,
            prompt_tokens=used_in,
            completion_tokens=used_out,
            cost_usd=0.0 if self.price is None else self.price.cost(used_in, used_out),
            provider_model=self.model,
        )

    def _next_scripted(self, request: ChatRequest) -> str | None:
        if not self._script:
            if self.strict:
                raise FakeScriptExhausted(
                    f"{self.model}: the script is exhausted after {self._scripted} scripted replies (strict=True)"
                )
            return None
        item = self._script.popleft()
        self._scripted += 1
        if isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        return item(request) if callable(item) else item

    async def aclose(self) -> None:
        return None

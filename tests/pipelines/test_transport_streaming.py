"""Streaming a reply as it is written, on every transport: the native one (aiohttp, SSE), LiteLLM,
the in-process fake and the mock server; a reply that breaks off midway is never retried."""

from __future__ import annotations

import time

import pytest
from mock_server import start_mock_server

from council.config.endpoints import native_endpoint
from council.errors import ProviderError
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.providers.fake import FakeAPI
from council.providers.openai_compatible import OpenAICompatibleAPI

MESSAGES = [{"role": "system", "content": "You are the chairman."}, {"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(stream_interval=0.02) as server:
        yield server


def native(model: str, base: str) -> OpenAICompatibleAPI:
    return OpenAICompatibleAPI(model, native_endpoint(model, base))


async def test_native_stream_hands_over_pieces_as_they_arrive_and_equals_the_whole_reply(mock):
    api = native("openai/mock-alpha", mock.base_url)
    whole = await api.generate(ChatRequest(messages=MESSAGES, seed=1))
    arrivals: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    streamed = await api.stream(
        ChatRequest(messages=MESSAGES, seed=1), lambda p: arrivals.append((time.perf_counter() - t0, p))
    )
    await api.aclose()
    assert len(arrivals) > 5
    assert "".join(p for _, p in arrivals) == streamed.text == whole.text
    assert streamed.prompt_tokens > 0 and streamed.completion_tokens > 0  # include_usage was asked for
    # The first piece came well before the last (0.02 s between chunks): streamed, not buffered.
    assert arrivals[-1][0] - arrivals[0][0] > 0.02 * (len(arrivals) - 2) * 0.8


async def test_native_stream_cut_off_midway_raises_after_the_first_half(mock):
    api = native("openai/mock-alpha+cutoff", mock.base_url)
    pieces: list[str] = []
    with pytest.raises(ProviderError, match="broke off"):
        await api.stream(ChatRequest(messages=MESSAGES), pieces.append)
    await api.aclose()
    assert pieces  # half the reply arrived first


async def test_litellm_streams_against_the_mock(mock):
    from council.providers.litellm_api import LiteLLMAPI

    api = LiteLLMAPI("openai/mock-beta", api_base=mock.base_url)
    pieces: list[str] = []
    streamed = await api.stream(ChatRequest(messages=MESSAGES, seed=2), pieces.append)
    whole = await api.generate(ChatRequest(messages=MESSAGES, seed=2))
    await api.aclose()
    assert len(pieces) > 5 and "".join(pieces) == streamed.text == whole.text


async def test_fake_stream_equals_generate_and_cutoff_stops_halfway():
    request = ChatRequest(messages=MESSAGES, seed=3)
    whole = await FakeAPI("fake/chair").generate(request)
    pieces: list[str] = []
    streamed = await FakeAPI("fake/chair").stream(request, pieces.append)
    assert len(pieces) > 5 and "".join(pieces) == streamed.text == whole.text
    cut: list[str] = []
    with pytest.raises(ProviderError):
        await FakeAPI("fake/chair+cutoff").stream(request, cut.append)
    assert 0 < len(cut) < len(pieces)
    with pytest.raises(ProviderError):
        await FakeAPI("fake/chair+cutoff").generate(request)


def _client(model: str, retries: int = 2) -> ModelClient:
    from council import Council

    config = {"models": {"m": {"model": model, "retries": retries}}, "councils": {"default": {"members": ["m"]}}}
    return Council.from_config(config, store=False).clients["m"]


async def test_client_does_not_retry_a_reply_that_broke_off_after_pieces_were_shown():
    client = _client("fake/chair+cutoff")
    pieces: list[str] = []
    with pytest.raises(ProviderError, match="after part of the reply") as caught:
        await client.complete(ChatRequest(messages=MESSAGES), stage="synthesis", on_delta=pieces.append)
    assert not caught.value.retryable
    assert len(client.api.history) == 1  # one attempt, not three
    # Without a listener the same failure is retried as any 500.
    quiet = _client("fake/chair+cutoff")
    with pytest.raises(ProviderError):
        await quiet.complete(ChatRequest(messages=MESSAGES), stage="synthesis")
    assert len(quiet.api.history) == 3


async def test_a_backend_that_cannot_stream_hands_over_the_whole_text_once():
    client = _client("fake/chair")

    class Plain:
        def __init__(self, api):
            self.api = api

        async def generate(self, request):
            return await self.api.generate(request)

        async def aclose(self):
            return None

    client.api = Plain(client.api)
    pieces: list[str] = []
    response = await client.complete(ChatRequest(messages=MESSAGES), stage="synthesis", on_delta=pieces.append)
    assert pieces == [response.text]


async def test_a_streamed_reply_is_capped_as_a_whole_one_is(mock, monkeypatch):
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", "1500")
    api = native("openai/mock-alpha", mock.base_url)
    pieces: list[str] = []
    with pytest.raises(ProviderError, match="larger than 1500 bytes") as caught:
        await api.stream(ChatRequest(messages=MESSAGES), pieces.append)
    await api.aclose()
    assert not caught.value.retryable and pieces  # stopped partway, not read to the end


class _OneEventServer:
    """A real HTTP server on 127.0.0.1 that streams a whole reply as one SSE event (as a proxy
    that buffers a stream may), of ``size`` characters, or that many bytes with no line end."""

    def __init__(self, size: int, line_end: bool = True) -> None:
        self.size, self.line_end = size, line_end

    async def __aenter__(self) -> str:
        import json

        from aiohttp import web

        async def handler(request: web.Request) -> web.StreamResponse:
            reply = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await reply.prepare(request)
            chunk = {"choices": [{"index": 0, "delta": {"content": "x" * self.size}}]}
            line = b"data: " + json.dumps(chunk).encode()
            for start in range(0, len(line), 65536):  # as a network delivers it: in blocks
                await reply.write(line[start : start + 65536])
            if self.line_end:
                await reply.write(b"\n\ndata: [DONE]\n\n")
            return reply

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def test_a_whole_reply_streamed_as_one_event_longer_than_aiohttps_line_limit_is_read():
    # aiohttp's line reader refuses a line over 512 KiB (LineTooLong, not a provider error): a
    # chairman's answer sent as one event that long failed the whole session instead of being read.
    async with _OneEventServer(700_000) as base:
        api = native("openai/m", base)
        pieces: list[str] = []
        reply = await api.stream(ChatRequest(messages=MESSAGES), pieces.append)
        await api.aclose()
    assert reply.text == "x" * 700_000 and pieces == [reply.text]


async def test_an_endless_line_is_refused_at_the_reply_cap(monkeypatch):
    monkeypatch.setenv("COUNCIL_MAX_REPLY_BYTES", "300000")
    async with _OneEventServer(2_000_000, line_end=False) as base:
        api = native("openai/m", base)
        with pytest.raises(ProviderError, match="larger than 300000 bytes"):
            await api.stream(ChatRequest(messages=MESSAGES), lambda piece: None)
        await api.aclose()

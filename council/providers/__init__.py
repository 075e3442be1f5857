"""Model backends behind one contract (see ``base``); heavy SDKs are imported lazily."""

from council.providers.base import ChatRequest, ChatResponse, ModelAPI

__all__ = ["ChatRequest", "ChatResponse", "ModelAPI"]

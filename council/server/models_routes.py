"""``GET /v1/models`` and ``GET /v1/models/{id}``: each council served is a model."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from council.server.errors import openai_error
from council.server.state import server_of


def _model_object(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "council"}


async def list_models(request: Request) -> Response:
    server = server_of(request)
    config = server.loaded.config
    data = [_model_object(name, server.started) for name in sorted(config.councils)]
    # One field beyond OpenAI's list: the council a client should offer first (the web app's picker).
    default = config.defaults.council if config.defaults.council in config.councils else None
    return JSONResponse({"object": "list", "data": data, "default_council": default})


async def get_model(request: Request) -> Response:
    server = server_of(request)
    name = request.path_params["model_id"]
    if name not in server.loaded.config.councils:
        message = f"The model {name[:200]!r} does not exist"
        return openai_error(404, message, "invalid_request_error", "model_not_found", param="model")
    return JSONResponse(_model_object(name, server.started))

"""The web app at ``GET /``: three static files shipped in the package (``council/web``), no build
step, no CDN. Each is sent with a strict Content-Security-Policy (scripts and styles from this
origin only, no inline script, API calls to this origin only), so model text that reaches the
page can never run; the app inserts every text with ``textContent`` besides. The files need no
token (they hold no data): the app sends the bearer token with each API call."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}
_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}


def _page(path: str) -> Route:
    name, media_type = _FILES[path]
    body = (files("council") / "web" / name).read_bytes()  # read once, at startup

    async def serve(request: Request) -> Response:
        return Response(body, media_type=media_type, headers=SECURITY_HEADERS)

    return Route(path, serve, methods=["GET", "HEAD"])


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204, headers=SECURITY_HEADERS)


def web_routes() -> list[Route]:
    return [*(_page(path) for path in _FILES), Route("/favicon.ico", _no_icon, methods=["GET", "HEAD"])]

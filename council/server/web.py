"""The web app at ``GET /``: static files shipped in the package (``council/web``, with the
markdown renderer and sanitiser vendored in ``council/web/vendor``), no build step, no CDN. Each
is sent with a strict Content-Security-Policy (scripts and styles from this origin only, no
inline script, API calls to this origin only), so model text that reaches the page can never
run; the app inserts text as text and a model's markdown only as sanitised nodes besides.
``/static/report.css`` is the CLI's HTML reports' style sheet (``PAGE_CSS``), scoped to the
app's report views, which show the very HTML those reports hold. The files need no token (they
hold no data): the app sends the bearer token with each API call."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from council._util.html_parts import PAGE_CSS

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
_JS = "text/javascript; charset=utf-8"
_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", _JS),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
    "/static/vendor/marked.umd.js": ("vendor/marked.umd.js", _JS),
    "/static/vendor/purify.min.js": ("vendor/purify.min.js", _JS),
}
# The reports' own rules apply inside the app's report views only (the app styles the rest).
REPORT_CSS = f"@scope (.report) {{{PAGE_CSS}}}\n"


def _page(path: str) -> Route:
    name, media_type = _FILES[path]
    body = (files("council") / "web").joinpath(*name.split("/")).read_bytes()  # read once, at startup
    return _static(path, body, media_type)


def _static(path: str, body: bytes, media_type: str) -> Route:
    async def serve(request: Request) -> Response:
        return Response(body, media_type=media_type, headers=SECURITY_HEADERS)

    return Route(path, serve, methods=["GET", "HEAD"])


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204, headers=SECURITY_HEADERS)


def web_routes() -> list[Route]:
    return [
        *(_page(path) for path in _FILES),
        _static("/static/report.css", REPORT_CSS.encode(), "text/css; charset=utf-8"),
        Route("/favicon.ico", _no_icon, methods=["GET", "HEAD"]),
    ]

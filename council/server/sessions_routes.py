"""Stored sessions, and the bias report and leaderboard over them; stored batches' summaries."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from council._util.background import asking_store
from council.api import DEFAULT_BOOTSTRAP, MAX_BOOTSTRAP, stored_result
from council.errors import CouncilError, InputError, NotFoundError
from council.server.errors import error_for, openai_error
from council.server.protocol import session_headers
from council.server.state import server_of
from council.server.web import SECURITY_HEADERS
from council.untrusted.inputs import MAX_SEED, whole_number


async def get_session(request: Request) -> Response:
    try:
        store = server_of(request).store
        row = await asking_store(store, store.get_session, request.path_params["session_id"])
    except NotFoundError as exc:
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    result = stored_result(row)  # with the error of a session that stopped early
    headers = session_headers(row["id"], row["status"])
    if result is not None:
        return JSONResponse(result, headers=headers)
    keys = {"session_id": "id", "status": "status", "error": "error", "created_at": "created_at"}
    return JSONResponse({key: row[column] for key, column in keys.items()}, headers=headers)


async def get_bias_report(request: Request) -> Response:
    from council.api import DEFAULT_MAX_POINTS, bias_report

    q = request.query_params
    try:
        as_html = _wants_html(request)
        store = server_of(request).store
        report = await asking_store(
            store,
            bias_report,
            store,
            since=q.get("since"),
            reviewers=q.getlist("reviewer"),
            council=q.get("council"),
            max_points=DEFAULT_MAX_POINTS if as_html else 0,  # the scatter's points: the page's only
        )
    except CouncilError as exc:
        return error_for(exc)
    if as_html:
        from council.api import render_bias_report_html

        return _html(render_bias_report_html(report, fragment=True))
    # As ``council bias-report --json`` writes it: the scatter points belong to the HTML page only.
    return JSONResponse(json.loads(report.model_dump_json(exclude={"length_points"})))


async def get_leaderboard(request: Request) -> Response:
    """The same JSON as ``council leaderboard --json`` (same query names as its options)."""
    from council.api import leaderboard

    q = request.query_params
    try:
        from council.api import parse_control

        as_html = _wants_html(request)
        numbers = {
            "bootstrap": whole_number(q.get("bootstrap", str(DEFAULT_BOOTSTRAP)), "bootstrap", 0, MAX_BOOTSTRAP),
            "seed": whole_number(q.get("seed", "0"), "seed", 0, MAX_SEED),
        }
        store = server_of(request).store
        board = await asking_store(
            store,
            leaderboard,
            store,
            council=q.get("council"),
            since=q.get("since"),
            source=q.get("source", "all"),
            baseline=q.get("baseline"),
            control=parse_control(q.get("control")),
            **numbers,
        )
    except CouncilError as exc:
        return error_for(exc)
    if as_html:
        from council.api import render_leaderboard_html

        return _html(render_leaderboard_html(board, fragment=True))
    return JSONResponse(json.loads(board.model_dump_json()))


def _wants_html(request: Request) -> bool:
    """``?format=html``: the body of the CLI's ``--html`` page (what the web app shows), not JSON."""
    kind = request.query_params.get("format", "json")
    if kind not in ("json", "html"):
        raise InputError(f"format must be json or html, got {kind[:40]!r}")
    return kind == "html"


def _html(fragment: str) -> Response:
    return HTMLResponse(fragment, headers=SECURITY_HEADERS)


async def get_batch(request: Request) -> Response:
    """A stored batch's summary as it is now: the same JSON as ``council batch results ID
    --summary --json`` (with two or more judges its ``panel``, with labels its ``calibration``;
    ``?calibration=NAME`` applies a stored calibration map)."""
    from council.api import batch_summary

    try:
        store = server_of(request).store
        summary = await asking_store(store, batch_summary, request.path_params["batch_id"],
                                     calibration=request.query_params.get("calibration"), store=store)  # fmt: skip
    except NotFoundError as exc:
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    except CouncilError as exc:
        return error_for(exc)
    return JSONResponse(json.loads(summary.model_dump_json()))

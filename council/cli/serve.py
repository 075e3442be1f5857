"""``council serve``: the OpenAI-compatible HTTP server."""

from __future__ import annotations

import functools
import gc
import os
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from council.cli.common import WholeNumber, log_format_option, metrics_address_option
from council.errors import UsageError
from council.server import MAX_SESSIONS, READ_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from council.api import ResolvedCouncil


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Council TOML file (default as for `council run`).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback needs --token.")
@click.option("--port", default=8000, show_default=True, type=WholeNumber(0, 65535),
              help="Port to listen on; 0 picks a free one (the address is printed).")
@click.option("--token", envvar="COUNCIL_SERVER_TOKEN",
              help="Require 'Authorization: Bearer TOKEN' (env COUNCIL_SERVER_TOKEN).")
@click.option("--max-body-bytes", default=1_000_000, show_default=True, type=WholeNumber(1024),
              help="Largest request body accepted (larger: 413).")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="URL",
              help="Let browser pages from this origin call the server, e.g. http://localhost:3000 "
              "(repeatable; none by default).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Also answer requests whose Host header names NAME, e.g. behind a proxy (repeatable; "
              "localhost and the bound address always).")
@click.option("--max-sessions", default=MAX_SESSIONS, show_default=True, type=WholeNumber(1, 1_000_000), metavar="N",
              help="Sessions one server process runs at once (chat completions and POST /v1/sessions alike); "
              "past it, 429 with retry-after.")
@click.option("--read-timeout", default=READ_TIMEOUT_SECONDS, show_default=True, type=WholeNumber(1, 3600),
              metavar="SECONDS", help="Close a connection whose request (headers and body) has not arrived whole "
              "this many seconds after it began: slow clients cannot hold connections. Responses and streams are "
              "not limited.")
@click.option("--workers", default=1, show_default=True, type=WholeNumber(1, 64),
              help="Server processes sharing the port and the store (uvicorn's workers): one per core "
              "serves more sessions at once.")
@log_format_option
@metrics_address_option("apart from the API (one server process: not with --workers)")
def serve(
    config_path: str | None,
    host: str,
    port: int,
    token: str | None,
    max_body_bytes: int,
    cors_origins: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_sessions: int,
    read_timeout: int,
    workers: int,
    log_format: str,
    metrics_address: tuple[str, int] | None,
) -> None:
    """Serve councils as OpenAI-compatible chat models (model = council name), and the web app at /."""
    from council.api import check_store_opens, load_config, served_councils
    from council.server import check_allowed_host, check_cors_origin, is_loopback

    if token is not None and (not token.strip() or token != token.strip()):
        # An empty token would turn authentication off; one with spaces around it can never match.
        raise UsageError("--token is empty or starts or ends with whitespace: give the exact token")
    if not is_loopback(host) and not token:
        raise UsageError(f"refusing to bind {host} without --token: anything but loopback needs a bearer token")
    if metrics_address is not None and workers > 1:
        raise UsageError("--metrics-address needs --workers 1: each process counts apart (scrape /metrics instead)")
    origins = [check_cors_origin(origin) for origin in cors_origins]
    hosts = [check_allowed_host(name) for name in allowed_hosts]
    loaded = load_config(config_path)
    councils = served_councils(loaded)  # a council that cannot serve fails now, not on a request
    # A store that cannot be opened (unreachable, refused, read-only) is one line now, not a
    # traceback from every server process's start-up; its migrations run once, here.
    check_store_opens()
    import uvicorn

    from council.server import ServeConfig

    options = WorkerOptions(
        config_path=os.path.abspath(config_path) if config_path else None,
        token=token,
        max_body_bytes=max_body_bytes,
        cors_origins=tuple(origins),
        host=host,
        allowed_hosts=tuple(hosts),
        max_sessions=max_sessions,
        debug=bool((click.get_current_context().find_root().obj or {}).get("debug")),
        log_format=log_format,
    )
    from council._util.ops_log import configure_ops_log

    configure_ops_log(log_format)
    if workers == 1:
        app: Any = _app(loaded, councils, options)
    else:
        # Each worker process builds its own app from these options (uvicorn pickles the
        # factory to the processes it spawns): its own store connection, clients and lease.
        app = functools.partial(worker_app, options)
    sock = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    listening = f"http://{shown}:{sock.getsockname()[1]}/v1"
    from council.untrusted.terminal import visible

    councils_served = ", ".join(sorted(loaded.config.councils))
    web = listening.removesuffix("v1")
    processes = f"  processes: {workers}" if workers > 1 else ""
    stop_metrics = None
    if metrics_address is not None:
        from council.server import serve_metrics

        try:
            metrics_url, stop_metrics = serve_metrics(app.state.council_metrics, *metrics_address)
        except OSError as exc:
            sock.close()
            where = "{}:{}".format(*metrics_address)
            raise UsageError(f"cannot serve metrics on {where}: {exc.strerror or exc}") from None
        processes += f"  metrics: {metrics_url}"
    click.echo(visible(f"council serve: {listening}  councils: {councils_served}  web app: {web}{processes}"), err=True)
    config = ServeConfig(app, read_timeout=read_timeout, log_level="warning", access_log=False, workers=workers,
                         factory=workers > 1)  # fmt: skip
    if workers == 1:
        server = uvicorn.Server(config)
        # uvicorn shuts down gracefully on SIGTERM, then raises it again to the handler it found
        # (the CLI's, which would make it a Ctrl-C: exit 130, or a traceback where SIGINT is
        # ignored). A requested stop is a clean exit (0, as uvicorn's own), and a SIGTERM that
        # comes before uvicorn listens for it stops the server as soon as it has started.
        signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
        try:
            server.run(sockets=[sock])
        finally:
            if stop_metrics is not None:
                stop_metrics()
        return
    from uvicorn.supervisors import Multiprocess

    # uvicorn's supervisor: the processes accept on the one socket bound here, a process that
    # dies is replaced, SIGINT/SIGTERM stop them all (each ends its sessions cleanly).
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    if any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes):
        from council.errors import EnvironmentFailure

        raise EnvironmentFailure("a server process could not start (its error is above)")


# uvicorn's exit code for a worker that failed before serving.
STARTUP_FAILURE = 3


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker process needs to build the same app as a single-process server."""

    config_path: str | None
    token: str | None
    max_body_bytes: int
    cors_origins: tuple[str, ...]
    host: str
    allowed_hosts: tuple[str, ...]
    max_sessions: int
    debug: bool
    log_format: str = "json"


def worker_app(options: WorkerOptions) -> Any:
    """The app of one worker process (``--workers N``): the CLI's logging, the config, the
    warm-up, then :func:`create_app` as one process would call it."""
    from council._util import tracing
    from council._util.logs import configure_logging
    from council._util.ops_log import configure_ops_log
    from council.api import load_config, resolve_council

    configure_logging(debug=options.debug)
    configure_ops_log(options.log_format)
    tracing.start()  # only if the OTEL_* variables ask for traces
    loaded = load_config(options.config_path)
    return _app(loaded, [resolve_council(loaded, name) for name in loaded.config.councils], options)


def _app(loaded: Any, councils: Sequence[ResolvedCouncil], options: WorkerOptions) -> Any:
    """The warm-up, then the app: the same in the one process and in each worker process."""
    from council.server import create_app

    _warm_up(councils)
    return create_app(
        loaded,
        token=options.token,
        max_body_bytes=options.max_body_bytes,
        cors_origins=options.cors_origins,
        host=options.host,
        allowed_hosts=options.allowed_hosts,
        max_sessions=options.max_sessions,
    )


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, so the address printed (port 0: the one the system picked) already accepts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _warm_up(councils: Sequence[ResolvedCouncil]) -> None:
    """Import LiteLLM before listening (only if a council uses it), then move the start-up heap
    out of the collector's way.

    Imported lazily, LiteLLM's long import would land on the first chat request; models on the
    native transport or offline need none of it. LiteLLM's many long-lived objects also make every
    full garbage collection stop the event loop for a long pause, which every request in flight
    waits out; ``gc.freeze()`` leaves the start-up heap out of later collections (it lives as long
    as the process anyway).
    """
    from council.api import load_model_libraries

    load_model_libraries(councils)
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLD)


# Short pauses while serving (Python's default young generations), but a full collection after
# 1,000 of the middle generation's instead of 10: with many sessions running, their objects live
# long enough to reach the old generation, and each full pass scanned them all again, a large
# share of a busy server's CPU.
SERVE_GC_THRESHOLD = (700, 10, 1000)

"""What every command shares: ``--debug`` and ``--quiet`` (before or after the subcommand),
the ``-o/--output FILE`` option and the one way its file is written, and the one switch that
decides whether status lines print.

``tests/cli/test_cli_conventions.py`` walks the command tree and holds every command to these.
"""

from __future__ import annotations

from typing import Any

import click

from council._util.outputs import open_output

DEBUG_HELP = "Show full tracebacks and debug logs."
QUIET_HELP = "No progress or status lines on stderr (results, warnings and errors still print)."


def _root_obj(ctx: click.Context) -> dict[str, Any]:
    root = ctx.find_root()
    root.ensure_object(dict)
    return root.obj  # type: ignore[no-any-return]


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not _root_obj(ctx).get("debug"):
        _root_obj(ctx)["debug"] = True
        from council._util.logs import configure_logging

        configure_logging(debug=True)


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        _root_obj(ctx)["quiet"] = True


def _shared_options() -> list[click.Option]:
    return [
        click.Option(
            ["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_set_debug, help=DEBUG_HELP
        ),
        click.Option(
            ["--quiet", "-q"], is_flag=True, expose_value=False, is_eager=True, callback=_set_quiet, help=QUIET_HELP
        ),
    ]


def add_shared_options(command: click.Command) -> click.Command:
    """Give ``command`` (and, for a group, each of its commands) ``--debug`` and ``--quiet``."""
    if not any("--debug" in p.opts for p in command.params):
        command.params.extend(_shared_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_shared_options(sub)
    return command


class WholeNumber(click.IntRange):
    """A whole-number option, read as every number a user types (``council.untrusted.inputs.whole_number``):
    ASCII digits only, within the range; anything else is one line and exit 2."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return super().convert(value, param, ctx)  # a default
        from council.untrusted.inputs import whole_number

        name = max(param.opts, key=len) if param is not None else "the value"
        hi = self.max if self.max is not None else 10**18
        return whole_number(value, name, self.min if self.min is not None else 0, hi)


def output_option(help: str, *, allow_dash: bool = True) -> Any:
    """``-o/--output FILE``: the file a command writes (``allow_dash``: '-' means stdout)."""
    return click.option(
        "--output",
        "-o",
        "output",
        type=click.Path(dir_okay=False, allow_dash=allow_dash),
        metavar="FILE",
        help=help,
    )


def quiet() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and _root_obj(ctx).get("quiet"))


def status(message: str) -> None:
    """A status line on stderr ("wrote FILE", "exported 3 sessions"), unless ``--quiet``."""
    if not quiet():
        from council.untrusted.terminal import visible

        click.echo(visible(message), err=True)


def write_output(path: str | None, text: str) -> None:
    """Write ``text`` to ``-o FILE`` (see :func:`open_output`) and say so, or print it."""
    with open_output(path) as fh:
        fh.write(text)
    if path and path != "-":
        status(f"wrote {path}")


MAX_COST_HELP = (
    "Stop before spending more than USD on model calls (each call reserves its worst case first; "
    "default: [budget] max_cost_usd)."
)


def config_and_privacy(config_path: str | None) -> tuple[Any, Any]:
    """The config a command runs under (``--config``, else ``$COUNCIL_CONFIG``, else the default
    file) and its privacy settings (the environment over that file). Every judging command
    resolves both here, so ``council batch`` and ``council worker`` given the same ``--config``
    keep (and hash) the same things."""
    from council.api import load_config, resolve_privacy

    loaded = load_config(config_path)
    return loaded, resolve_privacy(loaded)


def max_cost_option(help: str = MAX_COST_HELP) -> Any:
    """``--max-cost USD``: a hard spend cap (checked by ``council.api.check_cap``)."""
    return click.option("--max-cost", "max_cost", metavar="USD", help=help)


def lease_seconds_option(command: Any) -> Any:
    """``--lease-seconds``: how long a batch item stays held by a worker that stopped renewing
    its claim (council.storage.queue); ``council batch`` and ``council worker`` share it."""
    return click.option(
        "--lease-seconds",
        type=click.FloatRange(1, 3600),
        default=60.0,
        show_default=True,
        help="How long an item claimed by a process that stopped answering (killed, or cut off from the store) "
        "stays held before another takes it, e.g. a --resume of the same batch (a live process renews its claims "
        "every third of this).",
    )(command)


def cache_options(command: Any) -> Any:
    """``--cache`` and ``--refresh``: answer identical requests from the store (or ask again)."""
    command = click.option(
        "--refresh",
        is_flag=True,
        help="With the call cache: ask the models again and replace what is kept (implies --cache).",
    )(command)
    return click.option(
        "--cache",
        "use_cache",
        is_flag=True,
        help="Answer identical requests from the store's call cache (default: [cache] enabled).",
    )(command)


def cache_wanted(use_cache: bool, refresh: bool, loaded: Any) -> bool:
    """Whether the call cache is on: ``--cache``/``--refresh``, else ``[cache] enabled``. With
    transcripts off it cannot keep replies: a ``UsageError``."""
    from council.api import check_can_keep, resolve_privacy

    wanted = use_cache or refresh or loaded.config.cache.enabled
    if wanted:
        check_can_keep(resolve_privacy(loaded).store_transcripts)
    return bool(wanted)


def attach_cache(clients: Any, store: Any, *, refresh: bool) -> None:
    """Put ``clients`` (model clients) on the store's call cache."""
    from council.api import attach_call_cache

    attach_call_cache(clients, store, refresh=refresh)


log_format_option = click.option(
    "--log-format", type=click.Choice(["json", "console"]), default="json", show_default=True,
    help="One line on stdout per request, session and batch item: JSON, or key=value for a terminal. "
    "Never a question, an answer or a secret.",
)  # fmt: skip


class Address(click.ParamType):
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0: any free one) as ``(host, port)``."""

    name = "HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        host, sep, port = str(value).rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            self.fail(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:9464)", param, ctx)
        return host, int(port)


def metrics_address_option(what: str) -> Any:
    return click.option("--metrics-address", type=Address(), default=None, metavar="HOST:PORT",
                        help=f"Also serve Prometheus metrics at http://HOST:PORT/metrics, {what}, without "
                        "a token: bind an address only your scraper reaches.")  # fmt: skip

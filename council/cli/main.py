"""The ``council`` command. Each command: parse → validate → one library call → render.

Startup stays light: command modules import only click and the small pure modules;
LiteLLM and other heavy dependencies are imported on the code path that calls a model.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import click

from council import __version__
from council.cli.common import DEBUG_HELP, QUIET_HELP

# name: (module, attribute, the summary `council --help` lists, so listing imports no command;
# tests/cli/test_cli_startup.py checks each against the command's own help).
_COMMANDS = {
    "run": ("council.cli.run", "run", "Ask the council QUESTION: answers, shuffled peer review, consensus, synthesis."),
    "sessions": ("council.cli.sessions", "sessions", "List and inspect saved sessions."),
    "bias-report": (
        "council.cli.bias_report",
        "bias_report",
        "Reviewer calibration, length bias, position bias and self-preference across sessions.",
    ),
    "leaderboard": (
        "council.cli.leaderboard",
        "leaderboard",
        "Bradley–Terry ratings per model, with bootstrap intervals, from every stored ranking and judged pair "
        "(a tie is half a win).",
    ),
    "export": ("council.cli.export", "export",
               "Export session logs, bias records, judged pairs or batch judgments from the database."),
    "compare": (
        "council.cli.judge",
        "compare",
        "Compare two responses to PROMPT, judging them in both orders (position swap).",
    ),
    "grade": (
        "council.cli.judge",
        "grade",
        "Grade one response against a rubric: reasoning before integer scores, votes per criterion.",
    ),
    "batch": ("council.cli.batch", "batch", "Judge a batch file, or look at a stored batch."),
    "calibrate": (
        "council.cli.batch",
        "calibrate",
        "Fit a monotone (isotonic) map from a labelled batch's verdict probabilities to how often they were right.",
    ),
    "worker": (
        "council.cli.worker",
        "worker",
        "Claim queued batch items from the store and judge them until none are left.",
    ),
    "serve": (
        "council.cli.serve",
        "serve",
        "Serve councils as OpenAI-compatible chat models (model = council name), and the web app at /.",
    ),
    "store": ("council.cli.store", "store", "Move the stored sessions, judgments and bias records between databases."),
    "cache": (
        "council.cli.cache",
        "cache",
        "The call cache: replies kept for identical requests (run, compare, grade, batch --cache).",
    ),
    "mcp": (
        "council.cli.mcp",
        "mcp",
        "Serve the Model Context Protocol over stdio: tools council_run, council_compare, council_grade, "
        "council_leaderboard, council_bias_report and council_sessions.",
    ),
}


class LazyGroup(click.Group):
    """Imports a command's module only when that command (or its help) is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in _COMMANDS if self._available(name)]

    def _available(self, name: str) -> bool:
        import importlib.util

        return importlib.util.find_spec(_COMMANDS[name][0]) is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = _COMMANDS.get(name)
        if target is None or not self._available(name):
            return None
        import importlib

        from council.cli.common import add_shared_options

        return add_shared_options(getattr(importlib.import_module(target[0]), target[1]))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries above (as click would shorten them), importing none."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        # A bare Command shortens the summary exactly as click shortens a real command's help.
        rows = [(name, click.Command(name, help=_COMMANDS[name][2]).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def one_line(message: str) -> str:
    """An error as printed: no secrets, control characters visible, on one line."""
    from council.untrusted.redaction import redact
    from council.untrusted.terminal import visible

    return " ".join(visible(redact(message)).split())


class CouncilGroup(LazyGroup):
    def invoke(self, ctx: click.Context) -> Any:
        from council.errors import CouncilError

        try:
            return super().invoke(ctx)
        except CouncilError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: {one_line(str(exc))}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


@click.group(cls=CouncilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="council")
@click.option("--debug", is_flag=True, envvar="COUNCIL_DEBUG", help=DEBUG_HELP)
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """A multi-model LLM council: answers, shuffled anonymous peer review, consensus by
    rankings, a chairman's synthesis, and privacy-safe bias records.

    With no configuration it runs on a small offline default. Data lives in
    $COUNCIL_HOME (database council.db, optional council.toml). --debug and --quiet
    work before or after the command.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["quiet"] = quiet
    from council._util import tracing
    from council._util.logs import configure_logging

    configure_logging(debug=debug)
    if tracing.start():  # only if the OTEL_* variables ask for traces
        tracing.continue_environment()  # a caller's TRACEPARENT


def _stop_like_ctrl_c(signum: int, frame: Any) -> None:
    # A process manager's stop (SIGTERM: `timeout`, `docker stop`, systemd) gets the same
    # clean shutdown as Ctrl-C, so a running session is recorded as failed ("interrupted")
    # instead of being left "running". asyncio.run's own SIGINT handler cancels the main
    # task; where SIGINT is ignored (background jobs), interrupt directly.
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
        return
    asyncio = sys.modules.get("asyncio")
    try:
        loop = asyncio.get_running_loop() if asyncio else None
    except RuntimeError:
        loop = None
    if loop is None:
        raise KeyboardInterrupt
    # Raised from the loop, not inside whichever task runs now: asyncio.run then cancels
    # the tasks (the session records "interrupted") and re-raises it here.
    loop.call_soon_threadsafe(_raise_keyboard_interrupt)


def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt


# The garbage collector and a short-lived process: start-up creates many long-lived objects
# (modules, classes, validators) and, with the default threshold of 700, the collector scans them
# again and again, a noticeable share of a `council run`; so it runs after every 100k new objects
# instead (memory stays bounded; `council serve` sets its own once started). At exit, the
# interpreter's own final collections would scan them all again; frozen, they are left to the
# operating system, as the process's memory is anyway (objects still go by reference counting).
START_UP_GC_THRESHOLD = (100_000, 10, 10)


def main(*, exit_fast: bool = True) -> None:
    """The ``council`` command. ``exit_fast``: once it is done, end the process without the
    interpreter's teardown (see :func:`_exit_now`); a caller that goes on running passes False."""
    # Exit codes: 0 ok, 1 council/judging failure, 2 bad usage or input (click uses 2 too).
    import gc

    gc.set_threshold(*START_UP_GC_THRESHOLD)
    # Finding pydantic's plugins reads every installed distribution's entry points (a part of
    # each command's start worth saving) for tools that watch an application's own models: the command runs
    # without them unless PYDANTIC_DISABLE_PLUGINS is set (empty: load them all). Used from Python,
    # council leaves pydantic's plugins to the application (docs/operators/configuration.md, its table
    # of environment variables).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        cli(prog_name="council")
    except SystemExit as exc:
        gc.freeze()
        if exit_fast:
            _exit_now(exc.code)
        raise
    except KeyboardInterrupt:  # pragma: no cover - raised outside click's handling
        sys.stderr.write("interrupted\n")
        os._exit(130)
    finally:
        gc.freeze()


def _exit_now(code: object) -> None:
    """End the process as ``sys.exit(code)`` would, minus the interpreter's teardown: freeing
    every module and object one by one is slow at the end of a ``council run``, and the
    operating system frees the process at once. Exit handlers (``atexit``: leases released,
    log files flushed) still run and standard output and error are flushed. Returns (for the
    normal exit) when the code is a message, a profiler or tracer is watching, another non-daemon
    thread still runs, or the output cannot be flushed (a closed pipe: the interpreter reports that as usual)."""
    import atexit
    import threading

    if code is not None and not isinstance(code, int):
        return
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return  # a profiler, debugger or coverage tool finishes its work after the command
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in others):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    status = code or 0
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        status = status or 120  # as the interpreter exits when it cannot flush standard output
    os._exit(status)

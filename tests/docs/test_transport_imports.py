"""Cold start: each command imports only what it uses.

Each command runs as a fresh process (the import cost is the point) on in-process fake
models or a native model on the mock server, then reports which heavy packages ended up in
``sys.modules``. LiteLLM (~2.5 s), pandas and numpy (pulled by sqlite-utils), the OpenAI SDK
and httpx are never needed on these paths; rich only where output is rendered for people.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mock_server import start_mock_server
from slow_import import slowed

ROOT = Path(__file__).resolve().parents[2]
NEVER = {"litellm", "numpy", "pandas", "openai", "httpx", "scipy", "confusable_homoglyphs"}
#: What a command that only prints its help has no use for (validation, the event loop, storage,
#: HTTP, rendering, logging, the lookalike table): each takes 5-100 ms to import.
NOT_FOR_HELP = {
    "pydantic",
    "pydantic_core",
    "asyncio",
    "sqlite3",
    "sqlite_utils",
    "aiohttp",
    "rich",
    "structlog",
    "confusable_homoglyphs",
}
WATCHED = sorted(NEVER | NOT_FOR_HELP)
#: Runs the command in sys.argv as the console script does, without its fast exit (``code``: its status).
RUN_MAIN = """
sys.argv = ["council", *sys.argv[1:]]
from council.cli.main import main
try:
    main(exit_fast=False)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
"""
PROBE = "import json, sys\n" + RUN_MAIN
PROBE += f"""
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({WATCHED!r}))
sys.stderr.write("\\nPROBE " + json.dumps({{"code": code, "loaded": loaded}}) + "\\n")
"""


def run_command(home: Path, *args: str) -> tuple[int, set[str]]:
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("COUNCIL_CONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, cwd=home, capture_output=True, text=True, timeout=120
    )
    line = next((x for x in proc.stderr.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, proc.stderr
    report = json.loads(line.removeprefix("PROBE "))
    assert report["code"] in (0, None), proc.stderr
    return report["code"] or 0, set(report["loaded"])


@pytest.fixture(scope="module")
def mock():
    with start_mock_server() as server:
        yield server


@pytest.fixture
def home(tmp_path, mock):
    models = {n: {"model": f"openai/mock-{n}", "api_base": mock.base_url} for n in ("a", "b", "c")}
    lines = ["[councils.default]", 'members = ["a", "b", "c"]', 'chairman = "a"']
    for name, spec in models.items():
        lines += [f"[models.{name}]", *(f"{k} = {json.dumps(v)}" for k, v in spec.items())]
    (tmp_path / "council.toml").write_text("\n".join(lines) + "\n")
    (tmp_path / "a.txt").write_text("Rayleigh scattering makes the sky blue.")
    (tmp_path / "b.txt").write_text("Because the sea reflects on it.")
    (tmp_path / "pairs.jsonl").write_text(
        json.dumps({"id": "p1", "prompt": "Why is the sky blue?", "a": "Scattering.", "b": "The sea."}) + "\n"
    )
    (tmp_path / "answer.txt").write_text("Rayleigh scattering.")
    return tmp_path


@pytest.mark.parametrize(
    "args, rich",
    [
        (["run", "Why is the sky blue?"], True),
        (["run", "Why is the sky blue?", "--json"], None),
        (["compare", "--prompt", "Why is the sky blue?", "--a", "a.txt", "--b", "b.txt", "--json"], None),
        (["grade", "--prompt", "Why is the sky blue?", "--response", "answer.txt", "--json"], None),
        (["batch", "pairs.jsonl", "--json"], None),
        # A jury without labels: its panel (agreement, Krippendorff's α) needs no numpy either.
        (["batch", "pairs.jsonl", "--judge", "a", "--judge", "b", "--json"], None),
    ],
    ids=["run", "run-json", "compare", "grade", "batch", "batch-jury"],
)
def test_model_commands_on_the_native_transport_import_no_sdk(home, args, rich):
    _, loaded = run_command(home, *args)
    assert not loaded & NEVER, f"imported {sorted(loaded & NEVER)}"
    assert {"aiohttp", "sqlite_utils"} <= loaded
    if rich:
        assert "rich" in loaded  # the rendered result


#: Records the thread that first imports numpy, then runs a command.
MAIN_THREAD_PROBE = """
import json, sys, threading
first = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not first:
            first.append(threading.current_thread() is threading.main_thread())
        return None
sys.meta_path.insert(0, Watch())
"""
MAIN_THREAD_PROBE += RUN_MAIN
MAIN_THREAD_PROBE += """
sys.stderr.write("\\nPROBE " + json.dumps({"numpy_on_main_thread": first[0] if first else None}) + "\\n")
"""


def run_five_members(
    home: Path, base_url: str, probe: str, *args: str, council: str = "", env: dict[str, str] | None = None
) -> tuple[Any, Any]:
    """``council ARGS`` under ``probe`` on a council of 5 members on the mock at ``base_url``
    (``council``: a line more for it; ``env``: more variables): the probe's report and the finished process."""
    names = ["a", "b", "c", "d", "e"]
    lines = ["[councils.default]", f"members = {json.dumps(names)}", 'chairman = "a"', council]
    for n in names:
        lines += [f"[models.{n}]", f'model = "openai/mock-{n}"', f'api_base = "{base_url}"']
    (home / "council.toml").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(ROOT), **(env or {})}
    env.pop("COUNCIL_CONFIG", None)
    proc = subprocess.run([sys.executable, "-c", probe, *args], env=env, cwd=home,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    line = next((x for x in proc.stderr.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, proc.stderr
    return json.loads(line.removeprefix("PROBE ")), proc


@pytest.mark.parametrize("self_review", ["include", "exclude"])
def test_a_larger_councils_agreement_test_is_not_drawn_on_the_event_loop(tmp_path, mock, self_review):
    # 5 ballots of 5 (or of 4) are beyond the exact enumeration: the Monte-Carlo p needs numpy
    # (50-170 ms to import) and 10,000 draws. They are done in a worker thread while the
    # reviews are in flight, never on the loop that sends the calls; the p is the same.
    args = ["run", "Why is the sky blue?", "--json"]
    report, proc = run_five_members(tmp_path, mock.base_url, MAIN_THREAD_PROBE, *args,
                                    council=f'self_review = "{self_review}"')  # fmt: skip
    assert report == {"numpy_on_main_thread": False}, proc.stderr
    result = json.loads(proc.stdout)
    agreement = result["consensus"]["agreement"]
    assert agreement["p_method"] == "monte-carlo"
    assert agreement["design"] == ("complete" if self_review == "include" else "balanced incomplete")
    from council.methods.concordance import agreement as recompute

    ballots = [r["ranking"] for r in result["reviews"] if r["valid"]]
    assert len(ballots) == 5
    assert agreement == recompute(ballots).model_dump()
    assert result["consensus"]["kendall_w_p_value"] == agreement["p_value"]


#: What a run needs only once its replies are in: the result and bias-record models, the events
#: that tell of replies, the rendering (rich), the lookalikes table that neutralises non-ASCII
#: answers in the reviewers' prompts. Each is imported where it is used, never before the first call.
LATER = [
    "rich",
    "council.cli.render",
    "council.session.results",
    "council.session.events",
    "council.bias.records",
    "council.methods.bias_indicators",
    "council.untrusted.lookalikes",
]
#: Notes what is loaded when the first connection to the mock opens (LATER, the retry loop's
#: tenacity, the slot tag pattern: "slot pattern" once compiled), and the thread that first asks
#: for each module of LATER and compiles the pattern; then runs the command.
FIRST_CALL_PROBE = f"""
import json, re, sys, threading
LATER = {LATER!r}
port = int(sys.argv.pop(1))
at_first_call, first_thread = [], {{}}
def loaded():
    return sorted(m for m in [*LATER, "tenacity", "slot pattern"] if m in sys.modules or m in first_thread)
def hook(event, args):
    if event == "socket.connect" and not at_first_call and isinstance(args[1], tuple) and args[1][1] == port:
        at_first_call.append(loaded())
sys.addaudithook(hook)
def note(name):
    if name not in first_thread:
        first_thread[name] = "main" if threading.current_thread() is threading.main_thread() else "worker"
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in LATER:
            note(name)
        return None
sys.meta_path.insert(0, Watch())
compile_pattern = re.compile
def compile_noted(pattern, flags=0):
    if isinstance(pattern, str) and pattern.startswith("[<\uff1c"):  # council.untrusted.slots' tag pattern
        note("slot pattern")
    return compile_pattern(pattern, flags)
re.compile = compile_noted
"""
FIRST_CALL_PROBE += RUN_MAIN
FIRST_CALL_PROBE += """
at_exit = sorted(m for m in LATER if m in sys.modules)
report = {"code": code, "at_first_call": at_first_call, "first_thread": first_thread, "at_exit": at_exit,
          "retrying": "tenacity" in sys.modules}
sys.stderr.write("\\nPROBE " + json.dumps(report) + "\\n")
"""


# How long the mock takes to answer: the worker thread's imports must be done before the first
# replies, even beside other busy test processes. At 0.5 s, with four pytest-xdist workers on two
# cores, the slot pattern was once compiled by the main thread as a reply came in.
FLIGHT_S = 1.0


@pytest.mark.parametrize("args", [["run", "Why is the sky blue?"], ["run", "Why is the sky blue?", "--json"]])
def test_a_run_sends_its_first_call_before_importing_what_it_needs_only_after(tmp_path, args):
    # Results, bias records and rendering (~25-30 ms of CPU to import), the lookalikes table and
    # the slot tag pattern (~25 ms each) are made ready in a worker thread while the first calls
    # are in flight: neither the first call nor the last reply waits.
    from council.storage import SQLiteStore

    SQLiteStore.open(tmp_path / "council.db").close()  # as after the first command (a new one retries its WAL switch)
    with start_mock_server(latency=FLIGHT_S) as slow:
        port = str(urlsplit(slow.base_url).port)
        report, proc = run_five_members(tmp_path, slow.base_url, FIRST_CALL_PROBE, port, *args)
    assert report["code"] in (0, None), proc.stderr
    assert report["at_first_call"] == [[]], report
    assert report["at_exit"] == sorted(LATER), report
    assert report["retrying"] is False  # tenacity comes with the first retry, and none was needed
    # The worker starts as the calls set off; the replies come FLIGHT_S later.
    assert report["first_thread"] == dict.fromkeys([*LATER, "slot pattern"], "worker"), report


def test_a_run_on_a_terminal_starts_its_progress_line_once_its_first_calls_are_in_flight(tmp_path):
    # The live progress line needs rich (~50 ms of CPU to import before the first call): it starts
    # once the worker thread has imported it, while the first calls are in flight, and shows each stage.
    from council.storage import SQLiteStore

    SQLiteStore.open(tmp_path / "council.db").close()
    with start_mock_server(latency=FLIGHT_S) as slow:
        port = str(urlsplit(slow.base_url).port)
        report, proc = run_five_members(tmp_path, slow.base_url, FIRST_CALL_PROBE, port, "run", "Why is the sky blue?",
                                        env={"TTY_COMPATIBLE": "1"})  # fmt: skip
    assert report["code"] in (0, None), proc.stderr
    assert report["at_first_call"] == [[]], report
    assert report["first_thread"] == dict.fromkeys([*LATER, "slot pattern"], "worker"), report
    for shown in ("members answer (0/5)", "reviewers rank the anonymised answers", "synthesis: 1/1"):
        assert shown in proc.stderr, proc.stderr


@pytest.mark.parametrize("args", [["bias-report", "--json"], ["sessions", "list"], ["--help"]])
def test_commands_that_call_no_model_import_no_http_client(home, args):
    _, loaded = run_command(home, *args)
    assert not loaded & (NEVER | {"aiohttp"}), f"imported {sorted(loaded & (NEVER | {'aiohttp'}))}"


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["batch", "--help"], ["serve", "--help"]])
def test_help_imports_nothing_its_command_would_use(home, args):
    # `council --help` lists every command from its summary in council.cli.main: no command
    # module (council.exports.sessions alone took ~50 ms) and none of the libraries their work needs.
    _, loaded = run_command(home, *args)
    # A command's own --help comes after the group set up logging (structlog, which imports asyncio).
    unused = NOT_FOR_HELP - ({"structlog", "asyncio"} if args != ["--help"] else set())
    assert not loaded & unused, f"imported {sorted(loaded & unused)}"


def test_the_help_listing_is_what_click_would_list_from_the_commands_themselves():
    import click
    from click.testing import CliRunner

    from council.cli.main import cli

    class Eager(type(cli)):
        format_commands = click.Group.format_commands  # imports each command for its help

    eager = Eager(name=cli.name, params=cli.params, callback=cli.callback, help=cli.help)
    eager.context_settings = cli.context_settings
    for width in (60, 80, 120):
        lazy = CliRunner().invoke(cli, ["--help"], terminal_width=width)
        full = CliRunner().invoke(eager, ["--help"], terminal_width=width)
        assert lazy.exit_code == full.exit_code == 0
        assert "Commands:" in lazy.output
        assert lazy.output == full.output


def test_a_listing_of_sessions_imports_no_validation_library(home):
    """``council sessions list`` reads rows and prints a table: pydantic and its core (~60 ms of
    start-up) are for commands that validate or build models."""
    run_command(home, "run", "Why is the sky blue?", "--json")
    code, loaded = run_command(home, "sessions", "list")
    assert code == 0
    assert "sqlite3" in loaded and "rich" in loaded  # it did read the store and draw the table
    assert not loaded & {"pydantic", "pydantic_core"}, f"imported {sorted(loaded & {'pydantic', 'pydantic_core'})}"


def test_bias_report_json_renders_nothing_with_rich(home):
    _, loaded = run_command(home, "bias-report", "--json")
    assert "rich" not in loaded


def test_a_bias_report_imports_no_logging_library_and_no_event_loop(home):
    # structlog and asyncio (~0.1 s of start-up) come with the first event logged or the first
    # session run; a report over stored records logs nothing and runs no loop.
    from council.bias.records import BiasRecord
    from council.storage import open_store

    store = open_store(home / "council.db")
    store.insert_bias_records(
        [BiasRecord(session_id="s1", reviewer_id=r, model_id=m, position=i, response_length_chars=9,
                    score_value=3 + i, timestamp="2026-01-01T00:00:00Z").row()
         for r in ("a", "b") for i, m in enumerate(("a", "b", "c"))]
    )  # fmt: skip
    store.close()
    code, loaded = run_command(home, "bias-report", "--json")
    assert code == 0 and "sqlite3" in loaded  # the report did read the store
    assert not loaded & {"structlog", "asyncio", "rich", "aiohttp"}, loaded


def test_sqlite_utils_is_loaded_without_numpy_and_numpy_still_imports_after():
    code = (
        "import sys\n"
        "from council.storage.sqlite import Database\n"
        "import sqlite_utils.db\n"
        "hidden = 'numpy' not in sys.modules and sqlite_utils.db.np is None and sqlite_utils.db.pd is None\n"
        "import numpy\n"
        "print(hidden, numpy.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "numpy"]


def test_opening_the_store_scans_no_installed_package_for_sqlite_utils_plugins(tmp_path):
    # Loading sqlite-utils' plugins reads every installed distribution's entry points (10-20 ms
    # of every command's start); the store's connection is council's own, so it runs none.
    code = (
        "from council.storage import SQLiteStore\n"
        "import sqlite_utils.plugins\n"
        "store = SQLiteStore.open()\n"
        "store.close()\n"
        "print(sqlite_utils.plugins._plugins_loaded, store.db.conn is not None)\n"
    )
    env = {**os.environ, "COUNCIL_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_structlog_is_loaded_without_rich_and_rich_still_imports_after():
    code = (
        "import sys\n"
        "import council._util.logs\n"
        "deferred = 'structlog' not in sys.modules\n"
        "council._util.logs.get_logger('council.test').debug('first event')\n"
        "before = 'rich' in sys.modules\n"
        "import rich.console\n"
        "print(deferred, before, 'structlog' in sys.modules, rich.console.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "True", "rich.console"]


#: A process's code before the rest: structlog's import is made slow, and ``started`` is set when it begins.
SLOW_STRUCTLOG = slowed("structlog") + (
    "import council._util.logs\n"
    "errors = []\n"
    "def log(name):\n"
    "    try:\n"
    "        council._util.logs.get_logger(name).debug('first event')\n"
    "    except Exception as exc:\n"
    "        errors.append(repr(exc))\n"
    "first = threading.Thread(target=log, args=('council.a',))\n"
    "first.start()\n"
    "started.wait(10)\n"
)


def _with_slow_structlog(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", SLOW_STRUCTLOG + code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_the_first_events_of_several_threads_wait_for_structlog_to_be_imported_whole():
    """A thread that logs while another is still importing structlog (found half made in
    ``sys.modules``) waits for it, rather than failing with an AttributeError: seen in a batch
    whose store threads logged their first events together."""
    assert _with_slow_structlog("log('council.b')\nfirst.join()\nprint(errors)\n") == "[]"


def test_another_thread_imports_rich_while_structlog_is_imported_without_it():
    """rich is kept from structlog's import in the importing thread only: a thread importing rich
    meanwhile (a progress bar starting) gets it."""
    code = (
        "try:\n"
        "    import rich.console\n"
        "    print('rich', rich.console.__name__)\n"
        "except ImportError as exc:\n"
        "    print('refused', exc)\n"
        "first.join()\n"
        "print(errors)\n"
    )
    assert _with_slow_structlog(code).splitlines() == ["rich rich.console", "[]"]


def test_a_council_run_spends_no_time_in_older_generation_collections(home):
    # Start-up objects live as long as the process: the CLI's collector threshold leaves them be.
    code = (
        "import gc, sys\n"
        "sys.argv = ['council', 'run', 'Why is the sky blue?', '--json']\n"
        "from council.cli.main import main\n"
        "before = [g['collections'] for g in gc.get_stats()]\n"
        "try:\n    main(exit_fast=False)\nexcept SystemExit:\n    pass\n"
        "after = [g['collections'] for g in gc.get_stats()]\n"
        "print(gc.get_threshold()[0], after[1] - before[1], after[2] - before[2])\n"
    )
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=home, capture_output=True, text=True, timeout=120)
    threshold, older, full = proc.stdout.split()[-3:]
    assert (threshold, older, full) == ("100000", "0", "0"), proc.stderr


def test_serve_collects_young_objects_as_by_default_and_old_ones_rarely_once_started(tmp_path):
    code = (
        "import gc\n"
        "from council.cli.main import START_UP_GC_THRESHOLD\n"
        "from council.cli.serve import _warm_up\n"
        "gc.set_threshold(*START_UP_GC_THRESHOLD)\n"
        "_warm_up([])\n"
        "print(gc.get_threshold(), gc.get_freeze_count() > 0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[0] == "(700, 10, 1000) True"


def test_the_cli_leaves_its_objects_to_the_os_at_exit(home):
    # Frozen objects are skipped by the interpreter's final collections (~200 ms at exit).
    code = (
        "import gc, sys\n"
        "sys.argv = ['council', 'sessions', 'list']\n"
        "from council.cli.main import main\n"
        "try:\n    main(exit_fast=False)\nexcept SystemExit:\n    pass\n"
        "print('FROZEN', gc.get_freeze_count() > 1000)\n"
    )
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=home, capture_output=True, text=True, timeout=120)
    assert "FROZEN True" in proc.stdout, proc.stderr


FAST_EXIT = """
import atexit, json, sys
class Torn:
    def __del__(self):
        sys.stderr.write("torn down\\n")
json.kept = Torn()  # freed when the interpreter tears its modules down
atexit.register(lambda: sys.stdout.write("exit handlers ran\\n"))
sys.argv = ["council", *sys.argv[1:]]
from council.cli.main import main
main()
"""


@pytest.mark.parametrize("args, code", [(["sessions", "list", "--json"], 0), (["run"], 2), (["nonsense"], 2)])
def test_the_cli_exits_without_the_interpreters_teardown_but_runs_exit_handlers(home, args, code):
    # Freeing every module one by one is the operating system's job at exit (20-50 ms of a run).
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", FAST_EXIT, *args], env=env, cwd=home, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.endswith("exit handlers ran\n")
    assert "torn down" not in proc.stderr
    if code == 0:
        assert json.loads(proc.stdout.removesuffix("exit handlers ran\n")) == []


def test_a_profiled_command_still_writes_its_profile(tmp_path):
    # python -m cProfile writes after the command returns: the fast exit leaves that to it.
    env = {**os.environ, "COUNCIL_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = tmp_path / "council.prof"
    proc = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "council", "--version"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0


def _install_noting_plugin(where: Path) -> Path:
    """A pydantic plugin, installed (on PYTHONPATH) as a distribution would install one: it notes
    the name of each model that pydantic builds a validator for, in the file it returns."""
    noted = where / "noted.txt"
    (where / "noting_plugin.py").write_text(
        "class Plugin:\n"
        "    def new_schema_validator(self, schema, schema_type, path, kind, config, settings):\n"
        f"        with open({str(noted)!r}, 'a') as f:\n"
        "            f.write(path.name + '\\n')\n"
        "        return None, None, None\n"
        "plugin = Plugin()\n"
    )
    dist = where / "noting_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: noting-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nnoting = noting_plugin:plugin\n")
    return noted


@pytest.mark.parametrize("setting", [None, "", "other"])
def test_the_command_loads_no_pydantic_plugin_unless_asked_and_the_library_does(home, tmp_path, setting):
    # Finding pydantic's plugins reads every installed distribution's entry points (10-20 ms of
    # each command's start): the command runs without them, unless PYDANTIC_DISABLE_PLUGINS is set
    # (empty: load them all). Used from Python, council leaves pydantic's plugins as they are.
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    noted = _install_noting_plugin(plugins)
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT), str(plugins)])}
    env.pop("COUNCIL_CONFIG", None)
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    command = [sys.executable, "-m", "council", "run", "Why is the sky blue?", "--json"]
    proc = subprocess.run(command, env=env, cwd=home, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = set(noted.read_text().split()) if noted.exists() else set()
    assert ("ConfigFile" in seen) is (setting is not None), seen
    noted.unlink(missing_ok=True)
    library = "from council.config import load_config\nload_config('council.toml')\n"
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    proc = subprocess.run([sys.executable, "-c", library], env=env, cwd=home, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ConfigFile" in noted.read_text().split()

"""``council serve`` starting and stopping as an operator runs it: a config that defines no council is
refused at start (one line, exit 2); SIGTERM (a process manager's stop, ``kill``, ``timeout``) is a
graceful shutdown with exit code 0 and no traceback, the sessions still running recorded
interrupted, whether or not SIGINT is ignored (a server started in the background by a script
ignores it); Ctrl-C (SIGINT) is exit 130 and ``interrupted``, as for every command."""

from __future__ import annotations

import signal

import httpx
import pytest
from conftest import council_process, db_rows
from mock_server import start_mock_server
from serve_helpers import fast_and_slow_councils, serve_process

pytestmark = pytest.mark.slow  # real server processes


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency=0.01, slow_seconds=120) as server:
        yield server


@pytest.fixture
def config(tmp_path, mock):
    return fast_and_slow_councils(tmp_path / "council.toml", mock.base_url)


@pytest.mark.parametrize("text", ["", "# nothing yet\n", '[models.a]\nmodel = "fake/a"\n'])
@pytest.mark.parametrize("found", [False, True], ids=["--config", "COUNCIL_HOME"])
def test_a_config_that_defines_no_council_is_refused_in_one_line(tmp_path, council_home, text, found):
    path = (council_home if found else tmp_path) / "council.toml"
    path.write_text(text)
    args = ("serve", "--port", "0") if found else ("serve", "--config", str(path), "--port", "0")
    proc = council_process(*args, home=council_home, timeout=60)
    lines = [line for line in proc.stderr.decode().splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and "defines no council" in lines[0]


def test_without_any_config_the_offline_default_is_still_served(council_home):
    with serve_process(None, council_home) as (_, served):
        models = httpx.get(served.base + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["default"]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a non-interactive shell starts a job with '&'


def _stop(config, home, sig: int, *extra: str, sigint_ignored: bool = False) -> tuple[int, str, dict[str, str]]:
    """Start the server, answer one request, start a session that waits on a slow model, send ``sig``:
    the exit code, what the server printed, and each session's stored status."""
    popen = {"preexec_fn": _ignore_sigint} if sigint_ignored else {}
    with serve_process(config, home, *extra, **popen) as (proc, served):
        chat = {"model": "default", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}
        assert httpx.post(served.base + "/v1/chat/completions", json=chat, timeout=60).status_code == 200
        started = httpx.post(served.base + "/v1/sessions", json={"council": "slow", "question": "q?"}, timeout=30)
        assert started.status_code == 202, started.text
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        stderr = "".join(served.lines)
    return code, stderr, dict(db_rows(home, "SELECT id, status FROM sessions"))


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "script"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_stops_the_server_cleanly_with_exit_code_0(config, council_home, workers, sigint_ignored):
    code, stderr, statuses = _stop(config, council_home, signal.SIGTERM, "--workers", workers,
                                   sigint_ignored=sigint_ignored)  # fmt: skip
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr and "interrupted" not in stderr, stderr
    assert sorted(statuses.values()) == ["complete", "interrupted"]  # the slow one was ended cleanly


def test_ctrl_c_stops_the_server_with_exit_code_130(config, council_home):
    code, stderr, statuses = _stop(config, council_home, signal.SIGINT)
    assert code == 130, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1] == "interrupted", stderr
    assert sorted(statuses.values()) == ["complete", "interrupted"]

"""What the CLI shows, on hostile terminals and from sessions that went wrong: nothing lost, nothing made up."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def on_terminal(*args: str, columns: int, home: Path) -> tuple[int, str]:
    """``council ARGS`` as a real process on a pseudo-terminal ``columns`` wide."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "COUNCIL_HOME": str(home), "PYTHONPATH": path, "COLUMNS": str(columns), "TERM": "xterm"}
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "council", *args], stdin=follower, stdout=follower,
                            stderr=follower, env=env)  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def judgments(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    games = [("fake/alpha", "fake/beta", "A"), ("fake/beta", "fake/gamma", "A"), ("fake/alpha", "fake/gamma", "B")]
    path.write_text("".join(json.dumps({"model_a": a, "model_b": b, "winner": w}) + "\n" for a, b, w in games))
    return path


def test_a_leaderboard_on_a_20_column_terminal_still_names_every_model(tmp_path, council_home):
    code, shown = on_terminal("leaderboard", "--judgments", str(judgments(tmp_path)), "--bootstrap", "0",
                              columns=20, home=council_home)  # fmt: skip
    assert code == 0, shown
    flat = "".join(shown.split())
    for name in ("fake/alpha", "fake/beta", "fake/gamma", "rating", "1000"):
        assert name in flat, shown
    assert "Traceback" not in shown


def test_the_same_leaderboard_on_a_wide_terminal_is_still_a_table(tmp_path, council_home):
    code, shown = on_terminal("leaderboard", "--judgments", str(judgments(tmp_path)), "--bootstrap", "0",
                              columns=120, home=council_home)  # fmt: skip
    assert code == 0, shown
    plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
    assert "┃ rank ┃ model" in plain and "fake/alpha" in plain and "model: " not in plain


def test_a_length_correlation_that_could_not_be_computed_is_not_shown_as_zero(tmp_path, council_home):
    from conftest import invoke_cli, write_config

    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a+fail"}, "b": {"model": "fake/b"},
                                             "c": {"model": "fake/c"}}, chairman="b")  # fmt: skip
    result = invoke_cli("run", "Why is the sky blue?", "--config", str(cfg), "--seed", "1")
    assert result.exit_code == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if "vs score" in line]
    assert "r = +0.000" not in row and "fewer than 3" in row, row

"""Run ``council`` in-process (click's test runner) or as a real process, and read council.db.

In-process runs re-raise an exception that escapes the command: the real command would
print a traceback, so a test can never mistake a crash for a clean exit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(*args: str, env: dict[str, str] | None = None, input: str | bytes | None = None) -> CliResult:
    from click.testing import CliRunner

    from council.cli.main import cli

    result = CliRunner().invoke(cli, list(args), env=env, input=input, prog_name="council")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(result.exit_code, result.stdout, result.stderr)


def council_process(*args: str | bytes, home: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """``council ARGS`` as a real process (arguments may be bytes, as a shell passes them)."""
    full_env = {**os.environ, "COUNCIL_HOME": str(home), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "council", *args], capture_output=True, env=full_env, timeout=timeout
    )


def write_config(path: Path, models: dict[str, dict[str, Any]], **council: Any) -> Path:
    """A council.toml with these [models] as members (in order) and [councils.default] settings."""
    lines = ["[councils.default]"]
    council.setdefault("members", list(models))
    lines += [f"{k} = {json.dumps(v)}" for k, v in council.items()]
    for alias, spec in models.items():
        lines.append(f"[models.{alias}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in spec.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def db_rows(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    db = sqlite3.connect(home / "council.db", timeout=30)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def db_dump(home: Path) -> str:
    """Every row of every table, as SQL text."""
    db = sqlite3.connect(home / "council.db", timeout=30)
    try:
        return "\n".join(db.iterdump())
    finally:
        db.close()

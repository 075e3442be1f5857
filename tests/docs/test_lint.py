"""The code passes the linter (pyproject.toml's [tool.ruff] rules) as a test, so that CI holds it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("council", "scripts", "benchmarks", "tests")


def test_ruff_finds_nothing_in_the_package_scripts_benchmarks_and_tests():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", *FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert all((ROOT / folder).is_dir() for folder in FOLDERS)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]

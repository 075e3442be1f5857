"""The wheel: an SPDX licence with its file shipped, and the ``py.typed`` marker for type checkers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_licence_is_an_spdx_expression_with_its_file():
    # The table form (license = { text = "MIT" }) is deprecated by setuptools, unsupported from 2027-02-18.
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    # license-files and an SPDX string need setuptools 77 (PEP 639).
    (setuptools,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert re.fullmatch(r"setuptools>=(\d+).*", setuptools) and int(setuptools.split(">=")[1].split(".")[0]) >= 77
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "the council authors" in text
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))  # PEP 639: not both


def test_the_package_is_marked_typed():
    assert (ROOT / "council" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["council"]


def _setuptools_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("setuptools").split(".")[0])
    except PackageNotFoundError:
        return 0


@pytest.mark.slow
@pytest.mark.skipif(_setuptools_major() < 77, reason="building offline needs setuptools>=77 installed")
def test_the_wheel_holds_the_licence_and_the_marker_and_builds_without_a_licence_warning(tmp_path):
    # Built from a copy of the checkout (its files git does not ignore), offline (no build isolation, so
    # the dev extra's setuptools), so nothing lands in the checkout.
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    src = tmp_path / "src"
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "wheels"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert not re.search(r"(?i)license.*deprecat|deprecat.*license", log), log[-3000:]
    (wheel,) = out.glob("council_orchestrator-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "council/py.typed" in names
    licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert licence, names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta

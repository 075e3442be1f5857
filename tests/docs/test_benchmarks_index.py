"""benchmarks/README.md is the one index of the benchmark scripts: it names each with its command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")


def test_every_benchmark_script_is_in_the_index_with_its_command():
    scripts = sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) >= 28
    for script in scripts:
        assert f"[`{script.name}`]({script.name})" in INDEX, f"benchmarks/README.md does not list {script.name}"
        if script.name.startswith("bench_") and script.name not in ("bench_common.py", "bench_scaleout_rpm.py"):
            assert f"`python benchmarks/{script.name}" in INDEX, f"no command for {script.name}"


def test_no_benchmark_is_left_in_scripts():
    assert not sorted((ROOT / "scripts").glob("bench_*.py"))


def test_the_code_names_a_benchmark_by_its_script_never_by_a_section_of_the_history():
    """A comment says which script measures what it saves; the dated history is not on the
    reading path, and its section numbers say nothing to a reader of the code."""
    for path in sorted((ROOT / "council").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        assert "benchmark-history" not in text, f"{where} cites docs/benchmark-history.md"
        assert not re.search(r"benchmarks\.md,? sections?", text), f"{where} cites a section of docs/benchmarks.md"
        for script in re.findall(r"benchmarks/(bench_\w+\.py)", text):
            assert (ROOT / "benchmarks" / script).is_file(), f"{where} names benchmarks/{script}, which does not exist"

"""benchmarks/README.md is the one index of the benchmark scripts: it names each with its command."""

from __future__ import annotations

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

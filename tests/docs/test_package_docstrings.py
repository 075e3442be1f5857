"""A package docstring that lists its modules names only modules that exist, and all of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bias_package_docstring_names_its_modules_and_no_others():
    package = ROOT / "council" / "bias"
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    named = set(re.findall(r"``([a-z_][a-z0-9_]*)``", doc))
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    assert named == modules, f"named but missing: {sorted(named - modules)}; not named: {sorted(modules - named)}"

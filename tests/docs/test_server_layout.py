"""Each of the server's promises is kept by one module every request passes through: no route
checks the token, the Host, the Origin or the content type itself, no route parses a request body
itself, and no code outside council/providers/asking.py builds a JSON Schema validator (there, references
resolve in the offline registry only)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "council"
SERVER = PACKAGE / "server"


def strings_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            found.add(value.lower())
    return found


def names_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
    }


@pytest.mark.parametrize(
    "header, owner",
    [("authorization", "auth.py"), ("origin", "guard.py"), ("host", "guard.py"), ("content-type", "guard.py")],
)
def test_one_module_reads_each_guarded_header(header, owner):
    readers = sorted(p.name for p in SERVER.glob("*.py") if header in strings_in(p))
    assert readers == [owner], readers


def body_reads(path: Path) -> int:
    """Calls like ``request.body()``, ``request.json()``, ``request.stream()``, ``request.form()``."""
    return sum(
        1
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in {"body", "json", "stream", "form"}
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "request"
    )


def test_request_bodies_are_read_in_one_place():
    readers = sorted(p.name for p in SERVER.glob("*.py") if body_reads(p))
    assert readers == ["body.py"], readers


def test_json_schema_validators_are_built_only_with_the_offline_registry():
    builders = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if {"validator_for", "Draft202012Validator", "Draft7Validator", "validate"} & names_in(p)
        and "jsonschema" in p.read_text(encoding="utf-8")
    )
    assert builders == ["asking.py"], builders
    assert "registry=_offline_registry()" in (PACKAGE / "asking.py").read_text(encoding="utf-8")

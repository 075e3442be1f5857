"""The layout keeps its promises: no import cycle, no module imports one above its layer,
and pure logic never imports I/O. Every module must be placed in a layer below."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "council"

# Lowest first. A module may import its own layer and the ones below, never above.
LAYERS: list[tuple[str, ...]] = [
    # shared small things, used by everything: private plumbing, untrusted text, what calls cost, the methods
    ("council.errors", "council._util", "council.untrusted", "council.accounting", "council.methods"),
    ("council.config",),
    ("council.providers", "council.storage"),
    # asking sits on the model client; the bias report and judgment files on the store
    ("council.providers.asking", "council.bias", "council.leaderboard.judgment_files"),
    # council.testing: replies that follow the real prompts of both pipelines
    ("council.session", "council.judging", "council.testing"),
    ("council.api", "council.exports", "council.leaderboard"),
    # the front-ends
    ("council.cli", "council.server", "council.mcp", "council.__main__", "council"),
]

# Pure logic: no model calls, no database, no CLI or server. Every module of council.methods is
# pure (listed by METHODS below), and imports nothing else of council but council.errors.
PURE = (
    "council.session.schemas",
    "council.session.prompts",
    "council.session.results",
    "council.session.events",
    "council.session.early_events",
    "council.judging.schemas",
    "council.judging.prompts",
    "council.judging.grade_report",
    "council.judging.jury",
    "council.judging.safety",
    "council.judging.outcomes",
    "council.bias.records",
    "council.bias.foreign",
    "council.untrusted.slots",
    "council.untrusted.lookalikes",
    "council.providers.json_schema",
    "council._util.clock",
    "council.untrusted.csv_cells",
    "council.exports.shapes",
    "council.exports.rows",
    "council.accounting.budget",
    "council.accounting.call_cache",
    "council._util.html_parts",
)
IO = ("council.providers", "council.storage", "council.api", "council.cli", "council.server", "council.mcp")

# Siblings that must stay apart.
APART = [("council.session", "council.judging"), ("council.providers", "council.storage")]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
METHODS = tuple(sorted(m for m in MODULES if m == "council.methods" or m.startswith("council.methods.")))
PURE = (*PURE, *METHODS)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str) -> set[str]:
    """Council modules ``name`` imports at runtime (module level or inside functions)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("council"):
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("council"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer_of(name: str) -> int:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            # "council" itself (the lazy package init) is one module, not a prefix of all.
            if name == prefix or (prefix != "council" and name.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{name} is in no layer: place it in tests/docs/test_architecture.py LAYERS"
    return best[0]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


# The one import that goes up, on purpose: the shipped fake/ provider answers with the council's
# test replies, which must sit above the prompts they follow. Nothing else may import council.testing.
UPWARD = {("council.providers.fake", "council.testing.replies")}


def test_no_module_imports_one_above_its_layer():
    wrong = [
        f"{name} (layer {layer_of(name)}) imports {dep} (layer {layer_of(dep)})"
        for name, deps in GRAPH.items()
        for dep in deps
        if layer_of(dep) > layer_of(name) and (name, dep) not in UPWARD
    ]
    assert wrong == []


def test_only_the_fake_provider_uses_the_testing_replies():
    users = sorted(
        name
        for name, deps in GRAPH.items()
        if not _within(name, "council.testing") and any(_within(d, "council.testing") for d in deps)
    )
    assert users == ["council.providers.fake"]


def test_no_import_cycles():
    # A package's __init__ importing its own submodules is how packages work, not a cycle.
    graph = {
        name: {d for d in deps if not (MODULES[d].name == "__init__.py" and _within(name, d))}
        for name, deps in GRAPH.items()
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep, [*path, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert cycles == []


def test_pure_logic_imports_no_io():
    wrong = [f"{name} imports {dep}" for name in PURE for dep in GRAPH[name] if any(_within(dep, io) for io in IO)]
    assert wrong == []


def test_session_and_judging_stay_apart():
    wrong = [
        f"{name} imports {dep}"
        for a, b in APART
        for name, deps in GRAPH.items()
        for dep in deps
        if (_within(name, a) and _within(dep, b)) or (_within(name, b) and _within(dep, a))
    ]
    assert wrong == []


# -- the storage seam: storage owns every SQL statement, row shape and connection -----------

# What the rest of the package may import from storage: the protocol, its plain data,
# and the package's own functions (open_store, using_store, ...). Backends stay inside.
STORAGE_FACES = ("council.storage", "council.storage.protocol", "council.storage.data")
DATABASE_DRIVERS = ("sqlite3", "sqlite_utils", "apsw", "psycopg", "psycopg_pool", "sqlalchemy")
CONNECTION_ATTRIBUTES = {"db", "conn", "connection", "cursor", "execute", "executemany", "executescript"}
# SQL shapes, not words: "select" alone is English, "SELECT ... FROM" is a statement.
SQL_SHAPES = re.compile(
    r"\bSELECT\b[\s\S]+\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b"
    r"|\bCREATE\s+(TEMP\s+|UNIQUE\s+)?(TABLE|INDEX|TRIGGER|VIEW)\b|\bDROP\s+(TABLE|INDEX|TRIGGER)\b"
    r"|\bPRAGMA\s+\w+|\bBEGIN\s+IMMEDIATE\b|\bON\s+CONFLICT\b"
)


def _outside_storage() -> list[str]:
    return [name for name in MODULES if not _within(name, "council.storage")]


def _tree(name: str) -> ast.AST:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


def test_no_module_outside_storage_imports_a_database_driver_or_a_backend():
    wrong = []
    for name in _outside_storage():
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                if module.split(".")[0] in DATABASE_DRIVERS:
                    wrong.append(f"{name} imports {module}")
        wrong += [
            f"{name} imports {dep} (use {', '.join(STORAGE_FACES)})"
            for dep in GRAPH[name]
            if _within(dep, "council.storage") and dep not in STORAGE_FACES
        ]
    assert wrong == []


# uvicorn's HTTP protocol keeps its h11 connection (an HTTP parser's state) as ``self.conn``.
NOT_A_DATABASE_CONNECTION = {"council.server.connections"}


def test_no_module_outside_storage_touches_a_connection():
    wrong = [
        f"{name}:{node.lineno} .{node.attr}"
        for name in _outside_storage()
        if name not in NOT_A_DATABASE_CONNECTION
        for node in ast.walk(_tree(name))
        if isinstance(node, ast.Attribute) and node.attr in CONNECTION_ATTRIBUTES
    ]
    assert wrong == []


def test_no_module_outside_storage_writes_sql():
    wrong = [
        f"{name}:{node.lineno} {node.value[:60]!r}"
        for name in _outside_storage()
        for node in ast.walk(_tree(name))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_SHAPES.search(node.value.upper())
    ]
    assert wrong == []


def test_the_rules_catch_what_they_forbid():
    # The checks above pass on an empty world too: show each one firing.
    assert SQL_SHAPES.search("select id, status from sessions where id = ?".upper())
    assert SQL_SHAPES.search("INSERT OR IGNORE INTO t VALUES (?, ?)")
    assert SQL_SHAPES.search("update sessions set status = 'x'".upper())
    assert not SQL_SHAPES.search("choose one of: words, chars".upper())
    tree = ast.parse("import sqlite3\nstore.db.execute('SELECT 1 FROM t')\n")
    assert any(isinstance(n, ast.Attribute) and n.attr in CONNECTION_ATTRIBUTES for n in ast.walk(tree))


def test_the_spend_cap_is_kept_in_one_place():
    """Every call reserves against the cap in ModelClient; no other module reserves or settles
    (the store's ledger, council.storage.cost, is the one caller of the store's budget operations)."""
    allowed = {"council.accounting.budget", "council.providers.client", "council.storage.cost"}
    for name, path in MODULES.items():
        if name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr not in (
                    "reserve",
                    "settle",
                    "shrink",
                    "reserve_budget",
                    "settle_budget",
                    "shrink_budget",
                ), f"{name} reserves spending outside ModelClient"


def test_methods_import_only_methods():
    wrong = [
        f"{name} imports {dep}"
        for name in METHODS
        for dep in GRAPH[name]
        if not (_within(dep, "council.methods") or dep == "council.errors")
    ]
    assert METHODS and wrong == []


# Standard-library and third-party modules that do I/O or talk to the world.
IO_LIBRARIES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "socket",
    "subprocess",
    "sqlite3",
    "sqlite_utils",
    "aiohttp",
    "httpx",
    "urllib",
    "tempfile",
    "logging",
    "litellm",
    "openai",
    "click",
    "rich",
}


def test_methods_do_no_io():
    wrong = []
    for name in METHODS:
        for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
            roots = []
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots = [node.module.split(".")[0]]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("open", "print"):
                roots = [node.func.id + "()"]
            wrong += [f"{name}: {r}" for r in roots if r in IO_LIBRARIES or r.endswith("()")]
    assert wrong == []


def test_only_the_mcp_server_imports_the_mcp_sdk_and_only_when_serving():
    # The SDK is an optional extra: every other module (and `council --help`) works without it.
    def imports_sdk(tree: ast.AST) -> list[ast.AST]:
        return [
            node
            for node in ast.walk(tree)
            if (isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("mcp", "mcp_types") for a in node.names))
            or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("mcp", "mcp_types"))
        ]

    users = {name for name, path in MODULES.items() if imports_sdk(ast.parse(path.read_text(encoding="utf-8")))}
    assert users == {"council.mcp.server"}
    tree = ast.parse(MODULES["council.mcp.server"].read_text(encoding="utf-8"))
    top_level = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not [node for node in top_level if imports_sdk(node)]  # imported lazily, inside functions


def test_the_bias_package_holds_only_the_bias_report():
    """The leaderboard's page lives beside the leaderboard (council.leaderboard.html), not in council.bias."""
    wrong = [
        f"{name}:{node.lineno}"
        for name in MODULES
        if _within(name, "council.bias")
        for node in ast.walk(_tree(name))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and "leaderboard" in node.module
        or isinstance(node, ast.FunctionDef)
        and "leaderboard" in node.name
    ]
    assert wrong == []


# -- the front-ends (CLI, HTTP server and web app, MCP server) reach council only through its API --

FRONT_ENDS = ("council.cli", "council.server", "council.mcp")
# What every front-end module may import besides its own package: the lazy top level, the
# facade, the errors, the private plumbing and the untrusted-text helpers.
FRONT_END_MAY_IMPORT = ("council.api", "council.errors", "council._util", "council.untrusted")
# A command that starts another front-end imports it, through that package's own face only.
# ``council worker --metrics-address`` serves the server's metrics (council.server.metrics).
LAUNCHES = {("council.cli.serve", "council.server"), ("council.cli.worker", "council.server"),
            ("council.cli.mcp", "council.mcp")}  # fmt: skip


def _front_end_of(name: str) -> str | None:
    return next((f for f in FRONT_ENDS if _within(name, f)), None)


def front_end_imports_beyond_the_api(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(front-end module, council module) pairs the rule does not allow, in ``graph``."""
    wrong = set()
    for name, deps in graph.items():
        own = _front_end_of(name)
        if own is None:
            continue
        for dep in deps:
            allowed = (
                dep == "council"
                or _within(dep, own)
                or any(_within(dep, face) for face in FRONT_END_MAY_IMPORT)
                or (name, dep) in LAUNCHES
            )
            if not allowed:
                wrong.add((name, dep))
    return wrong


def test_front_ends_reach_council_only_through_its_public_api():
    wrong = front_end_imports_beyond_the_api(GRAPH)
    assert sorted(wrong) == []


def test_the_front_end_rule_catches_what_it_forbids():
    graph = {
        "council.cli.x": {"council.cli.render", "council.api", "council", "council.untrusted.terminal"},
        "council.mcp.server": {"council.cli.render", "council.storage"},
        "council.server.app": {"council.leaderboard.stored", "council._util.background", "council.errors"},
        "council.cli.serve": {"council.server", "council.server.app"},
    }
    assert front_end_imports_beyond_the_api(graph) == {
        ("council.mcp.server", "council.cli.render"),
        ("council.mcp.server", "council.storage"),
        ("council.server.app", "council.leaderboard.stored"),
        ("council.cli.serve", "council.server.app"),
    }

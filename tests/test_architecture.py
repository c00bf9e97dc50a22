"""Dependencies point one way: cli/server -> runtime/durable -> subagents/engine/mcp -> policy ->
llm/tools/memory -> store -> messages/errors/events/config. Nothing imports from a layer above
its own, and no module of retinue imports, directly or through others, a module that imports
it back.

``store`` (conversations, the step journal, task lists, leases, transcripts, media, and the
database plumbing under them) sits one layer below ``memory``: each memory backend
(``SQLiteMemory``, ``PostgresMemory``) is its database's store with agents' memory on top,
so ``memory`` imports ``store`` and never the other way; and ``tools`` (the transcript
tools), ``engine`` and everything above reach the records without loading memory's
consolidation. The MCP server (``mcp.server``) is a surface like ``server``, beside the MCP
client at the orchestration layer; the A2A model adapter (``llm.a2a``) needs the trust store
of ``policy``, so it sits at policy's layer, below the sub-agent factory that uses it.

Which imports count, for both rules: every ``import`` / ``from ... import`` statement of a
module, wherever it stands: at module level, inside a function (a deferred import is still a
dependency, only hidden), and under ``if TYPE_CHECKING:`` (a type-only import is a dependency
of the design, and a circle of them is how a runtime circle starts). ``from retinue.pkg
import name`` depends on the module ``retinue.pkg.name`` when there is one, else on the
package ``retinue.pkg`` (its ``__init__``). The package a module sits in is not counted as
one of its imports (Python loads it first, but a package's ``__init__`` is its face to
the outside, and it may re-export its own modules).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import retinue

PACKAGE = Path(retinue.__file__).parent

# the layer of each top-level module or subpackage; a module may import its own layer or lower
LAYERS = {
    "errors": 0, "messages": 0, "events": 0, "config": 0, "_tasks": 0, "safe_text": 0,
    "_deprecated": 0,
    "_tracer": 0,  # the slot the engine reads its tracer from, telemetry installs it in
    "store": 1,  # records below memory: memory's backends build on a store, never the reverse
    "llm": 2, "tools": 2, "memory": 2, "testing": 2, "telemetry": 2,
    "policy": 3,
    "llm.a2a": 3,  # a remote A2A agent as a role's model: asks the trust store (policy)
    "engine": 4, "subagents": 4, "mcp": 4, "skills": 4,
    "a2a.client": 4,  # deprecated alias of llm.a2a: the sub-agent factory used it
    "runtime": 5, "agent": 5, "durable": 5, "saved": 5, "temporal": 5,
    "cli": 6, "server": 6, "a2a": 6, "__main__": 6, "__init__": 6,
    "mcp.server": 6,  # Retinue's roles served over MCP: a surface, like server
}  # fmt: skip


def layer_of(module: str) -> int:
    """A module's layer: its own entry (``a2a.client``), else its top-level package's."""
    parts = module.split(".")
    return LAYERS.get(".".join(parts[:2]), LAYERS[parts[0]])


@cache
def import_statements(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The import statements of a module, wherever they stand (parsed once per test run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tuple(n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in import_statements(path):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retinue."):
            found.add(node.module.removeprefix("retinue."))
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("retinue.") for a in node.names if a.name.startswith("retinue.")
            )
    return found


def test_every_module_has_a_layer() -> None:
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    tops -= {"__pycache__", "roles", "py"}
    assert tops <= set(LAYERS), f"give these modules a layer: {tops - set(LAYERS)}"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = []
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
        for target in imports_of(path):
            if layer_of(target) > layer_of(own):
                upward.append(f"{own} imports {target}")
    assert upward == []


# -- import circles ----------------------------------------------------------------------

# Circles known and being fixed: none. A circle listed here must name its modules exactly.
KNOWN_CIRCLES: list[frozenset[str]] = []


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


@cache  # built once per test run; the tests only read it
def import_graph() -> dict[str, set[str]]:
    """Each module of retinue -> the modules of retinue it imports (see the docstring)."""
    modules = module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in import_statements(path):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1 packages
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        targets.add(sub)
                    elif base in modules:
                        targets.add(base)
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(frozenset(members))
    return found


def a_path(graph: Mapping[str, Iterable[str]], members: frozenset[str]) -> str:
    """One circle through ``members``, as ``a -> b -> a``, to say where it is."""
    start = min(members)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                return " -> ".join([*paths[node], start])
            if nxt in members and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                todo.append(nxt)
    raise AssertionError("not a circle")


def test_the_circle_finder_finds_circles_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set(), "f": {"f"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert a_path(graph, frozenset({"a", "b", "c"})) == "a -> b -> c -> a"
    assert circles({"x": {"y"}, "y": set()}) == []


def test_the_import_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert "retinue.memory.base" in graph["retinue.memory.consolidate"]  # module level
    assert "retinue.memory.consolidate" in graph["retinue.memory.common"]  # in a function
    assert "retinue.llm.base" in graph["retinue.memory.base"]  # under TYPE_CHECKING
    assert "retinue.events" in graph["retinue.cli.render"]  # from retinue import events


def test_no_import_circles() -> None:
    graph = import_graph()
    found = circles(graph)
    unknown = [a_path(graph, c) for c in found if c not in KNOWN_CIRCLES]
    assert unknown == [], "import circles (move the shared part below both):\n" + "\n".join(unknown)
    assert [c for c in KNOWN_CIRCLES if c not in found] == [], "fixed: drop from KNOWN_CIRCLES"


def test_the_engine_traces_through_its_declared_tracer_not_telemetry() -> None:
    """The engine declares what a tracer does (``engine.observer.RunTracer``) and reads the
    one installed in ``retinue._tracer``; it never calls ``telemetry.trace`` by name (issue 42:
    one observer interface the engine declares and the telemetry package implements)."""
    graph = import_graph()
    reaching = sorted(
        name
        for name, targets in graph.items()
        if name.startswith("retinue.engine") and "retinue.telemetry.trace" in targets
    )
    assert reaching == []
    assert "retinue._tracer" in graph["retinue.engine.loop"]
    assert "retinue._tracer" in graph["retinue.telemetry.trace"]


def test_consolidation_depends_on_the_store_protocol_not_on_a_store() -> None:
    imported = import_graph()["retinue.memory.consolidate"]
    assert "retinue.memory.base" in imported
    assert not imported & {"retinue.memory.sqlite", "retinue.memory.postgres"}


# What a tool context carries (gate, manager, memory, ...) is reached through what its
# protocol declares, never by asking an attribute it does not declare (issue 42).
_CONTEXTS = frozenset({"ctx", "context"})


def _reaches_through_a_context(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id not in {"getattr", "hasattr"} or not node.args:
        return False
    target = node.args[0]
    while isinstance(target, ast.Attribute):
        target = target.value
    first = node.args[0]
    return (
        isinstance(first, ast.Attribute)
        and isinstance(target, ast.Name)
        and (target.id in _CONTEXTS or (target.id == "self" and _has_context(first)))
    )


def _has_context(node: ast.Attribute) -> bool:
    names = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        names.append(current.attr)
        current = current.value
    return any(name in _CONTEXTS for name in names)


def getattr_through_contexts(source: str) -> list[int]:
    """The lines of ``source`` that call getattr/hasattr on something a context holds."""
    return [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and _reaches_through_a_context(n)
    ]


def test_the_getattr_finder_finds_what_it_should() -> None:
    found = getattr_through_contexts(
        "getattr(ctx.gate, 'hooks')\n"
        "hasattr(self.ctx.manager, 'registry')\n"
        "getattr(os, 'O_CLOEXEC', 0)\n"
        "getattr(body, field)\n"
        "getattr(context.memory.store, 'x')\n"
    )
    assert found == [1, 2, 5]


def test_no_getattr_reaches_through_a_tool_context() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in getattr_through_contexts(path.read_text())
    ]
    assert offenders == []


def test_memory_builds_on_the_store_and_never_the_reverse() -> None:
    graph = import_graph()
    reverse = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name.startswith("retinue.store")
        for target in targets
        if not target.startswith(("retinue.store", "retinue.errors", "retinue.messages"))
        and target not in {"retinue.config"}
    )
    assert reverse == [], "the store needs only the core (errors, messages, config)"
    assert "retinue.store.sqlite" in graph["retinue.memory.sqlite"]
    assert "retinue.store.postgres" in graph["retinue.memory.postgres"]

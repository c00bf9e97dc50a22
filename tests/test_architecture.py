"""Dependencies point one way: cli/server -> runtime -> subagents/engine/mcp -> policy ->
llm/tools/memory -> messages/errors/events/config. Nothing imports from a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

import retinue

PACKAGE = Path(retinue.__file__).parent

# the layer of each top-level module or subpackage; a module may import its own layer or lower
LAYERS = {
    "errors": 0, "messages": 0, "events": 0, "config": 0, "_tasks": 0,
    "llm": 1, "tools": 1, "memory": 1, "testing": 1,
    "policy": 2,
    "engine": 3, "subagents": 3, "mcp": 3,
    "runtime": 4, "agent": 4,
    "cli": 5, "server": 5, "__main__": 5, "__init__": 5,
}  # fmt: skip


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
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

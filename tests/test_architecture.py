"""The package's shape, read from its source with ``ast``: layers, circles, sizes, private names.

Layers (README, "Layout"): an import runs from a higher layer to a lower one, or within a
layer; never up. Function-level (lazy) imports count as much as module-level ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "sqlheads"
MAX_LINES = 700
# Highest first. A module takes the layer of its longest matching prefix.
LAYERS = {
    "sqlheads.cli": 5,  # the doors (the T-SQL is the other one)
    "sqlheads.healthcheck": 5,
    "sqlheads.host": 4,
    "sqlheads.sidecar": 4,
    "sqlheads.report": 4,
    "sqlheads.demo": 4,
    "sqlheads.sample": 4,  # the README's sample tables, as demo loads its own
    "sqlheads.caller_rows": 3,  # what host and sidecar read through callers' queries
    "sqlheads.encoders": 3,  # register, list and resolve encoders
    "sqlheads.baselines": 3,  # the host's side of the TF-IDF baseline
    "sqlheads.redeploy": 3,  # a deploy's re-scoring of the replaced rows
    "sqlheads.teacher_heads": 3,  # a deployed version teaching: soft labels, transfer rows
    "sqlheads.plots": 4,  # drawn as report draws
    "sqlheads.procedures": 2,
    "sqlheads.teach_run": 2,  # heads.distill @teacher_head: the teaching in the server's Python
    "sqlheads.settings": 1,
    "sqlheads.sqlserver": 1,
    "sqlheads.datasets": 1,
    "sqlheads.engine": 1,
    "sqlheads.store": 1,
    "sqlheads.errors": 0,
    "sqlheads": 0,  # the package's own __init__ (its version)
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[prefix]


def imported(path: Path) -> list[tuple[str, str, int]]:
    """(module, name or "", line) for every sqlheads import in ``path``, lazy ones too; a
    ``from package import module`` names the module itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("sqlheads")]
            found += [(name, "", node.lineno) for name in names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlheads"):
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                if whole in MODULES:
                    found.append((whole, "", node.lineno))
                else:
                    found.append((node.module, alias.name, node.lineno))
    return found


def graph() -> dict[str, set[str]]:
    return {
        module: {target for target, _, _ in imported(path) if target in MODULES}
        for module, path in MODULES.items()
    }


def test_the_modules_are_found() -> None:
    assert {"sqlheads.host", "sqlheads.engine.kinds", "sqlheads.store.schema"} <= set(MODULES)
    assert all(layer(m) >= 0 for m in MODULES)


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{module} ({layer(module)}) imports {target} ({layer(target)})"
        for module, targets in graph().items()
        for target in targets
        if layer(target) > layer(module)
    ]
    assert not upward


def test_the_engine_knows_nothing_of_sql_or_the_layers_above() -> None:
    strays = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        if module.startswith("sqlheads.engine")
        for target in targets
        if not target.startswith(("sqlheads.engine", "sqlheads.errors"))
    ]
    assert not strays


def test_only_the_store_imports_its_schema() -> None:
    strays = [
        module
        for module, targets in graph().items()
        if "sqlheads.store.schema" in targets and not module.startswith("sqlheads.store")
    ]
    assert not strays


def test_no_circle() -> None:
    edges = graph()
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(edges[module]):
            if target in path:
                circles.append(path[path.index(target) :] + [target])
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(edges):
        if module not in done:
            visit(module, [module])
    # A package's __init__ that names its own submodules is how a package hands them on.
    circles = [c for c in circles if not (len(c) == 3 and c[0] == c[2] and c[1].startswith(c[0]))]
    assert not circles


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_passes_700_lines(module: str) -> None:
    assert len(MODULES[module].read_text().splitlines()) <= MAX_LINES


def test_no_module_imports_another_modules_private_name() -> None:
    taken = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases = {}  # local name -> sqlheads module, for module._name
        for target, name, line in imported(path):
            if name.startswith("_") and target != module:
                taken.append(f"{module}:{line} takes {target}.{name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlheads"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and aliases[node.value.id] != module
            ):
                taken.append(f"{module}:{node.lineno} takes {aliases[node.value.id]}.{node.attr}")
    assert not taken

"""The package's shape, read from its source with ``ast``: layers, the engine's families,
circles, sizes, private names.

Layers (docs/architecture.md, "Layout"): an import runs from a higher layer to a lower one, or
within a layer; never up. The engine's families ("The engine") obey the same rule among
themselves. Function-level (lazy) imports count as much as module-level ones.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "sqlheads"
MAX_LINES = 700
# Highest first. A module takes the layer of its longest matching prefix.
LAYERS = {
    "sqlheads.cli": 6,  # the doors
    "sqlheads.healthcheck": 6,
    "sqlheads.procedures": 6,  # SQL Server's door (the frozen T-SQL imports it): nobody else
    "sqlheads.host": 5,  # the public Python API: the verbs gathered under one name
    "sqlheads.sidecar": 5,
    "sqlheads.report": 5,
    "sqlheads.demo": 5,
    "sqlheads.sample": 5,  # the README's sample tables, as demo loads its own
    "sqlheads.plots": 5,  # drawn as report draws
    "sqlheads.verbs": 4,  # the embedded host: one module per verb, and what they share
    "sqlheads.compute": 2,  # DataFrame in, DataFrame out: what SQL Server's scripts run
    "sqlheads.settings": 1,
    "sqlheads.sqlserver": 1,
    "sqlheads.keywords": 1,  # flat keywords in, parameter objects out: the doors share it
    "sqlheads.datasets": 1,
    "sqlheads.engine": 1,
    "sqlheads.store": 1,
    "sqlheads.errors": 0,
    "sqlheads": 0,  # the package's own __init__ (its version)
}
# The engine's families, highest first, and the rank of each: a family imports its own modules
# and those of lower ranks, never one of its rank or above (heads and loop know nothing of each
# other). A module takes the family of its longest matching prefix; every engine module has one.
FAMILIES = {
    "sqlheads.engine.kinds": "kinds",  # the registry of model kinds: fits, loads, scores
    "sqlheads.engine.students": "students",  # one module per student kind, how they learn
    "sqlheads.engine.training": "training",  # fine-tuning: the tuner, the teacher, its knobs
    "sqlheads.engine.encoders": "encoders",  # ONNX inference, export, int8, catalogue, torch
    "sqlheads.engine.heads": "heads",  # MLP heads on stored vectors
    "sqlheads.engine.loop": "loop",  # after deployment: which rows to label, drift
    "sqlheads.engine.progress": "shared",  # what every family may use
    "sqlheads.engine.constraints": "shared",  # parameter objects: what each field accepts
    "sqlheads.engine.devices": "shared",
    "sqlheads.engine.evaluation": "shared",
    "sqlheads.engine.baseline": "shared",
}
FAMILY_RANKS = {
    "kinds": 5,
    "students": 4,
    "training": 3,
    "encoders": 2,
    "heads": 1,
    "loop": 1,
    "shared": 0,
}
MAX_FUNCTION_LINES = 100
# Training loops read best whole, top to bottom; each one allowed past the limit is named.
LONG_TRAINING_LOOPS = {"sqlheads.engine.training.tuner.Tuner.fit"}
# compute/'s modules shared by several verbs; every other one is a verb's, registered in
# procedures.SQL_SERVER_VERBS, with its embedded half in verbs/ under the same file name.
SHARED_COMPUTE = {"columns", "versions", "model_cache"}


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


def family(module: str) -> str | None:
    prefixes = [p for p in FAMILIES if module == p or module.startswith(p + ".")]
    return FAMILIES[max(prefixes, key=len)] if prefixes else None


def test_every_engine_module_has_a_family() -> None:
    engine = [m for m in MODULES if m.startswith("sqlheads.engine.")]
    assert "sqlheads.engine.students.word.student" in engine
    assert not [m for m in engine if family(m) is None]
    assert set(FAMILIES.values()) == set(FAMILY_RANKS)


def test_an_engine_family_imports_only_families_below_it() -> None:
    upward = [
        f"{module} ({family(module)}) imports {target} ({family(target)})"
        for module, targets in graph().items()
        if module.startswith("sqlheads.engine.")
        for target in targets
        if target.startswith("sqlheads.engine.")
        and family(target) != family(module)
        and FAMILY_RANKS[family(target)] >= FAMILY_RANKS[family(module)]
    ]
    assert not upward


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


def functions(path: Path) -> list[tuple[str, int]]:
    """(dotted name, lines) of every function and method in ``path``."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}.{child.name}"
                found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}")

    visit(ast.parse(path.read_text()), module_name(path))
    return found


def test_no_function_passes_100_lines_but_the_named_training_loops() -> None:
    long = {
        f"{name} ({lines} lines)"
        for path in MODULES.values()
        for name, lines in functions(path)
        if lines > MAX_FUNCTION_LINES and name not in LONG_TRAINING_LOOPS
    }
    assert not long
    named = {name for path in MODULES.values() for name, _ in functions(path)}
    assert named >= LONG_TRAINING_LOOPS, "a named loop is gone: drop its name"


def test_each_compute_verb_has_its_embedded_half_under_the_same_name() -> None:
    from sqlheads.procedures import SQL_SERVER_VERBS

    compute = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("sqlheads.compute.")}
    verbs = {m.rsplit(".", 1)[1] for m in MODULES if m.startswith("sqlheads.verbs.")}
    registered = {function.__module__ for function, _ in SQL_SERVER_VERBS.values()}
    assert compute >= SHARED_COMPUTE, SHARED_COMPUTE - compute
    assert {m.rsplit(".", 1)[1] for m in registered} == compute - SHARED_COMPUTE
    assert all(m.startswith("sqlheads.compute.") for m in registered)
    assert verbs >= compute - SHARED_COMPUTE, compute - SHARED_COMPUTE - verbs


def test_every_package_is_in_the_wheel() -> None:
    """setuptools ships the packages pyproject.toml names, no others: a new subpackage left
    out would import here, from the source tree, and be missing from every install."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, sorted(packages - listed)


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff_finds_nothing_to_fix(command: list[str]) -> None:
    """The whole repository is linted and formatted as pyproject.toml's [tool.ruff] says (ruff
    pinned in constraints.txt: another version may format differently)."""
    found = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."],
        cwd=PACKAGE.parents[1],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stdout + found.stderr

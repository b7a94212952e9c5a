"""No module imports from a layer above its own (docs/architecture.md).

Layers, lowest first: errors, special, metrics, config | kernels | data | stats | obs, alloc | model |
moves | io | learn | api, report | cli. A package may import itself and any lower layer; two packages on
the same layer (obs, alloc; api, report) do not import each other. No two modules import each other, even
through others.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bnpvi"
LAYERS = [("errors", "special", "metrics", "config"), ("kernels",), ("data",), ("stats",), ("obs", "alloc"),
          ("model",), ("moves",), ("io",), ("learn",), ("api", "report"), ("cli",)]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}


def top_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "bnpvi" else None


def imported_names(path: Path) -> set[str]:
    """Every ``a.b`` of ``import a.b`` and every ``a.b.c`` of ``from a.b import c`` in the file, at any depth
    (in a function too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def imports_of(path: Path) -> set[str]:
    return {part for part in map(top_part, imported_names(path)) if part is not None}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = (package.name, *path.relative_to(package).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports (``from a.b import c``: the module
    a.b.c if there is one, else a.b)."""
    paths = {module_name(p, package): p for p in package.rglob("*.py")}

    def target(name: str) -> str | None:
        return next((m for m in (name, name.rpartition(".")[0]) if m in paths), None)

    return {name: {t for t in map(target, imported_names(path)) if t not in (None, name)}
            for name, path in paths.items()}


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of imports a -> b -> ... -> a (depth first), or [] when there is none."""
    done, path = set(), []

    def visit(name):
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return []
        path.append(name)
        cycle = next(filter(None, map(visit, sorted(graph[name]))), [])
        path.pop()
        done.add(name)
        return cycle

    return next(filter(None, map(visit, sorted(graph))), [])


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_from_its_own_layer_or_below(path):
    rel = path.relative_to(PACKAGE)
    own = rel.parts[0].removesuffix(".py")
    if own == "conf":
        return
    assert own in LEVEL, f"{rel}: package {own!r} has no layer; add it to LAYERS"
    for other in imports_of(path):
        if other == own:
            continue
        assert other in LEVEL, f"{rel} imports bnpvi.{other}, which has no layer"
        assert LEVEL[other] < LEVEL[own], f"{rel} (layer {LEVEL[own]}: {own}) imports bnpvi.{other} (layer {LEVEL[other]})"


def test_the_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from bnpvi.learn.runner import Run\nimport bnpvi.moves\n")
    assert imports_of(bad) == {"learn", "moves"}


def test_no_modules_import_each_other():
    """Imports inside functions count too: a lazy import keeps an optional dependency optional (Dask for
    ``learn/dask_pool.py``), which is one-way; two modules that import each other, lazily or not, can be read
    and changed only together."""
    cycle = import_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_check_catches_an_import_cycle(tmp_path):
    package = tmp_path / "bnpvi"
    (package / "learn").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "learn" / "__init__.py").write_text("")
    (package / "learn" / "pool.py").write_text("def open_pool():\n    from bnpvi.learn.dask_pool import DaskPool\n")
    (package / "learn" / "dask_pool.py").write_text("from bnpvi.learn.work import run\n")
    (package / "learn" / "work.py").write_text("from bnpvi.learn import pool\n")
    assert import_cycle(import_graph(package)) == ["bnpvi.learn.dask_pool", "bnpvi.learn.work", "bnpvi.learn.pool",
                                                   "bnpvi.learn.dask_pool"]
    (package / "learn" / "work.py").write_text("import numpy\n")
    assert import_cycle(import_graph(package)) == []

"""No module imports from a layer above its own (docs/architecture.md).

Layers, lowest first: errors, special, metrics, config | kernels | data | stats | obs, alloc | model |
moves | io | learn | api, report | cli. A package may import itself and any lower layer; two packages on
the same layer (obs, alloc; api, report) do not import each other.
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


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {part for part in map(top_part, found) if part is not None}


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

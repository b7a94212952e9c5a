"""Every dotted name ``bnpvi.x.y`` that the package's docstrings and comments, its Cython sources and the docs
cite resolves to a module or an attribute (a moved function leaves no stale reference behind)."""
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOTTED = re.compile(r"\bbnpvi(?:\.[A-Za-z_]\w*)+")
NOT_NAMES = {"bnpvi.lock"}
"""Names of files, not of modules (the run directory's lock file)."""


def resolves(name: str) -> bool:
    """``name`` is a module, or an attribute path from its longest importable prefix."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def test_dotted_references_resolve():
    sources = [*(ROOT / "bnpvi").rglob("*.py"), *(ROOT / "csrc").glob("*.pyx"), *(ROOT / "docs").glob("*.md"),
               ROOT / "README.md"]
    stale = [f"{path.relative_to(ROOT)}:{n}: {name}" for path in sorted(sources)
             for n, line in enumerate(path.read_text().splitlines(), 1) for name in DOTTED.findall(line)
             if name not in NOT_NAMES and not resolves(name)]
    assert not stale, "stale dotted references:\n" + "\n".join(stale)


def test_the_check_catches_a_moved_name():
    assert resolves("bnpvi.kernels.mixture.quad_argmax") and resolves("bnpvi.obs.gauss.Gauss.argmax_clusters")
    assert not resolves("bnpvi.obs.Gauss.best_clusters") and not resolves("bnpvi.kernels.nothing")

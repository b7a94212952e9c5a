"""The wheel ships every package and every config: pyproject lists them all."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setuptools_cfg():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_is_listed(setuptools_cfg):
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "bnpvi").rglob("__init__.py")}
    assert set(setuptools_cfg["packages"]) == found | {"bnpvi.conf"}


def test_the_top_level_conf_directory_ships_as_bnpvi_conf(setuptools_cfg):
    assert setuptools_cfg["package-dir"] == {"bnpvi.conf": "conf"}
    assert (ROOT / "conf" / "__init__.py").is_file()
    patterns = setuptools_cfg["package-data"]["bnpvi.conf"]
    shipped = {p for pattern in patterns for p in (ROOT / "conf").glob(pattern)}
    assert shipped == set((ROOT / "conf").rglob("*.yaml"))

"""Shared test fixtures (plain helpers: setups.py)."""
import compileall
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_configure(config):
    """Byte-compile the package under test once, in the main pytest process (not in each xdist worker): the
    suite starts a few hundred Python processes (bnpvi-train and the other commands, README blocks, Dask
    workers) that all import bnpvi, and where PYTHONDONTWRITEBYTECODE is set (or the tree is fresh) each would
    otherwise compile its ~100 modules again (0.3-0.4 s a process). Stale files are harmless: Python checks
    the source's time stamp and compiles what changed."""
    if hasattr(config, "workerinput"):
        return
    import bnpvi

    compileall.compile_dir(Path(bnpvi.__file__).parent, quiet=2)


@pytest.fixture
def shared_data() -> Path:
    """Path of ../shared/data (the reference data sets); skips the test where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (needs ../shared beside the repo)")
    return SHARED_DATA


@pytest.fixture
def compose_cfg(tmp_path, monkeypatch):
    """``compose_cfg(*overrides)`` -> the composed bnpvi-train config; toy data cached under tmp_path."""
    from hydra import compose, initialize_config_module

    from bnpvi.config import register_configs

    monkeypatch.setenv("BNPVI_CACHE", str(tmp_path / "cache"))
    register_configs()

    def make(*overrides):
        with initialize_config_module(config_module="bnpvi.conf", version_base="1.3"):
            return compose(config_name="train", overrides=list(overrides))
    return make


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """The toy-data cache that a session's bnpvi-train processes share."""
    return tmp_path_factory.mktemp("bnpvi-cache")


@pytest.fixture
def env(cache_dir):
    """The environment of a bnpvi-train process with the session's toy-data cache (``setups.env_of``)."""
    from setups import env_of  # setups imports bnpvi: conftest stays light until a test asks for a process

    return env_of(cache_dir)

"""Shared test fixtures (plain helpers: setups.py)."""
import compileall
import logging
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

LONGEST_FIRST = ("test_readme.py", "test_dask.py", "test_birth_refinement.py", "test_cli.py", "test_em.py",
                 "test_resume.py", "test_topic_runs.py", "test_disk_cache.py")
"""The test files that take longest, collected first in this order: xdist (``--dist loadfile
--no-loadscope-reorder``) hands files to its workers in collection order, so the two workers start on the
long files and finish together, on short ones."""


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


def pytest_collection_modifyitems(config, items):
    """The tests of the :data:`LONGEST_FIRST` files first; every file's tests stay together and in order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def shared_data() -> Path:
    """Path of ../shared/data (the reference data sets); skips the test where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (needs ../shared beside the repo)")
    return SHARED_DATA


@pytest.fixture
def compose_cfg(tmp_path, monkeypatch):
    """``compose_cfg(*overrides)`` -> the composed bnpvi-train config (``setups.compose``: no figures unless
    asked); toy data cached under tmp_path."""
    from setups import compose

    monkeypatch.setenv("BNPVI_CACHE", str(tmp_path / "cache"))
    return compose


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """The toy-data cache that a session's bnpvi-train processes share."""
    return tmp_path_factory.mktemp("bnpvi-cache")


@pytest.fixture
def env(cache_dir):
    """The environment of a bnpvi-train process with the session's toy-data cache (``setups.env_of``)."""
    from setups import env_of  # setups imports bnpvi: conftest stays light until a test asks for a process

    return env_of(cache_dir)


@pytest.fixture
def bnpvi_train(tmp_path, monkeypatch, capsys, cache_dir):
    """``bnpvi_train(*args)`` -> (exit status, stdout, stderr) of bnpvi-train run in this process from
    ``tmp_path``, with the session's toy-data cache (a process each costs a second of imports: one smoke test
    per command runs the console script itself)."""
    from bnpvi.cli import train as train_cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BNPVI_CACHE", str(cache_dir))

    def run(*args):
        capsys.readouterr()
        root, bnpvi_log = logging.getLogger(), logging.getLogger("bnpvi")
        kept = [(log, log.handlers[:], log.level, log.propagate) for log in (root, bnpvi_log)]
        try:
            train_cli.main(list(args))
            status = 0
        except SystemExit as stop:
            status = stop.code
        finally:  # Hydra's job logging writes to this test's captured streams and run directories: undo it
            for log, handlers, level, propagate in kept:
                for handler in log.handlers:
                    if handler not in handlers:
                        handler.close()
                log.handlers[:], log.level, log.propagate = handlers, level, propagate
        out, err = capsys.readouterr()
        return status, out, err
    return run

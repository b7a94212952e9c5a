"""Shared test fixtures."""
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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

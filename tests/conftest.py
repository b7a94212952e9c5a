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

import pytest


@pytest.fixture(autouse=True)
def _single_thread(single_thread):
    """Every test in this directory runs single-threaded (see tests/conftest.py)."""

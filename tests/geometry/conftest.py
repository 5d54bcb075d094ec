import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # mftma_cases / mftma_real helpers


@pytest.fixture(autouse=True)
def _single_thread(single_thread):
    """Every test in this directory runs single-threaded (see tests/conftest.py)."""

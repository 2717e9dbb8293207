import os

import pytest

# Importing the app opens its backend: in tests, none of the real ones.
os.environ.setdefault("TASUKI_URL", "memory://")

import shop


@pytest.fixture(autouse=True)
def app(tasuki_memory):
    """Every test runs the shop's app on a fresh memory:// store of its own."""
    shop.RECEIPTS.clear()
    return tasuki_memory(shop.app)

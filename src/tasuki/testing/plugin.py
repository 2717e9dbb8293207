"""The pytest plugin of tasuki, loaded by pytest wherever tasuki is installed (the
`pytest11` entry point named `tasuki`; `-p no:tasuki` turns it off).

It gives the tests of an app two fixtures, and registers the `requires` marker of the
contract suite (`tasuki.testing.contract`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tasuki.app import App


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): skip on backends without these Capabilities fields",
    )


@pytest.fixture
def tasuki_app() -> Iterator[App]:
    """A new App on a private `memory://` store, for jobs declared in the test."""
    from tasuki.app import App

    app = App("memory://")
    yield app
    app.close()


@pytest.fixture
def tasuki_memory() -> Iterator[Callable[[App], App]]:
    """`tasuki_memory(app)` puts your app on a fresh `memory://` store for this test (and
    returns it); when the test ends, the app is back on its own backend."""
    from tasuki.testing.memory import use_memory

    with ExitStack() as stack:
        yield lambda app: stack.enter_context(use_memory(app))

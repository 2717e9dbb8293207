"""The contract suite (`tasuki.testing.contract`) on every backend of this repository,
declared the way a backend of another package declares its own: `make_backend_url`,
here parametrized by the entries of `tests/support/backends.py`, and the optional
`contract_options` of each entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tasuki.testing.contract import ContractOptions
from tests.support.backends import BACKENDS, CONTRACT


@pytest.fixture(params=CONTRACT)
def make_backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Fresh stores on every backend, SQS included, one test run each."""
    entry = BACKENDS[request.param]
    return lambda: entry.url(request, tmp_path)


@pytest.fixture
def contract_options(request: pytest.FixtureRequest) -> ContractOptions:
    return BACKENDS[request.node.callspec.params["make_backend_url"]].contract

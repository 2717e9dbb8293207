"""The contract suite: what every tasuki backend must do, as tests any backend can run.

A backend joins by declaring one fixture and importing the suite into a test module:

    # tests/test_contract.py of a backend package
    import uuid

    import pytest

    from tasuki.testing.contract import *  # noqa: F403


    @pytest.fixture
    def make_backend_url(tmp_path):
        return lambda: f"mine://{tmp_path}/{uuid.uuid4().hex}"

`make_backend_url` and the optional `contract_options` are described in `fixtures`.
Tests that need a capability some backends lack carry `@pytest.mark.requires(name)` (a
field of `Capabilities`) and are skipped, with the reason, where it is missing. The
backends of this repository run the suite exactly this way (`tests/contract/`).

pytest rewrites the suite's asserts as it does a test module's (so a failure shows the
values that differ): it does so for every module of a package with a pytest plugin, and
tasuki's (`tasuki.testing.plugin`) registers the `requires` marker.
"""

from __future__ import annotations

from tasuki.testing.contract.cancel import TestCancel
from tasuki.testing.contract.concurrency import TestConcurrency
from tasuki.testing.contract.console import (
    TestActions,
    TestBrowse,
    TestJobStats,
    TestPause,
    TestWorkers,
    console_states,
)
from tasuki.testing.contract.fixtures import (
    ContractOptions,
    backend,
    backend_url,
    contract_requires,
    key_prefix,
    queue,
    short,
    volume,
)
from tasuki.testing.contract.flows import TestFlows
from tasuki.testing.contract.inspection import TestInspect
from tasuki.testing.contract.lifecycle import TestLifecycle
from tasuki.testing.contract.limits import TestLimits
from tasuki.testing.contract.lock_properties import TestLockProperties
from tasuki.testing.contract.locks import TestLocks
from tasuki.testing.contract.operations import TestOperations
from tasuki.testing.contract.priorities import TestPriorities
from tasuki.testing.contract.reliability import TestReliability
from tasuki.testing.contract.results import TestResults
from tasuki.testing.contract.steps import TestSteps
from tasuki.testing.contract.text import TestHostileText

__all__ = [
    "ContractOptions",
    "TestActions",
    "TestBrowse",
    "TestCancel",
    "TestConcurrency",
    "TestFlows",
    "TestHostileText",
    "TestInspect",
    "TestJobStats",
    "TestLifecycle",
    "TestLimits",
    "TestLockProperties",
    "TestLocks",
    "TestOperations",
    "TestPause",
    "TestPriorities",
    "TestReliability",
    "TestResults",
    "TestSteps",
    "TestWorkers",
    "backend",
    "backend_url",
    "console_states",
    "contract_requires",
    "key_prefix",
    "queue",
    "short",
    "volume",
]

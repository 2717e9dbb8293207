"""What the contract suite asks of a backend, and the fixtures it builds from the answer.

The backend under test declares one fixture, `make_backend_url`: a function that returns
the URL of a fresh, isolated store each time it is called (a new file, schema, key
prefix or name), starting whatever test server it needs through its own fixtures. Every
`backend_from_url` of one such URL must reach the same store, as a second connection
would: the suite opens several on one store, in threads and, when the backend declares
`cross_process`, in other processes.

It may also declare `contract_options`, returning `ContractOptions`, to scale the bulk
tests to a slow test server or to lapse locks whose TTLs run on the server's clock.

The fixtures below are imported with the suite (`from tasuki.testing.contract import *`),
so they belong to the test module that imports it; the backend's own fixtures may live in
that module or in a conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tasuki.backends.base import Backend
from tasuki.backends.urls import backend_from_url

# Give the lock `key` that many more seconds on the server's clock, or delete it (None).
ExpireLock = Callable[[Backend, str, float | None], None]


@dataclass(frozen=True)
class ContractOptions:
    """What a backend may tell the contract suite beyond its URLs.

    `volume` is the share of a bulk test's message count (up to 10,000) that its test
    server gets through in reasonable time; never fewer than 50 messages are sent.

    `expire_lock` is for a lock store whose TTLs run on its server's clock, which a test
    cannot move: the lock property test stretches every TTL and calls it where its model
    lapses or shortens a lock. Without it, the test sets the lock store's `clock`
    attribute (a function returning the time) and moves that clock instead.

    `lock_examples` and `lock_steps` size the lock property test: more where a step
    costs microseconds.
    """

    volume: float = 1.0
    expire_lock: ExpireLock | None = None
    lock_examples: int = 40
    lock_steps: int = 25

    def __post_init__(self) -> None:
        if not 0 < self.volume <= 1:
            raise ValueError(f"volume must be in (0, 1], got {self.volume!r}")
        if self.lock_examples < 1 or self.lock_steps < 1:
            raise ValueError("lock_examples and lock_steps must be >= 1")


def options_of(request: pytest.FixtureRequest) -> ContractOptions:
    """The backend's `contract_options` fixture, or the defaults when it declares none."""
    try:
        options = request.getfixturevalue("contract_options")
    except pytest.FixtureLookupError:
        return ContractOptions()
    if not isinstance(options, ContractOptions):
        raise TypeError(
            f"the contract_options fixture must return a ContractOptions, got {options!r}"
        )
    return options


def skip_unless_capable(backend: Backend, capability: str) -> None:
    """Skip the running test, naming the capability, when the backend lacks it."""
    if not hasattr(backend.capabilities, capability):
        raise AssertionError(f"no capability called {capability!r}")
    if not getattr(backend.capabilities, capability):
        scheme = backend.scheme
        pytest.skip(f"{scheme}:// lacks the {capability} capability")


def new_url(make_backend_url: Callable[[], str]) -> str:
    """A fresh store's URL from the backend's `make_backend_url`, checked."""
    if not callable(make_backend_url):
        raise TypeError(
            "the make_backend_url fixture must return a function that makes a fresh "
            f"store's URL at each call (e.g. `lambda: ...`), got {make_backend_url!r}"
        )
    url = make_backend_url()
    if not isinstance(url, str) or "://" not in url:
        raise TypeError(f"make_backend_url() must return a backend URL, got {url!r}")
    return url


@pytest.fixture
def backend_url(make_backend_url: Callable[[], str]) -> str:
    """The URL of a fresh store of the backend under test."""
    return new_url(make_backend_url)


@pytest.fixture
def backend(backend_url: str) -> Iterator[Backend]:
    b = backend_from_url(backend_url)
    yield b
    b.close()


@pytest.fixture
def short(backend: Backend) -> float:
    """A short lease or delay the backend can keep: 0.25 s, or its timer resolution."""
    return max(0.25, backend.capabilities.timer_resolution)


@pytest.fixture
def volume(request: pytest.FixtureRequest) -> Callable[[int], int]:
    """Scale a bulk test's message count to what the backend's test server runs quickly."""
    share = options_of(request).volume
    return lambda count: max(50, int(count * share))


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def key_prefix() -> str:
    return f"k-{uuid.uuid4().hex[:12]}:"


@pytest.fixture(autouse=True)
def contract_requires(request: pytest.FixtureRequest) -> None:
    """`@pytest.mark.requires("capability", ...)`: skipped where the backend lacks one."""
    for marker in request.node.iter_markers("requires"):
        backend: Backend = request.getfixturevalue("backend")
        for capability in marker.args:
            skip_unless_capable(backend, capability)

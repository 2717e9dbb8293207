"""Testing with tasuki: for the code of its users, and for the authors of backends.

For your own jobs:

- `drain(app)` runs the app's jobs until its queues are idle and re-raises the first
  error a job raised; `Drained` says what ran.
- `use_memory(app)` puts an app declared for production on a fresh `memory://` store.
- The pytest plugin (`tasuki.testing.plugin`, loaded by pytest wherever tasuki is
  installed) gives the fixtures `tasuki_app` and `tasuki_memory`.
- `FaultyBackend` wraps any backend and injects outages (failed, lost or slow calls), to
  test what a worker does when its backend misbehaves.

For a backend: the contract suite, `tasuki.testing.contract`.

Nothing here is imported by `import tasuki`, and only the pytest plugin and the
contract suite import pytest.
"""

from __future__ import annotations

from tasuki.testing.drain import Drained, Run, drain
from tasuki.testing.faulty import FaultyBackend
from tasuki.testing.memory import use_memory

__all__ = ["Drained", "FaultyBackend", "Run", "drain", "use_memory"]

"""An app whose module fails at import, as after a bad deploy: its workers never start."""

from __future__ import annotations

raise RuntimeError("the database password is not set (a bad deploy)")

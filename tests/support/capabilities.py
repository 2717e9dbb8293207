"""Backends opened without some capability: how a test of a refusal still runs once
every backend at hand has grown the capability it refuses without."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tasuki.app.application as tasuki_app
import tasuki.cli.common as cli_common


def without(monkeypatch: pytest.MonkeyPatch, *capabilities: str) -> None:
    """Every backend opened from here on (by `App(url)` or a CLI command) lacks them."""
    off = dict.fromkeys(capabilities, False)

    def lacking(opens: Any) -> Any:
        def opening(*args: Any, **kwargs: Any) -> Any:
            backend = opens(*args, **kwargs)
            backend.capabilities = dataclasses.replace(backend.capabilities, **off)
            return backend

        return opening

    monkeypatch.setattr(tasuki_app, "backend_from_url", lacking(tasuki_app.backend_from_url))
    monkeypatch.setattr(cli_common, "open_existing", lacking(cli_common.open_existing))

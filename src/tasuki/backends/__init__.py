"""Backends: where messages live. `base` is the interface; `urls` maps schemes to backends."""

from tasuki.backends.base import Backend, Capabilities, LockStore
from tasuki.backends.urls import DEFAULT_URL, backend_from_url

__all__ = ["DEFAULT_URL", "Backend", "Capabilities", "LockStore", "backend_from_url"]

"""The application object, `tasuki.App`: where jobs are declared and messages enter.

`application.py` is the App itself (the wiring, producing, operating, the worker);
`declaring.py` turns a function and its options into a `Job`; `flows.py` reads and
cancels running workflows.
"""

from __future__ import annotations

from tasuki.app.application import App

__all__ = ["App"]

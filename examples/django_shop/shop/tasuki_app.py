"""The project's one tasuki App, built from the settings.

Jobs live in a `tasks` module of each installed app (`orders/tasks.py`), as Celery users
know it; `autodiscover()` imports them so the worker knows every job by name.
"""

from __future__ import annotations

import importlib
import importlib.util

from django.apps import apps
from django.conf import settings

import tasuki

app = tasuki.App(settings.TASUKI_URL)


def autodiscover() -> None:
    for config in apps.get_app_configs():
        name = f"{config.name}.tasks"
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)

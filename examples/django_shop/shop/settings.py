"""Settings of the example project: only what Django and tasuki need."""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = ["orders"]
MIDDLEWARE: list[str] = []
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
USE_TZ = True

# Where tasuki keeps its messages: one setting, like any other. In production point it at
# Redis (redis://...) through the environment.
TASUKI_URL = os.environ.get("TASUKI_URL", f"sqlite:///{BASE_DIR / 'tasuki.db'}")

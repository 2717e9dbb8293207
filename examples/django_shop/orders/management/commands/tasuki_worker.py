"""`python manage.py tasuki_worker`: the tasuki worker, with Django set up first.

Like `tasuki worker`, it stops gracefully on SIGTERM/SIGINT (running jobs finish within
`--grace` seconds, the rest is handed back without penalty).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from shop.tasuki_app import app, autodiscover

from tasuki import logs


class Command(BaseCommand):
    help = "Run a tasuki worker for this project's jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-q", "--queues", help="Comma-separated queues (default: all).")
        parser.add_argument("-c", "--concurrency", type=int, default=8)
        parser.add_argument("--grace", type=float, default=25.0)
        parser.add_argument(
            "--until-idle",
            action="store_true",
            help="Stop once the queues are empty (for scripts and tests).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        logs.configure("INFO", "plain")
        autodiscover()
        worker = app.worker(
            queues=options["queues"],
            concurrency=options["concurrency"],
            grace=options["grace"],
            handle_signals=not options["until_idle"],
        )
        worker.run(until_idle=options["until_idle"])

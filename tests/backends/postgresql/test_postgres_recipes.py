"""The documented recipes for enqueueing inside a transaction an ORM opened: a SQLAlchemy
session and Django's `transaction.atomic` (docs/backends/postgresql.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy.orm import Session

import tasuki
from tasuki.testing.servers import PostgresServer
from tests.support.processes import env_with_src


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    return postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def app(url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(url)
    yield app
    app.close()


def test_sqlalchemy_session(app: tasuki.App, url: str) -> None:
    ship = app.job(name="ship", queue="orders")(lambda n: None)
    engine = sqlalchemy.create_engine(
        url.split("?", 1)[0].replace("postgresql:", "postgresql+psycopg:")
    )
    try:
        # The recipe: the psycopg connection under the session's own transaction.
        with Session(engine) as session:
            session.execute(sqlalchemy.text("SELECT 1"))
            conn = session.connection().connection.driver_connection
            ship.options(connection=conn).enqueue(1)
            session.rollback()
        assert app.stats("orders")["ready"] == 0

        with Session(engine) as session, session.begin():
            conn = session.connection().connection.driver_connection
            ship.options(connection=conn).enqueue(2)
            ship.options(connection=conn).enqueue_many([(3,), (4,)])
            assert app.stats("orders")["ready"] == 0  # not before the commit
        assert app.stats("orders")["ready"] == 3
    finally:
        engine.dispose()


DJANGO_SCRIPT = """
import sys
import django
from django.conf import settings

host, port, name, url = sys.argv[1:]
settings.configure(
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": host, "PORT": port, "NAME": name, "USER": "postgres",
    }},
    INSTALLED_APPS=[],
    USE_TZ=True,
)
django.setup()

import tasuki
from django.db import connection, transaction

app = tasuki.App(url)
ship = app.job(name="ship", queue="orders")(lambda n: None)

class Boom(Exception):
    pass

# The recipe: inside atomic(), Django's connection is a psycopg connection.
try:
    with transaction.atomic():
        ship.options(connection=connection.connection).enqueue(1)
        raise Boom
except Boom:
    pass
print("after rollback", app.stats("orders")["ready"])

with transaction.atomic():
    ship.options(connection=connection.connection).enqueue(2)
    inside = app.stats("orders")["ready"]
print("inside", inside)
print("after commit", app.stats("orders")["ready"])
app.close()
"""


def test_django_transaction_atomic(
    url: str, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    script = tmp_path / "django_recipe.py"
    script.write_text(textwrap.dedent(DJANGO_SCRIPT))
    # Its own process: Django's settings are configured once per process.
    done = subprocess.run(
        [sys.executable, str(script), "127.0.0.1", str(postgres_server.port), "test", url],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env_with_src(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["after rollback 0", "inside 0", "after commit 1"]

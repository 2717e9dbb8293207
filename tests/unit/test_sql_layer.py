"""The shared SQL layer: query files are checked against the names it needs, at import."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasuki.backends.sql.base import OPTIONAL, REQUIRED
from tasuki.backends.sqlfiles import QueryNamesError, check_names, load_queries


def _file(names: list[str]) -> str:
    return "".join(f"-- name: {name}\nSELECT 1;\n\n" for name in names)


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    """An importable package `fake_dialect` whose queries.sql the test writes."""
    root = tmp_path / "fake_dialect"
    root.mkdir()
    root.joinpath("__init__.py").write_text(
        textwrap.dedent(
            """
            from tasuki.backends.sql.base import load_dialect_queries

            Q = load_dialect_queries(__name__)
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    yield root
    sys.path.remove(str(tmp_path))
    sys.modules.pop("fake_dialect", None)


def test_sqlite_defines_exactly_the_required_queries() -> None:
    queries = load_queries("tasuki.backends.sqlite", "queries.sql")
    assert set(queries) == REQUIRED


def test_a_misspelt_query_name_fails_at_import(package: Path) -> None:
    names = [*sorted(REQUIRED - {"lease"}), "lease_one"]
    package.joinpath("queries.sql").write_text(_file(names))
    with pytest.raises(QueryNamesError, match="missing lease; unknown lease_one"):
        importlib.import_module("fake_dialect")


def test_a_complete_query_file_imports(package: Path) -> None:
    package.joinpath("queries.sql").write_text(_file(sorted(REQUIRED)))
    module = importlib.import_module("fake_dialect")
    assert set(module.Q) == REQUIRED


def test_an_optional_query_may_be_defined_and_a_misspelt_one_still_fails(
    package: Path,
) -> None:
    package.joinpath("queries.sql").write_text(_file([*sorted(REQUIRED), *sorted(OPTIONAL)]))
    assert set(importlib.import_module("fake_dialect").Q) == REQUIRED | OPTIONAL
    sys.modules.pop("fake_dialect", None)
    package.joinpath("queries.sql").write_text(_file([*sorted(REQUIRED), "insert_batches"]))
    with pytest.raises(QueryNamesError, match="unknown insert_batches"):
        importlib.import_module("fake_dialect")


def test_check_names_reports_missing_and_unknown() -> None:
    with pytest.raises(QueryNamesError, match=r"x\.sql: missing b$"):
        check_names({"a": "SELECT 1"}, {"a", "b"}, "x.sql")
    with pytest.raises(QueryNamesError, match="unknown c"):
        check_names({"a": "SELECT 1", "c": "SELECT 1"}, {"a"}, "x.sql")
    check_names({"a": "SELECT 1"}, {"a"}, "x.sql")


def test_sqlite_and_postgresql_define_the_same_queries() -> None:
    sqlite = load_queries("tasuki.backends.sqlite", "queries.sql")
    postgres = load_queries("tasuki.backends.postgres", "queries.sql")
    # The required names are the same; an optional one is a single-statement shortcut.
    assert set(sqlite) - OPTIONAL == set(postgres) - OPTIONAL == REQUIRED
    assert set(postgres) & OPTIONAL == {"insert_batch", "ack_archive", "prune_archive"}

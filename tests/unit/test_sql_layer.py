"""The shared SQL layer: query files are checked against the names it needs, at import."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasuki.backends.sql.dialect import (
    EXTRAS,
    POSTGRES_EXTRAS,
    REQUIRED,
    SEPARATE_STEPS,
    SQLITE_EXTRAS,
)
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
            from tasuki.backends.sql.dialect import load_dialect_queries

            Q = load_dialect_queries(__name__, cte_writes=True)
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    yield root
    sys.path.remove(str(tmp_path))
    sys.modules.pop("fake_dialect", None)


def test_sqlite_defines_the_required_queries_the_separate_steps_and_its_extras() -> None:
    queries = {
        **load_queries("tasuki.backends.sqlite", "queries.sql"),
        **load_queries("tasuki.backends.sqlite", "results.sql"),
        **load_queries("tasuki.backends.sqlite", "flows.sql"),
        **load_queries("tasuki.backends.sqlite", "limits.sql"),
        **load_queries("tasuki.backends.sqlite", "console.sql"),
        **load_queries("tasuki.backends.sqlite", "durable.sql"),
    }
    assert set(queries) == REQUIRED | SEPARATE_STEPS | SQLITE_EXTRAS


def test_a_misspelt_query_name_fails_at_import(package: Path) -> None:
    names = [*sorted(REQUIRED - {"lease"}), "lease_one"]
    package.joinpath("queries.sql").write_text(_file(names))
    with pytest.raises(QueryNamesError, match="missing lease; unknown lease_one"):
        importlib.import_module("fake_dialect")


def test_a_complete_query_file_imports(package: Path) -> None:
    package.joinpath("queries.sql").write_text(_file(sorted(REQUIRED)))
    module = importlib.import_module("fake_dialect")
    assert set(module.Q) == REQUIRED


def test_an_extra_query_may_be_defined_and_a_misspelt_one_still_fails(
    package: Path,
) -> None:
    package.joinpath("queries.sql").write_text(_file([*sorted(REQUIRED), *sorted(EXTRAS)]))
    assert set(importlib.import_module("fake_dialect").Q) == REQUIRED | EXTRAS
    sys.modules.pop("fake_dialect", None)
    package.joinpath("queries.sql").write_text(_file([*sorted(REQUIRED), "insert_batches"]))
    with pytest.raises(QueryNamesError, match="unknown insert_batches"):
        importlib.import_module("fake_dialect")


def test_separate_steps_are_required_exactly_without_cte_writes(package: Path) -> None:
    """A dialect whose statements cannot take the separate steps must define them; one
    whose statements take them must not (the queries would never run)."""
    package.joinpath("queries.sql").write_text(_file([*sorted(REQUIRED), *sorted(SEPARATE_STEPS)]))
    unknown = ", ".join(sorted(SEPARATE_STEPS))
    with pytest.raises(QueryNamesError, match=f"unknown {unknown}$"):
        importlib.import_module("fake_dialect")  # it declares cte_writes=True
    sys.modules.pop("fake_dialect", None)
    init = package.joinpath("__init__.py")
    init.write_text(init.read_text().replace("cte_writes=True", "cte_writes=False"))
    assert set(importlib.import_module("fake_dialect").Q) == REQUIRED | SEPARATE_STEPS
    sys.modules.pop("fake_dialect", None)
    package.joinpath("queries.sql").write_text(_file(sorted(REQUIRED)))
    with pytest.raises(QueryNamesError, match=f"missing {unknown}$"):
        importlib.import_module("fake_dialect")


def test_check_names_reports_missing_and_unknown() -> None:
    with pytest.raises(QueryNamesError, match=r"x\.sql: missing b$"):
        check_names({"a": "SELECT 1"}, {"a", "b"}, "x.sql")
    with pytest.raises(QueryNamesError, match="unknown c"):
        check_names({"a": "SELECT 1", "c": "SELECT 1"}, {"a"}, "x.sql")
    check_names({"a": "SELECT 1"}, {"a"}, "x.sql")


def test_sqlite_and_postgresql_define_the_same_queries() -> None:
    """The same names, but for what each declares: SQLite the steps PostgreSQL's
    statements take inside themselves, each its extras."""
    sqlite = {
        **load_queries("tasuki.backends.sqlite", "queries.sql"),
        **load_queries("tasuki.backends.sqlite", "results.sql"),
        **load_queries("tasuki.backends.sqlite", "flows.sql"),
        **load_queries("tasuki.backends.sqlite", "limits.sql"),
        **load_queries("tasuki.backends.sqlite", "console.sql"),
        **load_queries("tasuki.backends.sqlite", "durable.sql"),
    }
    postgres = {
        **load_queries("tasuki.backends.postgres", "queries.sql"),
        **load_queries("tasuki.backends.postgres", "archive.sql"),
        **load_queries("tasuki.backends.postgres", "results.sql"),
        **load_queries("tasuki.backends.postgres", "flows.sql"),
        **load_queries("tasuki.backends.postgres", "limits.sql"),
        **load_queries("tasuki.backends.postgres", "console.sql"),
        **load_queries("tasuki.backends.postgres", "durable.sql"),
    }
    assert set(sqlite) - SEPARATE_STEPS - EXTRAS == set(postgres) - EXTRAS == REQUIRED
    assert set(sqlite) - REQUIRED == SEPARATE_STEPS | SQLITE_EXTRAS
    assert set(postgres) - REQUIRED == POSTGRES_EXTRAS


def test_a_name_defined_in_two_of_a_dialects_files_fails(package: Path) -> None:
    package.joinpath("queries.sql").write_text(_file(sorted(REQUIRED)))
    package.joinpath("more.sql").write_text(_file(["lease"]))
    init = package.joinpath("__init__.py")
    files = 'files=("queries.sql", "more.sql")'
    init.write_text(init.read_text().replace("cte_writes=True", f"cte_writes=True, {files}"))
    with pytest.raises(QueryNamesError, match=r"more\.sql: defined again: lease"):
        importlib.import_module("fake_dialect")


def test_rows_are_read_by_column_name_and_a_missing_column_is_named() -> None:
    import sqlite3

    from tasuki.backends.sql.dialect import named_rows
    from tasuki.errors import BackendError

    conn = sqlite3.connect(":memory:")
    cursor = conn.execute("SELECT 1 AS a, 2 AS b, 3 AS c UNION ALL SELECT 4, 5, 6")
    assert named_rows(cursor, "c", "a") == [(3, 1), (6, 4)]  # any order, by name
    assert named_rows(conn.execute("SELECT 7 AS only"), "only") == [(7,)]
    with pytest.raises(BackendError, match="no column b, d"):
        named_rows(conn.execute("SELECT 1 AS a"), "a", "b", "d")

"""The one table helper of the command line (`tasuki.cli.tables`), at 80 and 200 columns,
on a terminal (colours, box drawing) and into a pipe: ids whole, words never broken,
nothing wider than the console, a block per record when a table cannot fit."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.cells import cell_len
from rich.console import Console

from tasuki.cli.tables import TEXT_FLOOR, Column, record, record_lines, table, table_widths

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

COLUMNS = [
    Column("id", whole=True),
    Column("job", whole=True),
    Column("attempts", whole=True, justify="right"),
    Column("reason"),
    Column("last error"),
]
ROWS = [
    [
        "d477351231844b879eeaef9ec9f2c879",
        "charge_card",
        "3",
        "retries exhausted after 3 attempts",
        "RuntimeError: payment gateway refused card 4",
    ],
    [
        "eec0fa77e4ea4ed9b222f60f9b819563",
        "resize",
        "1",
        "undecodable message",
        "SerializationError: cannot decode the json body: unexpected end of data: line 1 "
        "column 20 (char 19)",
    ],
    ["order-7", "no_such_job", "1", "unknown job 'no_such_job'", "UnknownJob: no_such_job"],
]


def render(width: int, terminal: bool, rows: list[list[str]] = ROWS) -> list[str]:
    out = Console(
        width=width,
        file=StringIO(),
        force_terminal=terminal,
        color_system="standard" if terminal else None,
    )
    table("dead letters (3)", COLUMNS, rows, out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert ("\x1b[" in text) == terminal
    return ANSI.sub("", text).splitlines()


def words_of(rows: list[list[str]]) -> set[str]:
    return {word for row in rows for cell in row for word in cell.split()}


def assert_reads_well(lines: list[str], width: int, rows: list[list[str]]) -> None:
    assert all(cell_len(line) <= width for line in lines), [x for x in lines if len(x) > width]
    tokens = {token for line in lines for token in re.split(r"[\s│┃]+", line)}
    assert words_of(rows) <= tokens, words_of(rows) - tokens  # every word whole, none split
    for row in rows:
        assert any(row[0] in line for line in lines), row[0]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_a_table_that_does_not_fit_80_columns_becomes_blocks(terminal: bool) -> None:
    lines = render(80, terminal)
    assert_reads_well(lines, 80, ROWS)
    assert not any("┃" in line for line in lines)  # no table
    at = lines.index("d477351231844b879eeaef9ec9f2c879")  # the id on a line of its own
    assert lines[at + 1 : at + 5] == [
        "  job:         charge_card",
        "  attempts:    3",
        "  reason:      retries exhausted after 3 attempts",
        "  last error:  RuntimeError: payment gateway refused card 4",
    ]
    # A long value wraps between words, under itself.
    at = lines.index(
        "  last error:  SerializationError: cannot decode the json body: unexpected end"
    )
    assert lines[at + 1] == "               of data: line 1 column 20 (char 19)"


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_a_table_that_fits_200_columns_is_a_table(terminal: bool) -> None:
    lines = render(200, terminal)
    assert_reads_well(lines, 200, ROWS)
    row = next(line for line in lines if "d477351231844b879eeaef9ec9f2c879" in line)
    for cell in ROWS[0]:
        assert cell in row, row  # the whole row on one line


def test_prose_wraps_between_words_when_a_table_nearly_fits() -> None:
    """At 150 columns the table fits once the longest error wraps: the short reason keeps
    its line and only the error column wraps, between words."""
    lines = render(150, False)
    assert_reads_well(lines, 150, ROWS)
    assert any("┃" in line for line in lines)
    row = next(line for line in lines if "eec0fa77e4ea4ed9b222f60f9b819563" in line)
    assert "undecodable message" in row
    assert "SerializationError:" in row and "(char 19)" not in row


def test_widths_keep_ids_whole_and_prose_above_its_floor() -> None:
    widths = table_widths(COLUMNS, ROWS, 150)
    assert widths is not None
    assert widths[0] == 32 and widths[1] == len("charge_card")
    assert widths[3] == len("retries exhausted after 3 attempts")
    assert sum(widths) + 3 * len(COLUMNS) + 1 <= 150
    assert table_widths(COLUMNS, ROWS, 80) is None
    wide = [Column("id", whole=True), Column("note")]
    assert table_widths(wide, [["x" * 100, "short"]], 80) is None  # an id is never cut
    narrow = table_widths([Column("id", whole=True), Column("note")], [["a", "w " * 40]], 40)
    assert narrow is not None and narrow[1] >= TEXT_FLOOR


def test_a_long_id_stays_whole_on_its_own_line() -> None:
    long_id = "tenant-42/" + "x" * 100
    rows = [[long_id, "resize", "1", "testing", "RuntimeError: boom"]]
    lines = render(80, False, rows)
    assert long_id in lines  # longer than the console, and still one line to copy


def test_record_lines_wrap_under_the_value_and_keep_long_tokens() -> None:
    url = "https://example.com/" + "a" * 90
    lines = record_lines(
        "dead letter x", [("reason", "gave up"), ("error", f"fetching {url} failed: timeout")], 80
    )
    assert lines[0] == "dead letter x"
    assert lines[1] == "  reason:  gave up"
    assert lines[2] == "  error:   fetching"
    assert lines[3] == f"           {url}"  # longer than 80, but never cut
    assert lines[4] == "           failed: timeout"


def test_record_prints_markup_as_written() -> None:
    out = Console(width=80, file=StringIO(), force_terminal=True)
    record("[bold]id[/bold]", [("error", "KeyError: 'tasuki[redis]'")], out=out)
    text = ANSI.sub("", out.file.getvalue())  # type: ignore[attr-defined]
    assert "[bold]id[/bold]" in text and "'tasuki[redis]'" in text


def test_an_empty_table_says_so() -> None:
    out = Console(width=80, file=StringIO())
    table("dead letters (0)", COLUMNS, [], out=out)
    assert out.file.getvalue().splitlines() == ["dead letters (0)", "  (none)"]  # type: ignore[attr-defined]

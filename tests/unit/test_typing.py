"""What a type checker says of a user's calls: mypy on small programs, as a user runs it.

`step()` is typed like `enqueue`: the job's whole argument list, or all of it but the
first parameter (a chain's predecessor's result); a wrong step argument is an error.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.support.deps import need

mypy_api = need("mypy.api")
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import asyncio
import tasuki

app = tasuki.App("memory://")

@app.job
def fetch(url: str) -> str:
    return url

@app.job
def parse(page: str, strip: str = "") -> list[str]:
    return [page.strip(strip)]

@app.job
def store(rows: list[str], table: str) -> int:
    return len(rows)

tasuki.chain(fetch.step("a.io"), parse.step(strip="<>"), store.step(table="pages"))
tasuki.group(parse.step(p) for p in ("a", "b"))
fetch.options(queue="q").step("a.io")
parse.options(priority=5).step(strip="x")

async def produce() -> str:
    return await fetch.enqueue_async("a.io") + await fetch.options(delay=1).enqueue_async("b")
"""

WRONG = {
    "fetch.step(42)": "call-overload",
    "store.step(table=3)": "call-overload",
    "parse.step(nope=1)": "call-overload",
    "store.step(['r'], 't', 'extra')": "call-overload",
    "fetch.options(queue='q').step(1)": "call-overload",
    "asyncio.run(fetch.enqueue_async(42))": "arg-type",
}


def check(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "user_app.py"
    path.write_text(textwrap.dedent(source))
    out, err, _ = mypy_api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(path),
        ]
    )
    assert not err, err
    return [line for line in out.splitlines() if ": error:" in line]


def test_right_steps_and_async_enqueues_type_check(tmp_path: Path) -> None:
    assert check(tmp_path, PROGRAM) == []


def test_each_wrong_step_argument_is_an_error(tmp_path: Path) -> None:
    lines = PROGRAM.count("\n")
    source = PROGRAM + "".join(f"{call}\n" for call in WRONG)
    errors = check(tmp_path, source)
    flagged: dict[int, str] = {}
    for error in errors:
        found = re.search(r":(\d+): error: .*\[([a-z-]+)\]$", error)
        assert found, error
        flagged.setdefault(int(found.group(1)), found.group(2))
    expected = {lines + 1 + i: code for i, code in enumerate(WRONG.values())}
    assert flagged == expected, errors

"""The docs show their code where people read them (GitHub too), and it is the tested code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.inline_docs import ROOT, blocks, pages, rewritten

# Generated result tables a benchmark run writes next to its page: included by the
# site's build, linked for GitHub (they are data, not code a reader copies).
INCLUDED_TABLES = {
    "docs/benchmarks/postgres.md",
    "docs/benchmarks/shapes.md",
    "docs/benchmarks/embedded.md",
}


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_inlined_block_is_its_file(page: Path) -> None:
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    if name not in INCLUDED_TABLES:
        assert "--8<--" not in text, f"{name}: an include shows as '--8<--' on GitHub"
    assert rewritten(text) == text, (
        f"{name}: a code block differs from its file: python -m tests.support.inline_docs"
    )


def test_the_pages_that_show_examples_inline_them() -> None:
    shown = {path for page in pages() for path, _, _ in blocks(page.read_text())}
    assert {
        "examples/quickstart.py",
        "examples/myapp.py",
        "examples/testing/test_shop.py",
        "examples/fastapi_shop/api.py",
        "examples/django_shop/orders/tasks.py",
    } <= shown
    for path in shown:
        assert (ROOT / path).is_file(), path


def test_operating_lists_every_command() -> None:
    from tasuki.cli.main import COMMANDS

    text = (ROOT / "docs/operating.md").read_text()
    listing = text[text.index("```sh") : text.index("```", text.index("```sh") + 5)]
    # `tasuki pause QUEUE | resume QUEUE`: a line may name two commands.
    missing = [n for n in COMMANDS if not re.search(rf"(^tasuki | \| ){n}\b", listing, re.M)]
    assert missing == [], f"docs/operating.md's command list lacks {missing}"


def test_migrating_knows_results_and_the_dashboard() -> None:
    text = (ROOT / "docs/migrating.md").read_text()
    assert "no result" not in text, "results exist: keep_result= (docs/results.md)"
    flower = next(line for line in text.splitlines() if "Flower" in line)
    assert "tasuki dashboard" in flower

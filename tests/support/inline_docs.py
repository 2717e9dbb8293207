"""The code the docs show, inlined from the files it is tested as, and kept equal to them.

A page read on GitHub shows its code blocks as written: a `--8<--` include of
pymdownx.snippets would show as that line, not the code. So a block holds the file's
text itself, under a comment naming the file:

    <!-- inlined: examples/quickstart.py -->
    ```python title="examples/quickstart.py"
    ...the file...
    ```

`tests/unit/test_docs_inline.py` fails when a block and its file differ (the file is the
one the tests run); `python -m tests.support.inline_docs` rewrites the blocks from their
files, and turns a fenced `--8<-- "path"` include into an inlined block.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"^<!-- inlined: (?P<path>\S+) -->\n(?P<fence>```[^\n]*\n)", re.M)
INCLUDE = re.compile(r'^(?P<fence>```[^\n]*\n)--8<-- "(?P<path>[^"]+)"\n```\n', re.M)


def pages() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def blocks(text: str) -> list[tuple[str, int, int]]:
    """(path, start, end) of each inlined block's body in `text`."""
    found = []
    for mark in MARK.finditer(text):
        start = mark.end()
        end = text.find("\n```\n", start - 1)
        if end < 0:
            raise ValueError(f"the block of {mark['path']} is not closed")
        found.append((mark["path"], start, end + 1))
    return found


def body(path: str) -> str:
    text = (ROOT / path).read_text()
    return text if text.endswith("\n") else text + "\n"


def rewritten(text: str) -> str:
    text = INCLUDE.sub(
        lambda m: f"<!-- inlined: {m['path']} -->\n{m['fence']}{body(m['path'])}```\n", text
    )
    for path, start, end in reversed(blocks(text)):
        text = text[:start] + body(path) + text[end:]
    return text


def main() -> int:
    for page in pages():
        text = page.read_text()
        new = rewritten(text)
        if new != text:
            page.write_text(new)
            print(f"inlined: {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

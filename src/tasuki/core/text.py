"""Text that every engine can store, and names that every engine can key on.

Text from user code (an error's message, a traceback, a progress note, a reason a
middleware gave) may be any `str`: a lone surrogate cannot be encoded as UTF-8 (SQLite,
Redis, SQS and JSON all refuse it) and PostgreSQL refuses NUL in text. Such text is made
storable before it reaches a backend, by escaping exactly those characters, so the job's
real error survives into its dead letter instead of failing the settle that carries it.

A name is different: a message id, a queue or a job name is a key that must come back
exactly as given, so one that some engine cannot store is refused at enqueue with
`InvalidArgument` rather than altered.
"""

from __future__ import annotations

from tasuki.errors import InvalidArgument


def storable(text: str) -> str:
    """`text` with NUL and lone surrogates written as backslash escapes; else unchanged."""
    if "\x00" not in text:
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    fixed = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return fixed.replace("\x00", "\\x00")


def unstorable(text: str) -> str | None:
    """What in `text` some engine cannot store (NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "NUL"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"a lone surrogate {text[exc.start]!r}"
    return None


def check_name(what: str, value: str) -> str:
    """`value`, refused with `InvalidArgument` if some engine cannot store it as a key."""
    problem = unstorable(value)
    if problem is not None:
        raise InvalidArgument(
            f"{what} {value!r} contains {problem}, which some backends cannot store"
        )
    return value

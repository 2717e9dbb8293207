"""The console's reads and actions over a backend (`app.messages`, `app.retry_matching`,
...; DESIGN §4d): decoding what a listing shows with the app's serializer, filtering by
arguments, and acting on every message a filter matches in batches.

A listed body is decoded only where that is safe: JSON always; pickle (which can run code
as it loads) only when the app enables it and signs messages, and the body's signature
verifies. Any other body is shown with its job name and no arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tasuki.backends.base import Backend
from tasuki.core.codec import Codec
from tasuki.core.console import BrowseState, Listed, Page, check_limit, check_state
from tasuki.core.job import check_queue
from tasuki.core.message import CONTENT_TYPE_HEADER, JOB_HEADER
from tasuki.core.records import MessageInfo
from tasuki.errors import InvalidArgument, TasukiError

# With a `match`, one request reads at most this many messages, then returns what
# matched so far and a cursor to continue from.
MATCH_READ_LIMIT = 1000
# ... in pages of this many.
MATCH_PAGE = 200
# Bulk actions list and act in batches of this many.
BULK_BATCH = 200


Arguments = tuple[tuple[Any, ...], dict[str, Any]]


def arguments(codec: Codec, queue: str, listed: Listed) -> Arguments | None:
    """The listed message's arguments, where safe to decode; else None."""
    headers = listed.headers
    try:
        if headers.get(CONTENT_TYPE_HEADER, "json") != "json":
            if not codec.signs:
                raise InvalidArgument("an unsigned body that is not JSON is not decoded")
            codec.verify(queue, headers, listed.body)
        return codec.decode_payload(headers, listed.body)
    except TasukiError:
        return None


def decoded(
    codec: Codec, queue: str, listed: Listed, found: Arguments | None = None
) -> MessageInfo:
    """The listed message with its job and, where safe to decode, its arguments
    (`found`, when decoded already)."""
    found = found or arguments(codec, queue, listed)
    args, kwargs = found if found is not None else (None, None)
    job = listed.headers.get(JOB_HEADER)
    return dataclasses.replace(listed.info, job=job, args=args, kwargs=kwargs)


def matches(info: MessageInfo, match: Mapping[str, Any]) -> bool:
    """Every key equal: a keyword argument by name, a positional one by its index."""
    if info.args is None or info.kwargs is None:
        return False
    return matching((info.args, info.kwargs), match)


def matching(found: Arguments, match: Mapping[str, Any]) -> bool:
    args, kwargs = found
    for key, want in match.items():
        if key in kwargs:
            if kwargs[key] != want:
                return False
        elif key.isdigit() and int(key) < len(args):
            if args[int(key)] != want:
                return False
        else:
            return False
    return True


def messages(
    backend: Backend,
    codec: Codec,
    queue: str,
    state: str,
    *,
    job: str | None = None,
    match: Mapping[str, Any] | None = None,
    newest_first: bool = False,
    limit: int = 50,
    cursor: str | None = None,
) -> Page[MessageInfo]:
    """A page of the queue's messages in `state` (see `App.messages`)."""
    queue, chosen = check_queue(queue), check_state(state)
    check_limit(limit)
    if not match:
        page = backend.browse(
            queue, chosen, job=job, newest_first=newest_first, limit=limit, cursor=cursor
        )
        return Page([decoded(codec, queue, item) for item in page.items], page.cursor)
    # Where the backend filters as it walks (Redis), one call: what it found, checked
    # again here by `matching`, and where it stopped.
    filtered = backend.browse_matching(
        queue, chosen, match, job=job, newest_first=newest_first, limit=limit, cursor=cursor
    )
    if filtered is not None:
        kept = [
            decoded(codec, queue, item, args)
            for item in filtered.items
            if (args := arguments(codec, queue, item)) is not None and matching(args, match)
        ]
        return Page(kept, filtered.cursor)
    found: list[MessageInfo] = []
    read = 0
    while True:
        page = backend.browse(
            queue, chosen, job=job, newest_first=newest_first, limit=MATCH_PAGE, cursor=cursor
        )
        for item in page.items:
            read += 1
            args = arguments(codec, queue, item)
            if args is not None and matching(args, match):
                found.append(decoded(codec, queue, item, args))
            if len(found) == limit or read >= MATCH_READ_LIMIT:
                # Stopped within the page: the cursor continues right after this item.
                last = item is page.items[-1]
                return Page(found, page.cursor if last else item.cursor)
        if page.cursor is None:
            return Page(found, None)
        cursor = page.cursor


def act_on_matching(
    backend: Backend,
    codec: Codec,
    queue: str,
    state: str,
    action: Callable[[str, Sequence[str], BrowseState], list[bool]],
    *,
    job: str | None = None,
    match: Mapping[str, Any] | None = None,
) -> int:
    """Apply `action` (the backend's `retry_many` or `cancel_many`) to every message of
    the queue in `state` that the filter matches, a batch at a time, each item only if
    still in that state; the count of those changed. Interrupted, it can be run again:
    what it changed no longer matches, what it had not reached still does."""
    queue, chosen = check_queue(queue), check_state(state)
    done = 0
    cursor: str | None = None
    while True:
        page = backend.browse(queue, chosen, job=job, limit=BULK_BATCH, cursor=cursor)
        ids = [
            item.info.id
            for item in page.items
            if not match or ((args := arguments(codec, queue, item)) and matching(args, match))
        ]
        if ids:
            done += sum(action(queue, ids, chosen))
        if page.cursor is None:
            return done
        cursor = page.cursor


def count_matching(
    backend: Backend,
    codec: Codec,
    queue: str,
    state: str,
    *,
    job: str | None = None,
    match: Mapping[str, Any] | None = None,
    most: int = 100_000,
) -> tuple[int, bool]:
    """How many messages in `state` the filter matches now, and whether counting stopped
    at `most` (there may be more): what a bulk action asks to confirm before it runs."""
    count, cursor = 0, None
    while True:
        page = messages(
            backend, codec, queue, state, job=job, match=match, limit=1000, cursor=cursor
        )
        count += len(page.items)
        if page.cursor is None:
            return count, False
        if count >= most:
            return count, True
        cursor = page.cursor

"""The nastiest inputs found while fuzzing, kept as explicit regression cases.

Each list is replayed by `test_fuzz.py` on every run, whatever hypothesis draws that day.
"""

from __future__ import annotations

# (headers, body) pairs a worker may lease: each must end as a dead letter with a reason.
GARBAGE_MESSAGES: list[tuple[dict[str, str], bytes]] = [
    ({"tasuki-job": "work"}, b""),  # empty body
    ({"tasuki-job": "work"}, b"{"),  # truncated JSON
    ({"tasuki-job": "work"}, b"null"),
    ({"tasuki-job": "work"}, b"[1, 2]"),  # not an object
    ({"tasuki-job": "work"}, b'{"args": "1", "kwargs": {}}'),  # args not a list
    ({"tasuki-job": "work"}, b'{"args": [], "kwargs": []}'),  # kwargs not an object
    ({"tasuki-job": "work"}, b'{"args": [1, 2, 3, 4]}'),  # too many arguments
    ({"tasuki-job": "work"}, b'{"kwargs": {"nope": 1}}'),  # unknown keyword
    ({"tasuki-job": "work"}, b'{"args": [NaN]}'),  # not JSON
    ({"tasuki-job": "work"}, b"\xff\xfe\x00garbage"),  # not UTF-8
    ({"tasuki-job": "work"}, b"\xef\xbb\xbf{}"),  # a byte-order mark
    ({"tasuki-job": "work"}, b"[" * 100_000),  # nesting past any recursion limit
    ({"tasuki-job": "work"}, b'{"args": [' + b"9" * 5000 + b"]}"),  # a 5000-digit integer
    ({"tasuki-job": "work"}, b'{"args": ["' + b"x" * 900_000 + b'"]}'),  # huge, wrong arity
    ({"tasuki-job": "no-such-job"}, b'{"args": []}'),
    ({"tasuki-job": ""}, b"{}"),
    ({"tasuki-job": "work", "tasuki-content-type": "pickle"}, b"\x80\x04K\x01."),  # not enabled
    ({"tasuki-job": "work", "tasuki-content-type": "yaml"}, b"a: 1"),
    ({"tasuki-job": "work", "tasuki-content-type": ""}, b"{}"),
]

# Text that must make backend_from_url raise a TasukiError (InvalidURL) and nothing else.
BAD_URLS: list[str] = [
    "",
    "://",
    "redis://",  # fine: localhost, lazily connected (listed to keep it fine)
    "redis://host:99999/0",  # port out of range
    "redis://host:-1",
    "redis://[::1",  # unclosed IPv6 bracket
    "redis://host/abc",
    "redis://host/0?socket_timeout=nan",
    "redis://host/0?socket_timeout=-1",
    "redis://host/0?max_message_size=0",
    "redis://host/0?cluster=maybe",
    "redis://host/0?unknown=1",
    "rediss://host/0?ssl_cert_reqs=sometimes",
    "unix://",
    "sqlite://host/x.db",
    "sqlite:///",
    "sqlite:///x.db?synchronous=off;DROP TABLE x",
    "sqlite:///x.db?busy_timeout=abc",
    "memory://?x=1",
    "postgresql://u:p@h/db",  # may be missing its extra: then a clean InvalidURL
    "sqs://",
    "ftp://x",
    "\x00://\x00",
    "redis://user:p%ZZ@host/0",  # bad percent-escape in the password
]

# Cron expressions that must be accepted or refused with InvalidArgument, never crash.
BAD_CRONS: list[str] = [
    "",
    " ",
    "* * * *",
    "* * * * * * *",
    "60 * * * *",
    "*/0 * * * *",
    "0-99999999999999999999 * * * *",
    "L * * * *",
    "0 0 31 2 *",  # never fires (February 31st)
    "0 0 * * 8",
    "@reboot",
    "@yearly",
    "\x00 * * * *",
    "* * * * MON-SUN#9",
    "1,2,3,,4 * * * *",
]

# Argument lists for `tasuki` that must end in a clean error (a message, status 1 or 2).
BAD_CLI_ARGS: list[list[str]] = [
    ["dead", "show"],
    ["dead", "show", "default", ""],
    ["dead", "redrive", "-q", ""],
    ["enqueue"],
    ["enqueue", "--kwargs", "{", "work"],
    ["enqueue", "--kwargs", "[1]", "work"],
    ["enqueue", "--delay", "nan", "work"],
    ["enqueue", "--delay", "-1", "work"],
    ["enqueue", "--delay", "inf", "work"],
    ["enqueue", "--id", "", "work"],
    ["enqueue", "--id", "x" * 10_000, "work"],
    ["enqueue", "-q", "", "work"],
    ["enqueue", "-q", "a b\x00", "work"],
    ["enqueue", "--app", "no.such.module:app", "work"],
    ["enqueue", "--app", "os:path", "work"],
    ["enqueue", "--app", "nocolon", "work"],
    ["stats", "--url", "bogus"],
    ["stats", "--url", "redis://h:99999"],
    ["stats", "--url", "sqlite://host/x"],
    ["stats", "--json", "--url", "memory://?x=1"],
    ["purge", "--url", "::"],
]

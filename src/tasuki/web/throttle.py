"""Wrong dashboard tokens, counted per client, so that guessing one is hopelessly slow.

Five wrong tokens cost nothing (a typo or two), then each one more doubles the wait
before that client's next attempt is checked at all: 1 s, 2 s, ... up to 5 minutes.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


def client_key(address: str | None) -> str:
    """Whose guesses count together: the address, or for IPv6 its /64 (one host is
    usually given a whole /64, so counting single addresses would not slow it)."""
    if not address:
        return "?"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass
class _Failures:
    count: int
    last: float


class LoginThrottle:
    """Wrong tokens per client: `free` of them cost nothing, then each one more doubles
    the wait before that client's next attempt is checked at all (`first_wait`, twice
    that, ... up to `max_wait`). A client quiet for `forget_after` starts afresh. A right
    token does not clear the count: whoever shares an address with a guesser (a NAT, a
    proxy) would otherwise hand the guesser fresh free attempts."""

    def __init__(
        self,
        free: int = 5,
        first_wait: float = 1.0,
        max_wait: float = 300.0,
        forget_after: float = 3600.0,
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free = free
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.forget_after = max(forget_after, max_wait)
        self._limit = limit
        self._clock = clock
        self._failures: dict[str, _Failures] = {}
        self._mutex = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before `client` may try a token again (0: now)."""
        now = self._clock()
        with self._mutex:
            failures = self._current(client, now)
            if failures is None or failures.count < self.free:
                return 0.0
            doublings = min(failures.count - self.free, 64)  # a float, never an overflow
            delay = min(self.max_wait, self.first_wait * 2.0**doublings)
            return max(0.0, failures.last + delay - now)

    def failed(self, client: str) -> None:
        now = self._clock()
        with self._mutex:
            failures = self._current(client, now)
            if failures is None:
                if len(self._failures) >= self._limit:
                    self._forget(now)
                failures = self._failures[client] = _Failures(0, now)
            failures.count += 1
            failures.last = now

    def _current(self, client: str, now: float) -> _Failures | None:
        failures = self._failures.get(client)
        if failures is not None and now - failures.last >= self.forget_after:
            del self._failures[client]
            return None
        return failures

    def _forget(self, now: float) -> None:
        """Room for one more client: the quiet ones go, else the longest quiet."""
        quiet = [k for k, f in self._failures.items() if now - f.last >= self.forget_after]
        for key in quiet:
            del self._failures[key]
        if len(self._failures) >= self._limit:
            del self._failures[min(self._failures, key=lambda k: self._failures[k].last)]

"""Redis Cluster's hash slot of a key, computed here so that no caller needs redis-py.

The backend checks slots itself before it calls a script on a Cluster: a uniqueness lock
must live in its queue's slot, and a lock renewal is split by slot. The rule is the
Cluster specification's: CRC16 (XMODEM) of the key modulo 16384, where a key holding a
non-empty `{hash tag}` is hashed by the tag alone.
"""

from __future__ import annotations

from functools import cache

SLOTS = 16384


@cache
def _table() -> tuple[int, ...]:
    """Built on first use: only a Cluster needs it, and every worker start would pay."""
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return tuple(table)


def crc16(data: bytes) -> int:
    """CRC16-CCITT as XMODEM has it (polynomial 0x1021, initial value 0)."""
    crc = 0
    table = _table()
    for byte in data:
        crc = ((crc << 8) & 0xFF00) ^ table[(crc >> 8) ^ byte]
    return crc


def key_slot(key: bytes) -> int:
    """The slot of `key`: of its hash tag alone if it has one (`{user1000}.following`)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % SLOTS

"""Many leasers at once: no message lost, none held by two leases at the same time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tasuki.backends.base import Backend, Envelope
from tasuki.backends.urls import backend_from_url
from tasuki.testing.contract.helpers import stats

LEASER = "tasuki.testing.contract.leaser"


def _child_env() -> dict[str, str]:
    """A leasing process imports what this one does: the backend under test included."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class TestConcurrency:
    def test_threads_never_lease_the_same_message(
        self, backend_url: str, queue: str, volume: Callable[[int], int]
    ) -> None:
        total = volume(2000)
        producer = backend_from_url(backend_url)
        producer.enqueue([Envelope(queue, f"t{i}", b"x") for i in range(total)])
        seen: list[str] = []
        mutex = threading.Lock()
        errors: list[BaseException] = []

        def leaser() -> None:
            b = backend_from_url(backend_url)  # memory://name: the same in-process store
            try:
                while leased := b.lease(queue, 7, 30.0):
                    with mutex:
                        seen.extend(d.id for d in leased)
                    assert all(b.ack([d.receipt for d in leased]))
            except BaseException as exc:
                errors.append(exc)
            finally:
                b.close()  # Python 3.13 warns of a SQLite connection left open

        threads = [threading.Thread(target=leaser) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        counts = Counter(seen)
        assert len(counts) == total
        assert max(counts.values()) == 1
        assert stats(producer, queue) == (0, 0, 0, 0)
        producer.close()

    @pytest.mark.requires("cross_process")
    def test_ten_thousand_messages_through_four_processes(
        self,
        backend: Backend,
        backend_url: str,
        queue: str,
        tmp_path: Path,
        volume: Callable[[int], int],
    ) -> None:
        total, processes = volume(10_000), 4
        for start in range(0, total, 1000):
            backend.enqueue(
                [
                    Envelope(queue, f"p{i}", str(i).encode())
                    for i in range(start, min(total, start + 1000))
                ]
            )
        outs = [tmp_path / f"leaser-{n}.txt" for n in range(processes)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", LEASER, backend_url, queue, str(out), "25"],
                env=_child_env(),
            )
            for out in outs
        ]
        for p in procs:
            assert p.wait(180) == 0
        lines = [line for out in outs for line in out.read_text().splitlines()]
        assert "ACK-REFUSED" not in lines
        ids = Counter(line.split()[0] for line in lines)
        assert len(ids) == total, f"lost {total - len(ids)} messages"
        doubled = [i for i, c in ids.items() if c > 1]
        assert not doubled, f"{len(doubled)} messages leased twice, e.g. {doubled[:5]}"
        per_process = [len(out.read_text().splitlines()) for out in outs]
        assert sum(per_process) == total
        assert stats(backend, queue) == (0, 0, 0, 0)

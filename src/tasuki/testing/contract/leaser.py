"""A leasing process for the contract suite: lease, record, ack, until told to stop.

Run as `python -m tasuki.testing.contract.leaser URL QUEUE OUT EXPECTED`. It writes one line per
delivery: `id token attempt`. It stops when the queue has been empty while the shared
`done` count reached EXPECTED, or after a generous deadline.
"""

from __future__ import annotations

import sys
import time

from tasuki.backends.urls import backend_from_url


def main() -> None:
    url, queue, out_path, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    backend = backend_from_url(url)
    deadline = time.monotonic() + 120
    idle_since: float | None = None
    with open(out_path, "w") as out:
        while time.monotonic() < deadline:
            leased = backend.lease(queue, batch, 30.0, wait=0.2)
            if not leased:
                idle_since = idle_since or time.monotonic()
                s = backend.stats(queue)
                if s.ready + s.in_flight + s.delayed == 0 and time.monotonic() - idle_since > 0.5:
                    break
                continue
            idle_since = None
            for d in leased:
                out.write(f"{d.id} {d.token} {d.attempt}\n")
            out.flush()
            acked = backend.ack([d.receipt for d in leased])
            if not all(acked):
                out.write("ACK-REFUSED\n")
    backend.close()


if __name__ == "__main__":
    main()

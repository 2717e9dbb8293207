"""Jobs for the process-pool tests; child processes import this module by name."""

from __future__ import annotations

import os
import threading

import tasuki

app = tasuki.App("memory://process-jobs")


@app.job(executor="process")
def whoami(path: str) -> None:
    with open(path, "a") as f:
        f.write(f"{os.getpid()} {threading.current_thread().name} {tasuki.current().attempt}\n")


@app.job(executor="process", timeout=0.5, retry=tasuki.Retry(max_attempts=1))
def runaway() -> None:
    while True:  # CPU-bound and deaf to everything: only a kill stops it
        pass


@app.job(executor="process", retry=tasuki.Retry(max_attempts=3, give_up_on=(ValueError,)))
def refuses(n: int) -> None:
    raise ValueError(f"no {n}")


class Unpicklable(Exception):
    def __init__(self, handle: object) -> None:
        super().__init__("cannot travel")
        self.handle = handle


@app.job(executor="process", retry=tasuki.Retry(max_attempts=1))
def weird() -> None:
    raise Unpicklable(threading.Lock())

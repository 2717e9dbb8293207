"""A real app: jobs in a module that producers import and a worker process runs.

TASUKI_URL=sqlite:///myapp.db tasuki worker myapp:app -c 8      # the worker
TASUKI_URL=sqlite:///myapp.db python myapp.py 42                # a producer
"""

from __future__ import annotations

import sys

import tasuki

app = tasuki.App()  # the URL comes from TASUKI_URL (default: sqlite:///tasuki.db)


@app.job(queue="images", retry=tasuki.Retry(max_attempts=5), timeout=60.0)
def resize(image_id: int, width: int = 800) -> None:
    print(f"resized image {image_id} to {width}px", flush=True)


@app.job(queue="emails", dedup=True)
def send_welcome(user_id: int) -> None:
    ctx = tasuki.current()
    print(f"welcome mail to user {user_id} (attempt {ctx.attempt})", flush=True)


@app.periodic("0 3 * * *")  # every night at 03:00 UTC, once however many workers run
def nightly_cleanup() -> None:
    print("cleaning up", flush=True)


if __name__ == "__main__":
    image_id = int(sys.argv[1])
    print(resize.enqueue(image_id, width=400))
    print(send_welcome.options(message_id=f"welcome-{image_id}").enqueue(image_id))

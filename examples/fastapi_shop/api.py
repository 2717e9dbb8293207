"""The web process: a request enqueues a job and answers at once (202 Accepted)."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Header

from fastapi_shop.tasks import app, make_thumbnail

api = FastAPI(title="shop")


@api.post("/images/{image_id}/thumbnail", status_code=202)
def request_thumbnail(
    image_id: int,
    size: int = 128,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> dict[str, str]:
    # A client that retries after a timeout sends the same Idempotency-Key: used as the
    # message id, it makes the second enqueue a no-op instead of a second thumbnail.
    job = make_thumbnail.options(message_id=idempotency_key) if idempotency_key else make_thumbnail
    return {"message_id": job.enqueue(image_id, size=size)}


@api.get("/queues/thumbnails")
def thumbnails_queue() -> dict[str, float]:
    return app.stats("thumbnails")

"""The jobs of the orders app."""

from __future__ import annotations

from shop.tasuki_app import app

import tasuki


@app.job(queue="emails", retry=tasuki.Retry(max_attempts=5))
def send_confirmation(order_id: int) -> None:
    # A real project would load the order with the ORM and send the mail here.
    print(
        f"confirmation mail for order {order_id} (attempt {tasuki.current().attempt})", flush=True
    )

"""The app under test: jobs declared once, for production, on the backend TASUKI_URL names."""

from __future__ import annotations

import tasuki

app = tasuki.App()

RECEIPTS: list[str] = []  # stands in for a mail server


class PaymentDeclined(Exception):
    pass


@app.job(queue="payments", retry=tasuki.Retry(max_attempts=3))
def charge(order_id: int, cents: int) -> str:
    if cents <= 0:
        raise PaymentDeclined(f"order {order_id}: nothing to charge")
    send_receipt.enqueue(order_id, cents)
    return f"charged {cents} cents for order {order_id}"


@app.job(queue="emails")
def send_receipt(order_id: int, cents: int) -> None:
    RECEIPTS.append(f"order {order_id}: {cents / 100:.2f} EUR")


def place_order(order_id: int, cents: int) -> None:
    """What the web app calls: the payment runs in the background."""
    charge.enqueue(order_id, cents)

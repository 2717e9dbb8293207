"""A view that enqueues and answers at once: the mail goes out from the worker."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from orders.tasks import send_confirmation


@require_POST
def confirm(request: HttpRequest, order_id: int) -> JsonResponse:
    # One confirmation per order, however often the button is pressed: the message id
    # makes a repeated enqueue a no-op (for an hour after it ran, by default).
    message_id = send_confirmation.options(message_id=f"confirm-{order_id}").enqueue(order_id)
    return JsonResponse({"message_id": message_id}, status=202)

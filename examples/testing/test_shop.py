import pytest
import shop

from tasuki.testing import drain


def test_an_order_is_charged_and_gets_a_receipt(app):
    shop.place_order(42, 1999)

    drained = drain(app)  # runs charge, then the send_receipt it enqueued

    assert drained.results("charge") == ["charged 1999 cents for order 42"]
    assert shop.RECEIPTS == ["order 42: 19.99 EUR"]


def test_a_declined_payment_fails_the_test_unless_expected(app):
    shop.place_order(7, 0)

    with pytest.raises(shop.PaymentDeclined, match="nothing to charge"):
        drain(app)  # the job's own error, with its traceback

    assert shop.RECEIPTS == []


def test_the_retries_run_too_when_asked(app):
    shop.charge.enqueue(7, 0)

    # Go on through the retries (their backoff is real: a few seconds here).
    drained = drain(app, raise_errors=False, timeout=30)

    assert [run.action for run in drained.failures] == ["retry", "retry", "dead"]
    assert [dead.reason for dead in drained.dead] == ["retries exhausted after 3 attempts"]

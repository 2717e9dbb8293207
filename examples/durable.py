"""A durable job: steps that run once, a sleep that holds no worker, a wait for a signal.

Run it: `python examples/durable.py`. It enqueues one onboarding, runs a worker beside
it, answers the job's wait with `app.signal` and prints what ran.
"""

import time

import tasuki

app = tasuki.App("sqlite:///durable.db")


def create_account(user_id: int) -> dict[str, int]:
    print(f"creating the account of user {user_id}")
    return {"account": user_id * 100}


def send_welcome(account: dict[str, int], answer: dict[str, bool]) -> str:
    print(f"welcoming account {account['account']} (confirmed: {answer['ok']})")
    return "welcomed"


@app.job()
def onboard(user_id: int) -> str:
    ctx = tasuki.current()
    account = ctx.step("create", create_account, user_id)  # runs once, whatever happens
    ctx.sleep(1.0)  # durable: the run ends here; the job runs again in a second
    answer = ctx.wait_for_signal("confirmed", timeout=60)  # ends the run until it comes
    return ctx.step("welcome", send_welcome, account, answer)


if __name__ == "__main__":
    message_id = onboard.enqueue(7)
    worker = app.worker(concurrency=2)
    worker.start()
    while "waiting for signal" not in app.inspect("default", message_id).waiting:
        time.sleep(0.1)
    print(app.inspect("default", message_id).waiting.split(" until ")[0])
    print(app.signal("default", message_id, "confirmed", {"ok": True}))  # delivered
    while app.stats()["ready"] + app.stats()["delayed"] + app.stats()["in_flight"]:
        time.sleep(0.1)
    worker.stop()
    print(app.stats())

import tasuki

app = tasuki.App("sqlite:///quickstart.db")


@app.job(retry=tasuki.Retry(max_attempts=3))
def resize(image_id: int) -> None:
    print(f"resizing image {image_id}, attempt {tasuki.current().attempt}")


if __name__ == "__main__":
    resize.enqueue(42)
    resize.options(message_id="img-7").enqueue(7)
    resize.options(message_id="img-7").enqueue(7)  # same id: a no-op, not a twin
    app.worker(concurrency=4).run(until_idle=True)
    print(app.stats())  # {'ready': 0, 'in_flight': 0, 'delayed': 0, 'dead': 0, ...}

"""A FastAPI app that enqueues from its requests, with a tasuki worker beside it.

From the `examples/` directory:

    uvicorn fastapi_shop.api:api            # the web process
    tasuki worker fastapi_shop.tasks:app    # the worker process, beside it
"""

"""One vocabulary for refusals: everything a backend cannot do is refused through
`core/capabilities.refusal`, in one wording that names the scheme, what was asked and
the capability it lacks, as a `tasuki.errors.Unsupported`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki.backends.base import Backend
from tasuki.backends.memory import MemoryBackend
from tasuki.core.capabilities import Capabilities, refusal
from tasuki.errors import ConfigurationError, InvalidArgument, Unsupported

SRC = Path(tasuki.__file__).parent
WORDING = re.compile(r"^memory:// cannot .+: it lacks the (\w+) capability; .+")


def lacking(*capabilities: str) -> MemoryBackend:
    backend = MemoryBackend()
    off = dict.fromkeys(capabilities, False)
    backend.capabilities = dataclasses.replace(backend.capabilities, **off)  # type: ignore[misc]
    return backend


def test_a_refusal_is_both_kinds_of_error_and_names_its_capability() -> None:
    error = refusal("sqs", "cancel", "cancel a message")
    assert isinstance(error, ConfigurationError) and isinstance(error, InvalidArgument)
    assert error.capability == "cancel"
    assert str(error).startswith("sqs:// cannot cancel a message: it lacks the cancel capability;")


def test_a_refusal_of_a_capability_that_does_not_exist_is_a_bug() -> None:
    with pytest.raises(AssertionError, match="no capability called 'cancellation'"):
        refusal("sqs", "cancellation", "cancel a message")


DEFAULTS: list[tuple[str, str, tuple[Any, ...]]] = [
    ("cancel", "cancel", ("q", "id")),
    ("results", "result", ("q", "id")),
    ("workflows", "flow", ("f",)),
    ("inspection", "inspect", ("q", "id")),
    ("inspection", "in_flight", ("q",)),
    ("transactional_enqueue", "refuse_connection", (object(),)),
    ("durable_steps", "steps", ("q", "id")),
    ("durable_steps", "signal", ("q", "id", "go", b"1")),
    ("transactional_steps", "record_step_in_transaction", (None, None)),
]


@pytest.mark.parametrize(
    ("capability", "method", "args"), DEFAULTS, ids=[m for _, m, _ in DEFAULTS]
)
def test_every_default_of_the_seam_refuses_in_the_one_wording(
    capability: str, method: str, args: tuple[Any, ...]
) -> None:
    """The defaults `Backend` gives a backend that lacks a capability."""
    backend = lacking(capability)
    with pytest.raises(Unsupported) as caught:
        getattr(Backend, method)(backend, *args)
    assert caught.value.capability == capability
    assert WORDING.match(str(caught.value)), str(caught.value)


@pytest.mark.parametrize(
    ("capability", "declare"),
    [
        ("priorities", lambda app: app.job(name="j", priority=3)(lambda: None)),
        ("rate_limits", lambda app: app.job(name="j", rate_limit=tasuki.RateLimit(1))(len)),
        ("results", lambda app: app.job(name="j", keep_result=60)(lambda: None)),
        ("id_window", lambda app: app.periodic(every=60)(lambda: None)),
    ],
)
def test_a_job_declared_with_what_its_backend_lacks_is_refused_in_the_one_wording(
    capability: str, declare: Callable[[tasuki.App], Any]
) -> None:
    app = tasuki.App(backend=lacking(capability))
    with pytest.raises(Unsupported) as caught:
        declare(app)
    assert caught.value.capability == capability
    assert WORDING.match(str(caught.value)), str(caught.value)


def test_calls_on_the_app_are_refused_in_the_one_wording() -> None:
    app = tasuki.App(backend=lacking("cancel", "workflows", "durable_steps"))
    for capability, call in (
        ("cancel", lambda: app.cancel("default", "x")),
        ("workflows", lambda: app.flow("f")),
        ("durable_steps", lambda: app.signal("default", "x", "go", {})),
    ):
        with pytest.raises(Unsupported) as caught:
            call()
        assert caught.value.capability == capability
        assert WORDING.match(str(caught.value)), str(caught.value)


def test_no_refusal_is_written_by_hand_and_no_scheme_is_cut_from_a_url_by_hand() -> None:
    """The sentence lives in `core/capabilities.py`; a scheme comes from `urls.scheme_of`
    or `Backend.scheme`. A new hand-written one fails here. (The contract suite's skip
    reasons, in `testing/`, name a missing capability without refusing anything.)"""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name in {"capabilities.py", "urls.py"} or "testing" in path.parts:
            continue
        text = path.read_text()
        for pattern in ('split("://"', "lacks the capability", "lacks the {", "capability '"):
            if pattern in text:
                offenders.append(f"{path.relative_to(SRC)}: {pattern}")
    assert offenders == []


def test_every_capability_is_documented_where_it_is_declared() -> None:
    source = (SRC / "core" / "capabilities.py").read_text()
    for field in dataclasses.fields(Capabilities):
        before = source[: source.index(f"    {field.name}:")]
        assert before.rstrip().splitlines()[-1].strip().startswith("#"), field.name

"""Workflows: steps composed into chains and groups, and the plan each step carries.

`job.step(...)` is one step; `chain(a, b, c)` runs its parts one after another, each
result the next part's first argument; `group(a, b, c)` runs its parts in parallel, and
what follows a group gets the list of their results in the group's order (the chord).
Parts nest freely.

The plan (which step follows which, which slot of which barrier a step fills) is worked
out here once, when the flow is enqueued. Each step's message carries its own part of it
in the `tasuki-flow` header (signed with the body when the app signs): what its settle
fills, the steps it enqueues (with their own plans, nested), whether its value is the
flow's result, and the `on_failure` step. A worker never reads the flow's record to move
it on: the settle of a step carries its follow-ups (`Effects`), and the backend applies
them atomically with the ack, under the step's lease (`core/flowrecords.py`).

Paths name a part by its place: the root is "", its parts "0", "1", ..., theirs "1.0",
"1.1"... A step's message id is `f"{flow_id}.{path}"`, so a re-run of a step enqueues
successors whose ids are already known: nothing new. A group's barrier is named by the
group's path; its slots by the members' indexes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import orjson

from tasuki.core.flowrecords import FLOW_RETENTION, Fill, FlowFailure, FlowRecord, FlowStep
from tasuki.core.job import Step, check_message_id
from tasuki.core.message import FLOW_HEADER, JOB_HEADER
from tasuki.core.outgoing import Outgoing
from tasuki.errors import InvalidArgument, SerializationError

if TYPE_CHECKING:
    from tasuki.core.job import Job, Producer
    from tasuki.core.records import MessageInfo

# The path of a flow's on_failure step (its message id is f"{flow_id}.failure").
FAILURE_PATH = "failure"
# What a step's first argument is at run time: its predecessor's result was prepended when
# its message was made ("" : nothing to add), the value of a group's barrier ("g:PATH",
# read when it runs: only the backend knows when the set is complete), or the flow's
# failure (the on_failure step).
_PREV, _GROUP, _FAILURE = "prev", "g:", "fail"

FlowStateName = Literal["running", "succeeded", "failed", "cancelled"]


class Flow:
    """A chain or a group: `options(message_id=...)`, `enqueue() -> flow_id`."""

    __slots__ = ("message_id", "on_failure", "parts")

    kind: str = ""
    parts: tuple[Part, ...]
    on_failure: Step | None
    message_id: str | None

    def __init__(
        self, parts: Sequence[Part], on_failure: Step | None, message_id: str | None = None
    ) -> None:
        if not parts and self.kind == "chain":
            raise InvalidArgument("a chain needs at least one part")
        for part in parts:
            if not isinstance(part, Step | Flow):
                raise InvalidArgument(
                    f"a {self.kind} takes steps (job.step(...)), chains and groups, got {part!r}"
                )
            if isinstance(part, Flow) and part.on_failure is not None:
                raise InvalidArgument(
                    "on_failure belongs to the outermost chain or group of a flow"
                )
        if on_failure is not None and not isinstance(on_failure, Step):
            raise InvalidArgument(f"on_failure must be a step (job.step(...)), got {on_failure!r}")
        self.parts = tuple(parts)
        self.on_failure = on_failure
        self.message_id = message_id

    def options(self, *, message_id: str | None = None) -> Flow:
        """`message_id`: the flow's id, making `enqueue` idempotent: a second enqueue with
        the same id (while the flow is kept) starts nothing and returns the same id."""
        given = None if message_id is None else check_message_id(message_id)
        return type(self)(self.parts, self.on_failure, given)

    def enqueue(self, app: HasProducer | None = None) -> str:
        """Start the flow: its first steps are enqueued; returns the flow's id. `app`
        (the app to start it on) is needed only by a flow without a single step, such
        as an empty group: any other flow starts on the app of its steps."""
        if app is not None:
            return app.producer.start_flow(self)
        step = any_step(self)
        if step is None:
            raise InvalidArgument(
                "a flow without a single step (an empty group) knows no app to start on: "
                "flow.enqueue(app=app)"
            )
        return step.job.producer.start_flow(self)

    def __repr__(self) -> str:
        return f"<{self.kind} of {len(self.parts)}>"


class Chain(Flow):
    __slots__ = ()
    kind = "chain"


class Group(Flow):
    __slots__ = ()
    kind = "group"


Part = Step | Flow


def chain(*parts: Part, on_failure: Step | None = None) -> Chain:
    """Run `parts` one after another: each one's result is the next one's first argument
    (after a group: the list of its results, in the group's order). `on_failure` runs
    once, with the `FlowFailure`, if a step is dead-lettered."""
    return Chain(parts, on_failure)


def group(*parts: Part | Iterable[Part], on_failure: Step | None = None) -> Group:
    """Run `parts` in parallel: `group(a, b)` or `group(step for ... in ...)`. Its value
    is the list of their results in this order."""
    if len(parts) == 1 and not isinstance(parts[0], Step | Flow):
        items: Sequence[Any] = tuple(parts[0])
    else:
        items = parts
    return Group(items, on_failure)


class HasProducer(Protocol):
    """An app, as far as starting a flow goes."""

    @property
    def producer(self) -> Producer: ...


def any_step(flow: Flow) -> Step | None:
    """A step of the flow (its on_failure counts), None if it has none."""
    parts: list[Part] = [*flow.parts, *([flow.on_failure] if flow.on_failure else [])]
    while parts:
        part = parts.pop(0)
        if isinstance(part, Step):
            return part
        parts[:0] = part.parts
    return None


# -- parts with no step: a value known when the flow is planned ------------------------
#
# A group of no members succeeds at once with [] (a fan-out whose size was known only at
# run time may be empty); a chain or group made only of such parts has a value known as
# well. Such a part has no step and no barrier: what follows it takes its value as a
# plain first argument, and where a settle must deliver it (the end of a chain after a
# step; a member of a group that has steps) its value is put in place where the value
# is read, by the `shape` of what is read: a group's barrier counts only its members
# that have steps, and its shape puts the others' values back at their places.

_DYNAMIC: Any = object()  # a part that has a step: its value is known when it runs


def known_value(part: Part) -> Any:
    """The value of a part with no step, or `_DYNAMIC`."""
    if isinstance(part, Step):
        return _DYNAMIC
    values = [known_value(p) for p in part.parts]
    if any(v is _DYNAMIC for v in values):
        return _DYNAMIC
    return values if isinstance(part, Group) else values[-1]


# A shape: None (the value as it is), {"s": value} (a known value, whatever was stored),
# {"g": [member shapes]} (a group's barrier value: one element per member with steps,
# the known values of the others put back at their places).
Shape = dict[str, Any] | None


def shape_of(part: Part) -> Shape:
    """How the stored value of a part with steps becomes its value."""
    if isinstance(part, Step):
        return None
    if isinstance(part, Chain):
        last = part.parts[-1]
        value = known_value(last)
        return shape_of(last) if value is _DYNAMIC else {"s": value}
    members: list[Shape] = []
    for member in part.parts:
        value = known_value(member)
        members.append(shape_of(member) if value is _DYNAMIC else {"s": value})
    return None if all(m is None for m in members) else {"g": members}


def shaped(shape: Shape, value: Any) -> Any:
    """A stored value made the part's value by its shape (`shape_of`)."""
    if shape is None:
        return value
    if "s" in shape:
        return shape["s"]
    stored = iter(value)
    return [m["s"] if m is not None and "s" in m else shaped(m, next(stored)) for m in shape["g"]]


class _Known(NamedTuple):
    """A step's first argument known when the flow is planned: the value of the part
    with no step before it."""

    value: Any


# -- the plan -------------------------------------------------------------------------


class Then(NamedTuple):
    """What a step's completion does: fill these barriers in turn (barrier, slot, size),
    then enqueue `next` (when every fill completed its set), and make the value the
    flow's result if `final`."""

    fills: tuple[tuple[str, int, int], ...]
    next: tuple[dict[str, Any], ...]
    final: bool

    def to_json(self) -> dict[str, Any]:
        return {"f": [list(f) for f in self.fills], "n": list(self.next), "z": self.final}


@dataclass(frozen=True, slots=True)
class Plan:
    """A flow worked out: its first steps (with the Step each came from) and its record."""

    entries: tuple[tuple[dict[str, Any], Step], ...]
    record: FlowRecord


def plan(flow: Flow, flow_id: str, retention: float = FLOW_RETENTION) -> Plan:
    """Where each step of `flow` goes: once, in Python, when the flow is enqueued."""
    steps: list[FlowStep] = []
    entries: list[tuple[dict[str, Any], Step]] = []

    def child(path: str, i: int) -> str:
        return f"{path}.{i}" if path else str(i)

    def output(part: Part, path: str) -> Given:
        """How what follows `part` gets its value: prepended, read from a barrier (with
        the group's shape), or known now."""
        value = known_value(part)
        if value is not _DYNAMIC:
            return _Known(value)
        if isinstance(part, Step):
            return _PREV
        if isinstance(part, Group):
            return (_GROUP + path, shape_of(part))
        last = len(part.parts) - 1
        return output(part.parts[last], child(path, last))

    def compile_part(
        part: Part, path: str, given: Given, then: Then, top: bool
    ) -> list[dict[str, Any]]:
        if isinstance(part, Step):
            spec = _spec(part, path, given, then)
            steps.append(FlowStep(path, part.job.name, part.queue, f"{flow_id}.{path}"))
            if top:
                entries.append((spec, part))
            return [spec]
        if isinstance(part, Group):
            # Its barrier counts the members with steps; the others are in its shape.
            members = [(i, m) for i, m in enumerate(part.parts) if known_value(m) is _DYNAMIC]
            size = len(members)
            heads: list[dict[str, Any]] = []
            for slot, (i, member) in enumerate(members):
                fill = Then(((path, slot, size), *then.fills), then.next, then.final)
                heads += compile_part(member, child(path, i), given, fill, top)
            return heads
        # A chain: compiled from its end, so each part knows the heads of the next. Only
        # its first part with steps starts when the chain does; a part with none is
        # passed over (what precedes it goes on to what follows it).
        first = next(i for i, p in enumerate(part.parts) if known_value(p) is _DYNAMIC)
        after = then
        heads = []
        for i in range(len(part.parts) - 1, first - 1, -1):
            sub = part.parts[i]
            if known_value(sub) is not _DYNAMIC:
                continue
            gets = given if i == 0 else output(part.parts[i - 1], child(path, i - 1))
            heads = compile_part(sub, child(path, i), gets, after, top and i == first)
            after = Then((), tuple(heads), False)
        return heads

    value = known_value(flow)
    extra: dict[str, Any] = {}
    if value is _DYNAMIC:
        compile_part(flow, "", None, Then((), (), True), True)
        if (shape := shape_of(flow)) is not None:
            extra["shape"] = shape
    else:
        extra["value"] = value  # a flow of no step: its value from the start
    on_failure = None
    failure_step = None
    if flow.on_failure is not None:
        step = flow.on_failure
        on_failure = _spec(step, FAILURE_PATH, _FAILURE, Then((), (), False))
        failure_step = FlowStep(FAILURE_PATH, step.job.name, step.queue, f"{flow_id}.failure")
    record = FlowRecord(
        flow_id,
        time.time(),
        retention,
        tuple(sorted(steps, key=lambda s: _order(s.path))),
        on_failure=failure_step,
        extra={**extra, **({"on_failure": on_failure} if on_failure is not None else {})},
    )
    return Plan(tuple(entries), record)


def flow_value(record: FlowRecord) -> FlowRecord:
    """The record as its readers see it: its stored result, once there is one, made the
    flow's value by its shape; a flow of no step has its value from the start."""
    if "value" in record.extra:
        return replace(record, result=orjson.dumps(record.extra["value"]))
    shape: Shape = record.extra.get("shape")
    if shape is None or record.result is None:
        return record
    return replace(record, result=orjson.dumps(shaped(shape, orjson.loads(record.result))))


_PATH = re.compile(r"\d+(?:\.\d+)*|" + FAILURE_PATH)


def step_candidates(message_id: str) -> list[tuple[str, str]]:
    """The (flow id, step path) a message id could be the step of, shortest path first.

    A step's id is `<flow id>.<path>` (`plan`), and a flow id may itself hold dots and
    digits, so an id can read several ways; the flow's record, which lists its steps' ids,
    says which (if any) is true."""
    out = []
    for i in range(len(message_id) - 1, 0, -1):
        if message_id[i] == "." and _PATH.fullmatch(message_id, i + 1):
            out.append((message_id[:i], message_id[i + 1 :]))
    return out


def _order(path: str) -> tuple[int, ...]:
    return tuple(int(p) for p in path.split(".")) if path else ()


# What a step's first argument is (see `_PREV`): nothing, its predecessor's result, a
# group's value (its path and shape), or a value known when the flow is planned.
Given = str | tuple[str, Shape] | _Known | None


def _spec(step: Step, path: str, given: Given, then: Then) -> dict[str, Any]:
    args = list(step.args)
    shape: Shape = None
    if isinstance(given, _Known):
        args, given = [given.value, *args], None
    elif isinstance(given, tuple):
        given, shape = given
    spec = {
        "p": path,
        "j": step.job.name,
        "q": step.queue,
        "a": args,
        "k": step.kwargs,
        "r": step.priority,
        "d": step.delay,
        "h": step.headers,
        "i": given,
        "t": then.to_json(),
        **({"x": shape} if shape is not None else {}),
    }
    try:
        orjson.dumps(spec)
    except TypeError as exc:
        raise SerializationError(
            f"step {step.job.name!r}: a flow's steps travel in its plan as JSON, and its "
            f"arguments cannot: {exc}"
        ) from exc
    return spec


NO_VALUE: Any = object()


def draft(
    spec: Mapping[str, Any],
    job: Job[..., Any],
    flow_id: str,
    retention: float,
    on_failure: Mapping[str, Any] | None,
    value: Any = NO_VALUE,
) -> Outgoing:
    """The message of one step, its predecessor's `value` prepended where it takes it."""
    given = spec["i"]
    args = tuple(spec["a"])
    if value is not NO_VALUE and given in (_PREV, _FAILURE):
        args = (value, *args)
    header = {
        "f": flow_id,
        "p": spec["p"],
        "i": given if given is not None and given.startswith((_GROUP, _FAILURE)) else None,
        **({"x": spec["x"]} if spec.get("x") is not None else {}),
        "t": spec["t"],
        "o": on_failure if spec["p"] != FAILURE_PATH else None,
        "r": retention,
    }
    return Outgoing(
        queue=spec["q"],
        id=f"{flow_id}.{spec['p']}",
        job=job,
        args=args,
        kwargs=spec["k"],
        headers={**spec["h"], JOB_HEADER: job.name, FLOW_HEADER: orjson.dumps(header).decode()},
        delay=float(spec["d"]),
        # One lease more than the job's limit: a step whose leases lapsed until no
        # attempt was left is then dead-lettered by the worker that leases it once more
        # (by the job's own limit, without running it), with its flow's failure, rather
        # than by the backend, which cannot tell the flow. The backend's limit stays the
        # safety net.
        max_attempts=job.retry.max_attempts + 1,
        visibility_timeout=job.visibility_timeout,
        keep_id=retention,
        priority=int(spec["r"]),
    )


class StepPlan(NamedTuple):
    """A running step's part of the plan, read from its `tasuki-flow` header: the
    barriers its settle fills (in turn), the steps it enqueues, whether its value is the
    flow's result, and the flow's on_failure step."""

    flow_id: str
    path: str
    given: str | None
    fills: tuple[Fill, ...]
    next: tuple[dict[str, Any], ...]
    final: bool
    on_failure: dict[str, Any] | None
    retention: float
    shape: Shape = None  # of the group whose value it takes

    @classmethod
    def from_header(cls, text: str) -> StepPlan:
        doc = orjson.loads(text)
        then = doc["t"]
        flow_id = doc["f"]
        if not isinstance(flow_id, str):
            raise TypeError(f"a flow id is a string, got {flow_id!r}")
        return cls(
            flow_id,
            doc["p"],
            doc.get("i"),
            tuple([Fill(flow_id, str(b), int(s), int(n)) for b, s, n in then["f"]])
            if then["f"]
            else (),
            tuple(then["n"]),
            bool(then["z"]),
            doc.get("o"),
            float(doc.get("r", FLOW_RETENTION)),
            doc.get("x"),
        )

    @property
    def barrier(self) -> str | None:
        """The group whose value this step takes as its first argument, if any."""
        if self.given is not None and self.given.startswith(_GROUP):
            return self.given[len(_GROUP) :]
        return None

    @property
    def takes_failure(self) -> bool:
        return self.given == _FAILURE


def failure_argument(value: Any) -> FlowFailure:
    """The on_failure step's first argument, from the JSON its message carries."""
    return FlowFailure.from_json(orjson.dumps(value))


# -- what the caller sees -------------------------------------------------------------


class StepState(NamedTuple):
    """One step of `app.flow(id).steps`: where it runs and what `inspect` says of it
    ("unknown" for a step not enqueued yet)."""

    job: str
    queue: str
    message_id: str
    state: str
    attempt: int


@dataclass(frozen=True, slots=True)
class FlowState:
    """`app.flow(flow_id)`: "running", "succeeded" (its last step's `result`), "failed"
    (`error`: its first failure) or "cancelled"; and each step's state."""

    id: str
    state: FlowStateName
    steps: tuple[StepState, ...]
    result: Any = None
    error: FlowFailure | None = None


def state_of(record: FlowRecord, infos: Sequence[MessageInfo]) -> FlowState:
    """A flow's state from its record and `inspect` of its steps (in record order, the
    on_failure step last when it was enqueued)."""
    state: FlowStateName
    if record.cancelled:
        state = "cancelled"
    elif record.result is not None:
        state = "succeeded"  # a failed step re-driven to the end: the flow resumed
    elif record.failure is not None:
        state = "failed"
    else:
        state = "running"
    all_steps = [*record.steps, *([record.on_failure] if record.on_failure else [])]
    steps = tuple(
        StepState(s.job, s.queue, s.message_id, info.state, info.attempt)
        for s, info in zip(all_steps, infos, strict=False)
        if not (s is record.on_failure and info.state == "unknown")
    )
    result = None if record.result is None else orjson.loads(record.result)
    return FlowState(record.id, state, steps, result, record.failure)

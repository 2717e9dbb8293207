"""tasuki: background jobs that never lose a message, never run one twice by accident,
and always tell you what happened to it."""

from tasuki.app import App
from tasuki.core.console import JobStats, Page, Running, WorkerInfo
from tasuki.core.context import Context, current
from tasuki.core.flowrecords import FlowFailure
from tasuki.core.flows import FlowState, chain, group
from tasuki.core.job import Step
from tasuki.core.message import DeadLetter, ErrorInfo, Message
from tasuki.core.policies import (
    ConcurrencyLimit,
    Dedup,
    RateLimit,
    Retry,
    Unique,
    constant,
    exponential,
)
from tasuki.core.records import HistoryEntry, MessageInfo
from tasuki.errors import Defer, Skip, TasukiError
from tasuki.middleware.base import Middleware, Outcome, Outgoing

__version__ = "0.1.0"

__all__ = [
    "App",
    "ConcurrencyLimit",
    "Context",
    "DeadLetter",
    "Dedup",
    "Defer",
    "ErrorInfo",
    "FlowFailure",
    "FlowState",
    "HistoryEntry",
    "JobStats",
    "Message",
    "MessageInfo",
    "Middleware",
    "Outcome",
    "Outgoing",
    "Page",
    "RateLimit",
    "Retry",
    "Running",
    "Skip",
    "Step",
    "TasukiError",
    "Unique",
    "WorkerInfo",
    "__version__",
    "chain",
    "constant",
    "current",
    "exponential",
    "group",
]

"""Effects a handler records on its context, applied in order after the handler returns.

The actor system interprets them; the behaviour test kit (``runtime.testkit``) just keeps them, so a
test can assert exactly what a handler decided without running any I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from runtime.messages import AskFailure, Requester
from runtime.ref import ActorRef

if TYPE_CHECKING:
    from runtime.actor import Actor
    from runtime.supervision import SupervisorStrategy

__all__ = [
    "Ask",
    "CancelTimer",
    "Effect",
    "Halt",
    "Pipe",
    "Reply",
    "Spawn",
    "StartTimer",
    "Stop",
    "Tell",
]


@dataclass(frozen=True, slots=True)
class Tell:
    target: ActorRef
    message: Any


@dataclass(frozen=True, slots=True)
class Ask:
    target: ActorRef
    message: Any
    timeout_ms: int
    ask_id: int
    on_reply: Callable[[Any], Any]
    on_failure: Callable[[AskFailure], Any]


@dataclass(frozen=True, slots=True)
class Reply:
    requester: Requester
    message: Any


@dataclass(frozen=True, slots=True)
class StartTimer:
    key: Hashable
    message: Any
    delay_ms: int
    interval_ms: int | None = None


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: Hashable


@dataclass(frozen=True, slots=True)
class Pipe:
    operation: Callable[[], Awaitable[Any]]
    on_success: Callable[[Any], Any]
    on_failure: Callable[[Exception], Any]
    # A blocking function (an fsync, a directory scan) behind ``operation``: the system runs it in
    # a worker thread, or inline when the node runs deterministically (simulation).
    blocking: Callable[[], Any] | None = None


@dataclass(frozen=True, slots=True)
class Spawn:
    ref: ActorRef
    factory: Callable[[], Actor[Any]]
    supervision: SupervisorStrategy | None


@dataclass(frozen=True, slots=True)
class Stop:
    ref: ActorRef


@dataclass(frozen=True, slots=True)
class Halt:
    """End the whole node: what a process does when it cannot go on safely (Kafka's
    ``Exit.halt`` on a failed log directory). The node's task group fails with ``NodeHalted``."""

    reason: str


Effect: TypeAlias = Tell | Ask | Reply | StartTimer | CancelTimer | Pipe | Spawn | Stop | Halt

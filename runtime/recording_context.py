"""``RecordingContext``: the part of a Context that only records effects, shared by the actor
system's context (``runtime.system``) and the behaviour test kit's (``runtime.testkit``).

Sharing it keeps the test kit honest: a handler that records an effect the system would reject (a
periodic timer without a positive interval) fails under the kit exactly as it fails in production.
Subclasses supply time, randomness, logging, the envelope being handled, ``message_adapter`` (posting
differs), and where ask ids and spawned children's node come from.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.context import Context
from runtime.effects import Ask, CancelTimer, Effect, Halt, Pipe, Reply, Spawn, StartTimer, Stop, Tell
from runtime.messages import AskFailure, Requester
from runtime.ref import ActorRef

if TYPE_CHECKING:
    from runtime.actor import Actor
    from runtime.supervision import SupervisorStrategy

__all__ = ["RecordingContext"]

T = TypeVar("T")


class RecordingContext(Context[Any]):
    """Records every effect into ``effects``, in call order."""

    __slots__ = ()
    effects: list[Effect]

    @abstractmethod
    def _next_ask_id(self) -> int:
        """A fresh ask id (unique within the actor system or the test kit)."""

    def tell(self, target: ActorRef, message: object) -> None:
        self.effects.append(Tell(target, message))

    def ask(
        self,
        target: ActorRef,
        message: object,
        *,
        timeout_ms: int,
        on_reply: Callable[[Any], Any],
        on_failure: Callable[[AskFailure], Any],
    ) -> int:
        ask_id = self._next_ask_id()
        self.effects.append(Ask(target, message, timeout_ms, ask_id, on_reply, on_failure))
        return ask_id

    def reply_to(self, requester: Requester, message: object) -> None:
        self.effects.append(Reply(requester, message))

    def start_timer(self, key: Hashable, message: Any, delay_ms: int) -> None:
        self.effects.append(StartTimer(key, message, delay_ms))

    def start_periodic_timer(
        self, key: Hashable, message: Any, interval_ms: int, initial_delay_ms: int | None = None
    ) -> None:
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        delay = interval_ms if initial_delay_ms is None else initial_delay_ms
        self.effects.append(StartTimer(key, message, delay, interval_ms))

    def cancel_timer(self, key: Hashable) -> None:
        self.effects.append(CancelTimer(key))

    def pipe_to_self(
        self,
        operation: Callable[[], Awaitable[T]],
        on_success: Callable[[T], Any],
        on_failure: Callable[[Exception], Any],
    ) -> None:
        self.effects.append(Pipe(operation, on_success, on_failure))

    def _pipe_blocking(
        self,
        operation: Callable[[], Awaitable[T]],
        function: Callable[[], T],
        on_success: Callable[[T], Any],
        on_failure: Callable[[Exception], Any],
    ) -> None:
        self.effects.append(Pipe(operation, on_success, on_failure, blocking=function))

    def spawn(
        self,
        name: str,
        factory: Callable[[], Actor[Any]],
        *,
        supervision: SupervisorStrategy | None = None,
    ) -> ActorRef:
        ref = ActorRef(node_id=self.self_ref.node_id, name=name)
        self.effects.append(Spawn(ref, factory, supervision))
        return ref

    def stop(self, ref: ActorRef) -> None:
        self.effects.append(Stop(ref))

    def halt_node(self, reason: str) -> None:
        self.effects.append(Halt(reason))

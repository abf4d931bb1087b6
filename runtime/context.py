"""The Context: everything a handler may do, recorded as effects.

A handler never performs I/O itself. It calls methods on its context, which record *effects*; the
runtime applies them, in the order recorded, after the handler returns (and drops them if the
handler raised). Two implementations exist: the actor system's (``runtime.system``) and the
behaviour test kit's (``runtime.testkit``), which keeps the effects for a test to inspect; both record
through ``runtime.recording_context.RecordingContext``.

What a context offers:

* time and randomness: ``now_ms`` (monotonic), ``wall_clock_ms`` (epoch), ``rng`` (seeded);
* messaging: ``tell``, ``ask`` (reply or failure comes back later as one of *your* messages, built
  by the ``on_reply``/``on_failure`` adapters), ``reply`` / ``reply_to`` (a kept ``Requester``);
* timers: ``start_timer`` / ``start_periodic_timer`` / ``cancel_timer`` by key. Starting a timer
  with a key already in use replaces it; a cancelled or replaced timer never delivers, even if its
  message was already queued;
* I/O: ``pipe_to_self(operation, on_success, on_failure)`` runs an async operation outside the
  actor and delivers its outcome as a message (Akka's pipeToSelf); ``pipe_blocking_to_self`` does
  the same for a blocking function, in a worker thread; ``message_adapter`` gives a
  plain callback that posts into this actor's mailbox (for port subscriptions such as watches);
* children: ``spawn`` / ``stop``, ``stop_self``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from runtime.messages import AskFailure, Requester
from runtime.ref import ActorRef

if TYPE_CHECKING:
    from runtime.actor import Actor
    from runtime.supervision import SupervisorStrategy

__all__ = ["Context"]

M = TypeVar("M")
T = TypeVar("T")


class Context(ABC, Generic[M]):
    """Effects available to a handler of an actor whose message union is ``M``."""

    @property
    @abstractmethod
    def self_ref(self) -> ActorRef: ...

    @property
    @abstractmethod
    def now_ms(self) -> int:
        """Monotonic milliseconds (timers, lags, deadlines)."""

    @property
    @abstractmethod
    def wall_clock_ms(self) -> int:
        """Unix-epoch milliseconds (record and znode timestamps)."""

    @property
    @abstractmethod
    def now_ns(self) -> int:
        """Monotonic nanoseconds, for measuring short durations (latency histograms)."""

    @property
    @abstractmethod
    def rng(self) -> random.Random: ...

    @property
    @abstractmethod
    def log(self) -> logging.LoggerAdapter[logging.Logger]: ...

    @property
    @abstractmethod
    def sender(self) -> ActorRef | None:
        """Who sent the message being handled, if known."""

    @property
    @abstractmethod
    def requester(self) -> Requester | None:
        """The reply token of the message being handled when it is an ask, else None."""

    # ------------------------------------------------------------------------------- messaging

    @abstractmethod
    def tell(self, target: ActorRef, message: object) -> None:
        """Send without expecting a reply. Delivery is at most once; order per target is kept."""

    def tell_self(self, message: M) -> None:
        self.tell(self.self_ref, message)

    @abstractmethod
    def ask(
        self,
        target: ActorRef,
        message: object,
        *,
        timeout_ms: int,
        on_reply: Callable[[Any], M],
        on_failure: Callable[[AskFailure], M],
    ) -> int:
        """Send a request; exactly one of the adapters' messages arrives later. Returns the ask id.

        A reply that arrives after the timeout is dropped. The target may still act on a request
        whose ask timed out: handlers that ask must be ready for that.
        """

    @abstractmethod
    def reply_to(self, requester: Requester, message: object) -> None:
        """Answer an ask, now or later. Answers to expired or answered asks are dropped."""

    def reply(self, message: object) -> None:
        """Answer the ask being handled."""
        requester = self.requester
        if requester is None:
            raise RuntimeError(f"{self.self_ref}: reply() while handling a tell")
        self.reply_to(requester, message)

    # ---------------------------------------------------------------------------------- timers

    @abstractmethod
    def start_timer(self, key: Hashable, message: M, delay_ms: int) -> None:
        """Deliver ``message`` to self once, ``delay_ms`` from now, unless cancelled."""

    @abstractmethod
    def start_periodic_timer(
        self, key: Hashable, message: M, interval_ms: int, initial_delay_ms: int | None = None
    ) -> None:
        """Deliver ``message`` to self every ``interval_ms`` (first after ``initial_delay_ms``)."""

    @abstractmethod
    def cancel_timer(self, key: Hashable) -> None: ...

    # ------------------------------------------------------------------------------------- I/O

    @abstractmethod
    def pipe_to_self(
        self,
        operation: Callable[[], Awaitable[T]],
        on_success: Callable[[T], M],
        on_failure: Callable[[Exception], M],
    ) -> None:
        """Run ``operation()`` outside the actor; its result or exception comes back as a message."""

    def pipe_blocking_to_self(
        self,
        function: Callable[[], T],
        on_success: Callable[[T], M],
        on_failure: Callable[[Exception], M],
    ) -> None:
        """Run a blocking ``function()`` (an fsync, a directory scan) in a worker thread; its result
        or exception comes back as a message. The event loop never blocks on it."""

        async def operation() -> T:
            return await asyncio.to_thread(function)

        self._pipe_blocking(operation, function, on_success, on_failure)

    def _pipe_blocking(
        self,
        operation: Callable[[], Awaitable[T]],
        function: Callable[[], T],
        on_success: Callable[[T], M],
        on_failure: Callable[[Exception], M],
    ) -> None:
        self.pipe_to_self(operation, on_success, on_failure)

    @abstractmethod
    def message_adapter(self, adapt: Callable[[T], M]) -> Callable[[T], None]:
        """A callback that, when called on the event loop, posts ``adapt(value)`` to this actor."""

    # -------------------------------------------------------------------------------- children

    @abstractmethod
    def spawn(
        self,
        name: str,
        factory: Callable[[], Actor[Any]],
        *,
        supervision: SupervisorStrategy | None = None,
    ) -> ActorRef:
        """Start a child actor on this node; it keeps its ref across restarts."""

    @abstractmethod
    def stop(self, ref: ActorRef) -> None:
        """Stop a child (its on_stop runs; queued messages are dropped)."""

    def stop_self(self) -> None:
        self.stop(self.self_ref)

    @abstractmethod
    def halt_node(self, reason: str) -> None:
        """End this actor's whole node (the process exits non-zero): for a failure after which
        nothing on this node may go on serving (a failed log directory, a registration that can
        never succeed). Its supervisor (Kubernetes, ``cluster up``) starts it again."""

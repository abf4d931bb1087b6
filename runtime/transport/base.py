"""The Transport port: how envelopes reach other nodes.

A transport moves ``WireEnvelope``s between actor systems identified by node id.

Guarantees every implementation keeps (``tests/contract/test_transport_contract.py`` proves them
for both the memory and the HTTP transport):

* **tells** are delivered at most once and, between one sending node and one target node, in the
  order they were sent (so per sender actor and per target actor too);
* an **ask** is one request whose answer is the reply; it ends in exactly one of: the reply,
  ``AskTimeoutError`` (deadline), ``PeerUnavailableError`` (node unreachable) or
  ``UnknownActorError`` (no such actor there). Concurrent asks are not ordered relative to each
  other; an actor that needs ordered requests keeps one in flight (as a replica fetcher does);
* receiving is backpressured: the inbound side waits for mailbox capacity before accepting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from runtime.codec import WireEnvelope

__all__ = ["InboundHandler", "TaskSpawner", "Transport"]

TaskSpawner = Callable[[Coroutine[Any, Any, None]], None]


class InboundHandler(Protocol):
    """The receiving side: implemented by the actor system."""

    @property
    def node_id(self) -> str: ...

    def admit(self, envelope: WireEnvelope, *, ask: bool) -> None:
        """Check without delivering that the target exists and takes this kind from another node
        in this mode. Raises UnknownActorError or RefusedMessageError."""
        ...

    async def deliver(self, envelope: WireEnvelope) -> None:
        """Enqueue a tell, waiting for mailbox capacity. Raises UnknownActorError or
        RefusedMessageError."""
        ...

    async def deliver_ask(self, envelope: WireEnvelope) -> object:
        """Enqueue an ask and wait for its reply. Raises UnknownActorError or AskTimeoutError."""
        ...

    async def submit_ask(self, envelope: WireEnvelope) -> Awaitable[object]:
        """Enqueue an ask (waiting for capacity) and return its reply, to be awaited exactly once
        (the reply counts as activity until the awaiting side resumes)."""
        ...


class Transport(Protocol):
    async def start(self, inbound: InboundHandler, spawn: TaskSpawner) -> None:
        """Begin receiving for ``inbound``; background tasks are started with ``spawn``."""
        ...

    def send(self, node_id: str, envelope: WireEnvelope) -> None:
        """Queue a tell for ``node_id`` (never blocks; dropped and counted if undeliverable)."""
        ...

    async def ask(
        self, node_id: str, envelope: WireEnvelope, timeout_ms: int, on_sent: Callable[[], None] | None = None
    ) -> object:
        """Send an ask and return the reply, or raise a TransportError subclass.

        ``on_sent`` is called once the request is handed over (for the memory transport: once it is
        in the target's mailbox), so that virtual-time tests know a pending reply is no longer work
        in flight but a wait.
        """
        ...

    async def stop(self) -> None:
        """Stop sending and receiving; pending tells are dropped."""
        ...

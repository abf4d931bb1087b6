"""In-memory transport: several actor systems in one process (tests, one-process clusters).

A ``MemoryNetwork`` is the shared medium; each system gets its own ``MemoryTransport`` on it.
Tells between two nodes go through one ordered channel per (sender node, target node), drained by
one pump task that waits for mailbox capacity on the receiving side, exactly like the HTTP
transport's per-peer channel. With a codec, every message is encoded and decoded on the way, so a
one-process cluster proves its messages survive the real wire format.

Faults for tests: ``partition(a, b)`` cuts both directions between two nodes (tells are dropped,
asks fail with ``PeerUnavailableError``), ``isolate(node)`` cuts a node from everyone, ``heal()``
restores everything.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.activity import Activity
from runtime.codec import Codec, WireEnvelope
from runtime.errors import PeerUnavailableError
from runtime.transport.base import InboundHandler, TaskSpawner

__all__ = ["MemoryNetwork", "MemoryTransport"]


@dataclass(slots=True)
class _Channel:
    queue: deque[WireEnvelope] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)


class MemoryNetwork:
    """The medium connecting memory transports, with partition faults."""

    def __init__(self, *, codec: Codec | None = None, activity: Activity | None = None) -> None:
        self.codec = codec
        self.activity = activity if activity is not None else Activity()
        self._nodes: dict[str, InboundHandler] = {}
        self._cut: set[frozenset[str]] = set()
        self._isolated: set[str] = set()
        self.dropped_total = 0

    def attach(self, inbound: InboundHandler) -> None:
        if inbound.node_id in self._nodes:
            raise ValueError(f"node {inbound.node_id!r} is already on this network")
        self._nodes[inbound.node_id] = inbound

    def detach(self, node_id: str) -> None:
        self._nodes.pop(node_id, None)

    def partition(self, a: str, b: str) -> None:
        self._cut.add(frozenset((a, b)))

    def isolate(self, node_id: str) -> None:
        self._isolated.add(node_id)

    def heal(self) -> None:
        self._cut.clear()
        self._isolated.clear()

    def reachable(self, source: str, target: str) -> bool:
        if source in self._isolated or target in self._isolated:
            return source == target
        return frozenset((source, target)) not in self._cut

    def lookup(self, source: str, target: str) -> InboundHandler:
        inbound = self._nodes.get(target)
        if inbound is None:
            raise PeerUnavailableError(target, "no such node on the network")
        if not self.reachable(source, target):
            raise PeerUnavailableError(target, "network partition")
        return inbound

    def transfer(self, envelope: WireEnvelope) -> WireEnvelope:
        """What the receiver gets: the same envelope, or its codec round-trip."""
        if self.codec is None:
            return envelope
        return self.codec.decode_envelopes(self.codec.encode_envelopes([envelope]))[0]

    def transfer_reply(self, reply: object) -> object:
        if self.codec is None:
            return reply
        return self.codec.decode(self.codec.encode(reply))


class MemoryTransport:
    """One node's view of a MemoryNetwork."""

    def __init__(self, network: MemoryNetwork) -> None:
        self._network = network
        self._node_id: str | None = None
        self._spawn: TaskSpawner | None = None
        self._channels: dict[str, _Channel] = {}
        self._stopped = False

    async def start(self, inbound: InboundHandler, spawn: TaskSpawner) -> None:
        self._node_id = inbound.node_id
        self._spawn = spawn
        self._network.attach(inbound)

    def send(self, node_id: str, envelope: WireEnvelope) -> None:
        if self._stopped or self._spawn is None:
            self._network.dropped_total += 1
            return
        channel = self._channels.get(node_id)
        if channel is None:
            channel = _Channel()
            self._channels[node_id] = channel
            self._spawn(self._pump(node_id, channel))
        channel.queue.append(envelope)
        self._network.activity.begin()
        channel.wakeup.set()

    async def _pump(self, node_id: str, channel: _Channel) -> None:
        source = self._node_id
        assert source is not None
        while not self._stopped:
            if not channel.queue:
                channel.wakeup.clear()
                await channel.wakeup.wait()
                continue
            envelope = channel.queue.popleft()
            try:
                inbound = self._network.lookup(source, node_id)
                await inbound.deliver(self._network.transfer(envelope))
            except Exception:  # noqa: BLE001
                # At most once: an undeliverable tell is dropped and counted.
                self._network.dropped_total += 1
            finally:
                self._network.activity.end()

    async def ask(
        self, node_id: str, envelope: WireEnvelope, timeout_ms: int, on_sent: Callable[[], None] | None = None
    ) -> object:
        source = self._node_id
        assert source is not None
        inbound = self._network.lookup(source, node_id)
        future = await inbound.submit_ask(self._network.transfer(envelope))
        if on_sent is not None:
            on_sent()
        reply = await future
        if not self._network.reachable(source, node_id):
            raise PeerUnavailableError(node_id, "network partition")
        return self._network.transfer_reply(reply)

    async def stop(self) -> None:
        self._stopped = True
        for channel in self._channels.values():
            for _ in channel.queue:
                self._network.activity.end()
                self._network.dropped_total += 1
            channel.queue.clear()
            channel.wakeup.set()
        if self._node_id is not None:
            self._network.detach(self._node_id)

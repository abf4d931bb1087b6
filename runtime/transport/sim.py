"""The simulated network: the memory network with per-message delays, loss and link filters, all
on virtual time and all drawn from one seeded generator.

What it models (an HTTP/1.1 network between nodes, as the real transport uses it):

* **Latency.** Every request, reply and tell waits ``delay_ms`` of virtual time before it is
  delivered, drawn per message from the link's ``LinkBehaviour``. Tells between one pair of nodes
  keep their order (one ordered channel per pair, as the HTTP transport's per-peer tell channel);
  asks are separate requests and may overtake each other and the tells.
* **Loss.** A link can lose requests or replies with a probability. A lost request never reaches
  the target; a lost reply is lost after the target handled the request (the asker cannot tell
  the two apart: both end as ``PeerUnavailableError``). A lost tell is dropped and counted.
* **Partitions.** A link filter decides, per message, whether it crosses: symmetric cuts, one-way
  cuts, and cuts of some actors' traffic only (broker-to-controller) are filters.

Virtual time and quiescence: a message waiting for its delivery time is *not* activity (nothing
can happen until the clock moves); the clock timer that ends the wait takes an activity unit that
is released once the message is in the target's mailbox or the reply is back with its asker. So
``advance()`` steps through deliveries as through any other timer.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.activity import Activity
from runtime.clock import ManualClock
from runtime.codec import Codec, WireEnvelope
from runtime.errors import PeerUnavailableError
from runtime.transport.base import InboundHandler, TaskSpawner

__all__ = ["Direction", "LinkBehaviour", "LinkFilter", "SimNetwork", "SimTransport"]


class Direction:
    REQUEST = "request"
    REPLY = "reply"
    TELL = "tell"


# (source node, target node, direction, the envelope of the request or tell) -> crosses?
LinkFilter = Callable[[str, str, str, WireEnvelope], bool]


@dataclass(frozen=True, slots=True)
class LinkBehaviour:
    """Delay and loss on a link. Delays are uniform in [min_delay_ms, max_delay_ms]; with
    ``spike_probability`` a message instead waits up to ``spike_delay_ms`` (a slow path)."""

    min_delay_ms: int = 0
    max_delay_ms: int = 2
    spike_probability: float = 0.0
    spike_delay_ms: int = 0
    loss_probability: float = 0.0


@dataclass(slots=True)
class _Channel:
    queue: deque[WireEnvelope] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # The pump has work it has not yet put on the wire: one activity unit, whatever the count.
    # Tells queued behind one on the wire wait on the clock too, so they are not counted apart.
    runnable: bool = False


class SimNetwork:
    """The medium for ``SimTransport``s: nodes, link behaviours, filters, counters."""

    def __init__(
        self, *, clock: ManualClock, rng: random.Random, codec: Codec | None = None, activity: Activity
    ) -> None:
        self.clock = clock
        self.rng = rng
        self.codec = codec
        self.activity = activity
        self.default = LinkBehaviour()
        self.links: dict[tuple[str, str], LinkBehaviour] = {}
        self.filters: dict[str, LinkFilter] = {}
        self._nodes: dict[str, InboundHandler] = {}
        self.delivered_total = 0
        self.dropped_total = 0
        self.lost_total = 0
        self.filtered_total = 0

    # ---------------------------------------------------------------------------- topology

    def attach(self, inbound: InboundHandler) -> None:
        if inbound.node_id in self._nodes:
            raise ValueError(f"node {inbound.node_id!r} is already on this network")
        self._nodes[inbound.node_id] = inbound

    def detach(self, node_id: str) -> None:
        self._nodes.pop(node_id, None)

    def behaviour(self, source: str, target: str) -> LinkBehaviour:
        return self.links.get((source, target), self.default)

    def crosses(self, source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        for link_filter in self.filters.values():
            if not link_filter(source, target, direction, envelope):
                self.filtered_total += 1
                return False
        return True

    def passes(self, source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        """Whether one message crosses the link: no filter stops it and it is not lost."""
        return self.crosses(source, target, direction, envelope) and not self.lost(source, target)

    def lost(self, source: str, target: str) -> bool:
        probability = self.behaviour(source, target).loss_probability
        if probability > 0 and self.rng.random() < probability:
            self.lost_total += 1
            return True
        return False

    def delay_ms(self, source: str, target: str) -> int:
        link = self.behaviour(source, target)
        if link.spike_probability > 0 and self.rng.random() < link.spike_probability:
            return self.rng.randint(link.max_delay_ms, max(link.max_delay_ms, link.spike_delay_ms))
        return self.rng.randint(link.min_delay_ms, link.max_delay_ms)

    def lookup(self, target: str) -> InboundHandler:
        inbound = self._nodes.get(target)
        if inbound is None:
            raise PeerUnavailableError(target, "no such node on the network")
        return inbound

    # ------------------------------------------------------------------------------ timing

    async def wait(self, delay_ms: int) -> None:
        """Wait ``delay_ms`` of virtual time. Returns holding one activity unit, which the caller
        releases once what it carried has arrived (see the module docstring)."""
        if delay_ms <= 0:
            self.activity.begin()
            return
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def arrive() -> None:
            if not arrived.done():
                self.activity.begin()
                arrived.set_result(None)

        timer = self.clock.call_later(delay_ms, arrive)
        try:
            await arrived
        except asyncio.CancelledError:
            # The carrier was cancelled (its node stopped): if the message had arrived, the unit
            # taken for it is nobody's to release but ours.
            if arrived.done() and not arrived.cancelled():
                self.activity.end()
            timer.cancel()
            raise

    def transfer(self, envelope: WireEnvelope) -> WireEnvelope:
        if self.codec is None:
            return envelope
        return self.codec.decode_envelopes(self.codec.encode_envelopes([envelope]))[0]

    def transfer_reply(self, reply: object) -> object:
        if self.codec is None:
            return reply
        return self.codec.decode(self.codec.encode(reply))


class SimTransport:
    """One node's view of a SimNetwork (the Transport port)."""

    def __init__(self, network: SimNetwork) -> None:
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
        network = self._network
        if self._stopped or self._spawn is None:
            network.dropped_total += 1
            return
        channel = self._channels.get(node_id)
        if channel is None:
            channel = self._channels[node_id] = _Channel()
            self._spawn(self._pump(node_id, channel))
        channel.queue.append(envelope)
        if not channel.runnable:
            channel.runnable = True
            network.activity.begin()
        channel.wakeup.set()

    async def _pump(self, node_id: str, channel: _Channel) -> None:
        network = self._network
        source = self._node_id
        assert source is not None
        while not self._stopped:
            if not channel.queue:
                channel.wakeup.clear()
                await channel.wakeup.wait()
                continue
            envelope = channel.queue.popleft()
            delay_ms = network.delay_ms(source, node_id)
            if channel.runnable:
                # Put on the wire: from here the pump waits on the clock, which is not activity.
                channel.runnable = False
                network.activity.end()
            await network.wait(delay_ms)
            try:
                if self.stopped:  # stopped while the tell was on the wire
                    network.dropped_total += 1
                    continue
                if not network.passes(source, node_id, Direction.TELL, envelope):
                    network.dropped_total += 1
                    continue
                inbound = network.lookup(node_id)
                await inbound.deliver(network.transfer(envelope))
                network.delivered_total += 1
            except Exception:  # noqa: BLE001 - at most once: an undeliverable tell is dropped
                network.dropped_total += 1
            finally:
                network.activity.end()

    async def ask(
        self, node_id: str, envelope: WireEnvelope, timeout_ms: int, on_sent: Callable[[], None] | None = None
    ) -> object:
        network = self._network
        source = self._node_id
        assert source is not None
        # On the wire the request waits on the clock: it no longer counts as the asker's activity.
        if on_sent is not None:
            on_sent()
        await network.wait(network.delay_ms(source, node_id))
        holding = True
        try:
            if not network.passes(source, node_id, Direction.REQUEST, envelope):
                raise PeerUnavailableError(node_id, "request lost in the network")
            pending = await network.lookup(node_id).submit_ask(network.transfer(envelope))
            network.activity.end()  # the request is in the target's mailbox, which counts it
            holding = False
            reply = await pending
            await network.wait(network.delay_ms(node_id, source))
            holding = True
            if not network.passes(node_id, source, Direction.REPLY, envelope):
                raise PeerUnavailableError(node_id, "reply lost in the network")
            network.delivered_total += 1
            return network.transfer_reply(reply)
        finally:
            # Released in the same step in which the asker posts the outcome to its mailbox.
            if holding:
                network.activity.end()

    @property
    def stopped(self) -> bool:
        return self._stopped

    async def stop(self) -> None:
        self._stopped = True
        for channel in self._channels.values():
            self._network.dropped_total += len(channel.queue)
            if channel.runnable:
                channel.runnable = False
                self._network.activity.end()
            channel.queue.clear()
            channel.wakeup.set()
        if self._node_id is not None:
            self._network.detach(self._node_id)

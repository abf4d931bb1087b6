"""One contract, three transports: the memory transport and the simulation's transport must behave
like the HTTP one.

The memory and HTTP transports run on real time (the HTTP transport does real I/O on loopback);
the simulation's runs on virtual time, moved by a driver that jumps to the next due timer whenever
everything is idle (deliveries wait on the clock there). Waiting is always on an event or a reply,
never a sleep.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from runtime import Actor, ActorRef, ActorSystem, AskTimedOut, Context, PeerUnavailable, UnknownActor
from runtime.activity import Activity
from runtime.clock import ManualClock
from runtime.errors import AskTimeoutError, PeerUnavailableError, RefusedMessageError, UnknownActorError
from runtime.transport.http import HttpServer, HttpTransport
from runtime.transport.memory import MemoryNetwork, MemoryTransport
from runtime.transport.sim import LinkBehaviour, SimNetwork, SimTransport
from tests.support.runtime_actors import (
    AskerActor,
    EchoActor,
    GetNotes,
    Note,
    Ping,
    PingAnswered,
    PingFailed,
    Pong,
    SendPings,
    Silence,
    make_codec,
)

pytestmark = pytest.mark.asyncio

SECRET = "contract-secret"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    kind: str
    a: ActorSystem
    b: ActorSystem
    ghost_node: str


async def autojump(clock: ManualClock, activity: Activity) -> None:
    """Virtual time that moves by itself: whenever nothing is in flight, jump to the next due
    timer; with no timer due, wait until something starts."""
    while True:
        await activity.wait_idle()
        if not clock.step():
            await activity.wait_begin()


@pytest_asyncio.fixture(params=["memory", "sim", "http"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    codec = make_codec()
    async with AsyncExitStack() as stack:
        if request.param == "memory":
            network = MemoryNetwork(codec=codec)
            a = ActorSystem("a", transport=MemoryTransport(network))
            b = ActorSystem("b", transport=MemoryTransport(network))
        elif request.param == "sim":
            clock, activity = ManualClock(), Activity()
            sim = SimNetwork(clock=clock, rng=random.Random(7), codec=codec, activity=activity)
            sim.default = LinkBehaviour(min_delay_ms=0, max_delay_ms=20)
            a = ActorSystem("a", clock=clock, transport=SimTransport(sim), activity=activity)
            b = ActorSystem("b", clock=clock, transport=SimTransport(sim), activity=activity)
            driver = asyncio.ensure_future(autojump(clock, activity))
            stack.callback(driver.cancel)
        else:
            addresses: dict[str, str] = {"ghost": f"http://127.0.0.1:{free_port()}"}
            transports = {
                node: HttpTransport(codec, secret=SECRET, resolve=addresses.get) for node in ("a", "b")
            }
            for node, transport in transports.items():
                server = HttpServer("127.0.0.1", 0, routes=transport.routes(), max_body_bytes=8 << 20)
                await server.start()
                stack.push_async_callback(server.stop)
                addresses[node] = server.url
            a = ActorSystem("a", transport=transports["a"])
            b = ActorSystem("b", transport=transports["b"])
        await stack.enter_async_context(a)
        await stack.enter_async_context(b)
        yield Cluster(request.param, a, b, "ghost")


class NoteCollector(Actor[Any]):
    """Keeps Notes in arrival order; sets ``done`` once ``expected`` have arrived."""

    remote_tells = frozenset({Note})

    def __init__(self, expected: int, done: asyncio.Event, notes: list[Note]) -> None:
        self.expected = expected
        self.done = done
        self.notes = notes

    def receive(self, ctx: Context[Any], message: Any) -> None:
        if isinstance(message, Note):
            self.notes.append(message)
            if len(self.notes) == self.expected:
                self.done.set()


@dataclass(frozen=True)
class Burst:
    target: ActorRef
    sender: str
    count: int


class Teller(Actor[Any]):
    def receive(self, ctx: Context[Any], message: Any) -> None:
        if isinstance(message, Burst):
            for sequence in range(message.count):
                ctx.tell(message.target, Note(sender=message.sender, sequence=sequence))


async def test_tells_from_each_sender_arrive_in_order(cluster: Cluster) -> None:
    per_sender = 300
    done = asyncio.Event()
    notes: list[Note] = []
    collector = cluster.b.spawn("collector", lambda: NoteCollector(2 * per_sender, done, notes))
    first = cluster.a.spawn("teller-1", Teller)
    second = cluster.a.spawn("teller-2", Teller)
    cluster.a.tell(first, Burst(collector, "one", per_sender))
    cluster.a.tell(second, Burst(collector, "two", per_sender))
    await asyncio.wait_for(done.wait(), timeout=20)
    for sender in ("one", "two"):
        assert [n.sequence for n in notes if n.sender == sender] == list(range(per_sender))


async def test_ask_returns_the_reply_with_bytes_intact(cluster: Cluster) -> None:
    echo = cluster.b.spawn("echo", EchoActor)
    payload = bytes(range(256)) * 64
    reply = await cluster.a.ask(echo, Ping(sequence=9, payload=payload), timeout_ms=5000)
    assert reply == Pong(sequence=9, payload=payload)


async def test_asks_from_an_actor_come_back_as_its_messages(cluster: Cluster) -> None:
    echo = cluster.b.spawn("echo", EchoActor)
    done = asyncio.Event()
    asker = AskerActor(20, done)
    ref = cluster.a.spawn("asker", lambda: asker)
    cluster.a.tell(ref, SendPings(echo, 20, 5000))
    await asyncio.wait_for(done.wait(), timeout=10)
    assert sorted(o.sequence for o in asker.outcomes if isinstance(o, Pong)) == list(range(20))


async def test_ask_without_reply_times_out_at_the_deadline(cluster: Cluster) -> None:
    echo = cluster.b.spawn("echo", EchoActor)
    with pytest.raises(AskTimeoutError):
        await cluster.a.ask(echo, Silence(sequence=1), timeout_ms=300)


async def test_ask_timeout_inside_an_actor_is_an_ask_timed_out_message(cluster: Cluster) -> None:
    class SilenceAsker(AskerActor):
        def receive(self, ctx: Context[Any], message: Any) -> None:
            if isinstance(message, SendPings):
                ctx.ask(
                    message.target,
                    Silence(sequence=0),
                    timeout_ms=message.timeout_ms,
                    on_reply=PingAnswered,
                    on_failure=PingFailed,
                )
            else:
                super().receive(ctx, message)

    cluster.b.spawn("echo", EchoActor)
    done = asyncio.Event()
    asker = SilenceAsker(1, done)
    ref = cluster.a.spawn("asker", lambda: asker)
    cluster.a.tell(ref, SendPings(ActorRef(node_id="b", name="echo"), 1, 300))
    await asyncio.wait_for(done.wait(), timeout=10)
    assert isinstance(asker.outcomes[0], AskTimedOut)


async def test_ask_to_an_unknown_actor_fails_with_unknown_actor(cluster: Cluster) -> None:
    with pytest.raises(UnknownActorError):
        await cluster.a.ask(ActorRef(node_id="b", name="nobody"), Ping(sequence=1), timeout_ms=5000)
    done = asyncio.Event()
    asker = AskerActor(1, done)
    ref = cluster.a.spawn("asker", lambda: asker)
    cluster.a.tell(ref, SendPings(ActorRef(node_id="b", name="nobody"), 1, 5000))
    await asyncio.wait_for(done.wait(), timeout=10)
    assert isinstance(asker.outcomes[0], UnknownActor)


async def test_ask_to_a_node_that_is_down_fails_with_peer_unavailable(cluster: Cluster) -> None:
    ghost = ActorRef(node_id=cluster.ghost_node, name="echo")
    with pytest.raises(PeerUnavailableError):
        await cluster.a.ask(ghost, Ping(sequence=1), timeout_ms=5000)
    done = asyncio.Event()
    asker = AskerActor(1, done)
    ref = cluster.a.spawn("asker", lambda: asker)
    cluster.a.tell(ref, SendPings(ghost, 1, 5000))
    await asyncio.wait_for(done.wait(), timeout=10)
    assert isinstance(asker.outcomes[0], PeerUnavailable)


async def test_tells_to_unknown_actors_do_not_disturb_later_tells(cluster: Cluster) -> None:
    done = asyncio.Event()
    notes: list[Note] = []
    collector = cluster.b.spawn("collector", lambda: NoteCollector(1, done, notes))
    cluster.a.tell(ActorRef(node_id="b", name="nobody"), Note(sender="x", sequence=0))
    cluster.a.tell(collector, Note(sender="x", sequence=1))
    await asyncio.wait_for(done.wait(), timeout=10)
    assert notes == [Note(sender="x", sequence=1)]


async def test_multi_megabyte_payloads_cross_intact(cluster: Cluster) -> None:
    echo = cluster.b.spawn("echo", EchoActor)
    payload = bytes(range(256)) * (12 * 1024)  # 3 MiB
    reply = await cluster.a.ask(echo, Ping(sequence=1, payload=payload), timeout_ms=10_000)
    assert reply == Pong(sequence=1, payload=payload)


async def test_a_kind_the_target_does_not_take_remotely_is_refused_before_its_mailbox(
    cluster: Cluster,
) -> None:
    """Closed message sets: Note is a tell kind and Ping an ask kind of EchoActor. Each in the other
    mode, or a kind outside its declarations, is refused at the edge and the actor never sees it."""
    echo_actor = EchoActor()
    echo = cluster.b.spawn("echo", lambda: echo_actor)
    await cluster.a.ask(echo, Ping(sequence=0), timeout_ms=5000)  # started: its class is known
    with pytest.raises(RefusedMessageError) as refused:
        await cluster.a.ask(echo, Note(sender="x", sequence=1), timeout_ms=5000)
    assert (refused.value.kind, refused.value.mode) == ("Note", "an ask")
    with pytest.raises(RefusedMessageError):
        await cluster.a.ask(echo, Pong(sequence=1), timeout_ms=5000)
    # A tell of an ask kind is dropped (tells are at most once); the Note after it still arrives.
    cluster.a.tell(echo, Ping(sequence=2))
    cluster.a.tell(echo, Note(sender="x", sequence=3))
    notes = await cluster.a.ask(echo, GetNotes(), timeout_ms=5000)
    while not notes.notes:  # the tells and the asks travel apart: ask until the Note is in
        notes = await cluster.a.ask(echo, GetNotes(), timeout_ms=5000)
    assert [note.sequence for note in notes.notes] == [3]
    (cell,) = [cell for cell in cluster.b.statistics().actors if cell.name == "echo"]
    assert (cell.failures_total, cell.restarts_total) == (0, 0)

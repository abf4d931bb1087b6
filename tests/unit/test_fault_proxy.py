"""FaultProxy on real TCP over loopback: forwarding, cuts by source host, heals, one-way cuts,
delays, backpressure and counters, and the HTTP transport through it.

Clients bind to 127.0.0.2 or 127.0.0.3 (``local_addr``) so the proxy tells them apart as it tells
brokers apart. The target is a server that hands each accepted connection to the test, so a test
holds both ends of a proxied connection and drives either side.

Nothing sleeps. A test waits on a reply, an accepted connection or a read. Where the assertion is
that nothing arrives (a cut), the bounded wait that times out is the assertion itself: ``SILENCE_S``
is how long "nothing" is observed, not a guess at how long something takes.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from ops.local.tls_certs import LocalCertificates
from ops.tls import SSL_KEYSTORE_LOCATION, SSL_TRUSTSTORE_LOCATION, client_context, server_context
from ops.verify.proxy import Direction, FaultProxy, ProxySet
from runtime import ActorSystem
from runtime.errors import AskTimeoutError, TransportError
from runtime.ref import ActorRef
from runtime.transport.http import HttpServer, HttpTransport
from tests.support.runtime_actors import EchoActor, Ping, Pong, make_codec

pytestmark = pytest.mark.asyncio

SOURCE = "127.0.0.2"
OTHER = "127.0.0.3"
# How long a cut link is watched for bytes that must not come.
SILENCE_S = 0.3
# Bound on anything that must happen (a reply, an accept, a close).
BOUND_S = 10.0


class Target:
    """A TCP server whose accepted connections wait in a queue for the test to drive them."""

    def __init__(self) -> None:
        self.accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self.peers: list[str] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._on_accept, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.peers.append(writer.get_extra_info("peername")[0])
        self._writers.append(writer)
        await self.accepted.put((reader, writer))

    async def next(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(self.accepted.get(), BOUND_S)

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        await _close_all(self._writers)
        await self._server.wait_closed()


async def _close_all(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()
    for writer in writers:
        # The proxy may have reset it already: closing is all that is asked.
        with suppress(ConnectionError):
            await writer.wait_closed()


@dataclass
class Link:
    """Both ends of one connection through the proxy."""

    client_reader: asyncio.StreamReader
    client_writer: asyncio.StreamWriter
    server_reader: asyncio.StreamReader
    server_writer: asyncio.StreamWriter


class Rig:
    def __init__(self, target: Target, proxy: FaultProxy) -> None:
        self.target = target
        self.proxy = proxy
        self.clients: list[asyncio.StreamWriter] = []

    async def open(self, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A client connection to the proxy from ``source``."""
        reader, writer = await asyncio.open_connection(*self.proxy.address, local_addr=(source, 0))
        self.clients.append(writer)
        return reader, writer

    async def link(self, source: str) -> Link:
        """A connection from ``source`` that the target has accepted, checked both ways."""
        client_reader, client_writer = await self.open(source)
        server_reader, server_writer = await self.target.next()
        link = Link(client_reader, client_writer, server_reader, server_writer)
        await exchange(link, b"hello")
        return link


async def exchange(link: Link, data: bytes) -> None:
    """``data`` from client to server, then back: both directions forward."""
    link.client_writer.write(data)
    await link.client_writer.drain()
    assert await asyncio.wait_for(link.server_reader.readexactly(len(data)), BOUND_S) == data
    link.server_writer.write(data)
    await link.server_writer.drain()
    assert await asyncio.wait_for(link.client_reader.readexactly(len(data)), BOUND_S) == data


async def silent(reader: asyncio.StreamReader) -> bool:
    """True when nothing arrives on ``reader`` for SILENCE_S."""
    try:
        await asyncio.wait_for(reader.read(1), SILENCE_S)
    except TimeoutError:
        return True
    return False


async def ended(reader: asyncio.StreamReader) -> bool:
    """True when the peer closes or resets the connection within BOUND_S."""
    try:
        data = await asyncio.wait_for(reader.read(), BOUND_S)
    except ConnectionResetError:
        return True
    return reader.at_eof() and data == b""


@pytest_asyncio.fixture
async def rig() -> AsyncIterator[Rig]:
    target = Target()
    address = await target.start()
    proxy = FaultProxy(address, name="test")
    await proxy.start()
    made = Rig(target, proxy)
    try:
        yield made
    finally:
        await _close_all(made.clients)
        await proxy.close()
        await target.close()


async def test_bytes_cross_both_ways_and_are_counted(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    payload = bytes(range(256)) * 4096  # 1 MiB, larger than every buffer on the way
    # Both directions at once: each side writes while the other reads.
    link.client_writer.write(payload)
    link.server_writer.write(payload)
    upstream, downstream = await asyncio.wait_for(
        asyncio.gather(
            link.server_reader.readexactly(len(payload)), link.client_reader.readexactly(len(payload))
        ),
        BOUND_S,
    )
    assert upstream == payload
    assert downstream == payload
    stats = rig.proxy.statistics()
    assert stats.connections_accepted_total == 1
    assert stats.connections_open == 1
    assert stats.bytes_to_target_total == len(b"hello") + len(payload)
    assert stats.bytes_to_source_total == len(b"hello") + len(payload)
    assert stats.connections_blackholed_total == stats.connections_dropped_total == 0
    # The target sees the proxy, not the client.
    assert rig.target.peers == ["127.0.0.1"]


async def test_a_half_close_is_passed_on_and_the_other_way_still_flows(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    link.client_writer.write(b"last words")
    link.client_writer.write_eof()
    assert await asyncio.wait_for(link.server_reader.read(), BOUND_S) == b"last words"
    assert link.server_reader.at_eof()
    link.server_writer.write(b"answer")
    link.server_writer.close()
    assert await asyncio.wait_for(link.client_reader.read(), BOUND_S) == b"answer"


async def test_a_connection_finished_both_ways_is_closed_by_the_proxy(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    link.client_writer.write_eof()
    assert await asyncio.wait_for(link.server_reader.read(), BOUND_S) == b""
    link.server_writer.write(b"answer")
    link.server_writer.write_eof()
    assert await asyncio.wait_for(link.client_reader.read(), BOUND_S) == b"answer"
    # The proxy closed both sockets when it passed the second EOF on; their close callbacks ran
    # before the client's read could return.
    assert rig.proxy.statistics().connections_open == 0


async def test_a_cut_source_is_silent_while_another_source_still_works(rig: Rig) -> None:
    cut_link = await rig.link(SOURCE)
    other_link = await rig.link(OTHER)
    rig.proxy.cut(SOURCE)
    assert rig.proxy.cut_of(SOURCE) is Direction.BOTH
    assert rig.proxy.cut_of(OTHER) is None

    cut_link.client_writer.write(b"request")
    cut_link.server_writer.write(b"unsolicited")
    assert await silent(cut_link.server_reader)
    assert await silent(cut_link.client_reader)
    # Stalled, not closed: neither end has seen an end of stream.
    assert not cut_link.client_reader.at_eof()
    assert not cut_link.server_reader.at_eof()

    await exchange(other_link, b"still fine")


async def test_a_new_connection_from_a_cut_source_is_accepted_but_never_connected_onward(
    rig: Rig,
) -> None:
    rig.proxy.cut(SOURCE)
    reader, writer = await rig.open(SOURCE)
    writer.write(b"x" * 1000)
    await writer.drain()
    assert await silent(reader)
    # The target never got a connection; the proxy read the bytes and dropped them. (The accept
    # and the read were ready long before the silence ran out.)
    assert rig.target.accepted.empty()
    stats = rig.proxy.statistics()
    assert stats.connections_accepted_total == 1
    assert stats.connections_blackholed_total == 1
    assert stats.bytes_discarded_total == 1000
    assert stats.bytes_to_target_total == 0
    # Another source connects through as usual.
    await rig.link(OTHER)


async def test_a_heal_closes_what_the_cut_touched_and_new_connections_work(rig: Rig) -> None:
    stalled = await rig.link(SOURCE)
    untouched = await rig.link(OTHER)
    rig.proxy.cut(SOURCE)
    stalled.client_writer.write(b"lost request")
    assert await silent(stalled.server_reader)
    blackholed_reader, _ = await rig.open(SOURCE)

    rig.proxy.heal(SOURCE)
    assert rig.proxy.cut_of(SOURCE) is None
    assert await ended(stalled.client_reader)
    assert await ended(stalled.server_reader)
    assert await ended(blackholed_reader)
    stats = rig.proxy.statistics()
    assert stats.connections_dropped_total == 2
    # The request sent during the cut was never delivered late.
    assert stats.bytes_to_target_total == 2 * len(b"hello")

    await rig.link(SOURCE)
    await exchange(untouched, b"never cut")


async def test_cut_all_cuts_every_source_until_heal_all(rig: Rig) -> None:
    first = await rig.link(SOURCE)
    second = await rig.link(OTHER)
    rig.proxy.cut_all()
    first.client_writer.write(b"a")
    second.client_writer.write(b"b")
    assert await silent(first.server_reader)
    assert await silent(second.server_reader)
    rig.proxy.heal(SOURCE)  # its own cut only: cut_all still holds
    assert rig.proxy.cut_of(SOURCE) is Direction.BOTH
    rig.proxy.heal_all()
    assert await ended(first.client_reader)
    assert await ended(second.client_reader)
    await rig.link(SOURCE)
    await rig.link(OTHER)


async def test_a_cut_toward_the_source_delivers_requests_and_loses_answers(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    rig.proxy.cut(SOURCE, Direction.TARGET_TO_SOURCE)
    link.client_writer.write(b"request")
    assert await asyncio.wait_for(link.server_reader.readexactly(7), BOUND_S) == b"request"
    link.server_writer.write(b"answer")
    assert await silent(link.client_reader)
    # A new connection is connected onward and obeys the same direction.
    reader, writer = await rig.open(SOURCE)
    server_reader, server_writer = await rig.target.next()
    writer.write(b"second")
    assert await asyncio.wait_for(server_reader.readexactly(6), BOUND_S) == b"second"
    server_writer.write(b"answer")
    assert await silent(reader)


async def test_a_cut_toward_the_target_loses_requests_and_delivers_answers(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    rig.proxy.cut(SOURCE, Direction.SOURCE_TO_TARGET)
    link.client_writer.write(b"request")
    assert await silent(link.server_reader)
    link.server_writer.write(b"push")
    assert await asyncio.wait_for(link.client_reader.readexactly(4), BOUND_S) == b"push"
    # Turned into a full cut, then healed: the connection it touched is closed.
    rig.proxy.cut(SOURCE)
    link.server_writer.write(b"more")
    assert await silent(link.client_reader)
    rig.proxy.heal(SOURCE)
    assert await ended(link.client_reader)
    assert rig.proxy.statistics().connections_dropped_total == 1


async def test_a_delay_holds_bytes_back_in_order_and_closes_nothing(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    loop = asyncio.get_running_loop()
    rig.proxy.delay(SOURCE, 200)
    started = loop.time()
    chunks = [bytes([n]) * 1000 for n in range(20)]
    for chunk in chunks:
        link.client_writer.write(chunk)
    received = await asyncio.wait_for(link.server_reader.readexactly(20_000), BOUND_S)
    assert received == b"".join(chunks)
    # A lower bound by construction (the proxy releases nothing earlier), not a performance claim.
    assert loop.time() - started >= 0.19
    rig.proxy.delay(SOURCE, 0)
    await exchange(link, b"prompt again")
    assert rig.proxy.statistics().connections_dropped_total == 0
    with pytest.raises(ValueError, match="negative"):
        rig.proxy.delay(SOURCE, -1)


async def test_a_target_that_does_not_read_pushes_back_on_the_source(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    chunk = b"z" * (1 << 20)

    async def write_forever() -> None:
        while True:
            link.client_writer.write(chunk)
            await link.client_writer.drain()

    # The target never reads: the client's writes must stall once the buffers on the way are full.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(write_forever(), SILENCE_S)
    assert rig.proxy.statistics().bytes_buffered <= 2 * 1024 * 1024
    forwarded = rig.proxy.statistics().bytes_to_target_total
    # Reading at the target releases the flow again.
    await asyncio.wait_for(link.server_reader.readexactly(forwarded - len(b"hello")), BOUND_S)


async def test_a_target_that_refuses_resets_the_client_and_is_counted() -> None:
    target = Target()
    address = await target.start()
    await target.close()  # nothing listens at the address any more
    async with FaultProxy(address) as proxy:
        reader, writer = await asyncio.open_connection(*proxy.address, local_addr=(SOURCE, 0))
        try:
            assert await ended(reader)
        finally:
            await _close_all([writer])
        assert proxy.statistics().connections_refused_total == 1


async def test_closing_the_proxy_ends_every_connection(rig: Rig) -> None:
    link = await rig.link(SOURCE)
    rig.proxy.cut(OTHER)
    blackholed_reader, _ = await rig.open(OTHER)
    await rig.proxy.close()
    assert await ended(link.client_reader)
    assert await ended(link.server_reader)
    assert await ended(blackholed_reader)
    assert rig.proxy.statistics().connections_open == 0


async def test_a_proxy_set_names_its_proxies_and_heals_them_together() -> None:
    target = Target()
    address = await target.start()
    try:
        async with ProxySet() as proxies:
            first = await proxies.add("broker-1", address)
            second = await proxies.add("zookeeper-for-broker-1", address)
            with pytest.raises(ValueError, match="exists already"):
                await proxies.add("broker-1", address)
            assert proxies["broker-1"] is first
            assert list(proxies) == [first, second]
            first.cut(SOURCE)
            second.cut_all(Direction.SOURCE_TO_TARGET)
            proxies.heal_all()
            assert first.cut_of(SOURCE) is None
            assert second.cut_of(SOURCE) is None
            assert set(proxies.statistics()) == {"broker-1", "zookeeper-for-broker-1"}
    finally:
        await target.close()


async def test_http_asks_through_the_proxy_time_out_under_a_cut_and_recover_after_the_heal() -> None:
    """The fault campaign's set-up in small: a node binds its outgoing connections to its own
    address, the peer is reached through a proxy, and cutting that address partitions the link."""
    codec = make_codec()
    addresses: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        server_side = HttpTransport(codec, secret="proxy-secret", resolve=addresses.get)
        server = HttpServer("127.0.0.1", 0, routes=server_side.routes(), max_body_bytes=1 << 20)
        await server.start()
        stack.push_async_callback(server.stop)
        assert server.port is not None
        proxy = await stack.enter_async_context(FaultProxy(("127.0.0.1", server.port)))
        addresses["b"] = f"http://127.0.0.1:{proxy.port}"
        client_side = HttpTransport(
            codec, secret="proxy-secret", resolve=addresses.get, source_host="127.0.0.5"
        )
        b = await stack.enter_async_context(ActorSystem("b", transport=server_side))
        a = await stack.enter_async_context(ActorSystem("a", transport=client_side))
        echo = b.spawn("echo", EchoActor)

        assert await a.ask(echo, Ping(sequence=1), timeout_ms=5_000) == Pong(sequence=1)
        proxy.cut("127.0.0.5")
        # A partition is a timeout, not a refusal.
        with pytest.raises(AskTimeoutError):
            await a.ask(echo, Ping(sequence=2), timeout_ms=300)
        proxy.heal("127.0.0.5")
        assert await a.ask(echo, Ping(sequence=3), timeout_ms=5_000) == Pong(sequence=3)
        assert proxy.statistics().connections_dropped_total >= 1


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_tls_passes_through_the_proxy_and_the_host_name_is_verified_end_to_end(
    tmp_path: Path,
) -> None:
    """``verify run --tls`` in small: the proxy forwards bytes, so the handshake is the client's
    with the server behind it. A certificate naming the proxy's address (as a campaign broker's
    names 127.0.0.(10+N)) verifies; one that does not is refused, whatever the proxy; a cut is
    still a timeout and a heal brings the link back."""
    certificates = LocalCertificates(tmp_path)
    certificates.ensure([1, 2], hosts={1: ["127.0.0.11"]})
    trust = client_context({SSL_TRUSTSTORE_LOCATION: str(certificates.ca_path)})
    codec = make_codec()
    addresses: dict[str, str] = {}
    async with AsyncExitStack() as stack:
        server_side = HttpTransport(codec, secret="proxy-secret", resolve=addresses.get)
        b = await stack.enter_async_context(ActorSystem("b", transport=server_side))
        echo = b.spawn("echo", EchoActor)
        proxies: list[FaultProxy] = []
        for broker_id in (1, 2):
            keystore = {SSL_KEYSTORE_LOCATION: str(certificates.keystore_path(broker_id))}
            server = HttpServer(
                "127.0.0.1", 0, routes=server_side.routes(), max_body_bytes=1 << 20,
                ssl_context=server_context(keystore),
            )  # fmt: skip
            await server.start()
            stack.push_async_callback(server.stop)
            assert server.port is not None
            proxy = FaultProxy(("127.0.0.1", server.port), host="127.0.0.11", name=f"broker-{broker_id}")
            await stack.enter_async_context(proxy)
            addresses[f"b{broker_id}"] = f"https://127.0.0.11:{proxy.port}"
            proxies.append(proxy)
        named = proxies[0]  # broker 1's, whose certificate names its address
        client_side = HttpTransport(
            codec, secret="proxy-secret", resolve=addresses.get, source_host="127.0.0.5", ssl_context=trust
        )
        a = await stack.enter_async_context(ActorSystem("a", transport=client_side))

        def at(node: str) -> ActorRef:
            return ActorRef(node_id=node, name=echo.name)

        assert await a.ask(at("b1"), Ping(sequence=1), timeout_ms=5_000) == Pong(sequence=1)
        with pytest.raises(TransportError, match=r"certificate is not valid for '127\.0\.0\.11'"):
            await a.ask(at("b2"), Ping(sequence=2), timeout_ms=5_000)
        named.cut("127.0.0.5")
        with pytest.raises(AskTimeoutError):
            await a.ask(at("b1"), Ping(sequence=3), timeout_ms=300)
        named.heal("127.0.0.5")
        assert await a.ask(at("b1"), Ping(sequence=4), timeout_ms=5_000) == Pong(sequence=4)

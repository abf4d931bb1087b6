"""FaultProxy: a TCP proxy that cuts, stalls and delays links the way a network partition does.

Owns one listening socket that forwards every accepted connection to one target address, the
proxied connections, and the fault rules. Rules are keyed by the *source host* of each accepted
connection: in a fault campaign every broker binds its outgoing connections to its own loopback
address (``ACTORLOG_SOURCE_ADDRESS``, see ``ops/broker_main.py``) and clients come from 127.0.0.1,
so one proxy in front of each broker's listener, and one per broker in front of ZooKeeper, make a
rule on a proxy a rule on one link. This machine has no packet filter to do it in the kernel.

Rules it keeps:

* **Bytes flow with backpressure.** When a socket's write buffer is full the proxy stops reading
  the other socket of its connection, so a slow reader slows the writer down as a direct
  connection would, and the proxy holds at most a socket write buffer per direction.
* **A cut is a partition, not a failure: nothing is closed and nothing is answered.** On a
  connection open when the cut begins, the proxy stops reading in the cut direction: the sender's
  socket buffers fill and its writes stall, the receiver waits, and both ends see timeouts, never
  resets. Bytes already handed to a socket before the cut still arrive, as packets already on the
  wire do. A connection accepted from a source cut both ways is never connected onward: its bytes
  are read and dropped, so a client's request goes out and no answer ever comes.
* **A one-way cut works on bytes, not packets.** ``Direction.SOURCE_TO_TARGET`` stops what the
  source sends (requests go nowhere; answers already on their way still arrive);
  ``Direction.TARGET_TO_SOURCE`` stops what the target sends back (requests arrive and are acted
  on, their answers are lost: the unknown-outcome case). New connections from a one-way-cut source
  are connected onward and obey the same direction. (TCP needs both directions to connect, so a
  one-way packet filter would refuse them; the message-level fault is the one worth testing.)
* **A heal closes every connection the cut touched**, aborted so that both ends notice at once
  and reconnect, as after a real partition whose connections timed out; bytes a cut held back are
  never delivered late. Connections the cut never touched are left alone. A cut's rule is per
  source; ``cut_all`` covers every source, present and future, until ``heal_all``.
* **A delay holds each chunk back for the given time**, in order, on both directions of the
  source's connections; it closes nothing.

It runs on real time (``loop.time()`` for delays): it sits between real processes. No task per
connection: sockets are asyncio transports driven by protocol callbacks, and the only tasks are
the onward connects in flight, owned by the proxy and cancelled by ``close``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Self

__all__ = ["Direction", "FaultProxy", "FaultProxyStatistics", "ProxySet"]

_log = logging.getLogger("actorlog.verify.proxy")

# Each socket's write buffer: large enough to keep loopback busy between two reads, small enough
# that a stalled link holds little in the proxy.
_WRITE_HIGH_WATER = 256 * 1024
_WRITE_LOW_WATER = 64 * 1024
# Bytes a direction may hold back (delayed, or read in the instant a cut began) before the proxy
# stops reading its source.
_HELD_HIGH_WATER = 1024 * 1024
# Bound on waiting for aborted sockets to close (one loop turn in practice).
_CLOSE_WAIT_S = 5.0
# SO_LINGER on, 0 s: closing sends a reset, which is what a connect to a closed port gets.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


class Direction(enum.Enum):
    """Which bytes a cut stops, named from the connection's source (the side that connected)."""

    BOTH = "both"
    SOURCE_TO_TARGET = "source-to-target"
    TARGET_TO_SOURCE = "target-to-source"

    def stops(self, *, to_target: bool) -> bool:
        if self is Direction.BOTH:
            return True
        return (self is Direction.SOURCE_TO_TARGET) == to_target


def _combined(first: Direction | None, second: Direction | None) -> Direction | None:
    if first is None or first == second:
        return second
    if second is None:
        return first
    return Direction.BOTH


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultProxyStatistics:
    """A snapshot of one proxy's counters."""

    connections_accepted_total: int
    connections_open: int
    connections_blackholed_total: int
    """Accepted from a source cut both ways, and never connected onward."""
    connections_dropped_total: int
    """Closed by the proxy at a heal because a cut had touched them."""
    connections_refused_total: int
    """Closed with a reset because the target refused (or did not answer) the onward connect."""
    bytes_to_target_total: int
    bytes_to_source_total: int
    bytes_discarded_total: int
    """Read and never forwarded: sent on a black-holed connection, or held back when closed."""
    bytes_buffered: int
    """Held by the proxy now: socket write buffers plus bytes held back."""


@dataclass(slots=True)
class _Rule:
    cut: Direction | None = None
    delay_s: float = 0.0


class _Pipe:
    """One direction of a proxied connection: reads one socket, writes the other."""

    __slots__ = (
        "connection",
        "delay_s",
        "eof",
        "eof_sent",
        "held",
        "held_bytes",
        "reader",
        "reader_gone",
        "stopped",
        "timer",
        "to_target",
        "writer",
        "writer_full",
    )

    def __init__(self, connection: _Connection, *, to_target: bool) -> None:
        self.connection = connection
        self.to_target = to_target
        self.reader: asyncio.Transport | None = None
        self.writer: asyncio.Transport | None = None
        self.stopped = False
        self.writer_full = False
        self.delay_s = 0.0
        # (release time, chunk), release times non-decreasing so chunks never overtake each other.
        self.held: deque[tuple[float, bytes]] = deque()
        self.held_bytes = 0
        self.eof = False
        self.eof_sent = False
        self.reader_gone = False
        self.timer: asyncio.TimerHandle | None = None

    def feed(self, data: bytes) -> None:
        writer = self.writer
        if not self.held and not self.stopped and self.delay_s == 0 and writer is not None:
            if writer.is_closing():
                self.connection.proxy._bytes_discarded += len(data)
                return
            writer.write(data)
            self.connection.proxy._forwarded(len(data), to_target=self.to_target)
            return
        release = self.connection.proxy._loop.time() + self.delay_s
        if self.held:
            release = max(release, self.held[-1][0])
        self.held.append((release, data))
        self.held_bytes += len(data)
        self.flush()

    def flush(self) -> None:
        """Write what is due, unless stopped; then the EOF or close that followed it."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        writer = self.writer
        if writer is not None and not self.stopped:
            proxy = self.connection.proxy
            now = proxy._loop.time()
            while self.held:
                release, data = self.held[0]
                if release > now:
                    self.timer = proxy._loop.call_at(release, self.flush)
                    break
                self.held.popleft()
                self.held_bytes -= len(data)
                if writer.is_closing():
                    proxy._bytes_discarded += len(data)
                else:
                    writer.write(data)
                    proxy._forwarded(len(data), to_target=self.to_target)
            if self.eof and not self.held and not writer.is_closing():
                # The sender finished: pass its EOF on (half-close), or its close once it is gone.
                if self.reader_gone or not writer.can_write_eof():
                    writer.close()
                else:
                    writer.write_eof()
                    self.eof_sent = True
                    other = self.connection.downstream if self.to_target else self.connection.upstream
                    if other.eof_sent:
                        # Both ways finished: nothing will come from either socket again.
                        self.connection.close(reset=False)
                        return
        self.update_reading()

    def update_reading(self) -> None:
        reader = self.reader
        if reader is None or reader.is_closing() or self.connection.blackholed:
            return
        wanted = (
            self.writer is not None
            and not self.stopped
            and not self.writer_full
            and self.held_bytes < _HELD_HIGH_WATER
        )
        if wanted and not reader.is_reading():
            reader.resume_reading()
        elif not wanted and reader.is_reading():
            reader.pause_reading()

    def set_rule(self, *, stopped: bool, delay_s: float) -> None:
        self.stopped = stopped
        self.delay_s = delay_s
        self.flush()

    def discard(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.connection.proxy._bytes_discarded += self.held_bytes
        self.held.clear()
        self.held_bytes = 0


class _Connection:
    """One accepted connection and, unless black-holed, its onward connection to the target."""

    __slots__ = (
        "blackholed",
        "closed",
        "connect",
        "downstream",
        "faulted",
        "open_sides",
        "proxy",
        "source",
        "source_host",
        "target",
        "upstream",
    )

    def __init__(self, proxy: FaultProxy, source: asyncio.Transport, source_host: str) -> None:
        self.proxy = proxy
        self.source = source
        self.source_host = source_host
        self.target: asyncio.Transport | None = None
        self.upstream = _Pipe(self, to_target=True)
        self.downstream = _Pipe(self, to_target=False)
        self.upstream.reader = source
        self.downstream.writer = source
        self.blackholed = False
        # A cut has touched it: bytes may have been lost, so the heal closes it.
        self.faulted = False
        self.closed = False
        self.open_sides = 1
        self.connect: asyncio.Task[None] | None = None

    def pipe_from(self, is_source: bool) -> _Pipe:
        return self.upstream if is_source else self.downstream

    def pipe_to(self, is_source: bool) -> _Pipe:
        return self.downstream if is_source else self.upstream

    def target_made(self, transport: asyncio.Transport) -> None:
        self.open_sides += 1
        if self.closed:
            transport.abort()
            return
        self.target = transport
        self.upstream.writer = transport
        self.downstream.reader = transport
        self.upstream.flush()
        self.downstream.flush()

    def side_lost(self, is_source: bool) -> None:
        self.open_sides -= 1
        if self.open_sides == 0:
            self.proxy._forget(self)
        if self.closed:
            return
        self.pipe_to(is_source).discard()
        pipe = self.pipe_from(is_source)
        pipe.eof = pipe.reader_gone = True
        if is_source and self.target is None and self.connect is not None:
            self.connect.cancel()
        # While this direction is cut the other end must not learn of the close: the heal
        # closes it.
        pipe.flush()

    def close(self, *, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.upstream.discard()
        self.downstream.discard()
        if self.connect is not None:
            self.connect.cancel()
        for transport in (self.source, self.target):
            if transport is not None and not transport.is_closing():
                if reset:
                    transport.abort()
                else:
                    transport.close()


class _Side(asyncio.Protocol):
    """Protocol callbacks of one socket of a connection, handed to its pipes."""

    __slots__ = ("connection", "is_source", "proxy")

    def __init__(self, proxy: FaultProxy, connection: _Connection | None = None) -> None:
        self.proxy = proxy
        self.connection = connection
        self.is_source = connection is None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER, low=_WRITE_LOW_WATER)
        if self.connection is None:
            self.connection = self.proxy._accepted(transport)
        else:
            self.connection.target_made(transport)

    def data_received(self, data: bytes) -> None:
        connection = self.connection
        assert connection is not None
        if connection.blackholed:
            self.proxy._bytes_discarded += len(data)
        elif not connection.closed:
            connection.pipe_from(self.is_source).feed(data)
        else:
            self.proxy._bytes_discarded += len(data)

    def eof_received(self) -> bool:
        connection = self.connection
        assert connection is not None
        if connection.blackholed or connection.closed:
            return False
        pipe = connection.pipe_from(self.is_source)
        pipe.eof = True
        pipe.flush()
        return True  # keep the socket open for the other direction (half-close)

    def pause_writing(self) -> None:
        self._writer_full(True)

    def resume_writing(self) -> None:
        self._writer_full(False)

    def _writer_full(self, full: bool) -> None:
        connection = self.connection
        assert connection is not None
        pipe = connection.pipe_to(self.is_source)
        pipe.writer_full = full
        pipe.update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is not None:
            self.connection.side_lost(self.is_source)


class FaultProxy:
    """A TCP proxy from ``host:port`` to ``target`` that injects partitions by source host.

    ``port=0`` lets the kernel choose; ``address`` gives the bound address once started. Cuts,
    heals and delays are plain calls that take effect at once, on open connections and new ones.
    """

    def __init__(
        self,
        target: tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "",
        connect_timeout_ms: int = 5_000,
    ) -> None:
        self.target = target
        self.name = name or f"{host}:{port}->{target[0]}:{target[1]}"
        self._host = host
        self._port = port
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._loop: asyncio.AbstractEventLoop  # set by start(); no callback comes before it
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._connections: set[_Connection] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._connects: set[asyncio.Task[None]] = set()
        self._rules: dict[str, _Rule] = {}
        self._everyone: Direction | None = None
        self._accepted_total = 0
        self._blackholed_total = 0
        self._dropped_total = 0
        self._refused_total = 0
        self._bytes_to_target = 0
        self._bytes_to_source = 0
        self._bytes_discarded = 0

    # ------------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._server is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: _Side(self), self._host, self._port, family=socket.AF_INET, backlog=512
        )
        bound = self._server.sockets[0].getsockname()
        self._address = (str(bound[0]), int(bound[1]))

    async def close(self) -> None:
        """Stop listening and abort every connection (both ends see it end)."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close(reset=True)
        connects = list(self._connects)
        for task in connects:
            task.cancel()
        await asyncio.gather(*connects, return_exceptions=True)
        # An abort closes its socket in a callback: wait for them, so no socket outlives close().
        try:
            async with asyncio.timeout(_CLOSE_WAIT_S):
                await self._idle.wait()
        except TimeoutError:
            _log.warning(
                "proxy %s: %d connection(s) still open after close", self.name, len(self._connections)
            )
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the proxy listens on (advertise this instead of the target)."""
        assert self._address is not None, f"proxy {self.name} not started"
        return self._address

    @property
    def port(self) -> int:
        """The port the proxy listens on (chosen by the kernel when asked for 0)."""
        return self.address[1]

    # ---------------------------------------------------------------------------------- faults

    def cut(self, source: str, direction: Direction = Direction.BOTH) -> None:
        """Partition the link from ``source`` (a host address) in ``direction``."""
        self._rules.setdefault(source, _Rule()).cut = direction
        self._reapply(source)

    def cut_all(self, direction: Direction = Direction.BOTH) -> None:
        """Partition every source, present and future, until ``heal_all``."""
        self._everyone = direction
        self._reapply(None)

    def heal(self, source: str) -> None:
        """End ``source``'s own cut (a ``cut_all`` still holds): close what it touched."""
        rule = self._rules.get(source)
        if rule is not None:
            rule.cut = None
            self._reapply(source)

    def heal_all(self) -> None:
        """End every cut; close every connection a cut touched. Delays stay."""
        self._everyone = None
        for rule in self._rules.values():
            rule.cut = None
        self._reapply(None)

    def delay(self, source: str, ms: int) -> None:
        """Hold each chunk from and to ``source`` back ``ms`` milliseconds (0 ends the delay)."""
        if ms < 0:
            raise ValueError(f"a delay cannot be negative: {ms} ms")
        self._rules.setdefault(source, _Rule()).delay_s = ms / 1000
        self._reapply(source)

    def cut_of(self, source: str) -> Direction | None:
        """The cut in force for connections from ``source``."""
        rule = self._rules.get(source)
        return _combined(rule.cut if rule is not None else None, self._everyone)

    def statistics(self) -> FaultProxyStatistics:
        buffered = 0
        for connection in self._connections:
            for transport in (connection.source, connection.target):
                if transport is not None:
                    buffered += transport.get_write_buffer_size()
            buffered += connection.upstream.held_bytes + connection.downstream.held_bytes
        return FaultProxyStatistics(
            connections_accepted_total=self._accepted_total,
            connections_open=len(self._connections),
            connections_blackholed_total=self._blackholed_total,
            connections_dropped_total=self._dropped_total,
            connections_refused_total=self._refused_total,
            bytes_to_target_total=self._bytes_to_target,
            bytes_to_source_total=self._bytes_to_source,
            bytes_discarded_total=self._bytes_discarded,
            bytes_buffered=buffered,
        )

    def _reapply(self, source: str | None) -> None:
        """Bring the connections from ``source`` (None: all) under the rules now in force."""
        for connection in list(self._connections):
            if source is None or connection.source_host == source:
                self._apply(connection)

    def _apply(self, connection: _Connection) -> None:
        if connection.closed:
            return
        cut = self.cut_of(connection.source_host)
        if cut is None and connection.faulted:
            self._dropped_total += 1
            connection.close(reset=True)
            return
        if cut is not None:
            connection.faulted = True
        if connection.blackholed:
            return
        rule = self._rules.get(connection.source_host)
        delay_s = rule.delay_s if rule is not None else 0.0
        connection.upstream.set_rule(stopped=cut is not None and cut.stops(to_target=True), delay_s=delay_s)
        connection.downstream.set_rule(
            stopped=cut is not None and cut.stops(to_target=False), delay_s=delay_s
        )

    # ------------------------------------------------------------------------------ callbacks

    def _accepted(self, transport: asyncio.Transport) -> _Connection:
        peer = transport.get_extra_info("peername")
        connection = _Connection(self, transport, str(peer[0]) if peer else "")
        self._accepted_total += 1
        self._connections.add(connection)
        self._idle.clear()
        if self._server is None or not self._server.is_serving():
            connection.close(reset=True)
            return connection
        if self.cut_of(connection.source_host) is Direction.BOTH:
            # Accepted (the kernel already did) but never connected onward: read and drop.
            connection.blackholed = connection.faulted = True
            self._blackholed_total += 1
            return connection
        self._apply(connection)  # also pauses reading the source until the target is connected
        task = self._loop.create_task(self._connect(connection))
        connection.connect = task
        self._connects.add(task)
        task.add_done_callback(self._connects.discard)
        return connection

    async def _connect(self, connection: _Connection) -> None:
        host, port = self.target
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                await self._loop.create_connection(
                    lambda: _Side(self, connection), host, port, family=socket.AF_INET
                )
        except OSError:
            # TimeoutError is an OSError: an onward connect that hangs is refused too.
            self._refused_total += 1
            if not connection.closed:
                sock = connection.source.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
                connection.close(reset=True)
        finally:
            connection.connect = None

    def _forwarded(self, count: int, *, to_target: bool) -> None:
        if to_target:
            self._bytes_to_target += count
        else:
            self._bytes_to_source += count

    def _forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        if not self._connections:
            self._idle.set()


class ProxySet:
    """Many proxies by name (say ``broker-1`` and ``zookeeper-for-broker-1``), closed together."""

    def __init__(self) -> None:
        self._proxies: dict[str, FaultProxy] = {}

    async def add(
        self, name: str, target: tuple[str, int], *, host: str = "127.0.0.1", port: int = 0
    ) -> FaultProxy:
        """Start a proxy named ``name`` from ``host:port`` to ``target``."""
        if name in self._proxies:
            raise ValueError(f"a proxy named {name!r} exists already")
        proxy = FaultProxy(target, host=host, port=port, name=name)
        await proxy.start()
        self._proxies[name] = proxy
        return proxy

    def __getitem__(self, name: str) -> FaultProxy:
        return self._proxies[name]

    def __iter__(self) -> Iterator[FaultProxy]:
        return iter(list(self._proxies.values()))

    def __len__(self) -> int:
        return len(self._proxies)

    def heal_all(self) -> None:
        for proxy in self._proxies.values():
            proxy.heal_all()

    def statistics(self) -> dict[str, FaultProxyStatistics]:
        return {name: proxy.statistics() for name, proxy in self._proxies.items()}

    async def close(self) -> None:
        proxies = list(self._proxies.values())
        self._proxies.clear()
        for proxy in proxies:
            await proxy.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

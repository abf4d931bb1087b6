"""Real Kafka clients through a leader killed mid-produce: kafka-python, aiokafka and confluent-kafka.

Issue 15's failover scenario, once per client, on one cluster of three broker processes shared by the
module (``ProcessCluster`` on the session's ZooKeeper, each broker with a KAFKA listener and the
SCRAM-SHA-256 user ``admin``):

1. A topic of one partition, RF 3, ``min.insync.replicas=2``, led by a broker that is not the
   controller (so the failover is one leader election, not a controller election first).
2. The client's producer, idempotent with acks=all (kafka-python and librdkafka with up to five
   requests in flight; aiokafka sends one batch per partition at a time), sends ``RECORDS`` records
   of 100 bytes with unique values.
3. When a third of the records have been acknowledged, the proxy in front of the leader's KAFKA
   listener starts holding its answers back. As soon as it holds a Produce response (the batches of
   that request are on every replica: acks=all), the leader is SIGKILLed and the held answers are
   dropped with the connections. The producer keeps sending; the batches it never heard about are
   retried on the new leader, which already has them: it must answer them as the duplicates they
   are, at their original offsets, not write them again.
4. The records are read back by assigning the partition (no consumer group) from the new leader.

Checked: every acknowledged record is in the log exactly once, at the offset its acknowledgement
gave; no value appears twice; offsets run from 0 without a gap; the records are in the order they
were sent; some records unanswered at the kill were already in the new leader's log (the case above
did happen). A send that failed may be absent (each test prints its tally; none is expected). Then
the killed broker is restarted for the next client.

Every wait is on an acknowledgement, a held answer, a process exit, a ZooKeeper watch or a client's
own poll. ``@pytest.mark.slow`` runs the same scenario with ten times the records.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import signal
import socket
import struct
import threading
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from actors.common.types import TopicPartition
from ops.local.zk_waits import read_partition_state
from ops.local.zookeeper import LocalZooKeeper
from ops.security.users import UserStore
from runtime.clock import LoopClock
from runtime.storage.records import iterate_batches
from tests.support.kafka_clients import USER, KafkaCluster
from tests.support.process_cluster import BrokerProcess, ProcessCluster, free_port

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.net.inet

import aiokafka
import confluent_kafka

pytestmark = [pytest.mark.integration, pytest.mark.zk]

T = TypeVar("T")

RECORDS = 6_000
RECORD_BYTES = 100
BROKERS = (1, 2, 3)
PASSWORD = "failover-password"
BROKER_PROPERTIES = {
    # The killed leader's ZooKeeper session: how long the failover takes.
    "zookeeper.session.timeout.ms": "4000",
    "replica.fetch.backoff.ms": "200",
}
PRODUCE_API_KEY = 0
WAIT_S = 60.0


def value_of(number: int) -> bytes:
    return (b"%08d-" % number).ljust(RECORD_BYTES, b"x")


def number_of(value: bytes | None) -> int:
    assert value is not None
    return int(value[:8])


# ---------------------------------------------------------------------------- the proxies


class KafkaProxy:
    """A TCP proxy in front of one broker's KAFKA listener, which the broker advertises instead of
    its own port: requests pass at once; while ``holding``, answers are kept back (a connection's
    answers stay in order: once one is held, the ones after it are too) and ``held_produce`` is set
    when one of them answers a Produce. ``drop`` closes every connection, held answers unsent."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.holding = False
        self.held_produce = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        await self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def hold(self) -> None:
        self.holding = True
        self.held_produce.clear()

    async def drop(self) -> None:
        self.holding = False
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except (OSError, asyncio.CancelledError) as error:
            # The broker is down (the client sees the connection closed), or ``drop`` cancelled the
            # connect: either way the client's socket is closed here, or it would outlive the test
            # and its event loop (a ResourceWarning that fails whichever test the collector runs in).
            self._connections.discard(task)
            client_writer.close()
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        pending: collections.deque[int] = collections.deque()  # API keys of requests not answered yet
        try:
            await _first_to_end(
                self._requests(client_reader, broker_writer, pending),
                self._answers(broker_reader, client_writer, pending),
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            broker_writer.close()
            client_writer.close()

    @staticmethod
    async def _requests(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: collections.deque[int]
    ) -> None:
        """Forward the client's requests, noting the API key of each (after a SaslHandshake v0 a
        frame is a raw SASL token: it gets one answer too)."""
        while True:
            frame = await _read_frame(reader)
            pending.append(struct.unpack_from(">h", frame, 4)[0] if len(frame) >= 6 else -1)
            writer.write(frame)
            await writer.drain()

    async def _answers(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: collections.deque[int]
    ) -> None:
        """Forward the broker's answers, which come in request order, unless holding."""
        held: list[bytes] = []
        while True:
            frame = await _read_frame(reader)
            api_key = pending.popleft() if pending else -1
            if self.holding or held:
                held.append(frame)
                if api_key == PRODUCE_API_KEY:
                    self.held_produce.set()
                continue
            writer.write(frame)
            await writer.drain()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = await reader.readexactly(4)
    return size + await reader.readexactly(struct.unpack(">i", size)[0])


async def _first_to_end(*coroutines: Coroutine[Any, Any, None]) -> None:
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------------------------ the cluster


class ClusterLoop:
    """The cluster's own event loop, on a thread of its own: kafka-python and confluent-kafka block
    the test's thread, and aiokafka runs on the test's loop, while brokers and proxies run here."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-loop", daemon=True)
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.submit(coroutine).result(timeout=2 * WAIT_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=WAIT_S)
        self.loop.close()


@dataclass(frozen=True)
class Placement:
    topic: str
    leader: int
    leader_epoch: int


@dataclass
class FailoverCluster:
    processes: ProcessCluster
    proxies: dict[int, KafkaProxy]
    loop: ClusterLoop

    @property
    def clients(self) -> KafkaCluster:
        listeners = {b: f"127.0.0.1:{proxy.port}" for b, proxy in sorted(self.proxies.items())}
        return KafkaCluster(",".join(listeners.values()), PASSWORD, listeners)

    def create_topic(self, topic: str) -> Placement:
        return self.loop.run(self._create_topic(topic))

    async def _create_topic(self, topic: str) -> Placement:
        controller, _ = await self.processes.controller()
        leader = max(b for b in BROKERS if b != controller)
        replicas = [leader, *(b for b in BROKERS if b != leader)]
        await self.processes.create_topic(topic, {0: replicas}, {"min.insync.replicas": "2"})
        state = await self.processes.wait_for_partition_state(
            TopicPartition(topic, 0),
            lambda s: s.leader == leader and len(s.isr) == len(replicas),
            timeout_s=WAIT_S,
        )
        return Placement(topic, leader, state.leader_epoch)

    def fail_over(self, leader: int, ledger: Ledger) -> concurrent.futures.Future[None]:
        """Hold the leader's answers back; once a Produce answer is held, SIGKILL the leader, then
        drop its proxied connections with what they held."""
        return self.loop.submit(self._fail_over(leader, ledger))

    async def _fail_over(self, leader: int, ledger: Ledger) -> None:
        proxy = self.proxies[leader]
        proxy.hold()
        await asyncio.wait_for(proxy.held_produce.wait(), timeout=WAIT_S)
        ledger.note_kill()
        await self.processes.kill(leader, signal.SIGKILL)
        await proxy.drop()

    def new_leader(self, placement: Placement) -> int:
        """The leader the controller elected after ``placement``'s (a ZooKeeper watch)."""
        state = self.loop.run(
            self.processes.wait_for_partition_state(
                TopicPartition(placement.topic, 0),
                lambda s: s.leader_epoch > placement.leader_epoch and s.leader >= 0,
                timeout_s=WAIT_S,
            )
        )
        assert state.leader != placement.leader
        return state.leader

    def leader(self, topic: str) -> int:
        state, _ = self.loop.run(read_partition_state(self.processes.admin, TopicPartition(topic, 0)))
        return state.leader

    def restart_killed(self) -> None:
        async def restart() -> None:
            for broker_id, broker in self.processes.brokers.items():
                if broker.process is None:
                    await self.processes.start(broker_id)

        self.loop.run(restart())

    def killed_epoch_end(self, placement: Placement, new_leader: int) -> int:
        """The offset after the last record the killed leader wrote (its epoch or before), as the new
        leader's log files have it."""
        directory = self.processes.brokers[new_leader].log_dir / f"{placement.topic}-0"
        return max(
            (
                batch.header.last_offset + 1
                for segment in sorted(directory.glob("*.log"))
                for batch in iterate_batches(segment.read_bytes())
                if batch.header.partition_leader_epoch <= placement.leader_epoch
            ),
            default=0,
        )


@contextlib.asynccontextmanager
async def running_cluster(
    zk_connect: str, base_dir: Path, loop: ClusterLoop
) -> AsyncIterator[FailoverCluster]:
    kafka_ports = {b: free_port() for b in BROKERS}
    proxies = {b: KafkaProxy(kafka_ports[b]) for b in BROKERS}
    for proxy in proxies.values():
        await proxy.start()

    def listeners(broker: BrokerProcess) -> dict[str, str]:
        return {
            "listeners": f"HTTP://127.0.0.1:{broker.port},KAFKA://127.0.0.1:{kafka_ports[broker.broker_id]}",
            "advertised.listeners": f"KAFKA://127.0.0.1:{proxies[broker.broker_id].port}",
        }

    try:
        async with ProcessCluster(
            zk_connect, base_dir, dict(BROKER_PROPERTIES), broker_properties=listeners
        ) as processes:
            await UserStore(processes.admin, clock=LoopClock()).upsert(USER, PASSWORD)
            await asyncio.gather(*(processes.start(b) for b in BROKERS))
            yield FailoverCluster(processes, proxies, loop)
    finally:
        for proxy in proxies.values():
            await proxy.stop()


@pytest.fixture(scope="module", autouse=True)
def kafka_python_closes_refused_sockets() -> Iterator[None]:
    """kafka-python 3.0.12 leaves the socket of a refused connect open (``KafkaNetSocket.sock_connect``
    raises without closing it), and the killed leader's port refuses until its restart: closed here,
    as the library should, rather than by the garbage collector with a ResourceWarning."""
    original = kafka.net.inet.KafkaNetSocket.sock_connect

    async def sock_connect(
        self: kafka.net.inet.KafkaNetSocket,
        net: Any,
        sock: socket.socket,
        sockaddr: Any,
        timeout_at: Any = None,
    ) -> socket.socket:
        try:
            connected: socket.socket = await original(self, net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:
            sock.close()
            raise
        return connected

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka.net.inet.KafkaNetSocket, "sock_connect", sock_connect)
        yield


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: LocalZooKeeper
) -> Iterator[FailoverCluster]:
    loop = ClusterLoop()
    zk_connect = f"{zookeeper_server.connect_string}/kafka-failover-{uuid.uuid4().hex[:8]}"
    context = running_cluster(zk_connect, tmp_path_factory.mktemp("kafka-failover"), loop)
    try:
        cluster = loop.run(context.__aenter__())
        try:
            yield cluster
        finally:
            loop.run(context.__aexit__(None, None, None))
    finally:
        loop.close()


@pytest.fixture
def restart_after(cluster: FailoverCluster) -> Iterator[None]:
    """The killed broker is started again for the next client (an ISR of three, one to kill)."""
    yield
    cluster.restart_killed()


# ---------------------------------------------------------------------------- the records


@dataclass
class Ledger:
    """What the producer was told, record by record (callbacks on the client's own thread); the
    ``kill_at``-th acknowledgement starts the failover (``FailoverCluster.fail_over``) while the
    sends go on."""

    records: int
    start_failover: Callable[[Ledger], concurrent.futures.Future[None]]
    offsets: dict[int, int] = field(default_factory=dict)  # acknowledged: number -> offset
    failures: dict[int, str] = field(default_factory=dict)  # failed sends: number -> error
    sent: int = 0
    sent_at_kill: int = 0
    answered_at_kill: set[int] = field(default_factory=set)
    failover: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    failover_started: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kill_at(self) -> int:
        return self.records // 3

    def sending(self) -> None:
        with self._lock:
            self.sent += 1

    def acknowledge(self, number: int, offset: int) -> None:
        with self._lock:
            self.offsets[number] = offset
            if len(self.offsets) < self.kill_at or self.failover_started:
                return
            self.failover_started = True
        started = self.start_failover(self)
        started.add_done_callback(lambda done: _chain(done, self.failover))

    def fail(self, number: int, error: object) -> None:
        with self._lock:
            self.failures[number] = repr(error)

    def note_kill(self) -> None:
        with self._lock:
            self.sent_at_kill = self.sent
            self.answered_at_kill = set(self.offsets) | set(self.failures)

    def check(self, client: str, read: list[tuple[int, bytes | None]], killed_epoch_end: int) -> None:
        """``read``: (offset, value) of the whole partition, from the new leader;
        ``killed_epoch_end``: the offset after the last record the killed leader wrote."""
        assert len(self.offsets) + len(self.failures) == self.records, "a send was never answered"
        numbers = [number_of(value) for _, value in read]
        duplicated = {n: c for n, c in collections.Counter(numbers).items() if c > 1}
        at: dict[int, int] = {}  # number -> offset (its first, if duplicated)
        for (offset, _), number in zip(read, numbers, strict=True):
            at.setdefault(number, offset)
        lost = sorted(n for n in self.offsets if n not in at)
        failed_absent = sum(1 for n in self.failures if n not in at)
        # Sent to the killed leader, unanswered when it died, and yet in the new leader's log as
        # the killed leader wrote it: the producer's retries of these had to be recognised.
        in_doubt = set(range(self.sent_at_kill)) - self.answered_at_kill
        replicated = sum(1 for n in in_doubt if n in at and at[n] < killed_epoch_end)
        print(
            f"{client}: {self.records} sent, {len(self.offsets)} acknowledged, {len(lost)} lost, "
            f"{sum(duplicated.values()) - len(duplicated)} duplicated, {len(self.failures)} failed sends "
            f"({failed_absent} of them absent); {len(in_doubt)} unanswered at the kill, "
            f"{replicated} of them already replicated"
        )
        assert duplicated == {}, "duplicates"
        assert lost == [], "acknowledged records lost"
        assert [offset for offset, _ in read] == list(range(len(read))), "offsets not consecutive from 0"
        assert {n: at[n] for n in self.offsets} == self.offsets, "records not at their acknowledged offsets"
        assert numbers == sorted(numbers), "records out of send order"
        assert set(numbers) <= set(range(self.records))
        assert replicated > 0, "no retried batch was already on the new leader"
        assert self.failures == {}, f"failed sends: {sorted(self.failures.items())[:5]}"


def _chain(source: concurrent.futures.Future[None], target: concurrent.futures.Future[None]) -> None:
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(None)


# ------------------------------------------------------------------------------- the clients


def run_kafka_python(cluster: FailoverCluster, records: int) -> None:
    placement = cluster.create_topic(f"kafka-python-failover-{records}")
    settings = cluster.clients
    ledger = Ledger(records, lambda ledger: cluster.fail_over(placement.leader, ledger))
    producer = kafka.KafkaProducer(
        **settings.kafka_python(
            enable_idempotence=True,
            acks="all",
            max_in_flight_requests_per_connection=5,
            linger_ms=5,
            batch_size=16_384,
        )
    )
    try:
        for number in range(records):
            future = producer.send(placement.topic, value=value_of(number), partition=0)
            ledger.sending()
            future.add_callback(lambda metadata, n=number: ledger.acknowledge(n, metadata.offset))
            future.add_errback(lambda error, n=number: ledger.fail(n, error))
        ledger.failover.result(WAIT_S)
        producer.flush(timeout=WAIT_S)
    finally:
        producer.close(timeout=10)
    new_leader = cluster.new_leader(placement)
    tp = kafka.TopicPartition(placement.topic, 0)
    consumer = kafka.KafkaConsumer(**settings.kafka_python(group_id=None, enable_auto_commit=False))
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        assert consumer._client.cluster.leader_for_partition(tp) == new_leader  # Metadata after failover
        read: list[tuple[int, bytes | None]] = []
        while len(read) < end:
            polled = consumer.poll(timeout_ms=10_000)
            assert polled, f"nothing read in 10 s at {len(read)} of {end}"
            for batch in polled.values():
                read += [(r.offset, r.value) for r in batch]
    finally:
        consumer.close()
    ledger.check("kafka-python", read, cluster.killed_epoch_end(placement, new_leader))


async def run_aiokafka(cluster: FailoverCluster, records: int) -> None:
    loop = asyncio.get_running_loop()
    placement = await loop.run_in_executor(None, cluster.create_topic, f"aiokafka-failover-{records}")
    settings = cluster.clients
    ledger = Ledger(records, lambda ledger: cluster.fail_over(placement.leader, ledger))
    producer = aiokafka.AIOKafkaProducer(
        **settings.aiokafka(enable_idempotence=True, acks="all", linger_ms=5, max_batch_size=16_384)
    )
    await producer.start()

    def done(number: int, future: asyncio.Future[Any]) -> None:
        if future.exception() is not None:
            ledger.fail(number, future.exception())
        else:
            ledger.acknowledge(number, future.result().offset)

    try:
        for number in range(records):
            future = await producer.send(placement.topic, value=value_of(number), partition=0)
            ledger.sending()
            future.add_done_callback(lambda f, n=number: done(n, f))
        await asyncio.wait_for(asyncio.wrap_future(ledger.failover), timeout=WAIT_S)
        await asyncio.wait_for(producer.flush(), timeout=WAIT_S)
    finally:
        await producer.stop()
    new_leader = await loop.run_in_executor(None, cluster.new_leader, placement)
    tp = aiokafka.TopicPartition(placement.topic, 0)
    consumer = aiokafka.AIOKafkaConsumer(**settings.aiokafka(group_id=None, enable_auto_commit=False))
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        assert consumer._client.cluster.leader_for_partition(tp) == new_leader
        read: list[tuple[int, bytes | None]] = []
        while len(read) < end:
            polled = await consumer.getmany(timeout_ms=10_000)
            assert polled, f"nothing read in 10 s at {len(read)} of {end}"
            for batch in polled.values():
                read += [(r.offset, r.value) for r in batch]
    finally:
        await consumer.stop()
    epoch_end = await loop.run_in_executor(None, cluster.killed_epoch_end, placement, new_leader)
    ledger.check("aiokafka", read, epoch_end)


def run_confluent_kafka(cluster: FailoverCluster, records: int) -> None:
    placement = cluster.create_topic(f"confluent-kafka-failover-{records}")
    settings = cluster.clients
    ledger = Ledger(records, lambda ledger: cluster.fail_over(placement.leader, ledger))
    producer = confluent_kafka.Producer(
        settings.librdkafka(
            **{
                "enable.idempotence": True,
                "acks": "all",
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": 5,
                "batch.size": 16_384,
            }
        )
    )

    def delivered(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        number = number_of(message.value())
        if error is not None:
            ledger.fail(number, error)
        else:
            offset = message.offset()
            assert offset is not None
            ledger.acknowledge(number, offset)

    for number in range(records):
        producer.produce(placement.topic, value=value_of(number), partition=0, on_delivery=delivered)
        ledger.sending()
        producer.poll(0)  # the delivery callbacks run here
    while not ledger.failover_started:
        producer.poll(1)  # the acknowledgements come only from here
    ledger.failover.result(WAIT_S)
    assert producer.flush(WAIT_S) == 0
    new_leader = cluster.new_leader(placement)
    consumer = confluent_kafka.Consumer(
        settings.librdkafka(**{"group.id": "assign-only", "enable.auto.commit": False})
    )
    try:
        tp = confluent_kafka.TopicPartition(placement.topic, 0, 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([tp])
        assert cluster.leader(placement.topic) == new_leader
        read: list[tuple[int, bytes | None]] = []
        while len(read) < end:
            messages = consumer.consume(min(500, end - len(read)), timeout=10)
            assert messages, f"nothing read in 10 s at {len(read)} of {end}"
            for message in messages:
                assert message.error() is None, message.error()
                offset = message.offset()
                assert offset is not None
                read.append((offset, message.value()))
    finally:
        consumer.close()
    ledger.check("confluent-kafka", read, cluster.killed_epoch_end(placement, new_leader))


# ------------------------------------------------------------------------------------ tests


@pytest.mark.usefixtures("restart_after")
def test_kafka_python(cluster: FailoverCluster) -> None:
    run_kafka_python(cluster, RECORDS)


@pytest.mark.usefixtures("restart_after")
@pytest.mark.asyncio
async def test_aiokafka(cluster: FailoverCluster) -> None:
    await run_aiokafka(cluster, RECORDS)


@pytest.mark.usefixtures("restart_after")
def test_confluent_kafka(cluster: FailoverCluster) -> None:
    run_confluent_kafka(cluster, RECORDS)


@pytest.mark.slow
@pytest.mark.usefixtures("restart_after")
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "confluent-kafka"])
def test_many_records(cluster: FailoverCluster, client: str) -> None:
    records = RECORDS * 10
    if client == "kafka-python":
        run_kafka_python(cluster, records)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(cluster, records))
    else:
        run_confluent_kafka(cluster, records)

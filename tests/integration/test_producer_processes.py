"""The Producer through three real broker processes and a real ZooKeeper (issue 7's end-to-end
producer checks): everything acknowledged is read back, in order per partition, with no duplicates,
while leaders move (a SIGKILL, then a SIGTERM); with answers to produce requests lost after the
broker wrote them, idempotence keeps duplicates at zero — and a control run without idempotence
shows the same faults do produce duplicates (exactly one per record of each lost answer).

Every wait is a reply, a ZooKeeper watch, or a broker-side long poll, bounded by a timeout."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from actors.clients.producer.errors import (
    ProducerClosedError,
    ProducerError,
    ProducerTimeoutError,
    RecordTooLargeError,
)
from actors.clients.producer.partitioner import keyed_partition
from actors.clients.producer.protocol import RecordMetadata
from actors.common.errors import ErrorCode
from actors.common.protocol import FetchPartition, FetchRequest, FetchResponse
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.clients.connection import ClientNode
from ops.clients.producer import Producer, SendCallback
from runtime.storage.records import Record, iterate_batches
from tests.support.process_cluster import SECRET, ProcessCluster
from tests.support.producer_faults import ReplyDroppingTransport

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

SESSION_MS = 4_000
TOPIC = "orders"
PARTITIONS = 3
ASSIGNMENT: dict[int, Sequence[int]] = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
BROKER_PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "min.insync.replicas": "2",
}


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    async with ProcessCluster(zk_connect_string, tmp_path, dict(BROKER_PROPERTIES)) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        await cluster.create_topic(TOPIC, ASSIGNMENT)
        for partition, replicas in ASSIGNMENT.items():
            await cluster.wait_for_partition_state(
                TopicPartition(TOPIC, partition), led_by_with_full_isr(replicas[0]), timeout_s=30
            )
        yield cluster


def led_by_with_full_isr(broker_id: int) -> Callable[[zk_data.PartitionState], bool]:
    return lambda state: state.leader == broker_id and len(state.isr) == 3


def bootstrap(cluster: ProcessCluster) -> str:
    return ",".join(f"127.0.0.1:{broker.port}" for broker in cluster.brokers.values())


def value_of(number: int) -> bytes:
    return b"record-%06d" % number


def number_of(value: bytes | None) -> int:
    assert value is not None
    return int(value.removeprefix(b"record-"))


async def read_back(
    cluster: ProcessCluster, tp: TopicPartition, *, at_least: int
) -> list[tuple[int, bytes | None]]:
    """Every record of the partition from its current leader: long-polling (a broker-side wait)
    until at least ``at_least`` are below the high watermark and a poll finds nothing more."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    records: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        assert loop.time() < deadline, f"{tp}: only {len(records)} of {at_least} records readable"
        state, _ = await cluster.zk_partition_state(tp)
        wanted = FetchPartition(
            topic=tp.topic, partition=tp.partition, fetch_offset=offset, partition_max_bytes=1 << 20
        )
        try:
            response = await cluster.client.ask(
                cluster.brokers[state.leader].ref,
                FetchRequest(
                    replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, partitions=(wanted,)
                ),
                timeout_ms=10_000,
            )
        except Exception:  # noqa: BLE001 - a leader that is just moving: ask the next one
            continue
        assert isinstance(response, FetchResponse)
        data = response.partitions[0]
        if data.error_code is not ErrorCode.NONE:
            continue  # NOT_LEADER_OR_FOLLOWER while the znode and the broker disagree for a moment
        batch = [
            (r.offset, r.value)
            for b in iterate_batches(data.records)
            for r in b.records()
            if r.offset >= offset
        ]
        if batch:
            records += batch
            offset = batch[-1][0] + 1
        elif len(records) >= at_least:
            return records


async def produce(
    producer: Producer,
    count: int,
    *,
    start: int = 0,
    in_flight: int = 500,
    progress: tuple[int, asyncio.Event] | None = None,
) -> dict[int, RecordMetadata | ProducerError]:
    """Send ``count`` numbered records, keyed so they spread over the partitions, keeping at most
    ``in_flight`` unacknowledged; returns each record's outcome. ``progress=(n, event)`` sets the
    event once n outcomes are in (so a test can act mid-stream)."""
    outcomes: dict[int, RecordMetadata | ProducerError] = {}
    window: set[asyncio.Future[RecordMetadata]] = set()
    by_future: dict[asyncio.Future[RecordMetadata], int] = {}
    for number in range(start, start + count):
        future = await producer.enqueue(TOPIC, value_of(number), key=b"key-%d" % (number % 97))
        by_future[future] = number
        window.add(future)
        if len(window) >= in_flight:
            done, window = await asyncio.wait(window, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                outcomes[by_future[finished]] = _outcome(finished)
            if progress is not None and len(outcomes) >= progress[0]:
                progress[1].set()
    if window:
        done, _ = await asyncio.wait(window)
        for finished in done:
            outcomes[by_future[finished]] = _outcome(finished)
    return outcomes


def _outcome(future: asyncio.Future[RecordMetadata]) -> RecordMetadata | ProducerError:
    error = future.exception()
    if error is not None:
        assert isinstance(error, ProducerError), repr(error)
        return error
    return future.result()


def check_log(
    records_by_partition: dict[int, list[tuple[int, bytes | None]]],
    acknowledged: dict[int, RecordMetadata],
) -> None:
    """Every acknowledged record at the offset it was acknowledged with; per partition the records
    in send order; no record twice."""
    seen: dict[int, tuple[int, int]] = {}
    for partition, records in records_by_partition.items():
        numbers = [number_of(value) for _, value in records]
        assert numbers == sorted(numbers), f"partition {partition} out of send order"
        for offset, value in records:
            number = number_of(value)
            assert number not in seen, f"record {number} twice: {seen[number]} and {(partition, offset)}"
            seen[number] = (partition, offset)
    for number, metadata in acknowledged.items():
        assert seen.get(number) == (metadata.partition, metadata.offset), f"acknowledged record {number}"


async def test_acknowledged_records_survive_leader_moves_in_order_and_once(cluster: ProcessCluster) -> None:
    async with Producer(
        bootstrap(cluster), secret=SECRET, config={"linger.ms": 5, "client.id": "moves"}
    ) as producer:
        first = await produce(producer, 3_000)
        # SIGKILL partition 0's leader (broker 1) mid-stream: the controller elects another after
        # the ZooKeeper session expires; the producer keeps retrying into the new leader.
        midway = asyncio.Event()
        sending = asyncio.ensure_future(
            produce(producer, 6_000, start=3_000, in_flight=200, progress=(500, midway))
        )
        await midway.wait()
        await cluster.kill(1, signal.SIGKILL)
        second = await sending
        await cluster.start(1)
        await cluster.wait_for_partition_state(
            TopicPartition(TOPIC, 0), lambda s: set(s.isr) == {1, 2, 3}, timeout_s=60
        )
        # SIGTERM partition 1's leader (broker 2): leadership moves first (controlled shutdown).
        state, _ = await cluster.zk_partition_state(TopicPartition(TOPIC, 1))
        midway = asyncio.Event()
        sending = asyncio.ensure_future(
            produce(producer, 3_000, start=9_000, in_flight=200, progress=(500, midway))
        )
        await midway.wait()
        assert await cluster.kill(state.leader, signal.SIGTERM) == 0
        third = await sending
        statistics = producer.statistics()
    outcomes = {**first, **second, **third}
    acknowledged = {n: m for n, m in outcomes.items() if isinstance(m, RecordMetadata)}
    failed = {n: e for n, e in outcomes.items() if not isinstance(e, RecordMetadata)}
    assert failed == {}, f"{len(failed)} records failed, e.g. {next(iter(failed.values()), None)!r}"
    assert statistics is not None
    assert statistics.record_retries_total > 0, "the leader moves should have caused retries"
    counts = {p: sum(1 for m in acknowledged.values() if m.partition == p) for p in range(PARTITIONS)}
    records = {
        p: await read_back(cluster, TopicPartition(TOPIC, p), at_least=counts[p]) for p in range(PARTITIONS)
    }
    check_log(records, acknowledged)


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "control-without-idempotence"])
async def test_lost_answers_are_retried_without_duplicates_only_with_idempotence(
    cluster: ProcessCluster, idempotence: bool
) -> None:
    node = ClientNode(bootstrap(cluster), secret=SECRET, client_id="drops")
    assert node.system.transport is not None
    dropping = ReplyDroppingTransport(node.system.transport, fraction=0.2, seed=7)
    node.system.transport = dropping
    settings: dict[str, object] = {"linger.ms": 2, "enable.idempotence": idempotence, "retry.backoff.ms": 20}
    async with node, Producer(bootstrap(cluster), node=node, config=settings) as producer:
        outcomes = await produce(producer, 3_000)
        statistics = producer.statistics()
    acknowledged = {n: m for n, m in outcomes.items() if isinstance(m, RecordMetadata)}
    failed = {n: e for n, e in outcomes.items() if not isinstance(e, RecordMetadata)}
    assert failed == {}, f"{len(failed)} records failed, e.g. {next(iter(failed.values()), None)!r}"
    assert len(acknowledged) == 3_000
    assert dropping.stats.dropped > 0
    assert statistics is not None
    assert statistics.record_retries_total > 0
    counts = {p: sum(1 for m in acknowledged.values() if m.partition == p) for p in range(PARTITIONS)}
    lost_records = sum(
        sum(
            1
            for data in request.partitions
            for b in iterate_batches(data.records)
            for _ in range(b.header.records_count)
        )
        for request in dropping.stats.dropped_requests
    )
    records = {
        p: await read_back(cluster, TopicPartition(TOPIC, p), at_least=counts[p]) for p in range(PARTITIONS)
    }
    values = [value for partition in records.values() for _, value in partition]
    duplicates = len(values) - len(set(values))
    if idempotence:
        assert duplicates == 0
        check_log(records, acknowledged)
    else:
        # Each lost answer's records were written once more by the retry.
        assert duplicates == lost_records > 0


async def test_the_client_api_against_real_brokers(cluster: ProcessCluster) -> None:
    """What an application sees: metadata for each record, keyed and explicit partitioning,
    headers and timestamps kept, typed errors, partitions_for, and no sends after close."""
    config = {"max.request.size": 2_000, "max.block.ms": 1_000, "client.id": "api"}
    async with Producer(bootstrap(cluster), secret=SECRET, config=config) as producer:
        assert await producer.partitions_for(TOPIC) == (0, 1, 2)
        keyed = await producer.send(
            TOPIC, b"v", key=b"foobar", headers=[("h", b"1"), ("n", None)], timestamp_ms=42
        )
        assert (keyed.topic, keyed.partition, keyed.timestamp) == (TOPIC, keyed_partition(b"foobar", 3), 42)
        assert (keyed.serialized_key_size, keyed.serialized_value_size) == (6, 1)
        explicit = await producer.send(TOPIC, None, partition=2)
        assert (explicit.partition, explicit.serialized_value_size) == (2, -1)
        pipelined = [producer.send_nowait(TOPIC, b"p%d" % i, partition=1) for i in range(50)]
        offsets = [(await future).offset for future in pipelined]
        assert offsets == list(range(offsets[0], offsets[0] + 50))

        with pytest.raises(RecordTooLargeError, match=r"max\.request\.size"):
            await producer.send(TOPIC, b"x" * 2_000)
        with pytest.raises(ProducerTimeoutError, match="topic missing not present in metadata after 1000 ms"):
            await producer.send("missing", b"x")
        with pytest.raises(ProducerTimeoutError):
            await producer.partitions_for("missing")
        with pytest.raises(TypeError, match="must be bytes"):
            _ = producer.send_nowait(TOPIC, "text")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="invalid timestamp"):
            _ = producer.send_nowait(TOPIC, b"x", timestamp_ms=-5)
        with pytest.raises(ValueError, match="partition must be"):
            _ = producer.send_nowait(TOPIC, b"x", partition=-1)
    with pytest.raises(ProducerClosedError):
        await producer.send(TOPIC, b"late")

    (record,) = [
        r
        for r in await read_records(cluster, TopicPartition(TOPIC, keyed.partition))
        if r.offset == keyed.offset
    ]
    assert (record.key, record.value, record.timestamp) == (b"foobar", b"v", 42)
    assert [(h.key, h.value) for h in record.headers] == [("h", b"1"), ("n", None)]


async def test_send_callbacks_against_real_brokers(
    cluster: ProcessCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's ``send(record, callback)``: each callback gets its record's metadata (or its error)
    once, a callback that raises is logged without stopping the others, flush waits for callback
    records, and a send after close reaches its callback as ProducerClosedError."""
    outcomes: list[tuple[int, RecordMetadata | None, ProducerError | None]] = []

    def callback_for(number: int) -> SendCallback:
        def done(metadata: RecordMetadata | None, error: ProducerError | None) -> None:
            outcomes.append((number, metadata, error))
            if number == 3:
                raise RuntimeError("a callback that fails")

        return done

    config = {"max.request.size": 2_000, "client.id": "callbacks"}
    async with Producer(bootstrap(cluster), secret=SECRET, config=config) as producer:
        for number in range(200):
            await producer.send_with_callback(TOPIC, value_of(number), callback_for(number), partition=1)
        producer.send_nowait_with_callback(TOPIC, b"x" * 2_000, callback_for(-1))
        await producer.flush()
        assert len(outcomes) == 201  # flush returned only once every callback had run
    producer.send_nowait_with_callback(TOPIC, b"late", callback_for(-2))

    acknowledged = [(number, metadata) for number, metadata, error in outcomes if metadata is not None]
    assert [number for number, _ in acknowledged] == list(range(200))
    offsets = [metadata.offset for _, metadata in acknowledged]
    assert offsets == list(range(offsets[0], offsets[0] + 200))
    assert {metadata.partition for _, metadata in acknowledged} == {1}
    failures = {number: error for number, metadata, error in outcomes if metadata is None}
    assert isinstance(failures[-1], RecordTooLargeError)
    assert isinstance(failures[-2], ProducerClosedError)
    assert "error in a send callback" in caplog.text
    records = await read_records(cluster, TopicPartition(TOPIC, 1))
    assert [r.value for r in records if r.offset in set(offsets)] == [value_of(n) for n in range(200)]


async def read_records(cluster: ProcessCluster, tp: TopicPartition) -> list[Record]:
    state, _ = await cluster.zk_partition_state(tp)
    wanted = FetchPartition(
        topic=tp.topic, partition=tp.partition, fetch_offset=0, partition_max_bytes=1 << 20
    )
    response = await cluster.client.ask(
        cluster.brokers[state.leader].ref,
        FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, partitions=(wanted,)),
        timeout_ms=10_000,
    )
    assert isinstance(response, FetchResponse)
    return [r for b in iterate_batches(response.partitions[0].records) for r in b.records()]

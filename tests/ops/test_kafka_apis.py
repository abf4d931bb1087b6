"""The Kafka APIs (``ops/kafka/apis.py``) in one process, on virtual time: every served API and
version, answered as Kafka 2.4 answers it.

Three brokers run the real controller over the simulated network (``InProcessCluster``, each
registering a KAFKA listener). Requests are written by kafka-python's ``kafka.protocol`` (the oracle)
at the version under test, read by the codec, handled by ``KafkaApis`` of the broker the test names,
written back by the codec at that version and read by kafka-python: the listener's dispatch without
its socket (the socket's rules are ``tests/ops/test_kafka_listener.py``'s). Each answer is compared
with Kafka's, error codes by name (``actors/common/errors.py``).

The topic ``orders`` has two partitions led by brokers 1 and 2, replicas on all three; ``thin`` has
one replica on broker 1, so acks=all never has the two in-sync replicas its
``min.insync.replicas=2`` asks for.
"""

from __future__ import annotations

import itertools
import struct
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    BrokerEndpoint,
    ListenerEndpoint,
    PartitionMetadata,
    TopicMetadata,
)
from actors.common.protocol import (
    MetadataResponse as InternalMetadataResponse,
)
from actors.common.types import TopicPartition
from ops.kafka import codec as k
from ops.kafka.apis import CloseConnection, KafkaApis, metadata_response
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    MAGIC_OFFSET,
    CompressionType,
    compute_crc,
    iterate_batches,
)
from tests.support.cluster import InProcessCluster

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse
    from kafka.protocol.admin.topics import (
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from kafka.protocol.consumer.offsets import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.producer import (
        InitProducerIdRequest,
        InitProducerIdResponse,
        ProduceRequest,
        ProduceResponse,
    )
    from kafka.protocol.sasl import SaslHandshakeRequest

pytestmark = pytest.mark.asyncio

KAFKA_PORT = 19092
ORDERS = "orders"
ORDERS_REPLICAS = {0: (1, 2, 3), 1: (2, 3, 1)}  # the controller elects the first
THIN = "thin"
USER = "alice"
RESPONSES: dict[Any, Any] = {
    ApiVersionsRequest: ApiVersionsResponse,
    MetadataRequest: MetadataResponse,
    ProduceRequest: ProduceResponse,
    FetchRequest: FetchResponse,
    ListOffsetsRequest: ListOffsetsResponse,
    OffsetForLeaderEpochRequest: OffsetForLeaderEpochResponse,
    InitProducerIdRequest: InitProducerIdResponse,
    CreateTopicsRequest: CreateTopicsResponse,
    DeleteTopicsRequest: DeleteTopicsResponse,
    DescribeConfigsRequest: DescribeConfigsResponse,
}


def versions(api_key: int) -> range:
    low, high = k.API_VERSIONS[api_key]
    return range(low, high + 1)


def message(kp_class: Any, version: int, values: dict[str, Any]) -> Any:
    """A kafka-python message of that version from plain values (nested dicts for structs)."""
    return kp_class[version](**_values(kp_class._struct.fields, values, version))


def _values(fields: Any, values: dict[str, Any], version: int) -> dict[str, Any]:
    built: dict[str, Any] = {}
    for name, value in values.items():
        field = fields[name]
        if value is not None and field.is_struct_array():
            built[name] = [
                field.data_class(**_values(field.fields, item, version), version=version) for item in value
            ]
        elif value is not None and field.is_struct():
            built[name] = field.data_class(**_values(field.fields, value, version), version=version)
        else:
            built[name] = value
    return built


@dataclass
class Kafka:
    cluster: InProcessCluster

    def __post_init__(self) -> None:
        self._correlation = itertools.count(1)

    async def ask(self, kp_class: Any, version: int, *, broker: int = 1, **values: Any) -> Any:
        """The answer, as kafka-python reads it, to the request of that class, version and values
        sent to ``broker``'s Kafka APIs (None: not answered)."""
        correlation = next(self._correlation)
        request = message(kp_class, version, values)
        request.with_header(correlation_id=correlation, client_id="apis-test")
        header, decoded = k.decode_request(bytes(request.encode(header=True)))
        assert (header.api_version, header.correlation_id) == (version, correlation)
        node = self.cluster.brokers[broker].node
        assert node is not None
        apis = KafkaApis(node.system, node.broker, node.admin, request_timeout_ms=30_000)
        response = await self.cluster.complete(apis.handle(header, decoded, USER))
        if response is None:
            return None
        frame = k.encode_response(header, response)
        answer = RESPONSES[kp_class].decode(frame[4:], version=version, header=True)
        assert answer.header.correlation_id == correlation
        return answer

    async def produce(
        self,
        version: int,
        records: bytes,
        *,
        topic: str = ORDERS,
        partition: int = 0,
        broker: int = 1,
        acks: int = -1,
    ) -> Any:
        """The one partition's answer to a Produce of ``records``."""
        answer = await self.ask(
            ProduceRequest,
            version,
            broker=broker,
            transactional_id=None,
            acks=acks,
            timeout_ms=5_000,
            topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        )
        if answer is None:
            return None
        ((result,),) = [t.partition_responses for t in answer.responses]
        return result


@pytest_asyncio.fixture
async def kafka() -> AsyncIterator[Kafka]:
    async with InProcessCluster(kafka_port=KAFKA_PORT) as cluster:
        await cluster.start_brokers(1, 2, 3)
        await cluster.create_topic(ORDERS, ORDERS_REPLICAS)
        await cluster.create_topic(THIN, {0: (1,)})
        yield Kafka(cluster)


def batch(*values: bytes, **options: Any) -> bytes:
    return build_batch([SimpleRecord(value) for value in values], **options)


def error(code: int) -> str:
    """Kafka's name of an error code (kio's table: every code Kafka has)."""
    return k.error(code).name.upper()


# ------------------------------------------------------------------------------- ApiVersions


async def test_api_versions(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.API_VERSIONS):
        answer = await kafka.ask(ApiVersionsRequest, version)
        assert answer.error_code == 0
        assert {v.api_key: (v.min_version, v.max_version) for v in answer.api_keys} == dict(k.API_VERSIONS)


# ---------------------------------------------------------------------------------- Metadata


async def test_metadata_every_version(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.METADATA):
        # v0 asks for every topic with an empty list, later versions with null.
        everything: list[Any] | None = [] if version == 0 else None
        extra = {"allow_auto_topic_creation": False} if version >= 4 else {}
        answer = await kafka.ask(MetadataRequest, version, topics=everything, **extra)
        assert sorted((b.node_id, b.host, b.port) for b in answer.brokers) == [
            (b, f"broker-{b}", KAFKA_PORT) for b in (1, 2, 3)
        ]
        topics = {t.name: t for t in answer.topics}
        assert set(topics) == {ORDERS, THIN}
        orders = {p.partition_index: p for p in topics[ORDERS].partitions}
        for partition, replicas in ORDERS_REPLICAS.items():
            assert orders[partition].error_code == 0
            assert orders[partition].leader_id == replicas[0]
            assert list(orders[partition].replica_nodes) == list(replicas)
            assert sorted(orders[partition].isr_nodes) == [1, 2, 3]
        if version >= 1:
            assert answer.controller_id in (1, 2, 3)
        if version >= 2:
            assert answer.cluster_id
        none = await kafka.ask(MetadataRequest, version, topics=[{"name": ORDERS}], **extra)
        assert [t.name for t in none.topics] == [ORDERS]
        if version >= 1:
            assert (await kafka.ask(MetadataRequest, version, topics=[], **extra)).topics == []


async def test_metadata_leaves_out_brokers_without_a_kafka_listener() -> None:
    """A broker registered without a KAFKA listener is not offered to a client of this listener, and
    a partition it leads has no leader to offer (LEADER_NOT_AVAILABLE), as Kafka answers a listener
    its leader does not have."""

    def broker(broker_id: int, *listeners: str) -> BrokerEndpoint:
        return BrokerEndpoint(
            broker_id=broker_id,
            host=f"h{broker_id}",
            port=9092,
            endpoints=tuple(
                ListenerEndpoint(
                    listener_name=name, host=f"h{broker_id}", port=port, security_protocol="PLAINTEXT"
                )
                for name, port in (("HTTP", 9092), ("KAFKA", 19092))
                if name in listeners
            ),
        )

    def partition(index: int, leader: int) -> PartitionMetadata:
        return PartitionMetadata(
            partition=index,
            error_code=ErrorCode.NONE,
            leader=leader,
            leader_epoch=0,
            replicas=(1, 2),
            isr=(1, 2),
        )

    internal = InternalMetadataResponse(
        brokers=(broker(1, "HTTP", "KAFKA"), broker(2, "HTTP")),
        controller_id=2,
        topics=(
            TopicMetadata(name="t", error_code=ErrorCode.NONE, partitions=(partition(0, 1), partition(1, 2))),
        ),
        cluster_id="c",
    )
    answer = metadata_response(internal)
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(1, "h1", 19092)]
    assert answer.controller_id == 2
    ((first, second),) = [t.partitions for t in answer.topics]
    assert (error(first.error_code), first.leader_id) == ("NONE", 1)
    assert (error(second.error_code), second.leader_id) == ("LEADER_NOT_AVAILABLE", -1)


async def test_metadata_of_unknown_topics(kafka: Kafka) -> None:
    """auto.create.topics.enable is off (actorlog's default): an unknown topic, whatever its name, is
    UNKNOWN_TOPIC_OR_PARTITION (Kafka's answer when it does not create the topic)."""
    for version in versions(k.ApiKey.METADATA):
        extra = {"allow_auto_topic_creation": True} if version >= 4 else {}
        answer = await kafka.ask(
            MetadataRequest, version, topics=[{"name": "nowhere"}, {"name": "bad name!"}], **extra
        )
        codes = {t.name: error(t.error_code) for t in answer.topics}
        assert codes == {"nowhere": "UNKNOWN_TOPIC_OR_PARTITION", "bad name!": "UNKNOWN_TOPIC_OR_PARTITION"}


def created(cluster: InProcessCluster, topic: str) -> Callable[[], bool]:
    return lambda: cluster.zookeeper.peek(f"/brokers/topics/{topic}") is not None


async def test_metadata_creates_topics_when_asked_and_enabled() -> None:
    """With auto.create.topics.enable, Metadata v0-3 (which always allow it) and v4-5 allowing it
    create a missing topic (LEADER_NOT_AVAILABLE until it has a leader) and refuse an invalid name
    (INVALID_TOPIC_EXCEPTION); v4-5 not allowing it answer UNKNOWN_TOPIC_OR_PARTITION."""
    async with InProcessCluster(
        kafka_port=KAFKA_PORT, config_overrides={"auto_create_topics_enable": True}
    ) as cluster:
        await cluster.start_brokers(1, 2, 3)
        kafka = Kafka(cluster)
        for version in versions(k.ApiKey.METADATA):
            allowed = {"allow_auto_topic_creation": True} if version >= 4 else {}
            topic = f"auto-{version}"
            answer = await kafka.ask(
                MetadataRequest, version, topics=[{"name": topic}, {"name": "bad name!"}], **allowed
            )
            codes = {t.name: error(t.error_code) for t in answer.topics}
            assert codes == {topic: "LEADER_NOT_AVAILABLE", "bad name!": "INVALID_TOPIC_EXCEPTION"}
            await cluster.wait_for(created(cluster, topic))
            if version >= 4:
                refused = await kafka.ask(
                    MetadataRequest,
                    version,
                    topics=[{"name": f"not-{version}"}],
                    allow_auto_topic_creation=False,
                )
                assert [error(t.error_code) for t in refused.topics] == ["UNKNOWN_TOPIC_OR_PARTITION"]


# ----------------------------------------------------------------------------------- Produce


async def test_produce_every_version(kafka: Kafka) -> None:
    offset = 0
    for version in versions(k.ApiKey.PRODUCE):
        result = await kafka.produce(version, batch(b"a", b"b"))
        assert (error(result.error_code), result.base_offset) == ("NONE", offset)
        if version >= 5:
            assert result.log_start_offset == 0
        offset += 2
    assert await kafka.produce(7, batch(b"unanswered"), acks=0) is None
    assert (await kafka.produce(7, batch(b"c"), acks=1)).base_offset == offset + 1


async def test_produce_refusals(kafka: Kafka) -> None:
    records = batch(b"x")
    for version in versions(k.ApiKey.PRODUCE):
        refused = {
            "follower": await kafka.produce(version, records, broker=2),
            "unknown topic": await kafka.produce(version, records, topic="nowhere"),
            "unknown partition": await kafka.produce(version, records, partition=7),
            "too few in sync": await kafka.produce(version, records, topic=THIN),
            "acks=2": await kafka.produce(version, records, acks=2),
        }
        assert {case: error(result.error_code) for case, result in refused.items()} == {
            "follower": "NOT_LEADER_OR_FOLLOWER",
            "unknown topic": "UNKNOWN_TOPIC_OR_PARTITION",
            "unknown partition": "UNKNOWN_TOPIC_OR_PARTITION",
            "too few in sync": "NOT_ENOUGH_REPLICAS",
            "acks=2": "INVALID_REQUIRED_ACKS",
        }
        assert {result.base_offset for result in refused.values()} == {-1}
    assert error((await kafka.produce(7, records, topic=THIN, acks=1)).error_code) == "NONE"


def compressed_as(records: bytes, codec: CompressionType) -> bytes:
    """``records`` (one uncompressed batch) claiming another codec, CRC made right."""
    data = bytearray(records)
    (attributes,) = struct.unpack_from(">h", data, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, attributes & ~COMPRESSION_MASK | codec)
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data, 0, len(data)))
    return bytes(data)


async def test_produce_of_records_kafka_refuses(kafka: Kafka) -> None:
    corrupt = bytearray(batch(b"some value"))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    legacy = bytearray(batch(b"v"))
    legacy[MAGIC_OFFSET] = 1
    cases = {
        "crc": bytes(corrupt),
        "magic 1": bytes(legacy),
        "two batches": batch(b"a") + batch(b"b"),
        "no batch": b"",
        "half a header": batch(b"a")[:20],
        "above max.message.bytes": batch(b"x" * 1_000_100),
        # actorlog has no snappy (Kafka has): the code Kafka gives a codec it cannot take.
        "snappy": compressed_as(batch(b"s"), CompressionType.SNAPPY),
    }
    expected = {
        "crc": "CORRUPT_MESSAGE",
        "magic 1": "CORRUPT_MESSAGE",
        "two batches": "CORRUPT_MESSAGE",
        "no batch": "CORRUPT_MESSAGE",
        "half a header": "CORRUPT_MESSAGE",
        "above max.message.bytes": "MESSAGE_TOO_LARGE",
        "snappy": "UNSUPPORTED_COMPRESSION_TYPE",
    }
    zstd = batch(b"z", compression=CompressionType.ZSTD)
    for version in versions(k.ApiKey.PRODUCE):
        answered = {
            case: error((await kafka.produce(version, records)).error_code) for case, records in cases.items()
        }
        assert answered == expected
        # KIP-110: zstd only from Produce v7 on.
        assert error((await kafka.produce(version, zstd)).error_code) == (
            "NONE" if version >= 7 else "UNSUPPORTED_COMPRESSION_TYPE"
        )
    # Nothing refused was written: the log holds the one zstd record.
    assert kafka.cluster.log(1, TopicPartition(ORDERS, 0)).log_end_offset == 1


async def test_idempotent_produce(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.PRODUCE):
        topic_partition: dict[str, Any] = {"topic": ORDERS, "partition": 1, "broker": 2}
        producer = await kafka.ask(
            InitProducerIdRequest, 0, transactional_id=None, transaction_timeout_ms=60_000
        )
        assert (error(producer.error_code), producer.producer_epoch) == ("NONE", 0)
        pid = producer.producer_id

        def sequenced(sequence: int, *values: bytes, epoch: int = 0, pid: int = pid) -> bytes:
            return batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

        first = await kafka.produce(version, sequenced(0, b"a", b"b"), **topic_partition)
        assert error(first.error_code) == "NONE"
        retried = await kafka.produce(version, sequenced(0, b"a", b"b"), **topic_partition)
        assert (error(retried.error_code), retried.base_offset) == ("NONE", first.base_offset)
        answered = {
            "gap": await kafka.produce(version, sequenced(5, b"c"), **topic_partition),
            "unknown producer": await kafka.produce(
                version, sequenced(3, b"c", pid=pid + 1000), **topic_partition
            ),
            "new epoch, not from 0": await kafka.produce(
                version, sequenced(2, b"c", epoch=1), **topic_partition
            ),
        }
        assert {case: error(r.error_code) for case, r in answered.items()} == {
            "gap": "OUT_OF_ORDER_SEQUENCE_NUMBER",
            "unknown producer": "UNKNOWN_PRODUCER_ID",
            "new epoch, not from 0": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        }
        bumped = await kafka.produce(version, sequenced(0, b"d", epoch=1), **topic_partition)
        assert (error(bumped.error_code), bumped.base_offset) == ("NONE", first.base_offset + 2)
        fenced = await kafka.produce(version, sequenced(1, b"e"), **topic_partition)
        assert error(fenced.error_code) == "INVALID_PRODUCER_EPOCH"


async def test_transactional_produce_and_producer_ids_are_refused(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.PRODUCE):
        answer = await kafka.ask(
            ProduceRequest,
            version,
            transactional_id="tx",
            acks=-1,
            timeout_ms=5_000,
            topic_data=[{"name": ORDERS, "partition_data": [{"index": 0, "records": batch(b"t")}]}],
        )
        ((result,),) = [t.partition_responses for t in answer.responses]
        assert error(result.error_code) == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    refused = await kafka.ask(InitProducerIdRequest, 0, transactional_id="tx", transaction_timeout_ms=60_000)
    assert (error(refused.error_code), refused.producer_id) == ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1)
    assert kafka.cluster.log(1, TopicPartition(ORDERS, 0)).log_end_offset == 0


# ------------------------------------------------------------------------------------- Fetch


async def fetch(
    kafka: Kafka,
    version: int,
    offset: int = 0,
    *,
    topic: str = ORDERS,
    partition: int = 0,
    broker: int = 1,
    leader_epoch: int = -1,
    **request: Any,
) -> Any:
    """The whole Fetch answer for one partition."""
    values: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
        **request,
    }
    return await kafka.ask(FetchRequest, version, broker=broker, **values)


def only(answer: Any) -> Any:
    ((result,),) = [t.partitions for t in answer.responses]
    return result


def read_values(records: bytes | None) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for b in iterate_batches(records or b"") for r in b.records()]


async def test_fetch_every_version(kafka: Kafka) -> None:
    await kafka.produce(7, batch(b"a", b"b", b"c"))
    for version in versions(k.ApiKey.FETCH):
        for isolation_level in (0, 1):  # read_uncommitted, read_committed: no transactions, no difference
            answer = await fetch(kafka, version, 1, isolation_level=isolation_level)
            assert error(answer.error_code if version >= 7 else 0) == "NONE"
            result = only(answer)
            assert (error(result.error_code), result.high_watermark, result.last_stable_offset) == (
                "NONE",
                3,
                3,
            )
            assert read_values(result.records) == [(0, b"a"), (1, b"b"), (2, b"c")]  # whole batches
            assert not result.aborted_transactions
            if version >= 5:
                assert result.log_start_offset == 0
            if version >= 7:
                assert answer.session_id == 0  # no fetch sessions (KIP-227)
            if version >= 11:
                assert result.preferred_read_replica == -1


async def test_fetch_refusals(kafka: Kafka) -> None:
    await kafka.produce(7, batch(b"a"))
    for version in versions(k.ApiKey.FETCH):
        refused = {
            "follower": only(await fetch(kafka, version, broker=2)),
            "unknown topic": only(await fetch(kafka, version, topic="nowhere")),
            "out of range": only(await fetch(kafka, version, 5)),
        }
        assert {case: error(r.error_code) for case, r in refused.items()} == {
            "follower": "NOT_LEADER_OR_FOLLOWER",
            "unknown topic": "UNKNOWN_TOPIC_OR_PARTITION",
            "out of range": "OFFSET_OUT_OF_RANGE",
        }
        assert all(not r.records for r in refused.values())
        with pytest.raises(CloseConnection):  # a replica id other than -1 would be a follower's
            await fetch(kafka, version, replica_id=2)


async def test_fetch_waits_for_records_up_to_max_wait(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.FETCH):
        started = kafka.cluster.clock.now_ms()
        answer = only(
            await fetch(
                kafka,
                version,
                kafka.cluster.log(1, TopicPartition(ORDERS, 0)).log_end_offset,
                max_wait_ms=500,
            )
        )
        assert (error(answer.error_code), answer.records or b"") == ("NONE", b"")
        assert kafka.cluster.clock.now_ms() - started >= 500


async def test_fetch_sessions_are_never_given(kafka: Kafka) -> None:
    """KIP-227's rules (Kafka's FetchManager.newContext) for a broker that creates no session: an
    epoch of 0 (a new session) or -1 (none) is a full fetch, answered with session id 0 (no session
    made, which Kafka also answers when its cache is full); any other epoch is an incremental fetch
    of a session this broker does not have."""
    await kafka.produce(7, batch(b"a"))
    for version in range(7, 12):
        for session_id, session_epoch in ((0, 0), (0, -1), (12, 0), (12, -1)):
            answer = await fetch(kafka, version, session_id=session_id, session_epoch=session_epoch)
            assert (error(answer.error_code), answer.session_id) == ("NONE", 0)
            assert read_values(only(answer).records) == [(0, b"a")]
        for session_id in (0, 12):
            answer = await fetch(kafka, version, session_id=session_id, session_epoch=3)
            assert (error(answer.error_code), answer.session_id, answer.responses) == (
                "FETCH_SESSION_ID_NOT_FOUND",
                0,
                [],
            )


# ------------------------------------------------------------------------------- ListOffsets


async def list_offset(
    kafka: Kafka, version: int, timestamp: int, *, broker: int = 1, topic: str = ORDERS, **request: Any
) -> Any:
    answer = await kafka.ask(
        ListOffsetsRequest,
        version,
        broker=broker,
        **{
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
            **request,
        },
    )
    ((result,),) = [t.partitions for t in answer.topics]
    return result


async def test_list_offsets_every_version(kafka: Kafka) -> None:
    records = [SimpleRecord(b"%d" % n, timestamp=1_000 * (n + 1)) for n in range(3)]
    await kafka.produce(7, build_batch(records))
    for version in versions(k.ApiKey.LIST_OFFSETS):
        found = {
            "earliest": await list_offset(kafka, version, -2),
            "latest": await list_offset(kafka, version, -1),
            "at 1500 ms": await list_offset(kafka, version, 1_500),
            "after the last": await list_offset(kafka, version, 9_000),
        }
        assert {case: (error(r.error_code), r.offset) for case, r in found.items()} == {
            "earliest": ("NONE", 0),
            "latest": ("NONE", 3),
            "at 1500 ms": ("NONE", 1),
            "after the last": ("NONE", -1),
        }
        assert found["at 1500 ms"].timestamp == 2_000
        refused = {
            "follower": await list_offset(kafka, version, -1, broker=2),
            "unknown topic": await list_offset(kafka, version, -1, topic="nowhere"),
        }
        assert {case: error(r.error_code) for case, r in refused.items()} == {
            "follower": "NOT_LEADER_OR_FOLLOWER",
            "unknown topic": "UNKNOWN_TOPIC_OR_PARTITION",
        }
        with pytest.raises(CloseConnection):
            await list_offset(kafka, version, -1, replica_id=3)


# ---------------------------------------------------- leader epochs: OffsetForLeaderEpoch, Fetch


async def offset_for_leader_epoch(
    kafka: Kafka,
    version: int,
    leader_epoch: int,
    current_leader_epoch: int,
    *,
    broker: int,
    topic: str = ORDERS,
) -> Any:
    answer = await kafka.ask(
        OffsetForLeaderEpochRequest,
        version,
        broker=broker,
        replica_id=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": current_leader_epoch,
                        "leader_epoch": leader_epoch,
                    }
                ],
            }
        ],
    )
    ((result,),) = [t.partitions for t in answer.topics]
    return result


async def test_leader_epochs_after_a_leader_change(kafka: Kafka) -> None:
    """orders-0 written in epoch 0 on broker 1, then led by broker 2 in epoch 1 after broker 1's
    controlled shutdown: a consumer's OffsetForLeaderEpoch (KIP-320) and Fetch carry the epoch they
    know, fenced when older than the leader's and unknown when newer."""
    cluster = kafka.cluster
    tp = TopicPartition(ORDERS, 0)
    await kafka.produce(7, batch(b"a", b"b"))
    await cluster.stop_broker(1)
    await cluster.wait_for_leader(tp, 2, epoch=1)
    assert error((await kafka.produce(7, batch(b"c"), broker=2)).error_code) == "NONE"
    for version in versions(k.ApiKey.OFFSET_FOR_LEADER_EPOCH):
        answered = {
            "epoch 0": await offset_for_leader_epoch(kafka, version, 0, 1, broker=2),
            "epoch 1": await offset_for_leader_epoch(kafka, version, 1, -1, broker=2),
            "fenced": await offset_for_leader_epoch(kafka, version, 0, 0, broker=2),
            "unknown": await offset_for_leader_epoch(kafka, version, 0, 2, broker=2),
            "follower": await offset_for_leader_epoch(kafka, version, 0, 1, broker=3),
            "unknown topic": await offset_for_leader_epoch(kafka, version, 0, -1, broker=2, topic="nowhere"),
        }
        assert {
            case: (error(r.error_code), r.leader_epoch, r.end_offset) for case, r in answered.items()
        } == {
            "epoch 0": ("NONE", 0, 2),  # epoch 0 ended where epoch 1 began
            "epoch 1": ("NONE", 1, 3),
            "fenced": ("FENCED_LEADER_EPOCH", -1, -1),
            "unknown": ("UNKNOWN_LEADER_EPOCH", -1, -1),
            "follower": ("NOT_LEADER_OR_FOLLOWER", -1, -1),
            "unknown topic": ("UNKNOWN_TOPIC_OR_PARTITION", -1, -1),
        }
    for version in range(9, 12):  # current_leader_epoch came with Fetch v9 (KIP-320)
        fetched = {
            epoch: only(await fetch(kafka, version, broker=2, leader_epoch=epoch)) for epoch in (-1, 0, 1, 2)
        }
        assert {epoch: error(r.error_code) for epoch, r in fetched.items()} == {
            -1: "NONE",
            0: "FENCED_LEADER_EPOCH",
            1: "NONE",
            2: "UNKNOWN_LEADER_EPOCH",
        }
        assert read_values(fetched[1].records) == [(0, b"a"), (1, b"b"), (2, b"c")]


# ------------------------------------------------------------------------ topics and configs


def creatable(
    name: str,
    partitions: int = -1,
    replication: int = -1,
    assignments: dict[int, list[int]] | None = None,
    **configs: str,
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication,
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or {}).items()],
        "configs": [{"name": key.replace("_", "."), "value": value} for key, value in configs.items()],
    }


async def create_topics(
    kafka: Kafka, version: int, *topics: dict[str, Any], validate_only: bool = False
) -> dict[str, str]:
    answer = await kafka.ask(
        CreateTopicsRequest, version, topics=list(topics), timeout_ms=10_000, validate_only=validate_only
    )
    return {t.name: error(t.error_code) for t in answer.topics}


async def test_create_topics_every_version(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.CREATE_TOPICS):
        answered = await create_topics(
            kafka,
            version,
            creatable(f"made-{version}", 2, 3, min_insync_replicas="2"),
            creatable(f"placed-{version}", assignments={0: [3, 1], 1: [1, 2]}),
            creatable(ORDERS, 1, 1),
            creatable(f"wide-{version}", 1, 4),
            creatable(f"none-{version}", 0, 1),
            creatable("bad name!", 1, 1),
            creatable(f"misconfigured-{version}", 1, 1, no_such_key="1"),
            creatable(f"badly-set-{version}", 1, 1, min_insync_replicas="many"),
            creatable(f"stranger-{version}", assignments={0: [1, 9]}),
            creatable(f"uneven-{version}", assignments={0: [1, 2], 1: [3]}),
            creatable(f"both-{version}", 1, assignments={0: [1]}),
        )
        assert answered == {
            f"made-{version}": "NONE",
            f"placed-{version}": "NONE",
            ORDERS: "TOPIC_ALREADY_EXISTS",
            f"wide-{version}": "INVALID_REPLICATION_FACTOR",
            f"none-{version}": "INVALID_PARTITIONS",
            "bad name!": "INVALID_TOPIC_EXCEPTION",
            f"misconfigured-{version}": "INVALID_CONFIG",
            f"badly-set-{version}": "INVALID_CONFIG",
            f"stranger-{version}": "INVALID_REPLICA_ASSIGNMENT",
            f"uneven-{version}": "INVALID_REPLICA_ASSIGNMENT",
            f"both-{version}": "INVALID_REQUEST",
        }
        metadata = await kafka.ask(
            MetadataRequest,
            5,
            topics=[{"name": f"made-{version}"}, {"name": f"placed-{version}"}],
            allow_auto_topic_creation=False,
        )
        shapes = {
            t.name: {p.partition_index: list(p.replica_nodes) for p in t.partitions} for t in metadata.topics
        }
        assert [len(r) for r in shapes[f"made-{version}"].values()] == [3, 3]
        assert shapes[f"placed-{version}"] == {0: [3, 1], 1: [1, 2]}
        checked = await create_topics(
            kafka, version, creatable(f"checked-{version}", 1, 1), validate_only=True
        )
        assert checked == {f"checked-{version}": "NONE"}
        assert kafka.cluster.zookeeper.peek(f"/brokers/topics/checked-{version}") is None


async def test_delete_topics_every_version(kafka: Kafka) -> None:
    for version in versions(k.ApiKey.DELETE_TOPICS):
        await create_topics(kafka, 3, creatable(f"doomed-{version}", 1, 3))
        answer = await kafka.ask(
            DeleteTopicsRequest, version, topic_names=[f"doomed-{version}", "nowhere"], timeout_ms=10_000
        )
        assert {r.name: error(r.error_code) for r in answer.responses} == {
            f"doomed-{version}": "NONE",
            "nowhere": "UNKNOWN_TOPIC_OR_PARTITION",
        }
        gone = await kafka.ask(
            MetadataRequest, 5, topics=[{"name": f"doomed-{version}"}], allow_auto_topic_creation=False
        )
        assert [error(t.error_code) for t in gone.topics] == ["UNKNOWN_TOPIC_OR_PARTITION"]


TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # Kafka's ConfigResource types
TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # Kafka's ConfigSource values


async def describe(kafka: Kafka, *resources: tuple[int, str, list[str] | None]) -> list[Any]:
    answer = await kafka.ask(
        DescribeConfigsRequest,
        1,
        resources=[
            {"resource_type": kind, "resource_name": name, "configuration_keys": keys}
            for kind, name, keys in resources
        ],
        include_synonyms=False,
    )
    assert [(r.resource_type, r.resource_name) for r in answer.results] == [
        (kind, name) for kind, name, _ in resources
    ]
    return list(answer.results)


async def test_describe_configs(kafka: Kafka) -> None:
    """DescribeConfigs v1 (its one served version): a topic's keys, overrides first-hand
    (TOPIC_CONFIG) and the rest as the broker's defaults (DEFAULT_CONFIG here: the in-process
    brokers have no properties file, nor static keys to list as a broker's)."""
    await create_topics(kafka, 3, creatable("tuned", 1, 3, retention_ms="60000", cleanup_policy="delete"))
    everything, broker, unknown, logger = await describe(
        kafka,
        (TOPIC, "tuned", None),
        (BROKER, "1", None),
        (TOPIC, "nowhere", None),
        (BROKER_LOGGER, "1", None),
    )
    assert error(everything.error_code) == "NONE"
    configs = {
        c.name: (c.value, c.config_source, c.read_only, c.is_sensitive, list(c.synonyms))
        for c in everything.configs
    }
    assert configs["retention.ms"] == ("60000", TOPIC_CONFIG, False, False, [])
    assert configs["cleanup.policy"] == ("delete", TOPIC_CONFIG, False, False, [])
    assert configs["min.insync.replicas"] == ("2", DEFAULT_CONFIG, False, False, [])
    assert len(configs) > 15
    (chosen,) = await describe(kafka, (TOPIC, "tuned", ["retention.ms", "segment.bytes"]))
    assert [(c.name, c.value) for c in chosen.configs] == [
        ("retention.ms", "60000"),
        ("segment.bytes", "1073741824"),
    ]
    assert error(broker.error_code) == "NONE"
    (other_broker,) = await describe(kafka, (BROKER, "2", None))  # Kafka: ask broker 2 itself
    assert (error(other_broker.error_code), other_broker.configs) == ("INVALID_REQUEST", [])
    assert (error(unknown.error_code), unknown.configs) == ("UNKNOWN_TOPIC_OR_PARTITION", [])
    assert (error(logger.error_code), logger.configs) == ("INVALID_REQUEST", [])


async def test_sasl_requests_after_authentication_close_the_connection(kafka: Kafka) -> None:
    with pytest.raises(CloseConnection):
        await kafka.ask(SaslHandshakeRequest, 1, mechanism="PLAIN")

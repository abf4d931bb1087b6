"""Real Kafka clients against actorlog's Kafka listener: kafka-python, aiokafka and confluent-kafka.

One ``actorlog cluster up`` of three broker processes (on the session's ZooKeeper) serves the whole
module. Each client, as its users write it, with the SCRAM-SHA-256 user ``cluster up`` wrote into
``client.properties``: creates a topic (3 partitions, RF 3) with its admin client, produces 1,200
records idempotently with acks=all and zstd, reads them back by assigning the partitions (no
consumer group), checks every record arrived exactly once and in order per partition, describes the
topic's configuration and deletes the topic. The Metadata every client receives names each broker at
its KAFKA listener, which the brokers learn from the controller. A wrong password is refused.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ops.local.zookeeper import LocalZooKeeper
from tests.support.kafka_clients import KafkaCluster

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin
    import kafka.errors

import aiokafka
import aiokafka.admin
import confluent_kafka
import confluent_kafka.admin
from confluent_kafka.admin import ConfigResource, NewTopic  # type: ignore[attr-defined]

from tests.support.cluster_up import start_cluster_up

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 1200
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: LocalZooKeeper
) -> Iterator[KafkaCluster]:
    """``actorlog cluster up`` on the session's ZooKeeper (its own chroot); up when it prints its
    banner (read from its stdout, no polling)."""
    workdir = tmp_path_factory.mktemp("kafka-clients")
    chroot = f"{zookeeper_server.connect_string}/kafka-clients-{uuid.uuid4().hex[:8]}"
    process, _banner = start_cluster_up(
        ["--base-port", "0", "--brokers", "3", "--zookeeper", chroot], workdir
    )
    try:
        data_dir = workdir / "actorlog-data"
        properties = (data_dir / "client.properties").read_text()
        bootstrap = re.search(r"^bootstrap\.servers=(.*)$", properties, re.MULTILINE)
        password = re.search(r'username="admin" password="([^"]+)"', properties)
        assert bootstrap is not None, properties
        assert password is not None, properties
        assert "security.protocol=SASL_PLAINTEXT" in properties
        description = orjson.loads((data_dir / "cluster.json").read_bytes())
        listeners = {
            b["broker_id"]: next(u for u in b["listeners"] if u.startswith("KAFKA://")).removeprefix(
                "KAFKA://"
            )
            for b in description["brokers"]
        }
        assert bootstrap[1] == description["kafka_bootstrap_servers"] == ",".join(listeners.values())
        yield KafkaCluster(bootstrap[1], password[1], listeners)
    finally:
        # The data is thrown away: the brokers are killed rather than stopped one controlled
        # shutdown at a time (about 4 s each), then cluster up notices and ends.
        with contextlib.suppress(OSError, ValueError, KeyError):
            for broker in orjson.loads((workdir / "actorlog-data" / "cluster.json").read_bytes())["brokers"]:
                if broker["pid"]:
                    os.kill(broker["pid"], signal.SIGKILL)
        process.terminate()
        try:
            process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def expected_records(topic: str) -> list[tuple[bytes, bytes]]:
    return [(f"key-{n % 7}".encode(), f"{topic}-{n}".encode()) for n in range(RECORDS)]


def check_read_back(topic: str, read: list[tuple[int, int, bytes, bytes]]) -> None:
    """Every record exactly once; per partition in produce order at consecutive offsets."""
    assert sorted(value for _, _, _, value in read) == sorted(value for _, value in expected_records(topic))
    for partition in range(PARTITIONS):
        offsets = [offset for p, offset, _, _ in read if p == partition]
        assert offsets == list(range(len(offsets)))
        numbers = [int(value.rsplit(b"-", 1)[1]) for p, _, _, value in read if p == partition]
        assert numbers == sorted(numbers)


def test_kafka_python(cluster: KafkaCluster) -> None:
    topic = "kafka-python"
    admin = kafka.KafkaAdminClient(**cluster.kafka_python())
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, PARTITIONS, 3)])
        producer = kafka.KafkaProducer(
            **cluster.kafka_python(enable_idempotence=True, acks="all", compression_type="zstd")
        )
        try:
            futures = [producer.send(topic, key=key, value=value) for key, value in expected_records(topic)]
            producer.flush(timeout=30)
            assert min(future.get(timeout=1).offset for future in futures) == 0
            assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0  # idempotent
        finally:
            producer.close()
        consumer = kafka.KafkaConsumer(**cluster.kafka_python(group_id=None, enable_auto_commit=False))
        try:
            assert {b.port for b in _kafka_python_brokers(consumer)} == {
                int(address.rsplit(":", 1)[1]) for address in cluster.listeners.values()
            }
            consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            read: list[tuple[int, int, bytes, bytes]] = []
            while len(read) < RECORDS:
                for batch in consumer.poll(timeout_ms=10_000).values():
                    read += [(r.partition, r.offset, r.key, r.value) for r in batch]
        finally:
            consumer.close()
        check_read_back(topic, read)
        resource = kafka.admin.ConfigResource("TOPIC", topic, configs={"min.insync.replicas": None})
        described = admin.describe_configs([resource], config_filter="all")
        assert described["topic"][topic]["min.insync.replicas"]["value"] == "2"
        admin.delete_topics([topic])
    finally:
        admin.close()


def _kafka_python_brokers(consumer: kafka.KafkaConsumer) -> set[Any]:
    consumer.topics()  # a Metadata round trip
    brokers: set[Any] = consumer._client.cluster.brokers()
    return brokers


@pytest.mark.asyncio
async def test_aiokafka(cluster: KafkaCluster) -> None:
    topic = "aiokafka"
    admin = aiokafka.admin.AIOKafkaAdminClient(**cluster.aiokafka())
    await admin.start()
    try:
        await admin.create_topics([aiokafka.admin.NewTopic(topic, PARTITIONS, 3)])
        producer = aiokafka.AIOKafkaProducer(
            **cluster.aiokafka(enable_idempotence=True, acks="all", compression_type="zstd")
        )
        await producer.start()
        try:
            sent = [
                await producer.send(topic, key=key, value=value) for key, value in expected_records(topic)
            ]
            await producer.flush()
            assert min([(await future).offset for future in sent]) == 0
            assert producer._txn_manager.producer_id >= 0  # idempotent
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(**cluster.aiokafka(group_id=None, enable_auto_commit=False))
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            read: list[tuple[int, int, bytes, bytes]] = []
            while len(read) < RECORDS:
                for batch in (await consumer.getmany(timeout_ms=10_000)).values():
                    read += [(r.partition, r.offset, r.key or b"", r.value or b"") for r in batch]
        finally:
            await consumer.stop()
        check_read_back(topic, read)
        deleted = await admin.delete_topics([topic])
        assert [error for _, error in deleted.topic_error_codes] == [0]
    finally:
        await admin.close()


def test_confluent_kafka(cluster: KafkaCluster) -> None:
    topic = "confluent-kafka"
    admin = confluent_kafka.admin.AdminClient(cluster.librdkafka())
    (created,) = admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values()
    created.result(timeout=30)
    producer = confluent_kafka.Producer(
        cluster.librdkafka(**{"enable.idempotence": True, "acks": "all", "compression.type": "zstd"})
    )
    failures: list[object] = []

    def delivered(error: confluent_kafka.KafkaError | None, _: object) -> None:
        if error is not None:
            failures.append(error)

    for key, value in expected_records(topic):
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert failures == []
    consumer = confluent_kafka.Consumer(
        cluster.librdkafka(**{"group.id": "assign-only", "enable.auto.commit": False})
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read: list[tuple[int, int, bytes, bytes]] = []
        while len(read) < RECORDS:
            # consume() returns once it has this many, or at its timeout: never ask for more than remain.
            for message in consumer.consume(min(500, RECORDS - len(read)), timeout=10):
                assert message.error() is None, message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None
                assert offset is not None
                read.append((partition, offset, message.key() or b"", message.value() or b""))
    finally:
        consumer.close()
    check_read_back(topic, read)
    resource = ConfigResource("topic", topic)
    (described,) = admin.describe_configs([resource]).values()
    assert described.result(timeout=30)["min.insync.replicas"].value == "2"
    (deleted,) = admin.delete_topics([topic]).values()
    deleted.result(timeout=30)


def test_a_wrong_password_is_refused(cluster: KafkaCluster) -> None:
    wrong = {**cluster.kafka_python(), "sasl_plain_password": "not-the-password"}
    # The right password gets in, so the wrong one's failure to bootstrap is the refused login (kafka-python
    # retries a failed SASL login until its bootstrap times out), not a cluster that is unreachable.
    kafka.KafkaAdminClient(
        **cluster.kafka_python(), request_timeout_ms=5000, bootstrap_timeout_ms=5000
    ).close()
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        kafka.KafkaAdminClient(**wrong, request_timeout_ms=5000, bootstrap_timeout_ms=5000)

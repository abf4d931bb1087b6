"""Real Kafka clients over TLS: ``actorlog cluster up --tls`` and its SASL_SSL Kafka listeners.

One ``cluster up --tls`` of two broker processes (on the session's ZooKeeper) serves the module.
Its ``client.properties`` is read as Kafka's clients read theirs: ``bootstrap.servers`` (the KAFKA
listeners), ``security.protocol=SASL_SSL``, the CA as ``ssl.truststore.location`` (PEM, which
kafka-python takes as ``ssl_cafile``, aiokafka in an ``ssl_context`` and librdkafka as
``ssl.ca.location``) and the SCRAM user. kafka-python, aiokafka and confluent-kafka each produce
idempotently with acks=all to a topic (2 partitions, RF 2) and read every record back once, in
order, by assigning the partitions; the Metadata they get names both brokers at their KAFKA
listeners (registrations carry SASL_SSL, the controller
passes them on). A client trusting another CA refuses the brokers' certificate; a plain-text client
fails against the TLS port without harming the broker, which serves the next client.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from ops.local.tls_certs import LocalCertificates
from ops.local.zookeeper import LocalZooKeeper

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin
    import kafka.errors
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest

import aiokafka
import aiokafka.admin
import aiokafka.helpers
import confluent_kafka
import confluent_kafka.admin
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from tests.support.cluster_up import start_cluster_up

pytestmark = [pytest.mark.integration, pytest.mark.zk]

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 400
PARTITIONS = 2
BROKERS = 2
USER = "admin"


@dataclass(frozen=True)
class TlsCluster:
    data_dir: Path
    properties: dict[str, str]  # client.properties as written
    password: str
    listeners: dict[int, str]  # broker id -> host:port of its KAFKA listener

    @property
    def bootstrap(self) -> str:
        return self.properties["bootstrap.servers"]

    @property
    def ca(self) -> str:
        return self.properties["ssl.truststore.location"]

    def kafka_python(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap.split(","),
            "security_protocol": self.properties["security.protocol"],
            "ssl_cafile": self.ca,
            "sasl_mechanism": self.properties["sasl.mechanism"],
            "sasl_plain_username": USER,
            "sasl_plain_password": self.password,
            **extra,
        }

    def aiokafka(self, **extra: Any) -> dict[str, Any]:
        options = self.kafka_python(**extra)
        del options["ssl_cafile"]
        return {
            **options,
            "bootstrap_servers": self.bootstrap,
            "ssl_context": aiokafka.helpers.create_ssl_context(cafile=self.ca),
        }

    def librdkafka(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.properties["security.protocol"],
            "ssl.ca.location": self.ca,
            "sasl.mechanism": self.properties["sasl.mechanism"],
            "sasl.username": USER,
            "sasl.password": self.password,
            **extra,
        }

    def broker_logs(self) -> str:
        return "".join(
            (self.data_dir / f"broker-{b}" / "broker.log").read_text(errors="replace") for b in self.listeners
        )

    def broker_pids(self) -> list[int]:
        brokers = orjson.loads((self.data_dir / "cluster.json").read_bytes())["brokers"]
        return [int(b["pid"]) for b in brokers]


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: LocalZooKeeper
) -> Iterator[TlsCluster]:
    """``actorlog cluster up --tls`` on the session's ZooKeeper (its own chroot); up when it prints
    its banner (read from its stdout, no polling)."""
    workdir = tmp_path_factory.mktemp("kafka-tls")
    chroot = f"{zookeeper_server.connect_string}/kafka-tls-{uuid.uuid4().hex[:8]}"
    process, _banner = start_cluster_up(
        ["--tls", "--base-port", "0", "--brokers", str(BROKERS), "--zookeeper", chroot], workdir
    )
    data_dir = workdir / "actorlog-data"
    try:
        text = (data_dir / "client.properties").read_text()
        properties = dict(
            line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
        )
        password = re.search(r'username="admin" password="([^"]+)"', text)
        assert password is not None, text
        description = orjson.loads((data_dir / "cluster.json").read_bytes())
        listeners = {
            b["broker_id"]: next(u for u in b["listeners"] if u.startswith("KAFKA://")).removeprefix(
                "KAFKA://"
            )
            for b in description["brokers"]
        }
        assert description["kafka_security_protocol"] == "SASL_SSL"
        assert all(b["endpoint"].startswith("https://") for b in description["brokers"])
        yield TlsCluster(data_dir, properties, password[1], listeners)
    finally:
        # The data is thrown away: the brokers are killed rather than stopped one controlled
        # shutdown at a time, then cluster up notices and ends.
        with contextlib.suppress(OSError, ValueError, KeyError):
            for broker in orjson.loads((data_dir / "cluster.json").read_bytes())["brokers"]:
                if broker["pid"]:
                    os.kill(broker["pid"], signal.SIGKILL)
        process.terminate()
        try:
            process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def expected_records(topic: str) -> list[tuple[bytes, bytes]]:
    return [(f"key-{n % 5}".encode(), f"{topic}-{n}".encode()) for n in range(RECORDS)]


def check_read_back(topic: str, read: list[tuple[int, int, bytes]]) -> None:
    """Every record exactly once; per partition in produce order at consecutive offsets."""
    assert sorted(value for _, _, value in read) == sorted(value for _, value in expected_records(topic))
    for partition in range(PARTITIONS):
        offsets = [offset for p, offset, _ in read if p == partition]
        assert offsets == list(range(len(offsets)))
        numbers = [int(value.rsplit(b"-", 1)[1]) for p, _, value in read if p == partition]
        assert numbers == sorted(numbers)


def test_client_properties_are_kafkas_sasl_ssl(cluster: TlsCluster) -> None:
    assert cluster.properties["security.protocol"] == "SASL_SSL"
    assert cluster.properties["ssl.truststore.type"] == "PEM"  # what Kafka's Java clients need to be told
    assert Path(cluster.ca) == cluster.data_dir / "tls" / "ca.pem"
    assert cluster.bootstrap == ",".join(cluster.listeners.values())
    for broker_id in cluster.listeners:
        server = (cluster.data_dir / f"broker-{broker_id}" / "server.properties").read_text()
        assert "listener.security.protocol.map=HTTPS:SSL,KAFKA:SASL_SSL\n" in server
    assert "on KAFKA://" in cluster.broker_logs()
    assert "(SASL_SSL)" in cluster.broker_logs()


def test_kafka_python_over_tls(cluster: TlsCluster) -> None:
    topic = "kafka-python-tls"
    admin = kafka.KafkaAdminClient(**cluster.kafka_python())
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, PARTITIONS, BROKERS)])
        producer = kafka.KafkaProducer(**cluster.kafka_python(enable_idempotence=True, acks="all"))
        try:
            futures = [producer.send(topic, key=key, value=value) for key, value in expected_records(topic)]
            producer.flush(timeout=30)
            assert min(future.get(timeout=1).offset for future in futures) == 0
            assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0  # idempotent
        finally:
            producer.close()
        consumer = kafka.KafkaConsumer(**cluster.kafka_python(group_id=None, enable_auto_commit=False))
        try:
            consumer.topics()  # a Metadata round trip: every broker at its KAFKA listener
            brokers = consumer._client.cluster.brokers()
            assert {f"{b.host}:{b.port}" for b in brokers} == set(cluster.listeners.values())
            consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            read: list[tuple[int, int, bytes]] = []
            while len(read) < RECORDS:
                for batch in consumer.poll(timeout_ms=10_000).values():
                    read += [(r.partition, r.offset, r.value) for r in batch]
        finally:
            consumer.close()
        check_read_back(topic, read)
        admin.delete_topics([topic])
    finally:
        admin.close()


@pytest.mark.asyncio
async def test_aiokafka_over_tls(cluster: TlsCluster) -> None:
    topic = "aiokafka-tls"
    admin = aiokafka.admin.AIOKafkaAdminClient(**cluster.aiokafka())
    await admin.start()
    try:
        await admin.create_topics([aiokafka.admin.NewTopic(topic, PARTITIONS, BROKERS)])
        producer = aiokafka.AIOKafkaProducer(**cluster.aiokafka(enable_idempotence=True, acks="all"))
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
            read: list[tuple[int, int, bytes]] = []
            while len(read) < RECORDS:
                for batch in (await consumer.getmany(timeout_ms=10_000)).values():
                    read += [(r.partition, r.offset, r.value or b"") for r in batch]
        finally:
            await consumer.stop()
        check_read_back(topic, read)
        await admin.delete_topics([topic])
    finally:
        await admin.close()


def test_confluent_kafka_over_tls(cluster: TlsCluster) -> None:
    topic = "confluent-kafka-tls"
    admin = confluent_kafka.admin.AdminClient(cluster.librdkafka())
    metadata = admin.list_topics(timeout=30)
    assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == set(cluster.listeners.values())
    (created,) = admin.create_topics([NewTopic(topic, PARTITIONS, BROKERS)]).values()
    created.result(timeout=30)
    producer = confluent_kafka.Producer(cluster.librdkafka(**{"enable.idempotence": True, "acks": "all"}))
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
        read: list[tuple[int, int, bytes]] = []
        while len(read) < RECORDS:
            # consume() returns once it has this many, or at its timeout: never ask for more than remain.
            for message in consumer.consume(min(500, RECORDS - len(read)), timeout=10):
                assert message.error() is None, message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None
                assert offset is not None
                read.append((partition, offset, message.value() or b""))
    finally:
        consumer.close()
    check_read_back(topic, read)
    (deleted,) = admin.delete_topics([topic]).values()
    deleted.result(timeout=30)


def test_a_client_trusting_another_ca_is_refused(
    cluster: TlsCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = LocalCertificates(tmp_path / "other-tls")
    other.ensure([1])
    caplog.set_level(logging.INFO, logger="librdkafka")
    admin = confluent_kafka.admin.AdminClient(
        cluster.librdkafka(
            **{"ssl.ca.location": str(other.ca_path), "logger": logging.getLogger("librdkafka")}
        )
    )
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(0)  # delivers librdkafka's log lines to the logger
    assert "certificate verify failed" in caplog.text


def test_a_plain_text_client_fails_and_the_broker_goes_on(cluster: TlsCluster) -> None:
    # kafka-python told SASL_PLAINTEXT: its ApiVersions is no TLS record, the broker hangs up.
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        kafka.KafkaAdminClient(
            **cluster.kafka_python(security_protocol="SASL_PLAINTEXT", bootstrap_timeout_ms=2000)
        )
    # The same by hand: a Kafka frame in clear text gets the end of the stream, at once.
    host, port = next(iter(cluster.listeners.values())).rsplit(":", 1)
    request = KpApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id="plain")
    with socket.create_connection((host, int(port)), timeout=10) as plain:
        plain.sendall(bytes(request.encode(header=True, framed=True)))
        with contextlib.suppress(ConnectionResetError):
            assert plain.recv(1024) == b""
    # The brokers are unharmed: still running, nothing but debug noise logged, the next client served.
    for pid in cluster.broker_pids():
        os.kill(pid, 0)
    assert "Traceback" not in cluster.broker_logs()
    metadata = confluent_kafka.admin.AdminClient(cluster.librdkafka()).list_topics(timeout=30)
    assert len(metadata.brokers) == BROKERS

"""The Admin client against three real broker processes and a real ZooKeeper: topics are created,
grown, configured and deleted through any broker's admin actor, and the controller acts on the
znodes it writes. Producer ids come from blocks claimed in /latest_producer_id_block."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from actors.common.client_protocol import InitProducerIdRequest, InitProducerIdResponse
from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import ADMIN_ACTOR_NAME
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.clients.admin import Admin
from runtime.ref import ActorRef
from tests.support.process_cluster import SECRET, ProcessCluster, free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]


@pytest_asyncio.fixture
async def cluster(zk_connect_string: str, tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    properties = {"zookeeper.session.timeout.ms": "4000", "num.partitions": "2"}
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        yield cluster


def bootstrap(cluster: ProcessCluster, *broker_ids: int) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in broker_ids or (1,))


async def test_create_describe_grow_configure_and_delete_a_topic(cluster: ProcessCluster) -> None:
    async with Admin(bootstrap(cluster, 2), secret=SECRET) as admin:
        await admin.create_topic(
            "orders", num_partitions=3, replication_factor=3, configs={"retention.ms": "3600000"}
        )
        # Returned only once every partition has a leader in the broker's metadata.
        (description,) = await admin.describe_topics(["orders"])
        assert [p.partition for p in description.partitions] == [0, 1, 2]
        for partition in description.partitions:
            assert partition.leader in (1, 2, 3)
            assert sorted(partition.replicas) == [1, 2, 3]
            assert partition.leader == partition.replicas[0]  # the preferred replica leads first
            assert partition.leader_epoch == 0
        leaders = sorted(p.leader for p in description.partitions)
        assert leaders == [1, 2, 3], "rack-unaware assignment spreads leaders over brokers"

        # Defaults: num.partitions=2 from the brokers' configuration, RF 3 (the project's default).
        await admin.create_topic("defaults")
        (defaults,) = await admin.describe_topics(["defaults"])
        assert (len(defaults.partitions), defaults.replication_factor) == (2, 3)
        assert await admin.list_topics() == ["defaults", "orders"]

        with pytest.raises(KafkaError) as exists:
            await admin.create_topic("orders", num_partitions=1)
        assert exists.value.error_code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert "Topic 'orders' already exists." in str(exists.value)
        with pytest.raises(KafkaError) as too_many:
            await admin.create_topic("wide", num_partitions=1, replication_factor=4)
        assert too_many.value.error_code is ErrorCode.INVALID_REPLICATION_FACTOR
        assert "Replication factor: 4 larger than available brokers: 3." in str(too_many.value)
        with pytest.raises(KafkaError) as illegal:
            await admin.create_topic("bad/name")
        assert illegal.value.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
        await admin.create_topic("metrics.in", num_partitions=1)
        with pytest.raises(KafkaError) as collides:
            await admin.create_topic("metrics_in")
        assert collides.value.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
        with pytest.raises(KafkaError) as bad_config:
            await admin.create_topic("configured", configs={"retention.ms": "soon"})
        assert bad_config.value.error_code is ErrorCode.INVALID_CONFIG
        with pytest.raises(KafkaError) as unknown_config:
            await admin.create_topic("configured", configs={"retention.msec": "1"})
        assert unknown_config.value.error_code is ErrorCode.INVALID_CONFIG
        assert "configured" not in await admin.list_topics()

        # Validate-only writes nothing.
        await admin.create_topic("dry-run", num_partitions=1, validate_only=True)
        assert "dry-run" not in await admin.list_topics()

        # Configs: the override, the brokers' static min.insync.replicas, Kafka's defaults.
        configs = await admin.describe_topic_config("orders")
        assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
            "3600000",
            "DYNAMIC_TOPIC_CONFIG",
        )
        assert configs["min.insync.replicas"].value == "2"
        assert configs["segment.bytes"].is_default
        await admin.alter_topic_config(
            "orders", set_configs={"min.insync.replicas": "3"}, delete_configs=["retention.ms"]
        )
        configs = await admin.describe_topic_config("orders")
        assert configs["min.insync.replicas"].value == "3"
        assert configs["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
        changes = await cluster.admin.get_children(zk_data.CONFIG_CHANGES_PATH)
        assert any(name.startswith(zk_data.CONFIG_CHANGE_PREFIX) for name in changes)
        with pytest.raises(KafkaError) as bad_alter:
            await admin.alter_topic_config("orders", set_configs={"min.insync.replicas": "0"})
        assert bad_alter.value.error_code is ErrorCode.INVALID_CONFIG

        # Grow: the controller's partition-modification watch starts the new partitions.
        await admin.create_partitions("orders", 5)
        (grown,) = await admin.describe_topics(["orders"])
        assert [p.partition for p in grown.partitions] == [0, 1, 2, 3, 4]
        assert all(p.leader >= 0 and len(p.isr) == 3 for p in grown.partitions)
        state, _ = await cluster.zk_partition_state(TopicPartition("orders", 4))
        assert state.leader_epoch == 0
        with pytest.raises(KafkaError) as shrink:
            await admin.create_partitions("orders", 2)
        assert shrink.value.error_code is ErrorCode.INVALID_PARTITIONS

        # Delete: returns once the controller removed the topic everywhere.
        results = await admin.delete_topics(["defaults", "nope"])
        assert results["defaults"] is None
        unknown = results["nope"]
        assert unknown is not None
        assert unknown.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await admin.list_topics() == ["metrics.in", "orders"]
        assert await cluster.admin.exists(zk_data.topic_path("defaults")) is None
        assert await cluster.admin.exists(zk_data.delete_topic_path("defaults")) is None


async def test_producer_ids_are_unique_across_brokers_and_blocks(cluster: ProcessCluster) -> None:
    async def init(broker_id: int) -> int:
        response = await cluster.client.ask(
            ActorRef(node_id=str(broker_id), name=ADMIN_ACTOR_NAME),
            InitProducerIdRequest(),
            timeout_ms=10_000,
        )
        assert isinstance(response, InitProducerIdResponse)
        assert response.error_code is ErrorCode.NONE
        assert response.producer_epoch == 0
        return response.producer_id

    ids = await asyncio.gather(*(init(1 + i % 3) for i in range(30)))
    assert len(set(ids)) == 30
    # Each broker claimed its own block of 1000: ids from different brokers are 1000 apart.
    assert sorted({producer_id // zk_data.PRODUCER_ID_BLOCK_SIZE for producer_id in ids}) == [0, 1, 2]
    data, _ = await cluster.admin.get(zk_data.LATEST_PRODUCER_ID_BLOCK_PATH)
    assert zk_data.decode_producer_id_block(data).block_end == 2999
    transactional = await cluster.client.ask(
        ActorRef(node_id="1", name=ADMIN_ACTOR_NAME),
        InitProducerIdRequest(transactional_id="t"),
        timeout_ms=10_000,
    )
    assert isinstance(transactional, InitProducerIdResponse)
    assert transactional.error_code is ErrorCode.INVALID_REQUEST


async def test_a_wrong_secret_is_a_clear_error(cluster: ProcessCluster) -> None:
    async with Admin(bootstrap(cluster, 1), secret="not-the-secret-of-this-cluster") as admin:
        with pytest.raises(KafkaError) as refused:
            await admin.list_topics()
    assert refused.value.error_code is ErrorCode.SASL_AUTHENTICATION_FAILED


async def test_an_unreachable_bootstrap_server_is_skipped(cluster: ProcessCluster) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with Admin(f"{dead},{bootstrap(cluster, 3)}", secret=SECRET) as admin:
        # Created only once broker 3's metadata (from the controller) shows the leader, so its
        # metadata then lists the live brokers too.
        await admin.create_topic("probe", num_partitions=1)
        cluster_description = await admin.describe_cluster()
    assert sorted(b.broker_id for b in cluster_description.brokers) == [1, 2, 3]
    assert cluster_description.controller_id in (1, 2, 3)

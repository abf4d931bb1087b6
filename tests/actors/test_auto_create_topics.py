"""auto.create.topics.enable: a Metadata request naming an unknown topic creates it (broker
defaults) when the broker allows it and the request does; tools that only look never create.
The brokers run the real controller, which then elects the new topic's leader."""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.names import broker_ref
from actors.common.protocol import MetadataRequest, MetadataResponse
from actors.common.types import TopicPartition
from actors.server import zk_data
from tests.support.cluster import InProcessCluster

pytestmark = pytest.mark.asyncio


async def metadata(cluster: InProcessCluster, topic: str, *, allow: bool) -> MetadataResponse:
    response = await cluster.client_node.ask(
        broker_ref(1),
        MetadataRequest(topics=(topic,), allow_auto_topic_creation=allow),
        timeout_ms=10_000,
    )
    assert isinstance(response, MetadataResponse)
    await cluster.settle()
    return response


async def test_an_unknown_topic_is_created_when_allowed() -> None:
    async with InProcessCluster(config_overrides={"auto_create_topics_enable": True}) as cluster:
        await cluster.start_brokers(1, 2, 3)
        (looked,) = (await metadata(cluster, "looked-at", allow=False)).topics
        assert looked.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert cluster.zookeeper.peek(zk_data.topic_path("looked-at")) is None

        (created,) = (await metadata(cluster, "written-to", allow=True)).topics
        assert created.error_code is ErrorCode.LEADER_NOT_AVAILABLE  # until the controller elects
        found = cluster.zookeeper.peek(zk_data.topic_path("written-to"))
        assert found is not None
        assignment = zk_data.decode_topic_assignment("written-to", found[0])
        assert [len(replicas) for replicas in assignment.partitions.values()] == [3]  # RF 3, 1 partition
        # The controller elects the first replica of the assignment; the next Metadata names it.
        state = await cluster.wait_for_leader(TopicPartition("written-to", 0))
        assert state.leader == assignment.partitions[0][0]
        (led,) = (await metadata(cluster, "written-to", allow=True)).topics
        assert (led.error_code, led.partitions[0].leader) == (ErrorCode.NONE, state.leader)

        # Kafka's createTopic answers what Topic.validate threw.
        (illegal,) = (await metadata(cluster, "bad/name", allow=True)).topics
        assert illegal.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_nothing_is_created_by_default() -> None:
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2, 3)
        (answer,) = (await metadata(cluster, "typo-topic", allow=True)).topics
        assert answer.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert cluster.zookeeper.peek(zk_data.topic_path("typo-topic")) is None

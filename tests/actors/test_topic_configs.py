"""Topic-level overrides reach the partitions: a broker reads ``/config/topics/<t>`` before it
applies a LeaderAndIsr for the topic, and applies ``/config/changes`` notifications afterwards.
Topics are created as ``AdminZkClient`` does and led by the real controller's choice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.server import zk_data
from tests.support.cluster import InProcessCluster, batch

pytestmark = pytest.mark.asyncio

TP = TopicPartition("strict", 0)
REPLICAS = {0: (1, 2, 3)}


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2, 3)
        # Broker 3 is a replica that is down: the ISR stays [1, 2] (it cannot rejoin).
        await cluster.stop_broker(3)
        yield cluster


async def set_topic_config(
    cluster: InProcessCluster, topic: str, config: dict[str, str], *, notify: bool
) -> None:
    """Write ``/config/topics/<topic>``, and with ``notify`` the ``/config/changes`` notification
    (Kafka's ``AdminZkClient.changeTopicConfig``)."""
    operator = cluster.operator
    path = zk_data.topic_config_path(topic)
    if await operator.exists(path) is None:
        await operator.create(path, zk_data.encode_topic_config(config))
    else:
        await operator.set(path, zk_data.encode_topic_config(config), version=-1)
    if notify:
        await operator.create(
            f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
            zk_data.encode_config_change_notification(topic),
            sequential=True,
        )
    await cluster.settle()


async def produce_error(cluster: InProcessCluster) -> ErrorCode:
    response = await cluster.complete(cluster.produce(1, TP, batch(b"x")))
    return response.partitions[0].error_code


async def test_the_topics_min_insync_replicas_applies_from_the_first_leader_and_isr(
    cluster: InProcessCluster,
) -> None:
    # The broker default is 2; the topic says 3. With an ISR of 2 an acks=all write must be
    # refused (with the broker default it would be acknowledged).
    await cluster.create_topic(TP.topic, REPLICAS, configs={"min.insync.replicas": "3"})
    assert cluster.zk_partition_state(TP)[0].isr == (1, 2)
    assert await produce_error(cluster) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.log(1, TP).log_end_offset == 0


async def test_a_config_change_notification_updates_running_partitions(cluster: InProcessCluster) -> None:
    await cluster.create_topic(TP.topic, REPLICAS)
    assert await produce_error(cluster) is ErrorCode.NONE  # the broker default, 2, is met
    await set_topic_config(
        cluster, TP.topic, {"min.insync.replicas": "3", "retention.ms": "60000"}, notify=True
    )
    assert await produce_error(cluster) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert cluster.log(1, TP).config.retention_ms == 60_000
    # Followers apply it too (their log settings; the policy matters once they lead).
    assert cluster.log(2, TP).config.retention_ms == 60_000
    await set_topic_config(cluster, TP.topic, {}, notify=True)
    assert await produce_error(cluster) is ErrorCode.NONE
    assert (
        cluster.log(1, TP).config.retention_ms
        == cluster.log(1, TopicPartition("strict", 0)).config.retention_ms
    )


async def test_a_change_written_without_notification_is_not_applied_until_announced(
    cluster: InProcessCluster,
) -> None:
    """Kafka's contract: /config/topics is read at creation; later edits need the notification."""
    await cluster.create_topic(TP.topic, REPLICAS)
    await set_topic_config(cluster, TP.topic, {"min.insync.replicas": "3"}, notify=False)
    assert await produce_error(cluster) is ErrorCode.NONE
    await set_topic_config(cluster, "other-topic", {"retention.ms": "1000"}, notify=True)
    assert await produce_error(cluster) is ErrorCode.NONE  # a notification for another topic
    await set_topic_config(cluster, TP.topic, {"min.insync.replicas": "3"}, notify=True)
    assert await produce_error(cluster) is ErrorCode.NOT_ENOUGH_REPLICAS

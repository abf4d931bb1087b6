"""``Consumer.offsets_for_times`` (kafka-python's signature and answer shape) against an in-process
cluster on virtual time: the façade's requests reach the real brokers and partition leaders over
the simulated network instead of HTTP (``SimClientNode`` stands in for its ``ClientNode``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, cast

import pytest
import pytest_asyncio

from actors.common.names import broker_ref
from actors.common.protocol import BrokerEndpoint
from actors.common.types import TopicPartition
from ops.clients.connection import ClientNode
from ops.clients.consumer import Consumer, OffsetAndTimestamp
from runtime.ref import ActorRef
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.system import ActorSystem
from tests.support.cluster import InProcessCluster

pytestmark = pytest.mark.asyncio

T = 1_700_000_000_000
TOPIC = "clicks"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


class SimClientNode:
    """What the Consumer façade uses of its ``ClientNode``, over the cluster's client node."""

    def __init__(self, system: ActorSystem, bootstrap: Sequence[int]) -> None:
        self.system = system
        self.bootstrap_refs = tuple(broker_ref(b) for b in bootstrap)
        self.known_brokers: dict[int, BrokerEndpoint] = {}
        self.asked: list[tuple[ActorRef, object]] = []

    def learn(self, brokers: Iterable[BrokerEndpoint]) -> None:
        self.known_brokers.update((b.broker_id, b) for b in brokers)

    async def ask_first(self, targets: Sequence[ActorRef], message: object, *, timeout_ms: int) -> Any:
        self.asked.append((targets[0], message))
        return await self.system.ask(targets[0], message, timeout_ms=timeout_ms)


def stamped(*timestamps: int) -> bytes:
    return build_batch([SimpleRecord(b"c%d" % i, timestamp=ts) for i, ts in enumerate(timestamps)])


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    async with InProcessCluster() as cluster:
        await cluster.start_brokers(1, 2)
        await cluster.create_topic(TOPIC, {0: (1, 2), 1: (2, 1)})
        for tp, timestamps in ((P0, (T + 100, T + 50, T + 300)), (P1, (T + 10, T + 20))):
            leader = cluster.current_leader_and_isr(tp).leader
            response = await cluster.complete(cluster.produce(leader, tp, stamped(*timestamps)))
            assert response.partitions[0].error_code.name == "NONE"
        yield cluster


def consumer_on(cluster: InProcessCluster) -> tuple[Consumer, SimClientNode]:
    consumer = Consumer("unused:9092", secret="unused")
    node = SimClientNode(cluster.client_node, bootstrap=(1,))
    consumer._node = cast("ClientNode", node)
    return consumer, node


async def test_offsets_for_times_answers_each_partition_from_its_leader(cluster: InProcessCluster) -> None:
    consumer, _node = consumer_on(cluster)
    epoch0 = cluster.current_leader_and_isr(P0).leader_epoch
    epoch1 = cluster.current_leader_and_isr(P1).leader_epoch
    assert cluster.current_leader_and_isr(P0).leader != cluster.current_leader_and_isr(P1).leader
    found = await consumer.offsets_for_times({P0: T + 60, P1: T + 15})
    assert found == {
        P0: OffsetAndTimestamp(offset=0, timestamp=T + 100, leader_epoch=epoch0),
        P1: OffsetAndTimestamp(offset=1, timestamp=T + 20, leader_epoch=epoch1),
    }
    assert await consumer.offsets_for_times({P0: T + 150, P1: T + 21}) == {
        P0: OffsetAndTimestamp(2, T + 300, epoch0),
        P1: None,  # no record of P1 has a timestamp at or after T+21
    }


async def test_the_other_offset_queries_still_answer(cluster: InProcessCluster) -> None:
    consumer, _node = consumer_on(cluster)
    assert await consumer.beginning_offsets([P0, P1]) == {P0: 0, P1: 0}
    assert await consumer.end_offsets([P0, P1]) == {P0: 3, P1: 2}


async def test_a_negative_timestamp_is_refused_before_anything_is_sent(cluster: InProcessCluster) -> None:
    consumer, node = consumer_on(cluster)
    with pytest.raises(ValueError, match="cannot be negative"):
        await consumer.offsets_for_times({P0: T, P1: -1})
    assert await consumer.offsets_for_times({}) == {}
    assert node.asked == []

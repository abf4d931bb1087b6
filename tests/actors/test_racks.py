"""Racks on virtual time: topics created (and grown) through a broker's admin actor on brokers with
``broker.rack`` spread each partition over the racks; a cluster where some brokers have a rack
and others not refuses; the active controller counts the partitions whose replicas break the rack
constraint (``kafka_controller_kafkacontroller_rackconstraintviolatingpartitioncount``), and the
other controllers report 0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest
import pytest_asyncio

from actors.common.client_protocol import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from actors.common.errors import ErrorCode
from actors.common.names import admin_ref
from actors.common.racks import rack_constraint_broken
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.broker_metrics import _controller_families
from tests.support.cluster import InProcessCluster

pytestmark = pytest.mark.asyncio

GAUGE = "kafka_controller_kafkacontroller_rackconstraintviolatingpartitioncount"
ZONES = {1: "zone-a", 2: "zone-a", 3: "zone-b", 4: "zone-b"}


async def cluster_of(racks: Mapping[int, str | None]) -> InProcessCluster:
    cluster = InProcessCluster(
        broker_ids=tuple(sorted(racks)),
        racks=dict(racks),
        config_overrides={"min_insync_replicas": 1, "auto_leader_rebalance_enable": False},
    )
    await cluster.__aenter__()
    try:
        await cluster.start_brokers(*sorted(racks))
    except BaseException:
        await cluster.__aexit__(None, None, None)
        raise
    return cluster


@pytest_asyncio.fixture
async def zoned() -> AsyncIterator[InProcessCluster]:
    cluster = await cluster_of(ZONES)
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


async def create(cluster: InProcessCluster, topic: CreatableTopic, via: int = 1) -> CreatableTopicResult:
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(via), CreateTopicsRequest(topics=(topic,)), timeout_ms=60_000),
        step_ms=10,
    )
    assert isinstance(response, CreateTopicsResponse)
    (result,) = response.topics
    return result


async def grow(cluster: InProcessCluster, topic: str, count: int, via: int = 1) -> CreatePartitionsResult:
    request = CreatePartitionsRequest(topics=(CreatePartitionsTopic(name=topic, count=count),))
    response = await cluster.complete(
        cluster.client_node.ask(admin_ref(via), request, timeout_ms=60_000), step_ms=10
    )
    assert isinstance(response, CreatePartitionsResponse)
    (result,) = response.results
    return result


def zk_assignment(cluster: InProcessCluster, topic: str) -> dict[int, tuple[int, ...]]:
    found = cluster.zookeeper.peek(zk_data.topic_path(topic))
    assert found is not None
    data, _ = found
    return dict(zk_data.decode_topic_assignment(topic, data).partitions)


def gauges(cluster: InProcessCluster) -> dict[int, int]:
    """Each running broker's exported value of the gauge (its controller's statistics)."""
    values = {}
    for broker_id in cluster.brokers:
        controller = cluster.controller_actor(broker_id)
        if controller is None:
            continue
        (family,) = [f for f in _controller_families(controller.statistics()) if f.name == GAUGE]
        (sample,) = family.samples
        values[broker_id] = int(sample.value)
    return values


async def test_a_created_topic_spreads_each_partition_over_the_racks(zoned: InProcessCluster) -> None:
    result = await create(zoned, CreatableTopic(name="orders", num_partitions=8, replication_factor=2))
    assert result.error_code is ErrorCode.NONE, result
    assignment = zk_assignment(zoned, "orders")
    assert sorted(assignment) == list(range(8))
    for replicas in assignment.values():
        assert len(replicas) == 2
        assert {ZONES[b] for b in replicas} == {"zone-a", "zone-b"}, assignment
    # Leaders still go round-robin over every broker.
    assert sorted(replicas[0] for replicas in assignment.values()) == [1, 1, 2, 2, 3, 3, 4, 4]
    # Added partitions follow the same rule.
    grown = await grow(zoned, "orders", 12)
    assert grown.error_code is ErrorCode.NONE, grown
    assignment = zk_assignment(zoned, "orders")
    assert sorted(assignment) == list(range(12))
    assert not any(rack_constraint_broken(r, ZONES) for r in assignment.values()), assignment
    await zoned.wait_for_leader(TopicPartition("orders", 11))
    assert gauges(zoned) == {1: 0, 2: 0, 3: 0, 4: 0}


async def test_the_active_controller_counts_partitions_that_break_the_rack_constraint(
    zoned: InProcessCluster,
) -> None:
    # An explicit assignment is taken as given (Kafka does not check it against racks).
    await zoned.create_topic("pinned", {0: (1, 2), 1: (1, 3), 2: (3, 4)}, through_admin=2)
    # A single replica covers as many racks as it can.
    await zoned.create_topic("single", {0: (2,)})
    controller = zoned.controller_id()
    # Partitions 0 (zone-a twice) and 2 (zone-b twice) break it; 1 spans both zones.
    expected = {b: 2 if b == controller else 0 for b in ZONES}
    assert gauges(zoned) == expected
    # The controller judges by the racks of the brokers it sees registered: broker 2 comes back
    # in zone-b, which mends partition 0.
    await zoned.stop_broker(2)
    zoned.racks[2] = "zone-b"
    await zoned.start_broker(2)
    new_controller = zoned.controller_id()
    assert gauges(zoned) == {b: 1 if b == new_controller else 0 for b in ZONES}


async def test_some_brokers_with_a_rack_and_others_without_are_refused() -> None:
    cluster = await cluster_of({1: "zone-a", 2: "zone-b", 3: None})
    try:
        result = await create(cluster, CreatableTopic(name="orders", num_partitions=3, replication_factor=2))
        assert result.error_code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert (
            result.error_message == "Not all brokers have rack information for replica rack aware assignment."
        )
        assert cluster.zookeeper.peek(zk_data.topic_path("orders")) is None
        # An explicit assignment needs no racks to create a topic...
        await cluster.create_topic("pinned", {0: (1, 3)}, through_admin=1)
        # ...but adding partitions reads the brokers rack-enforced first, as Kafka does.
        grown = await grow(cluster, "pinned", 2)
        assert grown.error_code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert grown.error_message == (
            "Not all brokers have rack information. Add --disable-rack-aware in command line"
            " to make replica assignment without rack information."
        )
        # Partition 0 spans zone-a and the rack-less broker 3: two groups, nothing broken.
        assert sum(gauges(cluster).values()) == 0
    finally:
        await cluster.__aexit__(None, None, None)

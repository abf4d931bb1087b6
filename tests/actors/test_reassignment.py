"""Partition reassignment (KIP-455, Kafka 2.4's controller) on virtual time: asked of the active
controller with AlterPartitionReassignments / ListPartitionReassignments or through the
``/admin/reassign_partitions`` znode (``actors/controller/logic.py``'s reassignment section), and
what brokers report meanwhile (KIP-352's under-replicated rule)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.names import controller_ref
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    ReassignablePartition,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from runtime.transport.sim import LinkBehaviour
from tests.support.cluster import InProcessCluster, batch, started

pytestmark = pytest.mark.asyncio

SESSION_MS = 4_000
CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 2_000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
    "min_insync_replicas": 1,
    "auto_leader_rebalance_enable": False,
}
TP = TopicPartition("orders", 0)


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    # Broker 1 starts first: it is the controller.
    cluster = await started(
        1,
        2,
        3,
        4,
        session_timeout_ms=SESSION_MS,
        link=LinkBehaviour(min_delay_ms=1, max_delay_ms=1),
        **CONFIG,
    )
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


async def alter(
    cluster: InProcessCluster, wanted: dict[TopicPartition, tuple[int, ...] | None], *, via: int | None = None
) -> dict[TopicPartition, ErrorCode]:
    """AlterPartitionReassignments asked of the controller (or of broker ``via``'s controller)."""
    request = AlterPartitionReassignmentsRequest(
        partitions=tuple(
            ReassignablePartition(topic=tp.topic, partition=tp.partition, replicas=replicas)
            for tp, replicas in wanted.items()
        )
    )
    target = cluster.controller_id() if via is None else via
    response = await cluster.complete(
        cluster.client_node.ask(controller_ref(target), request, timeout_ms=30_000), step_ms=10
    )
    assert isinstance(response, AlterPartitionReassignmentsResponse)
    assert response.error_code is ErrorCode.NONE, response
    return {TopicPartition(r.topic, r.partition): r.error_code for r in response.results}


async def ongoing(cluster: InProcessCluster, *tps: TopicPartition) -> list[OngoingPartitionReassignment]:
    request = ListPartitionReassignmentsRequest(partitions=tps or None)
    response = await cluster.complete(
        cluster.client_node.ask(controller_ref(cluster.controller_id()), request, timeout_ms=30_000),
        step_ms=10,
    )
    assert isinstance(response, ListPartitionReassignmentsResponse)
    assert response.error_code is ErrorCode.NONE, response
    return list(response.reassignments)


def topic_znode(cluster: InProcessCluster, topic: str = "orders") -> zk_data.TopicAssignment:
    found = cluster.zookeeper.peek(zk_data.topic_path(topic))
    assert found is not None
    return zk_data.decode_topic_assignment(topic, found[0])


async def produce_some(cluster: InProcessCluster, count: int = 5) -> None:
    for i in range(count):
        response = await cluster.complete(cluster.produce(2, TP, batch(f"v{i}".encode())))
        (partition,) = response.partitions
        assert partition.error_code is ErrorCode.NONE, response


async def test_a_reassignment_onto_a_new_broker_completes_and_moves_the_leader_off_a_removed_one(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    await produce_some(cluster)
    assert cluster.zk_partition_state(TP)[0].leader == 2

    assert await alter(cluster, {TP: (3, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.assignment(TP) == (3, 4), within_ms=30_000, step_ms=10)
    await cluster.wait_for(lambda: cluster.partition_actor(2, TP) is None, within_ms=30_000, step_ms=10)

    state, _ = cluster.zk_partition_state(TP)
    assert state.leader == 3  # the first live in-sync target replica: 2 was being removed
    assert set(state.isr) == {3, 4}
    assert topic_znode(cluster).reassigning == frozenset()
    assert cluster.zookeeper.peek(zk_data.REASSIGN_PARTITIONS_PATH) is None
    assert await ongoing(cluster) == []
    # The new replica has everything; the removed one's log is gone.
    assert cluster.log(4, TP).log_end_offset == cluster.log(3, TP).log_end_offset == 5
    assert cluster.partition_actor(2, TP) is None
    follower = cluster.partition(4, TP).statistics()
    assert follower.reassignment_bytes_in_total > 0
    assert follower.replication_bytes_in_total >= follower.reassignment_bytes_in_total


async def test_while_the_new_replica_lags_it_is_listed_adding_and_not_under_replicated_then_cancelled(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    await produce_some(cluster)
    cut = cluster.cut(4, 2)  # 4 cannot fetch from the leader
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.partition_actor(4, TP) is not None, within_ms=10_000, step_ms=10)
    await cluster.advance(3_000)

    assert await ongoing(cluster, TP, TopicPartition("orders", 7)) == [
        OngoingPartitionReassignment(
            topic="orders", partition=0, replicas=(2, 4, 3), adding_replicas=(4,), removing_replicas=(3,)
        )
    ]
    znode = topic_znode(cluster)
    assert dict(znode.partitions) == {0: (2, 4, 3)}
    assert (dict(znode.adding_replicas), dict(znode.removing_replicas)) == ({0: (4,)}, {0: (3,)})
    leader = cluster.partition(2, TP).statistics()
    assert leader.adding_replicas == (4,)
    assert leader.reassigning
    assert not leader.under_replicated  # KIP-352: 4 is being added, not missing
    assert leader.isr == (2, 3)

    # Cancel: back to [2, 3]; the added replica is stopped and its log deleted.
    assert await alter(cluster, {TP: None}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.assignment(TP) == (2, 3), within_ms=10_000, step_ms=10)
    cluster.heal(cut)
    await cluster.wait_for(lambda: cluster.partition_actor(4, TP) is None, within_ms=10_000, step_ms=10)
    assert topic_znode(cluster).reassigning == frozenset()
    assert await ongoing(cluster) == []
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, set(state.isr)) == (2, {2, 3})
    assert not cluster.partition(2, TP).statistics().reassigning
    # Nothing left to cancel.
    assert await alter(cluster, {TP: None}) == {TP: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


async def test_a_controller_failover_halfway_resumes_a_zookeeper_reassignment_and_completes_it(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    await produce_some(cluster)
    cut = cluster.cut(4, 2)
    # As kafka-reassign-partitions.sh --zookeeper does.
    await cluster.operator.create(
        zk_data.REASSIGN_PARTITIONS_PATH,
        zk_data.encode_reassign_partitions({zk_data.TopicPartition(topic="orders", partition=0): (3, 4)}),
    )
    await cluster.wait_for(lambda: topic_znode(cluster).reassigning == {0}, within_ms=10_000, step_ms=10)
    await cluster.advance(2_000)
    assert cluster.assignment(TP) == (3, 4, 2)

    await cluster.kill(1)  # the controller
    await cluster.wait_for(lambda: cluster.controller_id() not in (-1, 1), within_ms=SESSION_MS + 10_000)
    cluster.heal(cut)
    await cluster.wait_for(lambda: cluster.assignment(TP) == (3, 4), within_ms=30_000, step_ms=10)
    await cluster.wait_for(lambda: cluster.partition_actor(2, TP) is None, within_ms=10_000, step_ms=10)
    assert cluster.zookeeper.peek(zk_data.REASSIGN_PARTITIONS_PATH) is None
    assert topic_znode(cluster).reassigning == frozenset()
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, set(state.isr)) == (3, {3, 4})
    assert cluster.log(4, TP).log_end_offset == 5


async def test_targets_that_cannot_be_are_refused_with_kafkas_errors(cluster: InProcessCluster) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    missing = TopicPartition("orders", 5)
    results = await alter(
        cluster,
        {TP: (2, 9), missing: (2, 3), TopicPartition("nope", 0): None},
    )
    assert results == {
        TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # broker 9 does not exist
        missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await alter(cluster, {TP: (2, 2)}) == {TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert await alter(cluster, {TP: ()}) == {TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert await alter(cluster, {TP: None}) == {TP: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert cluster.assignment(TP) == (2, 3)
    assert topic_znode(cluster).reassigning == frozenset()

    # A dead broker is no target either; and only the active controller answers.
    await cluster.kill(4)
    await cluster.wait_until_gone(4)
    await cluster.settle()
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    request = AlterPartitionReassignmentsRequest(
        partitions=(ReassignablePartition(topic="orders", partition=0, replicas=(2, 3)),)
    )
    response = await cluster.complete(
        cluster.client_node.ask(controller_ref(2), request, timeout_ms=30_000), step_ms=10
    )
    assert isinstance(response, AlterPartitionReassignmentsResponse)
    assert response.error_code is ErrorCode.NOT_CONTROLLER


async def test_a_new_reassignment_replaces_one_in_progress_and_a_deleted_topic_ends_it(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    cut = cluster.cut(4, 2)
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.partition_actor(4, TP) is not None, within_ms=10_000, step_ms=10)
    # Replaced: 4 is no longer wanted (stopped and deleted), 1 is added instead.
    assert await alter(cluster, {TP: (1, 2)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.partition_actor(4, TP) is None, within_ms=10_000, step_ms=10)
    await cluster.wait_for(lambda: cluster.assignment(TP) == (1, 2), within_ms=30_000, step_ms=10)
    await cluster.wait_for(lambda: cluster.partition_actor(3, TP) is None, within_ms=10_000, step_ms=10)
    assert cluster.zk_partition_state(TP)[0].leader == 2

    # A reassignment stuck behind the cut ends when its topic is deleted.
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.partition_actor(4, TP) is not None, within_ms=10_000, step_ms=10)
    await cluster.operator.create(zk_data.delete_topic_path("orders"))
    await cluster.wait_for(
        lambda: cluster.zookeeper.peek(zk_data.topic_path("orders")) is None, within_ms=30_000, step_ms=10
    )
    cluster.heal(cut)
    await cluster.wait_for(
        lambda: all(cluster.partition_actor(b, TP) is None for b in (1, 2, 4)), within_ms=10_000, step_ms=10
    )
    assert await ongoing(cluster) == []


async def test_a_replica_removed_while_its_broker_is_down_is_deleted_when_it_starts_again(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    await produce_some(cluster)
    await cluster.kill(3)
    await cluster.wait_until_gone(3)
    # Moving off the dead broker completes without it: 4 catches up from 2.
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.assignment(TP) == (2, 4), within_ms=30_000, step_ms=10)
    await cluster.start_broker(3)
    await cluster.wait_for(lambda: super(InProcessCluster, cluster).log(3, TP) is None, within_ms=10_000)
    assert cluster.partition_actor(3, TP) is None


async def test_a_new_partition_does_not_start_from_a_stale_log_of_the_same_name(
    cluster: InProcessCluster,
) -> None:
    """The controller that knew of broker 3's removed replica is gone: 3 still has the old log when
    the topic is deleted and created again with a replica on 3."""
    await cluster.create_topic("orders", {0: (2, 3)})
    await cluster.wait_for_isr(TP, (2, 3), within_ms=30_000)
    await produce_some(cluster)
    await cluster.kill(3)
    await cluster.wait_until_gone(3)
    assert await alter(cluster, {TP: (2, 4)}) == {TP: ErrorCode.NONE}
    await cluster.wait_for(lambda: cluster.assignment(TP) == (2, 4), within_ms=30_000, step_ms=10)
    await cluster.kill(1)  # the controller, which remembered the replica left on 3
    await cluster.wait_for(lambda: cluster.controller_id() not in (-1, 1), within_ms=SESSION_MS + 10_000)
    await cluster.start_broker(3)
    stale = super(InProcessCluster, cluster).log(3, TP)
    assert stale is not None
    assert stale.log_end_offset == 5
    await cluster.operator.create(zk_data.delete_topic_path("orders"))
    await cluster.wait_for(
        lambda: cluster.zookeeper.peek(zk_data.topic_path("orders")) is None, within_ms=30_000, step_ms=10
    )
    await cluster.create_topic("orders", {0: (3, 4)})
    await cluster.wait_for_isr(TP, (3, 4), within_ms=30_000)
    assert cluster.log(3, TP).log_end_offset == 0
    assert cluster.log(4, TP).log_end_offset == 0


async def test_a_partition_reassigned_before_it_ever_had_a_leader_completes_once_it_gets_one(
    cluster: InProcessCluster,
) -> None:
    await cluster.kill(3)
    await cluster.kill(2)
    await cluster.wait_until_gone(3)
    await cluster.wait_until_gone(2)
    await cluster.create_topic("orders", {0: (3,)}, wait=False)  # no live replica: no state yet
    await cluster.settle()
    assert cluster.zookeeper.peek(zk_data.partition_state_path("orders", 0)) is None
    assert await alter(cluster, {TP: (4,)}) == {TP: ErrorCode.NONE}
    assert cluster.assignment(TP) == (4, 3)
    # Any broker's start elects the new partitions: 4, now in RS, starts it and is the whole ISR.
    await cluster.start_broker(2)
    await cluster.wait_for(lambda: cluster.assignment(TP) == (4,), within_ms=10_000, step_ms=10)
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, state.isr) == (4, (4,))
    assert await ongoing(cluster) == []

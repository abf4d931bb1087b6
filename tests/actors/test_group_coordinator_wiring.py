"""The group coordinator wired into every broker (ops/wiring.py), on the in-process cluster with the
real controller on virtual time.

``__consumer_offsets`` (3 partitions, RF 3) is created through the admin path; a group's member joins,
syncs and commits through the ``group-coordinator`` of the leader of the group's partition, whose
appends go to the local partition actor with acks=all. Then leadership moves (a controlled shutdown
of that broker, asked of the controller while the broker keeps running, then a preferred election):
the new leader's coordinator loads the commits from its replica of the log and serves them, the old
one answers NOT_COORDINATOR. A crashed coordinator restarts owning nothing and is elected again by
its broker, so it reloads rather than serve what it lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.names import GROUP_COORDINATOR_ACTOR_NAME, broker_node
from actors.common.topic_names import GROUP_METADATA_TOPIC_NAME
from actors.common.types import TopicPartition
from actors.group.coordinator_actor import GroupCoordinatorActor, OffsetFetchRequest, OffsetsPartitionElected
from actors.group.coordinator_logic import partition_for
from actors.group.protocol import (
    FetchedOffset,
    JoinGroupRequest,
    JoinGroupResult,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetFetchResult,
    SyncGroupRequest,
    SyncGroupResult,
)
from runtime.ref import ActorRef
from runtime.transport.sim import LinkBehaviour
from tests.support.cluster import InProcessCluster, started

pytestmark = pytest.mark.asyncio

PARTITIONS = 3
GROUP = "payments"
TP = TopicPartition("orders", 0)
CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 2_000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
    "controlled_shutdown_retry_backoff_ms": 500,
    "offsets_topic_num_partitions": PARTITIONS,
    "auto_leader_rebalance_enable": False,
}
OFFSETS_TP = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition_for(GROUP, PARTITIONS))


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(
        1, 2, 3, session_timeout_ms=4_000, link=LinkBehaviour(min_delay_ms=1, max_delay_ms=1), **CONFIG
    )
    try:
        # Preferred leaders 1, 2, 3 for partitions 0, 1, 2.
        assignment = {p: tuple(1 + (p + i) % 3 for i in range(3)) for p in range(PARTITIONS)}
        await cluster.create_topic(GROUP_METADATA_TOPIC_NAME, assignment, through_admin=1)
        await cluster.wait_for_isr(OFFSETS_TP, {1, 2, 3})
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


def running_coordinator(cluster: InProcessCluster, broker_id: int) -> GroupCoordinatorActor | None:
    """The broker's coordinator instance (None while its supervisor waits to restart it)."""
    system = cluster.brokers[broker_id].system
    assert system is not None
    for ref, actor in system.actor_instances():
        if ref.name == GROUP_COORDINATOR_ACTOR_NAME and isinstance(actor, GroupCoordinatorActor):
            return actor
    return None


def coordinator(cluster: InProcessCluster, broker_id: int) -> GroupCoordinatorActor:
    actor = running_coordinator(cluster, broker_id)
    assert actor is not None, f"no group coordinator on broker {broker_id}"
    return actor


def owns(cluster: InProcessCluster, broker_id: int, partition: int) -> bool:
    return partition in coordinator(cluster, broker_id).statistics().owned_partitions


async def ask(cluster: InProcessCluster, broker_id: int, message: object) -> Any:
    """A local ask to the broker's ``group-coordinator`` (as its Kafka listener will send them)."""
    system = cluster.brokers[broker_id].system
    assert system is not None
    ref = ActorRef(node_id=broker_node(broker_id), name=GROUP_COORDINATOR_ACTOR_NAME)
    return await cluster.complete(system.ask(ref, message, timeout_ms=30_000), step_ms=10)


async def fetch_offset(cluster: InProcessCluster, broker_id: int) -> OffsetFetchResult:
    result = await ask(cluster, broker_id, OffsetFetchRequest(group_id=GROUP, partitions=(TP,)))
    assert isinstance(result, OffsetFetchResult)
    return result


async def join_sync_commit(cluster: InProcessCluster, broker_id: int, offset: int) -> None:
    join = JoinGroupRequest(
        group_id=GROUP, member_id="", require_known_member_id=True, client_id="c", client_host="/h",
        rebalance_timeout_ms=10_000, session_timeout_ms=10_000, protocol_type="consumer",
        protocols=(("range", b"sub"),),
    )  # fmt: skip
    first = await ask(cluster, broker_id, join)
    assert isinstance(first, JoinGroupResult)
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.member_id
    joined = await ask(cluster, broker_id, JoinGroupRequest(**{**_fields(join), "member_id": member_id}))
    assert isinstance(joined, JoinGroupResult)
    assert joined.error is ErrorCode.NONE, joined
    assert joined.leader_id == member_id
    synced = await ask(
        cluster,
        broker_id,
        SyncGroupRequest(
            group_id=GROUP, generation_id=joined.generation_id, member_id=member_id,
            assignments={member_id: b"orders-0"},
        ),
    )  # fmt: skip
    assert synced == SyncGroupResult(ErrorCode.NONE, b"orders-0")
    commit = OffsetCommitRequest(
        group_id=GROUP,
        member_id=member_id,
        generation_id=joined.generation_id,
        offsets={TP: OffsetCommitPartition(offset=offset, metadata="m")},
    )
    assert await ask(cluster, broker_id, commit) == OffsetCommitResult({TP: ErrorCode.NONE})


def _fields(join: JoinGroupRequest) -> dict[str, Any]:
    return {name: getattr(join, name) for name in JoinGroupRequest.__dataclass_fields__}


async def test_commits_survive_a_coordinator_failover_to_the_new_leader(cluster: InProcessCluster) -> None:
    old = cluster.zk_partition_state(OFFSETS_TP)[0].leader
    await cluster.wait_for(lambda: owns(cluster, old, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    others = [b for b in (1, 2, 3) if b != old]
    assert not any(owns(cluster, b, OFFSETS_TP.partition) for b in others)
    assert (await fetch_offset(cluster, others[0])).error is ErrorCode.NOT_COORDINATOR

    await join_sync_commit(cluster, old, 42)
    assert (await fetch_offset(cluster, old)).offsets[TP] == FetchedOffset(42, None, "m")

    # The controller moves the old leader's leaderships away; the broker itself keeps running.
    response = await cluster.controlled_shutdown_request(old, broker_epoch=cluster.broker_epoch(old))
    assert response.error_code is ErrorCode.NONE
    state = await cluster.wait_for_state(OFFSETS_TP, lambda s: s.leader != old, within_ms=10_000)
    new = state.leader
    await cluster.wait_for(lambda: owns(cluster, new, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    assert (await fetch_offset(cluster, new)).offsets[TP] == FetchedOffset(42, None, "m")
    await cluster.wait_for(lambda: not owns(cluster, old, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    assert await fetch_offset(cluster, old) == OffsetFetchResult(ErrorCode.NOT_COORDINATOR, {})


async def test_a_preferred_election_moves_the_group_and_a_crashed_coordinator_reloads(
    cluster: InProcessCluster,
) -> None:
    first = cluster.zk_partition_state(OFFSETS_TP)[0].leader
    await cluster.wait_for(lambda: owns(cluster, first, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    await join_sync_commit(cluster, first, 7)

    # Leadership moves by a kill; the killed broker comes back as a follower, and a preferred
    # election hands the partition back to it.
    await cluster.kill(first)
    state = await cluster.wait_for_state(OFFSETS_TP, lambda s: s.leader not in (-1, first), within_ms=20_000)
    second = state.leader
    await cluster.wait_for(lambda: owns(cluster, second, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    assert (await fetch_offset(cluster, second)).offsets[TP].offset == 7
    await cluster.start_broker(first)
    await cluster.wait_for_isr(OFFSETS_TP, {1, 2, 3})
    await cluster.preferred_replica_election(OFFSETS_TP)
    await cluster.wait_for_state(OFFSETS_TP, lambda s: s.leader == first, within_ms=10_000)
    await cluster.wait_for(lambda: owns(cluster, first, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    await cluster.wait_for(
        lambda: not owns(cluster, second, OFFSETS_TP.partition), within_ms=10_000, step_ms=10
    )
    assert (await fetch_offset(cluster, first)).offsets[TP].offset == 7
    assert (await fetch_offset(cluster, second)).error is ErrorCode.NOT_COORDINATOR

    # A crash (a malformed election: its leader epoch cannot be compared): the supervisor restarts
    # it empty; the broker elects it again for what it leads, and it loads the partition back.
    before = coordinator(cluster, first)
    system = cluster.brokers[first].system
    assert system is not None
    malformed = OffsetsPartitionElected(partition=OFFSETS_TP.partition, leader_epoch=cast("int", None))
    system.tell(ActorRef(node_id=broker_node(first), name=GROUP_COORDINATOR_ACTOR_NAME), malformed)
    await cluster.wait_for(
        lambda: running_coordinator(cluster, first) not in (None, before), within_ms=10_000, step_ms=10
    )
    await cluster.wait_for(lambda: owns(cluster, first, OFFSETS_TP.partition), within_ms=10_000, step_ms=10)
    assert coordinator(cluster, first).statistics().loads_completed_total == 1
    [cell] = [a for a in system.statistics().actors if a.name == GROUP_COORDINATOR_ACTOR_NAME]
    assert cell.restarts_total == 1
    assert (await fetch_offset(cluster, first)).offsets[TP] == FetchedOffset(7, None, "m")

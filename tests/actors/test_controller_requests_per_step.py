"""The controller sends the requests of each state-machine step before its next step's ZooKeeper
work, as Kafka 2.4 does (``sendRequestsToBrokers`` at the end of every ``handleStateChanges``), not
once the whole event is done.

Found by ``python -m ops.bench.scale --phases shutdown`` (issue 19): a broker leading 1,000 of
3,000 partitions shut down; ZooKeeper named the new leaders after about 2 s, but they started
serving 6.5 s later, once the 2,000 ISR removals of the partitions the broker followed were
written too, because the controller sent its batch only at the end of the event. And when an ISR
removal lost its ZooKeeper connection, the event was retried with the batch dropped: the retry found
the leaders already moved and elected nothing, so the new leaders never heard of their leadership.

Here: virtual time, brokers 1 (the controller), 2 and 3; broker 2 leads four partitions and follows
four, and asks for its controlled shutdown. The controller's fenced writes of the followed
partitions' states (the ISR removals) are watched, or fail once with a connection loss.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.protocol import LeaderAndIsrRequest
from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition_state import Role
from runtime.coordination import ConnectionLossError, MemoryCoordinator
from runtime.coordination.base import CheckOp, MultiOp, OpResult, SetDataOp
from tests.support.cluster import InProcessCluster, started

pytestmark = pytest.mark.asyncio

TOPIC = "orders"
LED = [TopicPartition(TOPIC, p) for p in range(4)]  # led by broker 2, then by broker 3
FOLLOWED = [TopicPartition(TOPIC, p) for p in range(4, 8)]  # led by broker 3 throughout
ASSIGNMENT = {**{tp.partition: [2, 3, 1] for tp in LED}, **{tp.partition: [3, 2, 1] for tp in FOLLOWED}}
FOLLOWED_PATHS = {zk_data.partition_state_path(tp.topic, tp.partition) for tp in FOLLOWED}


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(1, 2, 3, session_timeout_ms=4_000)
    try:
        await cluster.create_topic(TOPIC, ASSIGNMENT)
        for tp in [*LED, *FOLLOWED]:
            await cluster.wait_for_state(tp, lambda s: len(s.isr) == 3, within_ms=30_000)
        assert cluster.controller_id() == 1
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


def is_isr_removal(ops: Sequence[MultiOp]) -> bool:
    """A controller's fenced write of a followed partition's state."""
    return (
        len(ops) == 2
        and isinstance(ops[0], CheckOp)
        and ops[0].path == zk_data.CONTROLLER_EPOCH_PATH
        and isinstance(ops[1], SetDataOp)
        and ops[1].path in FOLLOWED_PATHS
    )


def controller_coordinator(cluster: InProcessCluster) -> MemoryCoordinator:
    coordinator = cluster.brokers[1].coordinator
    assert coordinator is not None
    return coordinator


def broker_3_told_to_lead(cluster: InProcessCluster, tp: TopicPartition) -> bool:
    """Broker 3 leads ``tp``, or the controller has handed it a LeaderAndIsr saying so."""
    if cluster.partition(3, tp).state.role is Role.LEADER:
        return True
    ((_, controller),) = cluster.active_controllers()
    channel = controller.channels.get(3)
    return channel is not None and any(
        isinstance(request, LeaderAndIsrRequest)
        and any(
            (state.topic, state.partition, state.leader) == (tp.topic, tp.partition, 3)
            for state in request.partition_states
        )
        for request in channel.queue
    )


async def test_the_new_leaders_are_sent_leader_and_isr_before_the_isr_removals_are_written(
    cluster: InProcessCluster,
) -> None:
    coordinator = controller_coordinator(cluster)
    real_multi = coordinator.multi
    # At each ISR removal: had every new leader been sent its LeaderAndIsr?
    told_at_isr_removal: list[bool] = []

    async def multi(ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        if is_isr_removal(ops):
            told_at_isr_removal.append(all(broker_3_told_to_lead(cluster, tp) for tp in LED))
        return await real_multi(ops)

    coordinator.multi = multi  # type: ignore[method-assign]

    response = await cluster.controlled_shutdown_request(2, broker_epoch=cluster.broker_epoch(2))

    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    assert len(told_at_isr_removal) == len(FOLLOWED), "the followed partitions' ISRs were not written"
    assert all(told_at_isr_removal), "an ISR removal was written before the new leaders were told"
    for tp in FOLLOWED:
        assert cluster.zk_partition_state(tp)[0].isr == (3, 1)
    await cluster.wait_for(
        lambda: all(cluster.partition(3, tp).state.role is Role.LEADER for tp in LED), within_ms=5_000
    )


async def test_new_leaders_hear_of_it_when_an_isr_removal_loses_its_connection(
    cluster: InProcessCluster,
) -> None:
    coordinator = controller_coordinator(cluster)
    real_multi = coordinator.multi
    lost: list[str] = []

    async def multi(ops: Sequence[MultiOp]) -> tuple[OpResult, ...]:
        if is_isr_removal(ops) and not lost:
            lost.append(ops[1].path)
            raise ConnectionLossError("multi", ops[1].path, "no answer (injected)")
        return await real_multi(ops)

    coordinator.multi = multi  # type: ignore[method-assign]

    response = await cluster.controlled_shutdown_request(2, broker_epoch=cluster.broker_epoch(2))

    assert lost, "no ISR removal lost its connection: the event was not retried"
    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    for tp in LED:
        state, _ = cluster.zk_partition_state(tp)
        assert (state.leader, state.isr) == (3, (3, 1))
    for tp in FOLLOWED:
        assert cluster.zk_partition_state(tp)[0].isr == (3, 1)
    await cluster.wait_for(
        lambda: all(cluster.partition(3, tp).state.role is Role.LEADER for tp in LED), within_ms=10_000
    )

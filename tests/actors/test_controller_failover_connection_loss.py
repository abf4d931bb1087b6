"""A controller whose failover loses its ZooKeeper connection half-way must not stay active on a
half-built context (found by ``python -m ops.bench.scale``: with 3,000 partitions a broker's loop
was busy long enough for ZooKeeper requests to go unanswered while it read the partition states).

The failover of an activation reads the brokers, the topics and every partition state, then starts
the replica and partition state machines. A ConnectionLossError in the middle re-queues the Elect
event; by then the controller is already active, and a retried Elect of an active controller only
checks that ``/controller`` is still its own. So the state machines never started: the controller
served on with no replica states, and the next broker change failed on an illegal replica state
transition (NonExistentReplica -> OnlineReplica), which resigned it. Here: virtual time, three
brokers, one injected connection loss on the first partition state read of each broker's session.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from actors.common.types import TopicPartition
from actors.controller.state import PartitionMachineState, ReplicaMachineState
from actors.server import zk_data
from runtime.coordination import ConnectionLossError, MemoryCoordinator, WatchCallback
from runtime.coordination.base import Stat
from tests.support.cluster import InProcessCluster, started

pytestmark = pytest.mark.asyncio

TOPIC = "orders"
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await started(1, 2, 3, session_timeout_ms=4_000)
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


def lose_connection_on_first_partition_state_read(coordinator: MemoryCoordinator, lost: list[str]) -> None:
    """The coordinator's next read of a partition state znode raises ConnectionLossError, once."""
    real_get = coordinator.get
    armed = itertools.count()

    async def get(path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        if "/partitions/" in path and path.endswith("/state") and next(armed) == 0:
            lost.append(path)
            raise ConnectionLossError("get", path, "no answer (injected)")
        return await real_get(path, watch=watch)

    coordinator.get = get  # type: ignore[method-assign]


async def test_a_failover_cut_short_by_a_connection_loss_is_completed_before_serving(
    cluster: InProcessCluster,
) -> None:
    await cluster.create_topic(TOPIC, ASSIGNMENT)
    lost: list[str] = []
    for broker in cluster.brokers.values():
        assert broker.coordinator is not None
        lose_connection_on_first_partition_state_read(broker.coordinator, lost)

    # Move the controller as an operator does: delete /controller; every broker runs an election.
    await cluster.operator.delete(zk_data.CONTROLLER_PATH, version=-1)

    def settled() -> bool:
        active = cluster.active_controllers()
        if len(active) != 1 or cluster.controller_id() != active[0][0]:
            return False
        controller = active[0][1]
        return controller.running is None and not controller.queue

    await cluster.wait_for(settled, within_ms=30_000, step_ms=10)
    assert lost, "no partition state read lost its connection: the failover was not interrupted"
    ((_, controller),) = cluster.active_controllers()
    assert controller.logic is not None
    context = controller.logic.context
    tps = [TopicPartition(TOPIC, p) for p in ASSIGNMENT]
    # The replica and partition state machines started: every replica of a live broker is online,
    # every partition online (before the fix: NonExistentReplica / NonExistentPartition).
    assert {(tp, b): context.replica_state(tp, b) for tp in tps for b in ASSIGNMENT[tp.partition]} == {
        (tp, b): ReplicaMachineState.ONLINE for tp in tps for b in ASSIGNMENT[tp.partition]
    }
    assert {tp: context.partition_state(tp) for tp in tps} == dict.fromkeys(tps, PartitionMachineState.ONLINE)

    # And it goes on serving: a broker's departure moves the leadership it had, no resignation.
    resignations = controller.resignations_total
    victim = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    await cluster.stop_broker(victim)
    led = TopicPartition(TOPIC, next(p for p, replicas in ASSIGNMENT.items() if replicas[0] == victim))
    await cluster.wait_for(
        lambda: cluster.zk_partition_state(led)[0].leader not in (victim, -1), within_ms=30_000
    )
    assert controller.active
    assert controller.resignations_total == resignations

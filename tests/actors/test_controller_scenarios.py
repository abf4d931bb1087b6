"""The controller on virtual time: the twins of the process-level scenarios of
``tests/integration/test_controller_processes.py`` (docs/scenarios.md §6, and issue 6's fault
scenarios), with the same assertions, on brokers in one process that run the real controller
(``tests/support/cluster.py``). Kills are SIGKILLs (the session lives until it times out), a clean
stop is SIGTERM (controlled shutdown first); every wait is on virtual time, bounded like the
process test's timeouts, and the whole module runs in a fraction of a second of wall time.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.names import broker_ref
from actors.common.protocol import FetchResponse, ProduceResponse
from actors.common.types import TopicPartition
from actors.server import zk_data
from ops.sim.cluster import BrokerState
from runtime.clock import wait_ms
from runtime.transport.sim import LinkBehaviour
from tests.support.cluster import InProcessCluster, batch, started, values_of
from tests.support.produce_checks import assert_acknowledged_kept_in_order

pytestmark = pytest.mark.asyncio

SESSION_MS = 4_000
TP = TopicPartition("orders", 0)
# The process test's broker properties, as BrokerConfig fields.
BASE_CONFIG: dict[str, Any] = {
    "replica_lag_time_max_ms": 2_000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
    "controlled_shutdown_retry_backoff_ms": 500,
    "min_insync_replicas": 2,
}


# Every message takes 1 ms: a produce loop on a network without latency would never let virtual
# time move (one request after another, all at the same instant).
LINK = LinkBehaviour(min_delay_ms=1, max_delay_ms=1)


async def three_brokers(**config: Any) -> InProcessCluster:
    return await started(1, 2, 3, session_timeout_ms=SESSION_MS, link=LINK, **{**BASE_CONFIG, **config})


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[InProcessCluster]:
    cluster = await three_brokers()
    try:
        yield cluster
    finally:
        await cluster.__aexit__(None, None, None)


@dataclass
class ProduceLoop:
    """Writes one acks=all record at a time to the partition's leader (as ZooKeeper names it) and
    keeps what was acknowledged (value → virtual ms of the acknowledgement), like the process
    test's loop. The batches carry no producer id: a value whose attempt failed without an answer
    may be in the log once per attempt (``attempts`` counts them). After a failure it retries the
    same value after ``retry_backoff_ms`` of virtual time, with the leader ZooKeeper then names."""

    cluster: InProcessCluster
    tp: TopicPartition
    retry_backoff_ms: int = 100
    acknowledged: dict[bytes, int] = field(default_factory=dict)
    attempts: collections.Counter[bytes] = field(default_factory=collections.Counter)
    errors: list[str] = field(default_factory=list)
    _stopping: bool = False
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = self.cluster.run_in_background(self._run(), name="produce loop")

    async def wait_for_acks(self, count: int, *, within_ms: int) -> None:
        await self.cluster.wait_for(lambda: len(self.acknowledged) >= count, within_ms=within_ms, step_ms=10)

    async def stop(self) -> None:
        self._stopping = True
        assert self._task is not None
        await self.cluster.complete(self._task)

    async def _run(self) -> None:
        cluster = self.cluster
        number = 0
        while not self._stopping:
            value = f"record-{number}".encode()
            state, _ = cluster.zk_partition_state(self.tp)
            if state.leader < 0:
                await wait_ms(cluster.clock, self.retry_backoff_ms)
                continue
            self.attempts[value] += 1
            try:
                response = await cluster.client_node.ask(
                    broker_ref(state.leader),
                    cluster.produce_request(self.tp, batch(value), acks=-1, timeout_ms=5_000),
                    timeout_ms=10_000,
                )
            except Exception as failure:  # noqa: BLE001 - the broker may be killed mid-request
                self.errors.append(f"{type(failure).__name__}: {failure}")
            else:
                assert isinstance(response, ProduceResponse)
                error = response.partitions[0].error_code
                if error is ErrorCode.NONE:
                    self.acknowledged[value] = cluster.clock.now_ms()
                    number += 1
                    continue
                self.errors.append(error.name)
            await wait_ms(cluster.clock, self.retry_backoff_ms)


async def read_partition(
    cluster: InProcessCluster, broker_id: int, tp: TopicPartition
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record below the high watermark, through consumer fetches."""
    records: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        response: FetchResponse = await cluster.complete(cluster.fetch(broker_id, tp, offset))
        data = response.partitions[0]
        assert data.error_code is ErrorCode.NONE, data
        fetched = [(o, v) for o, v in values_of(data.records) if o >= offset]
        if not fetched:
            return records
        records += fetched
        offset = fetched[-1][0] + 1


async def create_topic(cluster: InProcessCluster, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    """As the process test creates topics: through the admin actor of partition 0's preferred
    leader, which answers once its own metadata names a leader for every partition."""
    await cluster.create_topic(topic, assignment, through_admin=assignment[0][0], wait=False)


async def non_controllers(cluster: InProcessCluster) -> tuple[int, int]:
    await cluster.wait_for(lambda: cluster.controller_id() >= 0, within_ms=30_000)
    controller = cluster.controller_id()
    first, second = (b for b in (1, 2, 3) if b != controller)
    return first, second


async def test_controller_epoch_starts_at_one_and_every_move_increments_it(cluster: InProcessCluster) -> None:
    """docs/scenarios.md §6 #46 and the controller SIGKILL: a new controller with a higher epoch within the
    session timeout + 2 s; a request carrying the old epoch is rejected; the epoch survives all brokers."""
    await cluster.wait_for(lambda: cluster.controller_id() >= 0, within_ms=30_000)
    first, epoch = cluster.controller_id(), cluster.controller_epoch()
    assert epoch == 1

    killed_at = cluster.clock.now_ms()
    await cluster.kill(first)
    await cluster.wait_for(
        lambda: cluster.controller_id() not in (-1, first), within_ms=SESSION_MS + 2_000, step_ms=10
    )
    assert cluster.clock.now_ms() - killed_at <= SESSION_MS + 2_000
    second, epoch = cluster.controller_id(), cluster.controller_epoch()
    assert epoch == 2

    survivor = next(b for b in (1, 2, 3) if b != first)
    ok = await cluster.send_update_metadata(survivor, controller_id=second, controller_epoch=2)
    refused = await cluster.send_update_metadata(survivor, controller_id=first, controller_epoch=1)
    assert ok.error_code is ErrorCode.NONE
    assert refused.error_code is ErrorCode.STALE_CONTROLLER_EPOCH

    # Every broker dies at once (no survivor to take over): the epoch stays in ZooKeeper, and the
    # next controller continues from it.
    for broker_id in (1, 2, 3):
        if broker_id != first:
            await cluster.kill(broker_id)
    await cluster.wait_for(
        lambda: cluster.zookeeper.peek(zk_data.CONTROLLER_PATH) is None, within_ms=SESSION_MS + 2_000
    )
    assert cluster.controller_epoch() == 2
    await cluster.start(first)
    await cluster.wait_for(lambda: cluster.controller_id() >= 0, within_ms=30_000)
    assert (cluster.controller_id(), cluster.controller_epoch()) == (first, 3)


async def test_hard_kill_of_the_leader_under_acks_all_load_loses_nothing(cluster: InProcessCluster) -> None:
    """A new leader from the ISR takes writes within the session timeout + 2 s; nothing
    acknowledged is lost; the old broker rejoins as a follower and catches up."""
    await create_topic(cluster, TP.topic, {0: (1, 2, 3)})
    await cluster.wait_for_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, within_ms=30_000)
    producer = ProduceLoop(cluster, TP)
    producer.start()
    await producer.wait_for_acks(20, within_ms=30_000)
    killed_at = cluster.clock.now_ms()
    await cluster.kill(1)
    state = await cluster.wait_for_state(
        TP, lambda s: s.leader in (2, 3), within_ms=SESSION_MS + 2_000 + 5_000
    )
    assert 1 not in state.isr
    acked_before = len(producer.acknowledged)
    await producer.wait_for_acks(acked_before + 20, within_ms=30_000)
    first_after = min(t for t in producer.acknowledged.values() if t > killed_at)
    assert first_after - killed_at <= SESSION_MS + 2_000

    # The old broker rejoins as a follower: a leader readmits it only once it has caught up to
    # the high watermark and into the current leader epoch.
    await cluster.start(1)
    await cluster.wait_for_state(TP, lambda s: set(s.isr) == {1, 2, 3}, within_ms=60_000)
    await producer.stop()
    leader = cluster.zk_partition_state(TP)[0].leader
    records = await read_partition(cluster, leader, TP)
    assert_acknowledged_kept_in_order(records, producer.acknowledged, producer.attempts)


async def test_sigterm_moves_leadership_before_exit_with_under_a_second_of_unavailability(
    cluster: InProcessCluster,
) -> None:
    await create_topic(cluster, TP.topic, {0: (1, 2, 3)})
    await cluster.wait_for_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, within_ms=30_000)
    producer = ProduceLoop(cluster, TP)
    producer.start()
    await producer.wait_for_acks(20, within_ms=30_000)
    terminated_at = cluster.clock.now_ms()
    await cluster.complete(cluster.stop(1), within_ms=30_000, step_ms=10)
    broker = cluster.brokers[1]
    assert (broker.state, broker.exit_reason) == (BrokerState.DOWN, None)  # it exited cleanly
    state = await cluster.wait_for_state(TP, lambda s: s.leader in (2, 3), within_ms=1_000)
    assert 1 not in state.isr
    acked_before = len(producer.acknowledged)
    await producer.wait_for_acks(acked_before + 20, within_ms=30_000)
    await producer.stop()
    times = sorted(producer.acknowledged.values())
    gaps = [later - earlier for earlier, later in itertools.pairwise(times) if later > terminated_at - 1_000]
    assert max(gaps) < 1_000, f"write unavailability {max(gaps)} ms"


async def test_a_partition_whose_whole_isr_is_offline_keeps_its_last_isr(cluster: InProcessCluster) -> None:
    """docs/scenarios.md §6 #48: RF 1 on broker 2; broker 2 dies → leader −1, leader epoch 1, ISR still
    [2]."""
    await create_topic(cluster, "single", {0: (2,)})
    tp = TopicPartition("single", 0)
    await cluster.wait_for_state(tp, lambda s: s.leader == 2, within_ms=30_000)
    await cluster.kill(2)
    state = await cluster.wait_for_state(tp, lambda s: s.leader == -1, within_ms=SESSION_MS + 5_000)
    assert (state.leader_epoch, state.isr) == (1, (2,))


async def test_controlled_shutdown_requests_move_leadership_and_shrink_the_isr(
    cluster: InProcessCluster,
) -> None:
    """docs/scenarios.md §6 #49: AR [1,2,3], leader 1. Shut down 3 → 0 remaining, ISR [1,2]; shut down 2 →
    leader 1, ISR [1]; shut down 1 → 1 remaining (no other live ISR member); a stale broker epoch is
    refused."""
    await create_topic(cluster, TP.topic, {0: (1, 2, 3)})
    await cluster.wait_for_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, within_ms=30_000)

    shut_down = cluster.controlled_shutdown_request
    stale = await shut_down(1, broker_epoch=cluster.broker_epoch(1) - 1)
    assert stale.error_code is ErrorCode.STALE_BROKER_EPOCH
    response = await shut_down(3, broker_epoch=cluster.broker_epoch(3))
    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, state.isr) == (1, (1, 2))
    response = await shut_down(2, broker_epoch=cluster.broker_epoch(2))
    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, state.isr) == (1, (1,))
    response = await shut_down(1, broker_epoch=cluster.broker_epoch(1))
    assert response.error_code is ErrorCode.NONE
    assert response.remaining_partitions == (TP,)
    assert cluster.zk_partition_state(TP)[0].leader == 1


async def test_preferred_replica_election_on_request(cluster: InProcessCluster) -> None:
    """docs/scenarios.md §6 #47: AR [a, b], leader a at epoch 0. Stop a → leader b, epoch 1; restart a and
    wait for the ISR; a /admin/preferred_replica_election request → znode removed, leader a, epoch 2.

    a and b are not the controller: a controller that dies with the leader is replaced first, and
    the new controller's start-up takes the dead replica out of the ISR (an epoch of its own)
    before it elects, as Kafka's replica state machine does — one epoch more than this scenario."""
    preferred, other = await non_controllers(cluster)
    await create_topic(cluster, TP.topic, {0: (preferred, other)})
    await cluster.wait_for_state(TP, lambda s: s.leader == preferred and len(s.isr) == 2, within_ms=30_000)
    await cluster.kill(preferred)
    state = await cluster.wait_for_state(TP, lambda s: s.leader == other, within_ms=SESSION_MS + 5_000)
    assert state.leader_epoch == 1
    await cluster.start(preferred)
    await cluster.wait_for_state(TP, lambda s: preferred in s.isr, within_ms=60_000)
    await cluster.operator.create(
        zk_data.PREFERRED_REPLICA_ELECTION_PATH,
        zk_data.encode_preferred_replica_election(
            [zk_data.TopicPartition(topic=TP.topic, partition=TP.partition)]
        ),
    )
    await cluster.wait_for(
        lambda: cluster.zookeeper.peek(zk_data.PREFERRED_REPLICA_ELECTION_PATH) is None, within_ms=30_000
    )
    state, _ = cluster.zk_partition_state(TP)
    assert (state.leader, state.leader_epoch) == (preferred, 2)


async def test_auto_rebalance_returns_leadership_to_the_preferred_replica() -> None:
    """docs/scenarios.md §6 #47 (auto): AR [a, b] (neither the controller); stop a → leader b (epoch 1);
    restart a → the rebalance task moves leadership back to a (epoch 2)."""
    cluster = await three_brokers(
        auto_leader_rebalance_enable=True, leader_imbalance_check_interval_seconds=1
    )
    try:
        preferred, other = await non_controllers(cluster)
        await create_topic(cluster, TP.topic, {0: (preferred, other)})
        await cluster.wait_for_state(
            TP, lambda s: s.leader == preferred and len(s.isr) == 2, within_ms=30_000
        )
        await cluster.kill(preferred)
        state = await cluster.wait_for_state(TP, lambda s: s.leader == other, within_ms=SESSION_MS + 5_000)
        assert state.leader_epoch == 1
        await cluster.start(preferred)
        state = await cluster.wait_for_state(TP, lambda s: s.leader == preferred, within_ms=60_000)
        assert state.leader_epoch == 2
    finally:
        await cluster.__aexit__(None, None, None)

"""The controller against three real broker processes and a real ZooKeeper (docs/scenarios.md §6,
and issue 6's fault scenarios). Every wait is a ZooKeeper watch or a reply, bounded by a timeout."""

from __future__ import annotations

import asyncio
import itertools
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from actors.common.errors import ErrorCode
from actors.common.names import controller_ref
from actors.common.protocol import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from actors.common.types import TopicPartition
from actors.server import zk_data
from tests.support.process_cluster import ProcessCluster, ProduceLoop
from tests.support.produce_checks import assert_acknowledged_kept_in_order
from tests.support.producer_faults import read_partition

pytestmark = [pytest.mark.asyncio, pytest.mark.integration, pytest.mark.zk]

SESSION_MS = 4_000
TP = TopicPartition("orders", 0)
BASE_PROPERTIES = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "min.insync.replicas": "2",
}


@pytest_asyncio.fixture
async def cluster(
    zk_connect_string: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ProcessCluster]:
    properties = dict(BASE_PROPERTIES)
    marker = request.node.get_closest_marker("broker_properties")
    if marker is not None:
        properties.update(marker.kwargs)
    async with ProcessCluster(zk_connect_string, tmp_path, properties) as cluster:
        await asyncio.gather(*(cluster.start(broker_id) for broker_id in (1, 2, 3)))
        yield cluster


async def broker_epoch(cluster: ProcessCluster, broker_id: int) -> int:
    stat = await cluster.admin.exists(zk_data.broker_id_path(broker_id))
    assert stat is not None
    return stat.czxid


async def test_controller_epoch_starts_at_one_and_every_move_increments_it(cluster: ProcessCluster) -> None:
    """docs/scenarios.md §6 #46 and the controller SIGKILL: a new controller with a higher epoch within the
    session timeout + 2 s; a request carrying the old epoch is rejected; the epoch survives all brokers."""
    data = await cluster.wait_for_znode(zk_data.CONTROLLER_PATH, lambda d: d is not None, timeout_s=30)
    assert data is not None
    first, epoch = await cluster.controller()
    assert epoch == 1

    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    await cluster.kill(first, signal.SIGKILL)
    await cluster.wait_for_znode(
        zk_data.CONTROLLER_PATH,
        lambda d: d is not None and zk_data.decode_controller(d).broker_id != first,
        timeout_s=(SESSION_MS + 2_000) / 1000,
    )
    assert loop.time() - killed_at <= (SESSION_MS + 2_000) / 1000
    second, epoch = await cluster.controller()
    assert epoch == 2

    survivor = next(b for b in (1, 2, 3) if b != first)
    # KIP-380's broker epoch: the czxid of the survivor's registration (no -1: docs/security.md).
    broker_epoch = (await cluster.admin.get(zk_data.broker_id_path(survivor)))[1].czxid
    current = UpdateMetadataRequest(
        controller_id=second,
        controller_epoch=2,
        broker_epoch=broker_epoch,
        partition_states=(),
        live_brokers=(),
    )
    stale = UpdateMetadataRequest(
        controller_id=first,
        controller_epoch=1,
        broker_epoch=broker_epoch,
        partition_states=(),
        live_brokers=(),
    )
    ok = await cluster.client.ask(cluster.brokers[survivor].ref, current, timeout_ms=10_000)
    refused = await cluster.client.ask(cluster.brokers[survivor].ref, stale, timeout_ms=10_000)
    assert isinstance(ok, UpdateMetadataResponse)
    assert ok.error_code is ErrorCode.NONE
    assert isinstance(refused, UpdateMetadataResponse)
    assert refused.error_code is ErrorCode.STALE_CONTROLLER_EPOCH

    # Every broker dies at once (no survivor to take over): the epoch stays in ZooKeeper, and the
    # next controller continues from it.
    await asyncio.gather(*(cluster.kill(b, signal.SIGKILL) for b in (1, 2, 3) if b != first))
    await cluster.wait_for_znode(
        zk_data.CONTROLLER_PATH, lambda d: d is None, timeout_s=(SESSION_MS + 2_000) / 1000
    )
    assert zk_data.decode_controller_epoch((await cluster.admin.get(zk_data.CONTROLLER_EPOCH_PATH))[0]) == 2
    await cluster.start(first)
    await cluster.wait_for_znode(zk_data.CONTROLLER_PATH, lambda d: d is not None, timeout_s=30)
    assert await cluster.controller() == (first, 3)


async def test_hard_kill_of_the_leader_under_acks_all_load_loses_nothing(cluster: ProcessCluster) -> None:
    """A new leader from the ISR takes writes within the session timeout + 2 s; nothing
    acknowledged is lost; the old broker rejoins as a follower and catches up."""
    await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
    await cluster.wait_for_partition_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, timeout_s=30)
    producer = ProduceLoop(cluster, TP)
    producer.start()
    await producer.wait_for_acks(20, timeout_s=30)
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    await cluster.kill(1, signal.SIGKILL)
    state = await cluster.wait_for_partition_state(
        TP, lambda s: s.leader in (2, 3), timeout_s=(SESSION_MS + 2_000) / 1000 + 5
    )
    assert 1 not in state.isr
    acked_before = len(producer.acknowledged)
    await producer.wait_for_acks(acked_before + 20, timeout_s=30)
    first_after = min(t for t in producer.acknowledged.values() if t > killed_at)
    assert first_after - killed_at <= (SESSION_MS + 2_000) / 1000

    # The old broker rejoins as a follower: a leader readmits it only once it has caught up to
    # the high watermark and into the current leader epoch.
    await cluster.start(1)
    await cluster.wait_for_partition_state(TP, lambda s: set(s.isr) == {1, 2, 3}, timeout_s=60)
    await producer.stop()
    leader = (await cluster.zk_partition_state(TP))[0].leader
    records = await read_partition(cluster.client, cluster.brokers[leader].ref, TP)
    assert_acknowledged_kept_in_order(records, producer.acknowledged, producer.attempts)


async def test_sigterm_moves_leadership_before_exit_with_under_a_second_of_unavailability(
    cluster: ProcessCluster,
) -> None:
    await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
    await cluster.wait_for_partition_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, timeout_s=30)
    producer = ProduceLoop(cluster, TP)
    producer.start()
    await producer.wait_for_acks(20, timeout_s=30)
    loop = asyncio.get_running_loop()
    terminated_at = loop.time()
    exit_code = await cluster.kill(1, signal.SIGTERM)
    assert exit_code == 0
    state = await cluster.wait_for_partition_state(TP, lambda s: s.leader in (2, 3), timeout_s=1)
    assert 1 not in state.isr
    acked_before = len(producer.acknowledged)
    await producer.wait_for_acks(acked_before + 20, timeout_s=30)
    await producer.stop()
    times = sorted(producer.acknowledged.values())
    gaps = [later - earlier for earlier, later in itertools.pairwise(times) if later > terminated_at - 1]
    assert max(gaps) < 1.0, f"write unavailability {max(gaps):.3f} s"


async def test_a_partition_whose_whole_isr_is_offline_keeps_its_last_isr(cluster: ProcessCluster) -> None:
    """docs/scenarios.md §6 #48: RF 1 on broker 2; broker 2 dies → leader −1, leader epoch 1, ISR still
    [2]."""
    await cluster.create_topic("single", {0: [2]})
    tp = TopicPartition("single", 0)
    await cluster.wait_for_partition_state(tp, lambda s: s.leader == 2, timeout_s=30)
    await cluster.kill(2, signal.SIGKILL)
    state = await cluster.wait_for_partition_state(
        tp, lambda s: s.leader == -1, timeout_s=(SESSION_MS + 5_000) / 1000
    )
    assert (state.leader_epoch, state.isr) == (1, (2,))


async def test_controlled_shutdown_requests_move_leadership_and_shrink_the_isr(
    cluster: ProcessCluster,
) -> None:
    """docs/scenarios.md §6 #49: AR [1,2,3], leader 1. Shut down 3 → 0 remaining, ISR [1,2]; shut down 2 →
    leader 1, ISR [1]; shut down 1 → 1 remaining (no other live ISR member); a stale broker epoch is
    refused."""
    await cluster.create_topic(TP.topic, {0: [1, 2, 3]})
    await cluster.wait_for_partition_state(TP, lambda s: s.leader == 1 and len(s.isr) == 3, timeout_s=30)
    controller_id, _ = await cluster.controller()
    controller = controller_ref(controller_id)

    async def shut_down(broker_id: int, epoch: int) -> ControlledShutdownResponse:
        response = await cluster.client.ask(
            controller, ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch), timeout_ms=30_000
        )
        assert isinstance(response, ControlledShutdownResponse)
        return response

    stale = await shut_down(1, await broker_epoch(cluster, 1) - 1)
    assert stale.error_code is ErrorCode.STALE_BROKER_EPOCH
    response = await shut_down(3, await broker_epoch(cluster, 3))
    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    state, _ = await cluster.zk_partition_state(TP)
    assert (state.leader, state.isr) == (1, (1, 2))
    response = await shut_down(2, await broker_epoch(cluster, 2))
    assert (response.error_code, response.remaining_partitions) == (ErrorCode.NONE, ())
    state, _ = await cluster.zk_partition_state(TP)
    assert (state.leader, state.isr) == (1, (1,))
    response = await shut_down(1, await broker_epoch(cluster, 1))
    assert response.error_code is ErrorCode.NONE
    assert response.remaining_partitions == (TP,)
    assert (await cluster.zk_partition_state(TP))[0].leader == 1


async def test_preferred_replica_election_on_request(cluster: ProcessCluster) -> None:
    """docs/scenarios.md §6 #47: AR [a, b], leader a at epoch 0. Stop a → leader b, epoch 1; restart a and
    wait for the ISR; a /admin/preferred_replica_election request → znode removed, leader a, epoch 2.

    a and b are not the controller: a controller that dies with the leader is replaced first, and
    the new controller's start-up takes the dead replica out of the ISR (an epoch of its own)
    before it elects, as Kafka's replica state machine does — one epoch more than this scenario."""
    preferred, other = await non_controllers(cluster)
    await cluster.create_topic(TP.topic, {0: [preferred, other]})
    await cluster.wait_for_partition_state(
        TP, lambda s: s.leader == preferred and len(s.isr) == 2, timeout_s=30
    )
    await cluster.kill(preferred, signal.SIGKILL)
    state = await cluster.wait_for_partition_state(
        TP, lambda s: s.leader == other, timeout_s=(SESSION_MS + 5_000) / 1000
    )
    assert state.leader_epoch == 1
    await cluster.start(preferred)
    await cluster.wait_for_partition_state(TP, lambda s: preferred in s.isr, timeout_s=60)
    await cluster.admin.create(
        zk_data.PREFERRED_REPLICA_ELECTION_PATH,
        zk_data.encode_preferred_replica_election(
            [zk_data.TopicPartition(topic=TP.topic, partition=TP.partition)]
        ),
    )
    await cluster.wait_for_znode(zk_data.PREFERRED_REPLICA_ELECTION_PATH, lambda d: d is None, timeout_s=30)
    state, _ = await cluster.zk_partition_state(TP)
    assert (state.leader, state.leader_epoch) == (preferred, 2)


async def non_controllers(cluster: ProcessCluster) -> tuple[int, int]:
    await cluster.wait_for_znode(zk_data.CONTROLLER_PATH, lambda d: d is not None, timeout_s=30)
    controller, _ = await cluster.controller()
    first, second = (b for b in (1, 2, 3) if b != controller)
    return first, second


@pytest.mark.broker_properties(**{"leader.imbalance.check.interval.seconds": "1"})
async def test_auto_rebalance_returns_leadership_to_the_preferred_replica(cluster: ProcessCluster) -> None:
    """docs/scenarios.md §6 #47 (auto): AR [a, b] (neither the controller); stop a → leader b (epoch 1);
    restart a → the rebalance task moves leadership back to a (epoch 2)."""
    preferred, other = await non_controllers(cluster)
    await cluster.create_topic(TP.topic, {0: [preferred, other]})
    await cluster.wait_for_partition_state(
        TP, lambda s: s.leader == preferred and len(s.isr) == 2, timeout_s=30
    )
    await cluster.kill(preferred, signal.SIGKILL)
    state = await cluster.wait_for_partition_state(
        TP, lambda s: s.leader == other, timeout_s=(SESSION_MS + 5_000) / 1000
    )
    assert state.leader_epoch == 1
    await cluster.start(preferred)
    state = await cluster.wait_for_partition_state(TP, lambda s: s.leader == preferred, timeout_s=60)
    assert state.leader_epoch == 2

"""Controller requests are verified before they act (issue 23: "one request fences the controller
for good"; docs/security.md): the broker epoch must be this broker's (no -1), and a controller epoch
the broker has not seen yet must be the one ZooKeeper's ``/controller_epoch`` holds, from the broker
``/controller`` names. On virtual time, against the real controller of ``tests/support/cluster.py``.
"""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.protocol import StopReplicaResponse
from actors.common.types import TopicPartition
from tests.support.cluster import InProcessCluster, batch, started

pytestmark = pytest.mark.asyncio

TP = TopicPartition("orders", 0)


async def two_brokers_with_data() -> InProcessCluster:
    cluster = await started(1, 2)
    await cluster.create_topic(TP.topic, {0: (1, 2)})
    await cluster.complete(cluster.produce(1, TP, batch(b"a", b"b", b"c")))
    await cluster.wait_for(lambda: cluster.log(2, TP).log_end_offset == 3)
    return cluster


async def test_a_forged_future_controller_epoch_fences_nobody() -> None:
    """UpdateMetadata(controller_epoch=2^31-1, live_brokers=[]) used to empty the broker's metadata
    and fence the real controller for good."""
    cluster = await two_brokers_with_data()
    try:
        controller, epoch = cluster.controller_id(), cluster.controller_epoch()
        forged = await cluster.send_update_metadata(2, controller_id=controller, controller_epoch=2**31 - 1)
        assert forged.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
        broker = cluster.broker(2)
        assert sorted(broker.metadata.live_brokers) == [1, 2]
        assert broker.controller_epoch == epoch
        assert broker.forged_controller_requests_total == 1
        # The real controller still governs: its request is applied.
        real = await cluster.send_update_metadata(2, controller_id=controller, controller_epoch=epoch)
        assert real.error_code is ErrorCode.NONE
    finally:
        await cluster.__aexit__(None, None, None)


async def test_the_current_epoch_with_another_controller_id_is_refused() -> None:
    cluster = await two_brokers_with_data()
    try:
        controller = cluster.controller_id()
        impostor = 2 if controller == 1 else 1
        forged = await cluster.send_update_metadata(
            2, controller_id=impostor, controller_epoch=cluster.controller_epoch()
        )
        assert forged.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    finally:
        await cluster.__aexit__(None, None, None)


async def test_a_request_without_a_broker_epoch_deletes_nothing() -> None:
    """StopReplica(delete_partitions=true, broker_epoch=-1) with the current controller's id and epoch
    used to delete the replica (Kafka lets -1 through for old request versions)."""
    cluster = await two_brokers_with_data()
    try:
        deletion = cluster.run_in_background(cluster.stop_replica(2, TP, delete=True, broker_epoch=-1))
        response = await cluster.complete(deletion, step_ms=1)
        assert isinstance(response, StopReplicaResponse)
        assert response.error_code is ErrorCode.STALE_BROKER_EPOCH
        await cluster.settle()
        assert cluster.log(2, TP).log_end_offset == 3
    finally:
        await cluster.__aexit__(None, None, None)


async def test_a_controlled_shutdown_without_a_broker_epoch_moves_nothing() -> None:
    """The controller's side of the same rule: ControlledShutdown(broker_epoch=-1) for a live broker
    used to make the controller move its leaderships away and mark it shutting down."""
    cluster = await two_brokers_with_data()
    try:
        leader = cluster.zk_partition_state(TP)[0].leader
        response = await cluster.controlled_shutdown_request(leader, broker_epoch=-1)
        assert response.error_code is ErrorCode.STALE_BROKER_EPOCH
        await cluster.settle()
        assert cluster.zk_partition_state(TP)[0].leader == leader
    finally:
        await cluster.__aexit__(None, None, None)

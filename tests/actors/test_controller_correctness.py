"""Regressions for the controller's failure paths (Kafka 2.4's guarantees when things break), on
brokers in one process running the real controller, on virtual time. Each failed before its fix."""

from __future__ import annotations

import logging

import pytest

from actors.common.errors import ErrorCode
from actors.common.protocol import BrokerEndpoint
from actors.common.types import TopicPartition
from actors.controller.logic import ControllerLogic
from actors.controller.state import (
    ControllerContext,
    LeaderIsrAndEpoch,
    LiveBroker,
    PartitionMachineState,
    ReplicaMachineState,
)
from actors.server import zk_data
from runtime.coordination.base import Stat
from runtime.coordination.requests import WriteOutcome, ZkFencedSetMany, ZkGetMany
from tests.support.cluster import InProcessCluster, started

TP = TopicPartition("orders", 0)


async def set_topic_config(
    cluster: InProcessCluster, topic: str, config: dict[str, str], *, notify: bool
) -> None:
    """What ``topics --alter`` writes: the config znode and, with ``notify``, the change notice."""
    await cluster.operator.set(
        zk_data.topic_config_path(topic), zk_data.encode_topic_config(config), version=-1
    )
    if notify:
        await cluster.operator.create(
            f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}",
            zk_data.encode_config_change_notification(topic),
            sequential=True,
        )


async def offline_after_losing_its_isr(cluster: InProcessCluster) -> None:
    """RF 2 on [2, 3] (broker 1, the controller, stays): broker 3 dies (the ISR shrinks to [2]),
    then broker 2: no live ISR member; then broker 3 comes back, out of the ISR."""
    await cluster.kill(3)
    await cluster.wait_for_state(TP, lambda state: state.isr == (2,))
    await cluster.kill(2)
    await cluster.wait_for_state(TP, lambda state: state.leader == -1)
    await cluster.start_broker(3)


@pytest.mark.asyncio
async def test_unclean_election_follows_the_topic_config_when_disabled_later() -> None:
    """Item 1: the controller read ``unclean.leader.election.enable`` only when it loaded the
    topic; turned off later, an unclean election still happened (acks=all records lost)."""
    cluster = await started(1, 2, 3, session_timeout_ms=4_000)
    try:
        assert cluster.controller_id() == 1
        await cluster.create_topic(TP.topic, {0: (2, 3)}, configs={"unclean.leader.election.enable": "true"})
        await set_topic_config(cluster, TP.topic, {"unclean.leader.election.enable": "false"}, notify=True)
        await cluster.advance(1_000)
        await offline_after_losing_its_isr(cluster)
        await cluster.advance(10_000)
        state, _ = cluster.zk_partition_state(TP)
        assert state.leader == -1, "an unclean election happened although the topic no longer allows it"
    finally:
        await cluster.__aexit__(None, None, None)


@pytest.mark.asyncio
async def test_enabling_unclean_election_elects_an_offline_partition() -> None:
    """Item 1: turning unclean election on revived nothing; Kafka elects the offline partitions."""
    cluster = await started(1, 2, 3, session_timeout_ms=4_000)
    try:
        assert cluster.controller_id() == 1
        await cluster.create_topic(TP.topic, {0: (2, 3)})
        await offline_after_losing_its_isr(cluster)
        await cluster.advance(10_000)
        assert cluster.zk_partition_state(TP)[0].leader == -1
        await set_topic_config(cluster, TP.topic, {"unclean.leader.election.enable": "true"}, notify=True)
        await cluster.wait_for_state(TP, lambda state: state.leader == 3, within_ms=10_000)
    finally:
        await cluster.__aexit__(None, None, None)


@pytest.mark.asyncio
async def test_a_broker_in_controlled_shutdown_does_not_lead_a_new_partition() -> None:
    """Item 6: a broker shutting down was chosen leader of a new partition (and of an offline
    one) and kept in the new ISR, so a second election followed at once. Kafka counts it live
    only for the controlled-shutdown election. Broker 2 asks for its controlled shutdown (it
    leads nothing, so it stays up, shutting down); a topic is then created on [2, 3]."""
    cluster = await started(1, 2, 3, session_timeout_ms=4_000)
    try:
        response = await cluster.controlled_shutdown_request(2, broker_epoch=cluster.broker_epoch(2))
        assert response.remaining_partitions == ()
        await cluster.create_topic(TP.topic, {0: (2, 3)})
        # (Broker 2 may rejoin the ISR later as a caught-up follower; it is not made leader.)
        assert cluster.zk_partition_state(TP)[0].leader == 3
    finally:
        await cluster.__aexit__(None, None, None)


def logic_with(context: ControllerContext) -> ControllerLogic:
    logic = ControllerLogic(
        broker_id=1, default_unclean_leader_election=False,
        now_ms=lambda: 0, now_ns=lambda: 0, wall_clock_ms=lambda: 0, session_id=lambda: None,
        log=logging.getLogger("actorlog.controller"),
    )  # fmt: skip
    logic.context = context
    logic.active = True
    return logic


def state_znode(state: LeaderIsrAndEpoch) -> tuple[bytes, Stat]:
    data = zk_data.encode_partition_state(
        zk_data.PartitionState(
            leader=state.leader, leader_epoch=state.leader_epoch, isr=state.isr, controller_epoch=1
        )
    )
    return data, Stat(
        version=state.zk_version, cversion=0, czxid=1, mzxid=1, ephemeral_owner=0, num_children=0,
        data_length=len(data),
    )  # fmt: skip


def test_an_isr_write_is_retried_on_badversion_until_it_lands() -> None:
    """Item 8: the controller gave up after ten BADVERSIONs, leaving a dead replica in the ISR
    until the next event; Kafka retries until done. Here a leader's own ISR writes win the race
    twelve times before the controller's removal of broker 3 lands."""
    context = ControllerContext(controller_epoch=1, epoch_zk_version=0)
    context.add_topic(TP.topic, {0: (1, 2, 3)})
    current = LeaderIsrAndEpoch(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=1, zk_version=7)
    context.leadership[TP] = current
    script = logic_with(context)._remove_replica_from_isr(3, [TP])
    path = zk_data.partition_state_path(TP.topic, TP.partition)
    step = next(script)
    races = 0
    while True:
        if isinstance(step, ZkGetMany):
            reply: object = {path: state_znode(current)}
        else:
            assert isinstance(step, ZkFencedSetMany)
            if races < 12:
                races += 1
                current = LeaderIsrAndEpoch(
                    leader=1,
                    leader_epoch=4,
                    isr=(1, 2, 3),
                    controller_epoch=1,
                    zk_version=current.zk_version + 1,
                )
                reply = [WriteOutcome(path=path, new_version=None, error="bad_version")]
            else:
                reply = [WriteOutcome(path=path, new_version=current.zk_version + 1)]
        try:
            step = script.send(reply)
        except StopIteration:
            break
    assert races == 12
    assert context.leadership[TP].isr == (1, 2)


def test_a_resigning_controller_can_close_an_isr_notification_script() -> None:
    """Item 7: a ``yield`` inside ``finally`` made ``close()`` raise when the controller resigned
    in the middle of an ISR change notification: the actor crashed, and queued controlled-shutdown
    requesters were never answered."""
    context = ControllerContext(controller_epoch=1, epoch_zk_version=0)
    script = logic_with(context).on_isr_change_notification()
    next(script)  # the watched read of /isr_change_notification
    step = script.send(["isr_change_0000000001"])
    assert isinstance(step, ZkGetMany)
    script.close()  # what a resignation does to the running script


def test_a_controlled_shutdown_sorts_its_partitions_in_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by ``python -m ops.bench.scale``: the partitions a broker shutting down follows were
    told from those it leads by a list scan, one TopicPartition comparison per (hosted, led)
    pair: 2,000,000 for a broker with 3,000 partitions that leads 1,000 (a third of a second of the
    controller's loop). Here 300 partitions, broker 1 leading 100: comparisons stay linear."""
    partitions = 300
    context = ControllerContext(controller_epoch=1, epoch_zk_version=0)
    assignment = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(partitions)}
    context.add_topic(TP.topic, assignment)
    for broker_id in (1, 2, 3):
        endpoint = BrokerEndpoint(broker_id=broker_id, host="127.0.0.1", port=9090 + broker_id)
        context.live_brokers[broker_id] = LiveBroker(endpoint=endpoint, broker_epoch=10 + broker_id)
    states = {}
    for p, replicas in assignment.items():
        tp = TopicPartition(TP.topic, p)
        state = LeaderIsrAndEpoch(
            leader=replicas[0], leader_epoch=0, isr=replicas, controller_epoch=1, zk_version=0
        )
        context.leadership[tp] = state
        states[zk_data.partition_state_path(tp.topic, tp.partition)] = state
        for broker_id in replicas:
            context.replica_states[(tp, broker_id)] = ReplicaMachineState.ONLINE
        context.partition_states[tp] = PartitionMachineState.ONLINE
    comparisons = 0
    compare = TopicPartition.__eq__

    def counting_eq(self: TopicPartition, other: object) -> bool:
        nonlocal comparisons
        comparisons += 1
        return compare(self, other)

    script = logic_with(context).on_controlled_shutdown(1, 11)
    monkeypatch.setattr(TopicPartition, "__eq__", counting_eq)
    reply: object = None
    error, remaining = None, None
    try:
        while True:
            step = script.send(reply)
            if isinstance(step, ZkGetMany):
                reply = {path: state_znode(states[path]) for path in step.paths}
            elif isinstance(step, ZkFencedSetMany):
                reply = [
                    WriteOutcome(path=path, new_version=version + 1) for path, _, version in step.updates
                ]
            else:
                reply = None
    except StopIteration as finished:
        error, remaining = finished.value
    monkeypatch.undo()
    assert error is ErrorCode.NONE
    assert remaining == []  # every leadership moved off broker 1
    assert comparisons < 10 * partitions, comparisons

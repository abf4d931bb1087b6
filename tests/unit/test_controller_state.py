"""The controller's state machines: every legal edge is accepted, every illegal one is an assertion."""

from __future__ import annotations

import itertools

import pytest

from actors.common.types import TopicPartition
from actors.controller.state import (
    PARTITION_VALID_PREVIOUS_STATES,
    REPLICA_VALID_PREVIOUS_STATES,
    ControllerContext,
    LeaderIsrAndEpoch,
    PartitionMachineState,
    ReplicaMachineState,
)

TP = TopicPartition("t", 0)


def context_with_partition(state: PartitionMachineState) -> ControllerContext:
    context = ControllerContext()
    if state is not PartitionMachineState.NON_EXISTENT:
        context.partition_states[TP] = state
    return context


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(PartitionMachineState, PartitionMachineState))
)
def test_partition_transitions_follow_the_table(
    current: PartitionMachineState, target: PartitionMachineState
) -> None:
    context = context_with_partition(current)
    if current in PARTITION_VALID_PREVIOUS_STATES[target]:
        assert context.set_partition_state(TP, target) is current
        assert context.partition_state(TP) is target
    else:
        with pytest.raises(AssertionError, match=rf"{TP}: {current.value} -> {target.value}"):
            context.set_partition_state(TP, target)


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(ReplicaMachineState, ReplicaMachineState))
)
def test_replica_transitions_follow_the_table(
    current: ReplicaMachineState, target: ReplicaMachineState
) -> None:
    context = ControllerContext()
    if current is not ReplicaMachineState.NON_EXISTENT:
        context.replica_states[(TP, 3)] = current
    if current in REPLICA_VALID_PREVIOUS_STATES[target]:
        context.set_replica_state(TP, 3, target)
        assert context.replica_state(TP, 3) is target
    else:
        with pytest.raises(AssertionError, match=rf"replica 3 of {TP}: {current.value} -> {target.value}"):
            context.set_replica_state(TP, 3, target)


def test_the_tables_match_kafkas_declared_states() -> None:
    assert PARTITION_VALID_PREVIOUS_STATES[PartitionMachineState.NEW] == {PartitionMachineState.NON_EXISTENT}
    assert PARTITION_VALID_PREVIOUS_STATES[PartitionMachineState.NON_EXISTENT] == {
        PartitionMachineState.OFFLINE
    }
    assert (
        ReplicaMachineState.DELETION_INELIGIBLE in REPLICA_VALID_PREVIOUS_STATES[ReplicaMachineState.ONLINE]
    )


def test_offline_and_imbalance_counts_skip_topics_being_deleted() -> None:
    context = ControllerContext()
    context.add_topic("a", {0: (1, 2), 1: (2, 1)})
    context.add_topic("doomed", {0: (1, 2)})
    for tp in context.all_partitions():
        context.partition_states[tp] = PartitionMachineState.OFFLINE
    context.leadership[TopicPartition("a", 1)] = LeaderIsrAndEpoch(
        leader=1, leader_epoch=1, isr=(1,), controller_epoch=1, zk_version=1
    )
    context.leadership[TopicPartition("doomed", 0)] = LeaderIsrAndEpoch(
        leader=2, leader_epoch=1, isr=(2,), controller_epoch=1, zk_version=1
    )
    context.topics_to_delete.add("doomed")
    assert context.offline_partition_count() == 2
    assert context.preferred_replica_imbalance_count() == 1
    context.remove_topic("doomed")
    assert context.partitions_of("doomed") == []

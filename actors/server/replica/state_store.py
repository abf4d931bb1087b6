"""The ZooKeeper side of a leader's ISR change: Kafka's ``ZkPartitionStateStore`` with
``ReplicationUtils.updateLeaderAndIsr`` and ``checkLeaderAndIsrZkData`` (docs/replication.md §2.4).

``isr_write`` is the exchange as a script of ZooKeeper request values (``runtime/scripts.py``): a
conditional ``setData`` of ``/brokers/topics/<T>/partitions/<P>/state`` on the zkVersion the
leader has cached. Its result is the znode's new version, or None when the write did not happen:

* OK → the new version;
* BADVERSION → re-read the znode: if it says exactly what we tried to write (leader, leader epoch,
  controller epoch, ISR), a retried write of ours landed: its current version; otherwise None
  (the controller changed the znode — the fencing of a deposed leader);
* NONODE → None. Any other error propagates (the actor counts it as a failed update).

The script never awaits: whoever drives it performs each request. ``conditional_isr_write`` is
the operation the partition actor pipes today: the runtime performs the whole script in it.
``read_partition_state`` is the same for the state znode a recovering leader reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition_state import LeaderAndIsr
from runtime.coordination.base import Coordinator, Stat
from runtime.coordination.errors import BadVersionError, NoNodeError
from runtime.coordination.requests import ZkGet, ZkRequest, ZkSet
from runtime.scripts import perform_script

__all__ = ["conditional_isr_write", "isr_write", "partition_state", "read_partition_state"]


def isr_write(tp: TopicPartition, proposal: LeaderAndIsr) -> Generator[ZkRequest, Any, int | None]:
    path = zk_data.partition_state_path(tp.topic, tp.partition)
    data = zk_data.encode_partition_state(
        zk_data.PartitionState(
            leader=proposal.leader,
            leader_epoch=proposal.leader_epoch,
            isr=proposal.isr,
            controller_epoch=proposal.controller_epoch,
        )
    )
    try:
        stat: Stat = yield ZkSet(path, data, version=proposal.zk_version)
    except BadVersionError:
        # Maybe a retried write of ours landed: if the znode says exactly what we wrote, it is
        # ours (Kafka's checkLeaderAndIsrZkData).
        raw, current_stat = yield ZkGet(path)
        current = zk_data.decode_partition_state(raw, path=path)
        ours = (
            current.leader == proposal.leader
            and current.leader_epoch == proposal.leader_epoch
            and current.controller_epoch == proposal.controller_epoch
            and set(current.isr) == set(proposal.isr)
        )
        return current_stat.version if ours else None
    except NoNodeError:
        return None
    return stat.version


def conditional_isr_write(
    coordinator: Coordinator, tp: TopicPartition, proposal: LeaderAndIsr
) -> Callable[[], Awaitable[int | None]]:
    """The whole exchange as one operation to pipe (the runtime performs ``isr_write``)."""

    def operation() -> Awaitable[int | None]:
        return perform_script(coordinator, isr_write(tp, proposal))

    return operation


def partition_state(tp: TopicPartition) -> Generator[ZkRequest, Any, tuple[zk_data.PartitionState, int]]:
    """The partition's state znode and its zkVersion (raises NoNodeError if it has none)."""
    path = zk_data.partition_state_path(tp.topic, tp.partition)
    raw, stat = yield ZkGet(path)
    return zk_data.decode_partition_state(raw, path=path), stat.version


def read_partition_state(
    coordinator: Coordinator, tp: TopicPartition
) -> Callable[[], Awaitable[tuple[zk_data.PartitionState, int]]]:
    def operation() -> Awaitable[tuple[zk_data.PartitionState, int]]:
        return perform_script(coordinator, partition_state(tp))

    return operation

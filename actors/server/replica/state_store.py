"""The ZooKeeper side of a leader's ISR change: Kafka's ``ZkPartitionStateStore`` with
``ReplicationUtils.updateLeaderAndIsr`` and ``checkLeaderAndIsrZkData`` (docs/replication.md §2.4).

``conditional_isr_write`` returns the I/O (a coroutine function) that the partition actor pipes:
a conditional ``setData`` of ``/brokers/topics/<T>/partitions/<P>/state`` on the zkVersion the
leader has cached. Its outcome is the znode's new version, or None when the write did not happen:

* OK → the new version;
* BADVERSION → re-read the znode: if it says exactly what we tried to write (leader, leader epoch,
  controller epoch, ISR), a retried write of ours landed: its current version; otherwise None
  (the controller changed the znode — the fencing of a deposed leader);
* NONODE → None. Any other error propagates (the actor counts it as a failed update).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.replica.partition_state import LeaderAndIsr
from runtime.coordination.base import Coordinator
from runtime.coordination.errors import BadVersionError, NoNodeError

__all__ = ["conditional_isr_write"]


def conditional_isr_write(
    coordinator: Coordinator, tp: TopicPartition, proposal: LeaderAndIsr
) -> Callable[[], Awaitable[int | None]]:
    path = zk_data.partition_state_path(tp.topic, tp.partition)
    data = zk_data.encode_partition_state(
        zk_data.PartitionState(
            leader=proposal.leader,
            leader_epoch=proposal.leader_epoch,
            isr=proposal.isr,
            controller_epoch=proposal.controller_epoch,
        )
    )

    async def write() -> int | None:
        try:
            stat = await coordinator.set(path, data, version=proposal.zk_version)
        except BadVersionError:
            # Maybe a retried write of ours landed: if the znode says exactly what we wrote,
            # it is ours (Kafka's checkLeaderAndIsrZkData).
            raw, stat = await coordinator.get(path)
            current = zk_data.decode_partition_state(raw, path=path)
            ours = (
                current.leader == proposal.leader
                and current.leader_epoch == proposal.leader_epoch
                and current.controller_epoch == proposal.controller_epoch
                and set(current.isr) == set(proposal.isr)
            )
            return stat.version if ours else None
        except NoNodeError:
            return None
        return stat.version

    return write

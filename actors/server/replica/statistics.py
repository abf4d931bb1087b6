"""What a partition replica reports: its statistics snapshot and the counters behind it.

``PartitionStatistics`` is the frozen snapshot the metrics collectors read at scrape time
(docs/propagation.md §3: ``UnderReplicated``, ``UnderMinIsr``, ``AtMinIsr``, ISR shrink/expand and
failed-update counts, produce/fetch request counts, purgatory expiries). ``PartitionCounters`` is
the mutable tally the partition actor keeps between snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.common.types import TopicPartition
from actors.server.replica.partition_state import Role

__all__ = ["PartitionCounters", "PartitionStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionStatistics:
    tp: TopicPartition
    role: Role
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    assigned_replicas: tuple[int, ...]
    min_insync_replicas: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    size_bytes: int
    segment_count: int
    isr_change_in_flight: bool
    delayed_produces: int
    isr_shrinks_total: int
    isr_expands_total: int
    failed_isr_updates_total: int
    bytes_in_total: int
    messages_in_total: int
    bytes_out_total: int
    replication_bytes_in_total: int
    replication_bytes_out_total: int
    produce_requests_total: int
    failed_produce_requests_total: int
    fetch_requests_total: int
    failed_fetch_requests_total: int
    delayed_produce_expires_total: int
    # KIP-455: the replicas being added and removed while the partition is reassigning; bytes a
    # replica being added fetched here (follower side) or was served (leader side).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    reassignment_bytes_in_total: int = 0
    reassignment_bytes_out_total: int = 0

    @property
    def under_replicated(self) -> bool:
        """KIP-352: replicas being added do not count until they join the ISR."""
        return self.role is Role.LEADER and len(self.assigned_replicas) - len(self.adding_replicas) > len(
            self.isr
        )

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def under_min_isr(self) -> bool:
        return self.role is Role.LEADER and len(self.isr) < self.min_insync_replicas

    @property
    def at_min_isr(self) -> bool:
        return self.role is Role.LEADER and len(self.isr) == self.min_insync_replicas


@dataclass(slots=True)
class PartitionCounters:
    isr_shrinks_total: int = 0
    isr_expands_total: int = 0
    failed_isr_updates_total: int = 0
    bytes_in_total: int = 0
    messages_in_total: int = 0
    bytes_out_total: int = 0
    replication_bytes_in_total: int = 0
    replication_bytes_out_total: int = 0
    produce_requests_total: int = 0
    failed_produce_requests_total: int = 0
    fetch_requests_total: int = 0
    failed_fetch_requests_total: int = 0
    delayed_produce_expires_total: int = 0
    reassignment_bytes_in_total: int = 0
    reassignment_bytes_out_total: int = 0

"""Messages a PartitionActor understands, and its answers.

These are node-local: the broker actor and the replica fetchers of the same broker send them; they
never cross the wire (the wire carries ``actors.common.protocol``'s Kafka requests, which the broker splits
into these per-partition messages). Asks are marked; everything else is a tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from actors.common.errors import ErrorCode
from actors.common.protocol import FetchPartitionResponse, LeaderAndIsrPartitionState
from actors.common.types import TopicPartition
from actors.server.config import TopicPolicy
from runtime.storage.config import LogConfig

__all__ = [
    "AppendAsFollower",
    "AppendRecords",
    "BecomeFollower",
    "BecomeLeader",
    "CreateLog",
    "FetchOffsetForTimestamp",
    "FollowerAppendResult",
    "FollowerLogState",
    "FollowerRequest",
    "GetFollowerLogState",
    "IsrChangeRecorded",
    "LastOffsetForLeaderEpoch",
    "MaybeFlush",
    "MaybeShrinkIsr",
    "NotifyOnChange",
    "PartitionAppendResult",
    "PartitionChanged",
    "PartitionCommand",
    "PartitionReadResult",
    "ReadRecords",
    "ReplicaStopped",
    "StopReplica",
    "TruncateFullyAndStartAt",
    "TruncateOnLeaderEpoch",
    "TruncateTo",
    "TruncationResult",
    "UpdateTopicConfig",
]


# ------------------------------------------------------------------------- from the broker


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    state: LeaderAndIsrPartitionState
    policy: TopicPolicy
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    state: LeaderAndIsrPartitionState
    policy: TopicPolicy
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class CreateLog:
    """A replica assigned here whose leader is not yet known: its log exists now (so its checkpoints
    do), while its role waits for a LeaderAndIsr naming a live leader (Kafka's KAFKA-1647)."""

    policy: TopicPolicy
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class UpdateTopicConfig:
    """The topic's configuration changed (``/config/changes``): new policy and log settings."""

    policy: TopicPolicy
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class StopReplica:
    """Stop serving (StopReplica from the controller). Without ``delete`` the replica goes offline
    and its actor stays, keeping its log and leader epoch (Kafka keeps the ``Partition``); with
    ``delete`` the log is deleted and the actor stops."""

    delete: bool


@dataclass(frozen=True, slots=True)
class ReplicaStopped:
    """The answer to a StopReplica asked (the broker asks when it deletes): the log is gone, or
    deleting it failed (KAFKA_STORAGE_ERROR)."""

    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class MaybeShrinkIsr:
    """The broker's ``isr-expiration`` task tick."""


@dataclass(frozen=True, slots=True)
class MaybeFlush:
    """The broker's ``kafka-log-flusher`` task tick: flush the log if its ``flush.ms`` has passed."""


@dataclass(frozen=True, slots=True)
class NotifyOnChange:
    """Send the broker one ``PartitionChanged`` at the next append or high watermark change.

    ``seen_*`` are the offsets of the read that made the broker park a fetch: if the partition has
    already moved past them (another request got in between), it answers at once, so no change is
    ever missed.
    """

    seen_log_end_offset: int
    seen_high_watermark: int


@dataclass(frozen=True, slots=True)
class AppendRecords:
    """Ask: a producer's records for this partition (the reply waits for acks=all)."""

    records: bytes
    acks: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class PartitionAppendResult:
    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_count: int = 0


@dataclass(frozen=True, slots=True)
class ReadRecords:
    """Ask: read for a fetch. ``update_follower_state`` is False when re-reading a parked fetch."""

    replica_id: int
    fetch_offset: int
    follower_log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    min_one_message: bool
    update_follower_state: bool
    # The group coordinator's loading read (Kafka's FetchLogEnd isolation, which its loader uses):
    # up to the log end offset instead of the high watermark, and from the log start offset when
    # ``fetch_offset`` is below it. Node-local: no client request sets it.
    fetch_log_end: bool = False
    # The broker's leader replication quota holds this throttled partition back now (Kafka's
    # shouldLeaderThrottle, less the ISR test, which is the partition's): a fetching replica
    # outside the ISR gets no records this time; an in-sync one is never held back.
    leader_throttled: bool = False


@dataclass(frozen=True, slots=True)
class PartitionReadResult:
    response: FetchPartitionResponse
    # For follower fetches: the HW is above what this follower was last sent (KIP-392: answer now).
    high_watermark_advanced_for_follower: bool = False
    # The leader's log end offset when the read happened (-1 when the read failed).
    log_end_offset: int = -1
    # The records were withheld by the leader replication quota (``ReadRecords.leader_throttled``).
    withheld_by_quota: bool = False


@dataclass(frozen=True, slots=True)
class LastOffsetForLeaderEpoch:
    """Ask: the leader side of OffsetsForLeaderEpoch (replies an OffsetForLeaderEpochResult)."""

    replica_id: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchOffsetForTimestamp:
    """Ask: the leader side of ListOffsets (replies a ListOffsetsPartitionResponse)."""

    replica_id: int
    timestamp: int
    current_leader_epoch: int


# ---------------------------------------------------------------------- to the broker


@dataclass(frozen=True, slots=True)
class PartitionChanged:
    """New data or a new high watermark: parked fetches watching this partition may complete."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class IsrChangeRecorded:
    """A leader-initiated ISR change was written to ZooKeeper (``ReplicaManager.recordIsrChange``)."""

    tp: TopicPartition


# ---------------------------------------------------------------------- from the fetcher
# Every follower-side request names the leader epoch it was built for: a partition whose role or
# epoch has moved on refuses it, so a fetcher can never apply a stale leader's data.


@dataclass(frozen=True, slots=True)
class GetFollowerLogState:
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FollowerLogState:
    error_code: ErrorCode
    latest_epoch: int | None = None
    log_end_offset: int = -1
    log_start_offset: int = -1
    high_watermark: int = -1


@dataclass(frozen=True, slots=True)
class TruncateOnLeaderEpoch:
    """The leader answered OffsetsForLeaderEpoch with ``(leader_epoch_answer, end_offset)``."""

    leader_epoch: int
    leader_epoch_answer: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class TruncateTo:
    leader_epoch: int
    offset: int


@dataclass(frozen=True, slots=True)
class TruncateFullyAndStartAt:
    leader_epoch: int
    offset: int


@dataclass(frozen=True, slots=True)
class TruncationResult:
    error_code: ErrorCode
    fetch_offset: int = -1
    complete: bool = True
    log_end_offset: int = -1


@dataclass(frozen=True, slots=True)
class AppendAsFollower:
    leader_epoch: int
    fetch_offset: int
    records: bytes
    leader_high_watermark: int
    leader_log_start_offset: int


@dataclass(frozen=True, slots=True)
class FollowerAppendResult:
    error_code: ErrorCode
    log_end_offset: int = -1
    log_start_offset: int = -1
    high_watermark: int = -1
    appended_bytes: int = 0
    error_message: str | None = None


# The replica fetcher's requests: a follower takes them, any other role refuses them.
FollowerRequest: TypeAlias = (
    GetFollowerLogState | TruncateOnLeaderEpoch | TruncateTo | TruncateFullyAndStartAt | AppendAsFollower
)


PartitionCommand: TypeAlias = (
    BecomeLeader
    | BecomeFollower
    | CreateLog
    | UpdateTopicConfig
    | StopReplica
    | MaybeShrinkIsr
    | MaybeFlush
    | NotifyOnChange
    | AppendRecords
    | ReadRecords
    | LastOffsetForLeaderEpoch
    | FetchOffsetForTimestamp
    | GetFollowerLogState
    | TruncateOnLeaderEpoch
    | TruncateTo
    | TruncateFullyAndStartAt
    | AppendAsFollower
)

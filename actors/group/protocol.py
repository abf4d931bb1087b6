"""The group coordinator logic's vocabulary: requests in, results and effects out, what is persisted.

The logic (``actors.group.coordinator_logic``) takes a request (or a timer, or an append's
completion) with ``now_ms`` and returns effects; the actor that will host it carries them out:

* ``Reply``: answer a request, possibly one held since an earlier event (a parked JoinGroup or SyncGroup);
* ``StartTimer`` / ``CancelTimer``: arm or disarm a wake-up; when it fires, feed the key back with
  ``on_timer``. A timer only wakes the logic up: the deadlines live in the logic's state, so a stale
  or duplicated firing is harmless;
* ``AppendGroupMetadata`` / ``AppendOffsetCommits``: append to the group's ``__consumer_offsets``
  partition with acks=all, then call ``on_append_completed(append_id, ...)`` once the high watermark
  covers the records (or with the append's error). The replies that depend on it wait until then;
* ``AppendTombstones``: deletions of expired or deleted offsets and of a dead group's metadata; no
  completion is expected (Kafka writes them with acks=0: a lost tombstone is written again by the
  next expiry pass).

The persisted dataclasses (``StoredGroupMetadata``, ``StoredOffsetCommit``) carry exactly the fields of
Kafka's group-metadata value (key v2, value v3) and offset-commit value (key v1, value v1 or v3); the
byte formats belong to ``actors/group/records.py`` (docs/consumer-groups.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.group_state import NO_GENERATION, GroupOverview, GroupSummary, OffsetAndMetadata, ReplyTo

__all__ = [
    "DEFAULT_RETENTION_TIME",
    "DEFAULT_TIMESTAMP",
    "AppendGroupMetadata",
    "AppendOffsetCommits",
    "AppendTombstones",
    "CancelTimer",
    "DescribeGroupResult",
    "Effect",
    "FetchedOffset",
    "HeartbeatRequest",
    "HeartbeatResult",
    "HeartbeatTimer",
    "JoinGroupRequest",
    "JoinGroupResult",
    "JoinTimer",
    "LeaveGroupRequest",
    "LeaveGroupResult",
    "ListGroupsResult",
    "LoadedGroup",
    "OffsetCommitPartition",
    "OffsetCommitRequest",
    "OffsetCommitResult",
    "OffsetFetchResult",
    "OffsetsRetentionTimer",
    "PendingMemberTimer",
    "Reply",
    "Response",
    "StartTimer",
    "StoredGroupMetadata",
    "StoredMember",
    "StoredOffsetCommit",
    "SyncGroupRequest",
    "SyncGroupResult",
    "TimerKey",
]

# OffsetCommit's "not given" values (Kafka's OffsetCommitRequest.DEFAULT_TIMESTAMP / _RETENTION_TIME).
DEFAULT_TIMESTAMP = -1
DEFAULT_RETENTION_TIME = -1


# ------------------------------------------------------------------------------------ requests


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    """JoinGroup v0-v5 without static membership. ``require_known_member_id`` is true from v4 (KIP-394)."""

    group_id: str
    member_id: str
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    # Only the leader sends one: member id -> opaque assignment bytes.
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    """LeaveGroup v0-v2 carry one member id; the logic takes a tuple so v3's batch fits later."""

    group_id: str
    member_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitPartition:
    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    # OffsetCommit v1 only: an explicit commit timestamp (DEFAULT_TIMESTAMP: the coordinator's now).
    commit_timestamp_ms: int = DEFAULT_TIMESTAMP


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str = ""
    generation_id: int = NO_GENERATION
    # OffsetCommit v2-v4 only (DEFAULT_RETENTION_TIME: retention follows KIP-211).
    retention_time_ms: int = DEFAULT_RETENTION_TIME
    offsets: dict[TopicPartition, OffsetCommitPartition] = field(default_factory=dict)


# ------------------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResult:
    """``members`` (member id, metadata of the chosen protocol) goes to the leader only."""

    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_name: str = ""
    leader_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """The top-level error and one error per leaving member (v0-v2 answer with the single member's)."""

    error: ErrorCode
    members: tuple[tuple[str, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    errors: dict[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """One partition of an OffsetFetch answer; offset -1 means nothing committed."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    offsets: dict[TopicPartition, FetchedOffset]


@dataclass(frozen=True, slots=True)
class DescribeGroupResult:
    group_id: str
    error: ErrorCode
    summary: GroupSummary


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[GroupOverview, ...]


Response: TypeAlias = (
    JoinGroupResult | SyncGroupResult | HeartbeatResult | LeaveGroupResult | OffsetCommitResult
)


# -------------------------------------------------------------------------------------- timers


@dataclass(frozen=True, slots=True)
class JoinTimer:
    """The group's DelayedJoin or InitialDelayedJoin."""

    group_id: str


@dataclass(frozen=True, slots=True)
class HeartbeatTimer:
    """A member's session (or new-member join) deadline: Kafka's DelayedHeartbeat."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class PendingMemberTimer:
    """A member id handed out with MEMBER_ID_REQUIRED that must rejoin within its session timeout."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class OffsetsRetentionTimer:
    """The periodic expiry pass (``offsets.retention.check.interval.ms``)."""


TimerKey: TypeAlias = JoinTimer | HeartbeatTimer | PendingMemberTimer | OffsetsRetentionTimer


# ------------------------------------------------------------------------------ persisted values


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    # The member's metadata for the group's chosen protocol, and its assignment.
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredGroupMetadata:
    """A group-metadata record's value: written when the leader's SyncGroup completes a rebalance, and when
    a rebalance ends with no members (then ``protocol``/``leader`` are None and ``members`` empty)."""

    group_id: str
    protocol_type: str | None
    generation_id: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int | None
    members: tuple[StoredMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredOffsetCommit:
    """An offset-commit record: key (group, topic, partition), value ``OffsetAndMetadata``."""

    group_id: str
    topic_partition: TopicPartition
    offset_and_metadata: OffsetAndMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedGroup:
    """What loading an offsets partition found for one group: the last group-metadata value (None if
    absent or deleted) and the last offset commit per partition with its record's log offset."""

    group_id: str
    metadata: StoredGroupMetadata | None
    offsets: dict[TopicPartition, tuple[int, OffsetAndMetadata]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class Reply:
    reply_to: ReplyTo
    response: Response


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Arm (or re-arm: one timer per key) a wake-up ``delay_ms`` from now."""

    key: TimerKey
    delay_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class AppendGroupMetadata:
    append_id: int
    offsets_partition: int
    record: StoredGroupMetadata


@dataclass(frozen=True, slots=True)
class AppendOffsetCommits:
    append_id: int
    offsets_partition: int
    records: tuple[StoredOffsetCommit, ...]


@dataclass(frozen=True, slots=True)
class AppendTombstones:
    """Delete ``offsets`` of ``group_id`` (and its group-metadata record if ``group_metadata``)."""

    offsets_partition: int
    group_id: str
    offsets: tuple[TopicPartition, ...]
    group_metadata: bool


Effect: TypeAlias = (
    Reply | StartTimer | CancelTimer | AppendGroupMetadata | AppendOffsetCommits | AppendTombstones
)

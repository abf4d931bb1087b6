"""The ``group-coordinator`` actor: hosts ``GroupCoordinatorLogic`` and carries out its effects.

The logic (``actors/group/coordinator_logic.py``) decides; this actor does what it decides
(docs/consumer-groups.md §10):

* group requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  DescribeGroups, ListGroups, DeleteGroups) arrive as local asks; the ask's ``Requester`` is the
  logic's ``ReplyTo``, so a parked JoinGroup or SyncGroup is answered by a later ``Reply`` effect;
* ``StartTimer`` / ``CancelTimer`` become the actor's timers, whose firing is fed back to ``on_timer``;
* ``AppendGroupMetadata`` / ``AppendOffsetCommits`` / ``AppendTombstones`` are encoded with
  ``actors/group/records.py`` into one v2 batch and handed to the injected ``OffsetsLogWriter``
  (an ask to the offsets partition's leader with acks=all); its outcome comes back as a message and
  goes to ``on_append_completed``, which maps produce errors to group errors (docs/consumer-groups.md §7);
* ``OffsetsPartitionElected`` starts loading: ``on_election``, then the partition is read from its
  start through the injected ``OffsetsLogReader``, one read at a time, folding the records (the last
  value per key wins, a tombstone deletes) into ``LoadedGroup`` values for ``complete_loading``;
  ``OffsetsPartitionResigned`` unloads (``on_resignation``: parked requests answered NOT_COORDINATOR).

The ports are what keeps the actor pure: each call records effects on the handler's context (an ask,
a pipe) and promises exactly one message back, built by the ``on_complete`` adapter it is given.

Deliberate choices:

* A read error (the partition moved, a timeout) retries the read after ``LOAD_RETRY_BACKOFF_MS``;
  bytes that do not decode as group records stop the load: the partition keeps answering
  COORDINATOR_LOAD_IN_PROGRESS rather than serve groups with state it could not read (Kafka 2.4
  logs the error and marks the partition loaded anyway). A re-election starts a fresh load.
* A record that cannot be encoded (a string over 32767 UTF-8 bytes) fails its append at once with
  MESSAGE_TOO_LARGE, which the logic maps like a produce error.
* A restart loses every group: the new incarnation tells the broker ``GroupCoordinatorStarted``
  (when it was given one) and the broker elects it again for every offsets partition it leads, so
  the restarted actor reloads them from the log; until then it owns nothing and answers
  NOT_COORDINATOR, never with the state it lost.
* Nothing is accepted from other nodes (``remote_asks``/``remote_tells`` empty): the Kafka listener
  and the broker on the same node are the senders.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, assert_never

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.coordinator_logic import GroupConfig, GroupCoordinatorLogic
from actors.group.group_state import GroupState, OffsetAndMetadata
from actors.group.protocol import (
    AppendGroupMetadata,
    AppendOffsetCommits,
    AppendTombstones,
    CancelTimer,
    DescribeGroupResult,
    Effect,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsResult,
    LoadedGroup,
    OffsetCommitRequest,
    OffsetFetchResult,
    Reply,
    StartTimer,
    StoredGroupMetadata,
    StoredMember,
    StoredOffsetCommit,
    SyncGroupRequest,
    TimerKey,
)
from actors.group.records import (
    NO_LEADER_EPOCH,
    NO_STATE_TIMESTAMP,
    GroupMetadataKey,
    GroupMetadataRecord,
    GroupMetadataValue,
    GroupRecord,
    GroupRecordError,
    LoadedGroupRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitRecord,
    OffsetCommitValue,
    build_group_batch,
    iterate_group_records,
    offset_commit_value,
)
from runtime.actor import Actor
from runtime.context import Context
from runtime.errors import StorageError
from runtime.messages import AskFailure, AskTimedOut, PeerUnavailable, Requester, UnknownActor
from runtime.ref import ActorRef
from runtime.storage.records import iterate_batches

__all__ = [
    "LOAD_RETRY_BACKOFF_MS",
    "AppendOutcome",
    "DeleteGroupsRequest",
    "DeleteGroupsResult",
    "DescribeGroupsRequest",
    "DescribeGroupsResult",
    "GroupCoordinatorActor",
    "GroupCoordinatorMessage",
    "GroupCoordinatorStarted",
    "GroupCoordinatorStatistics",
    "GroupRecordFold",
    "ListGroupsRequest",
    "OffsetFetchRequest",
    "OffsetsLogReader",
    "OffsetsLogWriter",
    "OffsetsPartitionElected",
    "OffsetsPartitionResigned",
    "ReadOutcome",
    "ask_failure_error",
    "group_metadata_record",
    "offset_commit_record",
    "tombstone_records",
]

LOAD_RETRY_BACKOFF_MS = 1_000
"""How long a failed read of an offsets partition waits before it is tried again."""


# ------------------------------------------------------------------------------------ requests
# JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit are ``actors.group.protocol``'s; the
# read-only and admin requests the logic takes as plain arguments get their message here.


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    """Ask: committed offsets of ``partitions`` (None: every partition with one). Replies
    ``OffsetFetchResult``."""

    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    """Ask: replies ``DescribeGroupsResult``, one ``DescribeGroupResult`` per id in order."""

    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribeGroupsResult:
    groups: tuple[DescribeGroupResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    """Ask: replies ``ListGroupsResult``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    """Ask: replies ``DeleteGroupsResult``."""

    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    errors: dict[str, ErrorCode]


GroupRequest: TypeAlias = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
)


# ----------------------------------------------------------------------------- from the broker


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsPartitionElected:
    """Tell: this broker became leader of ``__consumer_offsets-<partition>`` at ``leader_epoch``."""

    partition: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsPartitionResigned:
    """Tell: this broker no longer leads ``__consumer_offsets-<partition>``."""

    partition: int


@dataclass(frozen=True, slots=True)
class GroupCoordinatorStarted:
    """Tell, to the broker: a (re)started coordinator owns nothing; elect it again for every
    ``__consumer_offsets`` partition this broker leads."""


# ---------------------------------------------------------------------------------------- ports


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """An offsets append's end: ``error`` NONE once the high watermark covers the batch (acks=all),
    with ``base_offset`` the batch's first offset; otherwise the produce error."""

    error: ErrorCode
    base_offset: int = -1


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    """One read of an offsets partition: complete v2 batches (``records``, possibly empty) from the
    offset asked for, and the partition's log end offset when read (loading reads up to it, as
    Kafka 2.4's loader does)."""

    error: ErrorCode
    records: bytes = b""
    log_end_offset: int = 0


class OffsetsLogWriter(Protocol):
    """Appends group records to the local leader of an offsets partition.

    ``append`` records effects on ``ctx`` (the wiring: an ``AppendRecords`` ask with acks -1 to the
    partition actor, timed out after ``offsets.commit.timeout.ms``) and must see to it that exactly
    one ``on_complete(AppendOutcome)`` message reaches the actor: the partition's answer, or an ask
    failure mapped with ``ask_failure_error``. It never blocks and never raises.
    """

    def append(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        batch: bytes,
        on_complete: Callable[[AppendOutcome], GroupCoordinatorMessage],
    ) -> None: ...


class OffsetsLogReader(Protocol):
    """Reads an offsets partition's log for loading.

    ``read`` records effects on ``ctx`` (the wiring: a ``ReadRecords`` ask to the local partition
    actor, reading to its log end) and must see to it that exactly one ``on_complete(ReadOutcome)``
    message reaches the actor. ``start_offset`` 0 means the log's start (a log start offset above it
    is where the read begins). It returns at least one complete batch when ``start_offset`` is below
    the log end. It never blocks and never raises.
    """

    def read(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        start_offset: int,
        on_complete: Callable[[ReadOutcome], GroupCoordinatorMessage],
    ) -> None: ...


def ask_failure_error(failure: AskFailure) -> ErrorCode:
    """What a failed ask to the offsets partition means as a produce or read error: a timeout is
    REQUEST_TIMED_OUT (the append may still happen); a partition actor that is gone or unreachable
    is no longer the leader here."""
    match failure:
        case AskTimedOut():
            return ErrorCode.REQUEST_TIMED_OUT
        case PeerUnavailable() | UnknownActor():
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        case _:
            assert_never(failure)


# ------------------------------------------------------------------------------ private messages


@dataclass(frozen=True, slots=True)
class _GroupTimerFired:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class _AppendCompleted:
    append_id: int
    outcome: AppendOutcome


@dataclass(frozen=True, slots=True)
class _TombstonesAppended:
    partition: int
    outcome: AppendOutcome


@dataclass(frozen=True, slots=True)
class _OffsetsLogRead:
    partition: int
    load_id: int
    outcome: ReadOutcome


@dataclass(frozen=True, slots=True)
class _RetryLoad:
    partition: int
    load_id: int


GroupCoordinatorMessage: TypeAlias = (
    GroupRequest
    | OffsetsPartitionElected
    | OffsetsPartitionResigned
    | _GroupTimerFired
    | _AppendCompleted
    | _TombstonesAppended
    | _OffsetsLogRead
    | _RetryLoad
)


# ------------------------------------------------------------------------------ records <-> logic


def group_metadata_record(stored: StoredGroupMetadata) -> GroupMetadataRecord:
    """The group-metadata record (key v2, value v3) of what the logic persists."""
    return GroupMetadataRecord(
        GroupMetadataKey(stored.group_id),
        GroupMetadataValue(
            protocol_type=stored.protocol_type or "",
            generation=stored.generation_id,
            protocol=stored.protocol,
            leader=stored.leader,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.subscription,
                    assignment=m.assignment,
                )
                for m in stored.members
            ),
            current_state_timestamp=(
                NO_STATE_TIMESTAMP
                if stored.current_state_timestamp_ms is None
                else stored.current_state_timestamp_ms
            ),
        ),
    )


def offset_commit_record(stored: StoredOffsetCommit) -> OffsetCommitRecord:
    """The offset-commit record (key v1; value v1 with an explicit expiry, else v3)."""
    o = stored.offset_and_metadata
    tp = stored.topic_partition
    return OffsetCommitRecord(
        OffsetCommitKey(stored.group_id, tp.topic, tp.partition),
        offset_commit_value(
            o.offset,
            o.metadata,
            o.commit_timestamp_ms,
            leader_epoch=NO_LEADER_EPOCH if o.leader_epoch is None else o.leader_epoch,
            expire_timestamp=o.expire_timestamp_ms,
        ),
    )


def tombstone_records(effect: AppendTombstones) -> list[GroupRecord]:
    """Null-valued records deleting the effect's offsets (and the group's metadata record)."""
    records: list[GroupRecord] = [
        OffsetCommitRecord(OffsetCommitKey(effect.group_id, tp.topic, tp.partition), None)
        for tp in effect.offsets
    ]
    if effect.group_metadata:
        records.append(GroupMetadataRecord(GroupMetadataKey(effect.group_id), None))
    return records


def _offset_and_metadata(value: OffsetCommitValue) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        offset=value.offset,
        leader_epoch=None if value.leader_epoch == NO_LEADER_EPOCH else value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=None if value.expire_timestamp < 0 else value.expire_timestamp,
    )


def _stored_group_metadata(group_id: str, value: GroupMetadataValue) -> StoredGroupMetadata:
    return StoredGroupMetadata(
        group_id=group_id,
        protocol_type=value.protocol_type,
        generation_id=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        current_state_timestamp_ms=(
            None if value.current_state_timestamp == NO_STATE_TIMESTAMP else value.current_state_timestamp
        ),
        members=tuple(
            StoredMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in value.members
        ),
    )


@dataclass(slots=True)
class GroupRecordFold:
    """An offsets partition's records folded in log order, as Kafka's loader does: the last value per
    key wins and a tombstone deletes the key. A group whose metadata was deleted but which still has
    offsets loads as a group with offsets only (Empty)."""

    metadata: dict[str, StoredGroupMetadata | None] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, tuple[int, OffsetAndMetadata]]] = field(default_factory=dict)
    records: int = 0

    def add(self, loaded: LoadedGroupRecord) -> None:
        self.records += 1
        match loaded.record:
            case OffsetCommitRecord(key=key, value=value):
                tp = TopicPartition(key.topic, key.partition)
                group_offsets = self.offsets.setdefault(key.group, {})
                if value is None:
                    group_offsets.pop(tp, None)
                else:
                    group_offsets[tp] = (loaded.offset, _offset_and_metadata(value))
            case GroupMetadataRecord(key=key, value=value):
                self.metadata[key.group] = None if value is None else _stored_group_metadata(key.group, value)

    def groups(self) -> list[LoadedGroup]:
        ids = {g for g, m in self.metadata.items() if m is not None}
        ids |= {g for g, offsets in self.offsets.items() if offsets}
        return [
            LoadedGroup(group_id=g, metadata=self.metadata.get(g), offsets=dict(self.offsets.get(g, {})))
            for g in sorted(ids)
        ]


# --------------------------------------------------------------------------------------- actor


@dataclass(slots=True)
class _Load:
    load_id: int
    leader_epoch: int
    next_offset: int = 0
    fold: GroupRecordFold = field(default_factory=GroupRecordFold)
    failed: bool = False


@dataclass(frozen=True, slots=True)
class GroupCoordinatorStatistics:
    groups: int
    groups_by_state: dict[str, int]
    owned_partitions: tuple[int, ...]
    loading_partitions: tuple[int, ...]
    rebalances_total: int
    appends_in_flight: int
    appends_total: int
    append_errors_total: int
    loads_completed_total: int
    load_read_errors_total: int
    load_corrupt_total: int
    records_loaded_total: int


class GroupCoordinatorActor(Actor[GroupCoordinatorMessage]):
    """One per broker: every group of the ``__consumer_offsets`` partitions this broker leads."""

    def __init__(
        self,
        *,
        config: GroupConfig,
        writer: OffsetsLogWriter,
        reader: OffsetsLogReader,
        broker: ActorRef | None = None,
    ) -> None:
        """``broker``: told ``GroupCoordinatorStarted`` at every start, so that the offsets
        partitions it leads are elected again after a restart (None: nobody elects it again)."""
        self._broker = broker
        self._writer = writer
        self._reader = reader
        self._logic = GroupCoordinatorLogic(config=config, generate_uuid=self._generate_uuid)
        self._uuid_bits: Callable[[int], int] | None = None
        self._loads: dict[int, _Load] = {}
        self._leader_epochs: dict[int, int] = {}
        self._next_load_id = 0
        self._appends_in_flight: set[int] = set()
        self._appends_total = 0
        self._append_errors_total = 0
        self._loads_completed_total = 0
        self._load_read_errors_total = 0
        self._load_corrupt_total = 0
        self._records_loaded_total = 0

    @property
    def logic(self) -> GroupCoordinatorLogic:
        """The hosted rules (read-only use: checkers and tests)."""
        return self._logic

    def _generate_uuid(self) -> str:
        # Member ids' unique part, from the node's seeded generator (deterministic in the simulation).
        assert self._uuid_bits is not None, "member ids are handed out only after on_start"
        return str(uuid.UUID(int=self._uuid_bits(128), version=4))

    # ------------------------------------------------------------------------------ lifecycle

    def on_start(self, ctx: Context[GroupCoordinatorMessage]) -> None:
        self._uuid_bits = ctx.rng.getrandbits
        self._carry_out(ctx, self._logic.startup(ctx.now_ms))
        if self._broker is not None:
            ctx.tell(self._broker, GroupCoordinatorStarted())

    def on_stop(self, ctx: Context[GroupCoordinatorMessage]) -> None:
        self._carry_out(ctx, self._logic.shutdown())

    def receive(self, ctx: Context[GroupCoordinatorMessage], message: GroupCoordinatorMessage) -> None:
        match message:
            case JoinGroupRequest():
                self._on_join_group(ctx, message)
            case SyncGroupRequest():
                self._on_sync_group(ctx, message)
            case HeartbeatRequest():
                self._on_heartbeat(ctx, message)
            case LeaveGroupRequest():
                self._on_leave_group(ctx, message)
            case OffsetCommitRequest():
                self._on_offset_commit(ctx, message)
            case OffsetFetchRequest():
                self._on_offset_fetch(ctx, message)
            case DescribeGroupsRequest():
                self._on_describe_groups(ctx, message)
            case ListGroupsRequest():
                self._on_list_groups(ctx, message)
            case DeleteGroupsRequest():
                self._on_delete_groups(ctx, message)
            case OffsetsPartitionElected():
                self._on_offsets_partition_elected(ctx, message)
            case OffsetsPartitionResigned():
                self._on_offsets_partition_resigned(ctx, message)
            case _GroupTimerFired():
                self._on_group_timer_fired(ctx, message)
            case _AppendCompleted():
                self._on_append_completed(ctx, message)
            case _TombstonesAppended():
                self._on_tombstones_appended(ctx, message)
            case _OffsetsLogRead():
                self._on_offsets_log_read(ctx, message)
            case _RetryLoad():
                self._on_retry_load(ctx, message)
            case _:
                assert_never(message)

    def statistics(self) -> GroupCoordinatorStatistics:
        by_state = dict.fromkeys((s.value for s in GroupState), 0)
        for group in self._logic.groups.values():
            by_state[group.state.value] += 1
        return GroupCoordinatorStatistics(
            groups=len(self._logic.groups),
            groups_by_state=by_state,
            owned_partitions=tuple(sorted(self._logic.owned_partitions)),
            loading_partitions=tuple(sorted(self._logic.loading_partitions)),
            rebalances_total=self._logic.rebalances_total,
            appends_in_flight=len(self._appends_in_flight),
            appends_total=self._appends_total,
            append_errors_total=self._append_errors_total,
            loads_completed_total=self._loads_completed_total,
            load_read_errors_total=self._load_read_errors_total,
            load_corrupt_total=self._load_corrupt_total,
            records_loaded_total=self._records_loaded_total,
        )

    # ------------------------------------------------------------------------------ requests

    @staticmethod
    def _requester(ctx: Context[GroupCoordinatorMessage], message: object) -> Requester | None:
        requester = ctx.requester
        if requester is None:
            ctx.log.warning("%s sent as a tell: nobody to answer, ignored", type(message).__name__)
        return requester

    def _on_join_group(self, ctx: Context[GroupCoordinatorMessage], message: JoinGroupRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            self._carry_out(ctx, self._logic.handle_join_group(message, requester, ctx.now_ms))

    def _on_sync_group(self, ctx: Context[GroupCoordinatorMessage], message: SyncGroupRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            self._carry_out(ctx, self._logic.handle_sync_group(message, requester, ctx.now_ms))

    def _on_heartbeat(self, ctx: Context[GroupCoordinatorMessage], message: HeartbeatRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            self._carry_out(ctx, self._logic.handle_heartbeat(message, requester, ctx.now_ms))

    def _on_leave_group(self, ctx: Context[GroupCoordinatorMessage], message: LeaveGroupRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            self._carry_out(ctx, self._logic.handle_leave_group(message, requester, ctx.now_ms))

    def _on_offset_commit(self, ctx: Context[GroupCoordinatorMessage], message: OffsetCommitRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            self._carry_out(ctx, self._logic.handle_commit_offsets(message, requester, ctx.now_ms))

    def _on_offset_fetch(self, ctx: Context[GroupCoordinatorMessage], message: OffsetFetchRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            result: OffsetFetchResult = self._logic.handle_fetch_offsets(message.group_id, message.partitions)
            ctx.reply_to(requester, result)

    def _on_describe_groups(
        self, ctx: Context[GroupCoordinatorMessage], message: DescribeGroupsRequest
    ) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            described = tuple(self._logic.handle_describe_group(g) for g in message.group_ids)
            ctx.reply_to(requester, DescribeGroupsResult(described))

    def _on_list_groups(self, ctx: Context[GroupCoordinatorMessage], message: ListGroupsRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            result: ListGroupsResult = self._logic.handle_list_groups()
            ctx.reply_to(requester, result)

    def _on_delete_groups(self, ctx: Context[GroupCoordinatorMessage], message: DeleteGroupsRequest) -> None:
        if (requester := self._requester(ctx, message)) is not None:
            errors, effects = self._logic.handle_delete_groups(message.group_ids, ctx.now_ms)
            ctx.reply_to(requester, DeleteGroupsResult(errors))
            self._carry_out(ctx, effects)

    # ------------------------------------------------------------------------------ timers, appends

    def _on_group_timer_fired(self, ctx: Context[GroupCoordinatorMessage], message: _GroupTimerFired) -> None:
        self._carry_out(ctx, self._logic.on_timer(message.key, ctx.now_ms))

    def _on_append_completed(self, ctx: Context[GroupCoordinatorMessage], message: _AppendCompleted) -> None:
        if message.append_id not in self._appends_in_flight:
            return  # answered already (a port that broke its promise of one answer)
        self._appends_in_flight.discard(message.append_id)
        self._complete_append(ctx, message.append_id, message.outcome)

    def _complete_append(
        self, ctx: Context[GroupCoordinatorMessage], append_id: int, outcome: AppendOutcome
    ) -> None:
        if outcome.error is not ErrorCode.NONE:
            self._append_errors_total += 1
        base_offset = outcome.base_offset if outcome.error is ErrorCode.NONE else None
        self._carry_out(
            ctx, self._logic.on_append_completed(append_id, outcome.error, base_offset, ctx.now_ms)
        )

    def _on_tombstones_appended(
        self, ctx: Context[GroupCoordinatorMessage], message: _TombstonesAppended
    ) -> None:
        if message.outcome.error is not ErrorCode.NONE:
            # Nobody waits for tombstones: the next expiry pass writes a lost one again.
            self._append_errors_total += 1
            ctx.log.warning(
                "tombstones to __consumer_offsets-%d failed: %s",
                message.partition,
                message.outcome.error.name,
            )

    # ------------------------------------------------------------------------------ loading

    def _on_offsets_partition_elected(
        self, ctx: Context[GroupCoordinatorMessage], message: OffsetsPartitionElected
    ) -> None:
        partition = message.partition
        known_epoch = self._leader_epochs.get(partition)
        if known_epoch is not None and message.leader_epoch < known_epoch:
            return  # a stale notification
        self._leader_epochs[partition] = message.leader_epoch
        stopped = self._loads.get(partition)
        if stopped is not None and stopped.failed:
            del self._loads[partition]  # its bytes did not decode: this election reads them afresh
        elif partition in self._logic.owned_partitions or partition in self._loads:
            return  # loaded or loading already (Kafka's addLoadingPartition)
        self._carry_out(ctx, self._logic.on_election(partition))
        self._next_load_id += 1
        load = _Load(self._next_load_id, message.leader_epoch)
        self._loads[partition] = load
        ctx.log.info("loading __consumer_offsets-%d (leader epoch %d)", partition, message.leader_epoch)
        self._read_next(ctx, partition, load)

    def _read_next(self, ctx: Context[GroupCoordinatorMessage], partition: int, load: _Load) -> None:
        load_id = load.load_id

        def on_complete(outcome: ReadOutcome) -> GroupCoordinatorMessage:
            return _OffsetsLogRead(partition, load_id, outcome)

        self._reader.read(ctx, partition, load.next_offset, on_complete)

    def _on_offsets_log_read(self, ctx: Context[GroupCoordinatorMessage], message: _OffsetsLogRead) -> None:
        partition, outcome = message.partition, message.outcome
        load = self._loads.get(partition)
        if load is None or load.load_id != message.load_id or load.failed:
            return  # resigned (or re-elected) meanwhile: this read belongs to an abandoned load
        if outcome.error is not ErrorCode.NONE:
            self._retry_later(ctx, partition, load, outcome.error.name)
            return
        try:
            next_offset = load.next_offset
            for batch in iterate_batches(outcome.records):
                next_offset = max(next_offset, batch.header.next_offset)
            for record in iterate_group_records(outcome.records):
                load.fold.add(record)
        except (GroupRecordError, StorageError) as error:
            load.failed = True
            self._load_corrupt_total += 1
            ctx.log.error(
                "__consumer_offsets-%d cannot be loaded, its groups stay unavailable: %s", partition, error
            )
            return
        if next_offset < outcome.log_end_offset:
            if next_offset == load.next_offset:
                self._retry_later(ctx, partition, load, "a read returned no batch")
                return
            load.next_offset = next_offset
            self._read_next(ctx, partition, load)
            return
        del self._loads[partition]
        self._loads_completed_total += 1
        self._records_loaded_total += load.fold.records
        groups = load.fold.groups()
        ctx.log.info(
            "loaded __consumer_offsets-%d: %d groups from %d records",
            partition,
            len(groups),
            load.fold.records,
        )
        self._carry_out(ctx, self._logic.complete_loading(partition, groups, ctx.now_ms))

    def _retry_later(
        self, ctx: Context[GroupCoordinatorMessage], partition: int, load: _Load, why: str
    ) -> None:
        self._load_read_errors_total += 1
        ctx.log.warning(
            "reading __consumer_offsets-%d at %d failed (%s); retrying", partition, load.next_offset, why
        )
        ctx.start_timer(("load", partition), _RetryLoad(partition, load.load_id), LOAD_RETRY_BACKOFF_MS)

    def _on_retry_load(self, ctx: Context[GroupCoordinatorMessage], message: _RetryLoad) -> None:
        load = self._loads.get(message.partition)
        if load is not None and load.load_id == message.load_id and not load.failed:
            self._read_next(ctx, message.partition, load)

    def _on_offsets_partition_resigned(
        self, ctx: Context[GroupCoordinatorMessage], message: OffsetsPartitionResigned
    ) -> None:
        if self._loads.pop(message.partition, None) is not None:
            ctx.cancel_timer(("load", message.partition))
        self._carry_out(ctx, self._logic.on_resignation(message.partition, ctx.now_ms))

    # ------------------------------------------------------------------------------ effects

    def _carry_out(self, ctx: Context[GroupCoordinatorMessage], effects: list[Effect]) -> None:
        work = deque(effects)
        while work:
            effect = work.popleft()
            match effect:
                case Reply(reply_to=reply_to, response=response):
                    assert isinstance(reply_to, Requester), "the actor parks asks only"
                    ctx.reply_to(reply_to, response)
                case StartTimer(key=key, delay_ms=delay_ms):
                    ctx.start_timer(("group", key), _GroupTimerFired(key), delay_ms)
                case CancelTimer(key=key):
                    ctx.cancel_timer(("group", key))
                case AppendGroupMetadata(append_id=append_id, offsets_partition=partition, record=record):
                    work.extend(self._append(ctx, append_id, partition, [group_metadata_record(record)]))
                case AppendOffsetCommits(append_id=append_id, offsets_partition=partition, records=records):
                    encoded: list[GroupRecord] = [offset_commit_record(r) for r in records]
                    work.extend(self._append(ctx, append_id, partition, encoded))
                case AppendTombstones(offsets_partition=partition):
                    self._append_tombstones(ctx, partition, tombstone_records(effect))
                case _:
                    assert_never(effect)

    def _append(
        self,
        ctx: Context[GroupCoordinatorMessage],
        append_id: int,
        partition: int,
        records: list[GroupRecord],
    ) -> list[Effect]:
        """Hand one batch to the writer; an unencodable record fails the append at once (its
        effects are returned for the caller's work list)."""
        self._appends_total += 1
        try:
            batch = build_group_batch(records, timestamp_ms=ctx.wall_clock_ms)
        except GroupRecordError as error:
            ctx.log.warning("group records for __consumer_offsets-%d not writable: %s", partition, error)
            self._append_errors_total += 1
            return self._logic.on_append_completed(append_id, ErrorCode.MESSAGE_TOO_LARGE, None, ctx.now_ms)
        self._appends_in_flight.add(append_id)

        def on_complete(outcome: AppendOutcome) -> GroupCoordinatorMessage:
            return _AppendCompleted(append_id, outcome)

        self._writer.append(ctx, partition, batch, on_complete)
        return []

    def _append_tombstones(
        self, ctx: Context[GroupCoordinatorMessage], partition: int, records: list[GroupRecord]
    ) -> None:
        self._appends_total += 1
        try:
            batch = build_group_batch(records, timestamp_ms=ctx.wall_clock_ms)
        except GroupRecordError as error:
            self._append_errors_total += 1
            ctx.log.warning("tombstones for __consumer_offsets-%d not writable: %s", partition, error)
            return

        def on_complete(outcome: AppendOutcome) -> GroupCoordinatorMessage:
            return _TombstonesAppended(partition, outcome)

        self._writer.append(ctx, partition, batch, on_complete)

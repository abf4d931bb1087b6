"""The group coordinator's rules (Kafka 2.4.1's ``GroupCoordinator``), sans I/O.

House rules
-----------
1. One ``GroupCoordinatorLogic`` per broker holds every group of the ``__consumer_offsets``
   partitions this broker leads. Each public method is one input (a request, a timer's wake-up,
   an append's completion, a partition gained or lost) with ``now_ms``; it returns the effects to
   carry out (``actors.group.protocol``). Nothing here awaits, reads a clock or does I/O.
2. Replies that must wait are held in the group's state (the member's ``awaiting_join`` /
   ``awaiting_sync``) and come out as ``Reply`` effects of a later input.
3. What must survive a coordinator failover (the group after a completed rebalance, offset commits)
   is an append effect; the answer that depends on it comes out of ``on_append_completed``, which the
   caller invokes only once the high watermark covers the records (acks=all).

Theory of operation (docs/consumer-groups.md)
--------------------------------------------
* Ownership (docs/consumer-groups.md §1): group G lives on offsets partition
  ``abs(hashCode(G)) % offsets.topic.num.partitions``. Requests for a partition being loaded get
  COORDINATOR_LOAD_IN_PROGRESS; for one not led here, NOT_COORDINATOR.
* Join (docs/consumer-groups.md §3): the first join of an Empty group waits
  ``group.initial.rebalance.delay.ms``, extended while new members keep arriving, up to the rebalance
  timeout (InitialDelayedJoin); a later rebalance completes as soon as every known member has rejoined,
  or at the rebalance timeout (DelayedJoin). Completion drops the members that did not rejoin, bumps
  the generation, picks the protocol, and answers every parked join (the leader gets the members'
  metadata).
* Sync (docs/consumer-groups.md §4): the leader's assignment is appended; once stored, every parked
  SyncGroup is answered and the group is Stable.
* Liveness (docs/consumer-groups.md §5): each member's session timer restarts on heartbeat, sync and
  commit; when it lapses the member is removed and the group rebalances.
* Commits (docs/consumer-groups.md §6): validated as Kafka's ``handleCommitOffsets`` does, stored,
  answered once replicated; retention follows KIP-211 on a periodic timer (docs/consumer-groups.md §6.3).

Left out: static membership (KIP-345, ``group.instance.id``), transactional offset commits,
OffsetDelete (KIP-496).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.group_state import (
    NO_MEMBER_ID,
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    MemberMetadata,
    OffsetAndMetadata,
    ReplyTo,
)
from actors.group.protocol import (
    DEFAULT_RETENTION_TIME,
    DEFAULT_TIMESTAMP,
    AppendGroupMetadata,
    AppendOffsetCommits,
    AppendTombstones,
    CancelTimer,
    DescribeGroupResult,
    Effect,
    FetchedOffset,
    HeartbeatRequest,
    HeartbeatResult,
    HeartbeatTimer,
    JoinGroupRequest,
    JoinGroupResult,
    JoinTimer,
    LeaveGroupRequest,
    LeaveGroupResult,
    ListGroupsResult,
    LoadedGroup,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetFetchResult,
    OffsetsRetentionTimer,
    PendingMemberTimer,
    Reply,
    Response,
    StartTimer,
    StoredGroupMetadata,
    StoredMember,
    StoredOffsetCommit,
    SyncGroupRequest,
    SyncGroupResult,
    TimerKey,
)
from actors.group.records import partition_for

__all__ = ["GroupConfig", "GroupCoordinatorLogic", "partition_for"]

_log = logging.getLogger("actorlog.group")

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's parked join lapses after 5 minutes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker settings the coordinator reads (Kafka 2.4's names and defaults)."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    # offsets.retention.minutes (7 days), in milliseconds.
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS


class _Api(enum.Enum):
    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE_GROUP = "LeaveGroup"
    OFFSET_COMMIT = "OffsetCommit"
    OFFSET_FETCH = "OffsetFetch"
    DESCRIBE_GROUPS = "DescribeGroups"
    DELETE_GROUPS = "DeleteGroups"


# The APIs that accept the empty group id (Kafka keeps it for old offset-only clients and for tools).
_EMPTY_GROUP_ID_ALLOWED = frozenset(
    {_Api.OFFSET_COMMIT, _Api.OFFSET_FETCH, _Api.DESCRIBE_GROUPS, _Api.DELETE_GROUPS}
)


@dataclass(frozen=True, slots=True)
class _DelayedJoin:
    """Wait for every member to rejoin, at most until ``deadline_ms`` (the rebalance timeout)."""

    deadline_ms: int


@dataclass(frozen=True, slots=True)
class _InitialDelayedJoin:
    """The first rebalance of an Empty group: never completes early; at ``deadline_ms``, if a member
    joined meanwhile and rebalance time remains, wait ``min(configured, remaining)`` more."""

    deadline_ms: int
    configured_delay_ms: int
    delay_ms: int
    remaining_ms: int


@dataclass(frozen=True, slots=True)
class _PendingSyncStore:
    group: GroupMetadata
    generation_id: int
    assignment: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class _PendingEmptyStore:
    group: GroupMetadata


@dataclass(frozen=True, slots=True)
class _PendingCommit:
    group: GroupMetadata
    reply_to: ReplyTo
    requested: dict[TopicPartition, OffsetAndMetadata]
    stored: dict[TopicPartition, OffsetAndMetadata]


_PendingAppend = _PendingSyncStore | _PendingEmptyStore | _PendingCommit


def _store_group_error(error: ErrorCode) -> ErrorCode:
    """How an append error of a group-metadata record reaches the members (Kafka's storeGroup)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _store_offsets_error(error: ErrorCode) -> ErrorCode:
    """How an append error of offset-commit records reaches the committer (Kafka's storeOffsets)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def _join_error(member_id: str, error: ErrorCode) -> JoinGroupResult:
    return JoinGroupResult(error=error, member_id=member_id)


class GroupCoordinatorLogic:
    """All groups of the offsets partitions this broker leads, and the rules that move them."""

    def __init__(self, *, config: GroupConfig, generate_uuid: Callable[[], str]) -> None:
        self.config = config
        # Where member ids' unique part comes from (a seeded Rng in the actor; a counter in tests).
        self._generate_uuid = generate_uuid
        self.is_active = False
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._delayed_joins: dict[str, _DelayedJoin | _InitialDelayedJoin] = {}
        # (group id, pending member id) -> deadline of its MEMBER_ID_REQUIRED rejoin.
        self._pending_member_deadlines: dict[tuple[str, str], int] = {}
        self._pending_appends: dict[int, _PendingAppend] = {}
        self._next_append_id = 0
        self._effects: list[Effect] = []
        self.rebalances_total = 0

    # ------------------------------------------------------------------------------ plumbing

    def _take(self) -> list[Effect]:
        effects, self._effects = self._effects, []
        return effects

    def _reply(self, reply_to: ReplyTo, response: Response) -> None:
        self._effects.append(Reply(reply_to, response))

    def _start_timer(self, key: TimerKey, delay_ms: int) -> None:
        self._effects.append(StartTimer(key, max(delay_ms, 0)))

    def _cancel_timer(self, key: TimerKey) -> None:
        self._effects.append(CancelTimer(key))

    def _new_append_id(self, pending: _PendingAppend) -> int:
        self._next_append_id += 1
        self._pending_appends[self._next_append_id] = pending
        return self._next_append_id

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def _validate_group_status(self, group_id: str, api: _Api) -> ErrorCode | None:
        """Kafka's validateGroupStatus: a usable group id, an active coordinator, the group's partition
        loaded (else COORDINATOR_LOAD_IN_PROGRESS) and led here (else NOT_COORDINATOR)."""
        if not group_id and api not in _EMPTY_GROUP_ID_ALLOWED:
            return ErrorCode.INVALID_GROUP_ID
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    # ------------------------------------------------------------------------------ lifecycle

    def startup(self, now_ms: int) -> list[Effect]:
        """Start serving and arm the periodic offsets expiry."""
        self.is_active = True
        self._start_timer(OffsetsRetentionTimer(), self.config.offsets_retention_check_interval_ms)
        return self._take()

    def shutdown(self) -> list[Effect]:
        self.is_active = False
        self._cancel_timer(OffsetsRetentionTimer())
        return self._take()

    def on_election(self, offsets_partition: int) -> list[Effect]:
        """This broker became leader of an offsets partition: its groups load (the caller reads the log,
        then calls ``complete_loading``); meanwhile its groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        if offsets_partition not in self.owned_partitions:
            self.loading_partitions.add(offsets_partition)
        return self._take()

    def complete_loading(
        self, offsets_partition: int, loaded: Iterable[LoadedGroup], now_ms: int
    ) -> list[Effect]:
        """The partition's groups as read from the log. A group with members comes back Stable with a
        fresh session timer per member; one without, Empty (offsets only, or a group that emptied)."""
        if offsets_partition not in self.loading_partitions:
            return self._take()  # resigned while loading
        for item in loaded:
            group = self._group_from_stored(item, now_ms)
            group = self._add_group(group)
            for member in group.members.values():
                self._complete_and_schedule_next_heartbeat(group, member, now_ms)
            if group.size > self.config.group_max_size:
                self._prepare_rebalance(group, now_ms)
        self.loading_partitions.discard(offsets_partition)
        self.owned_partitions.add(offsets_partition)
        return self._take()

    def _group_from_stored(self, loaded: LoadedGroup, now_ms: int) -> GroupMetadata:
        stored = loaded.metadata
        if stored is None:
            group = GroupMetadata.new(loaded.group_id, now_ms)
        else:
            state = GroupState.STABLE if stored.members else GroupState.EMPTY
            group = GroupMetadata(
                group_id=loaded.group_id,
                state=state,
                current_state_timestamp_ms=stored.current_state_timestamp_ms,
                protocol_type=stored.protocol_type or None,
                generation_id=stored.generation_id,
                leader_id=stored.leader,
                protocol_name=stored.protocol,
            )
            for m in stored.members:
                protocol = stored.protocol or ""
                group.add(
                    MemberMetadata(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout_ms=m.rebalance_timeout_ms,
                        session_timeout_ms=m.session_timeout_ms,
                        protocol_type=stored.protocol_type or "",
                        supported_protocols=((protocol, m.subscription),),
                        assignment=m.assignment,
                    )
                )
            group.leader_id = stored.leader
            group.subscribed_topics = group.compute_subscribed_topics()
        for tp, (log_offset, offset) in loaded.offsets.items():
            group.offsets[tp] = CommitRecordMetadataAndOffset(log_offset, offset)
        return group

    def on_resignation(self, offsets_partition: int, now_ms: int) -> list[Effect]:
        """This broker no longer leads the partition: its groups become Dead and leave the cache; parked
        requests are answered NOT_COORDINATOR so the clients find the new coordinator."""
        self.loading_partitions.discard(offsets_partition)
        self.owned_partitions.discard(offsets_partition)
        for group in [g for g in self.groups.values() if self.partition_for(g.group_id) == offsets_partition]:
            previous = group.state
            group.transition_to(GroupState.DEAD, now_ms)
            for member in group.members.values():
                if previous is GroupState.PREPARING_REBALANCE and member.awaiting_join is not None:
                    self._reply(
                        member.awaiting_join, _join_error(member.member_id, ErrorCode.NOT_COORDINATOR)
                    )
                    member.awaiting_join = None
                if member.awaiting_sync is not None:
                    self._reply(member.awaiting_sync, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                    member.awaiting_sync = None
            self._forget_group(group)
        return self._take()

    def _forget_group(self, group: GroupMetadata) -> None:
        """Drop a Dead group from the cache with every timer it had."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        if self._delayed_joins.pop(group.group_id, None) is not None:
            self._cancel_timer(JoinTimer(group.group_id))
        for member_id, member in group.members.items():
            if member.heartbeat_deadline_ms is not None:
                member.heartbeat_deadline_ms = None
                self._cancel_timer(HeartbeatTimer(group.group_id, member_id))
        for member_id in group.pending_members:
            if self._pending_member_deadlines.pop((group.group_id, member_id), None) is not None:
                self._cancel_timer(PendingMemberTimer(group.group_id, member_id))

    # ------------------------------------------------------------------------------ JoinGroup

    def handle_join_group(self, request: JoinGroupRequest, reply_to: ReplyTo, now_ms: int) -> list[Effect]:
        """JoinGroup (docs/consumer-groups.md §3). The answer may be held until the rebalance completes."""
        error = self._validate_group_status(request.group_id, _Api.JOIN_GROUP)
        if error is not None:
            self._reply(reply_to, _join_error(request.member_id, error))
            return self._take()
        config = self.config
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            self._reply(reply_to, _join_error(request.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return self._take()
        is_unknown_member = request.member_id == NO_MEMBER_ID
        group = self.groups.get(request.group_id)
        if group is None:
            # Only an unknown member may create a group; a known member id of a missing group is stale.
            if not is_unknown_member:
                self._reply(reply_to, _join_error(request.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return self._take()
            group = self._add_group(GroupMetadata.new(request.group_id, now_ms))
            self._do_unknown_join_group(group, request, reply_to, now_ms)
            return self._take()
        over_capacity = group.size > config.group_max_size
        existing = group.members.get(request.member_id)
        if (over_capacity and existing is not None and not existing.is_awaiting_join) or (
            is_unknown_member and group.size >= config.group_max_size
        ):
            # Shed members beyond group.max.size that have not rejoined yet, refuse newcomers.
            if existing is not None:
                self._remove_heartbeat_for_leaving_member(group, existing)
                group.remove(existing.member_id)
            self._reply(reply_to, _join_error(NO_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._do_unknown_join_group(group, request, reply_to, now_ms)
        else:
            self._do_join_group(group, request, reply_to, now_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)
        return self._take()

    def _do_unknown_join_group(
        self, group: GroupMetadata, request: JoinGroupRequest, reply_to: ReplyTo, now_ms: int
    ) -> None:
        """A member without an id. From JoinGroup v4 (KIP-394) it first gets an id with
        MEMBER_ID_REQUIRED and must rejoin with it within its session timeout; older clients are added
        at once."""
        protocols = frozenset(name for name, _ in request.protocols)
        if group.is_(GroupState.DEAD):
            self._reply(reply_to, _join_error(NO_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(request.protocol_type, protocols):
            self._reply(reply_to, _join_error(NO_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        else:
            new_member_id = f"{request.client_id}-{self._generate_uuid()}"
            if request.require_known_member_id:
                group.pending_members.add(new_member_id)
                deadline = now_ms + request.session_timeout_ms
                self._pending_member_deadlines[(group.group_id, new_member_id)] = deadline
                self._start_timer(
                    PendingMemberTimer(group.group_id, new_member_id), request.session_timeout_ms
                )
                self._reply(reply_to, _join_error(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
            else:
                self._add_member_and_rebalance(group, request, new_member_id, reply_to, now_ms)

    def _do_join_group(
        self, group: GroupMetadata, request: JoinGroupRequest, reply_to: ReplyTo, now_ms: int
    ) -> None:
        protocols = frozenset(name for name, _ in request.protocols)
        member_id = request.member_id
        if group.is_(GroupState.DEAD):
            self._reply(reply_to, _join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, protocols):
            self._reply(reply_to, _join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            # The rejoin KIP-394 asked for: now the member is added.
            self._add_member_and_rebalance(group, request, member_id, reply_to, now_ms)
            return
        member = group.members.get(member_id)
        if member is None:
            self._reply(reply_to, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        match group.state:
            case GroupState.PREPARING_REBALANCE:
                self._update_member_and_rebalance(group, member, request.protocols, reply_to, now_ms)
            case GroupState.COMPLETING_REBALANCE:
                if member.matches(request.protocols):
                    # A repeated join (its first answer was lost): answer with the current generation.
                    self._reply(reply_to, self._join_result(group, member_id))
                else:
                    self._update_member_and_rebalance(group, member, request.protocols, reply_to, now_ms)
            case GroupState.STABLE:
                if group.is_leader(member_id) or not member.matches(request.protocols):
                    # The leader may force a rebalance (e.g. topic metadata changed); so may new metadata.
                    self._update_member_and_rebalance(group, member, request.protocols, reply_to, now_ms)
                else:
                    self._reply(reply_to, self._join_result(group, member_id, with_members=False))
            case GroupState.EMPTY | GroupState.DEAD:
                self._reply(reply_to, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(
        self, group: GroupMetadata, member_id: str, *, with_members: bool = True
    ) -> JoinGroupResult:
        """The current generation as ``member_id`` sees it (the leader gets every member's metadata)."""
        members = group.current_member_metadata() if with_members and group.is_leader(member_id) else ()
        return JoinGroupResult(
            error=ErrorCode.NONE,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name or "",
            leader_id=group.leader_id or "",
            members=members,
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, request: JoinGroupRequest, member_id: str, reply_to: ReplyTo, now_ms: int
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            supported_protocols=request.protocols,
            awaiting_join=reply_to,
            is_new=True,
        )
        # A member arriving during the first rebalance extends the initial delay once more.
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat yet: its parked join lapses after the new-member timeout.
        self._complete_and_schedule_next_expiration(
            group, member, self.config.new_member_join_timeout_ms, now_ms
        )
        group.pending_members.discard(member_id)
        if self._pending_member_deadlines.pop((group.group_id, member_id), None) is not None:
            self._cancel_timer(PendingMemberTimer(group.group_id, member_id))
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: tuple[tuple[str, bytes], ...],
        reply_to: ReplyTo,
        now_ms: int,
    ) -> None:
        member.supported_protocols = protocols
        self._supersede_join(member)
        member.awaiting_join = reply_to
        self._maybe_prepare_rebalance(group, now_ms)

    def _supersede_join(self, member: MemberMetadata) -> None:
        """A member that sends a second JoinGroup while one is parked replaces it. Kafka silently drops the
        old callback (its connection is gone: a client only retries after its request timed out); here the
        old request is answered REBALANCE_IN_PROGRESS so that no request is held forever
        (docs/consumer-groups.md §3.4)."""
        if member.awaiting_join is not None:
            self._reply(member.awaiting_join, _join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_join = None

    def _maybe_prepare_rebalance(self, group: GroupMetadata, now_ms: int) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int) -> None:
        """Enter PreparingRebalance: parked syncs are answered REBALANCE_IN_PROGRESS (their members must
        rejoin), and the join wait is armed: the initial delay for an Empty group, else the rebalance
        timeout."""
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        delayed: _DelayedJoin | _InitialDelayedJoin
        if group.is_(GroupState.EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            delayed = _InitialDelayedJoin(
                deadline_ms=now_ms + delay,
                configured_delay_ms=delay,
                delay_ms=delay,
                remaining_ms=max(group.rebalance_timeout_ms - delay, 0),
            )
        else:
            delayed = _DelayedJoin(now_ms + group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        self.rebalances_total += 1
        self._arm_join(group, delayed, now_ms)
        self._try_complete_join(group, now_ms)

    def _arm_join(
        self, group: GroupMetadata, delayed: _DelayedJoin | _InitialDelayedJoin, now_ms: int
    ) -> None:
        self._delayed_joins[group.group_id] = delayed
        self._start_timer(JoinTimer(group.group_id), delayed.deadline_ms - now_ms)

    def _try_complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """A DelayedJoin completes as soon as every member has rejoined; the initial delay never does."""
        delayed = self._delayed_joins.get(group.group_id)
        if isinstance(delayed, _DelayedJoin) and group.has_all_members_joined():
            del self._delayed_joins[group.group_id]
            self._cancel_timer(JoinTimer(group.group_id))
            self._on_complete_join(group, now_ms)

    def _on_join_deadline(self, group: GroupMetadata, now_ms: int) -> None:
        delayed = self._delayed_joins.get(group.group_id)
        if delayed is None or now_ms < delayed.deadline_ms:
            return  # stale wake-up
        del self._delayed_joins[group.group_id]
        if isinstance(delayed, _InitialDelayedJoin) and group.new_member_added and delayed.remaining_ms != 0:
            group.new_member_added = False
            delay = min(delayed.configured_delay_ms, delayed.remaining_ms)
            self._arm_join(
                group,
                _InitialDelayedJoin(
                    deadline_ms=now_ms + delay,
                    configured_delay_ms=delayed.configured_delay_ms,
                    delay_ms=delay,
                    remaining_ms=max(delayed.remaining_ms - delayed.delay_ms, 0),
                ),
                now_ms,
            )
            return
        self._on_complete_join(group, now_ms)

    def _on_complete_join(self, group: GroupMetadata, now_ms: int) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin; if nobody rejoined, wait another
        rebalance timeout; else start the next generation and answer every parked join."""
        for failed in group.not_yet_rejoined_members():
            self._remove_heartbeat_for_leaving_member(group, failed)
            if failed.awaiting_sync is not None:
                self._reply(failed.awaiting_sync, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
                failed.awaiting_sync = None
            group.remove(failed.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            _log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._arm_join(group, _DelayedJoin(now_ms + group.rebalance_timeout_ms), now_ms)
            return
        group.init_next_generation(now_ms)
        if group.is_(GroupState.EMPTY):
            # Nobody is left: persist the empty generation (nobody waits for the answer).
            append_id = self._new_append_id(_PendingEmptyStore(group))
            self._effects.append(
                AppendGroupMetadata(
                    append_id, self.partition_for(group.group_id), self._stored_group(group, {})
                )
            )
            return
        for member in group.members.values():
            assert member.awaiting_join is not None
            self._reply(member.awaiting_join, self._join_result(group, member.member_id))
            member.awaiting_join = None
            # actorlog clears is_new before arming the session timer (docs/consumer-groups.md §5.1).
            member.is_new = False
            self._complete_and_schedule_next_heartbeat(group, member, now_ms)

    # ------------------------------------------------------------------------------ SyncGroup

    def handle_sync_group(self, request: SyncGroupRequest, reply_to: ReplyTo, now_ms: int) -> list[Effect]:
        """SyncGroup (docs/consumer-groups.md §4): followers wait for the leader's stored assignment."""
        error = self._validate_group_status(request.group_id, _Api.SYNC_GROUP)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state was lost with the old coordinator: make the member rejoin.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            self._reply(reply_to, SyncGroupResult(error))
            return self._take()
        group = self.groups.get(request.group_id)
        member = None if group is None else group.members.get(request.member_id)
        if group is not None and group.is_(GroupState.DEAD):
            self._reply(reply_to, SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif group is None or member is None:
            self._reply(reply_to, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif request.generation_id != group.generation_id:
            self._reply(reply_to, SyncGroupResult(ErrorCode.ILLEGAL_GENERATION))
        else:
            match group.state:
                case GroupState.EMPTY:
                    self._reply(reply_to, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
                case GroupState.PREPARING_REBALANCE:
                    self._reply(reply_to, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                case GroupState.COMPLETING_REBALANCE:
                    if member.awaiting_sync is not None:
                        self._reply(member.awaiting_sync, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.awaiting_sync = reply_to
                    if group.is_leader(member.member_id):
                        assignment = {m: request.assignments.get(m, b"") for m in group.members}
                        pending = _PendingSyncStore(group, group.generation_id, assignment)
                        append_id = self._new_append_id(pending)
                        self._effects.append(
                            AppendGroupMetadata(
                                append_id,
                                self.partition_for(group.group_id),
                                self._stored_group(group, assignment),
                            )
                        )
                case GroupState.STABLE:
                    self._reply(reply_to, SyncGroupResult(ErrorCode.NONE, member.assignment))
                    self._complete_and_schedule_next_heartbeat(group, member, now_ms)
                case GroupState.DEAD:
                    raise AssertionError("handled above")
        return self._take()

    def _stored_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> StoredGroupMetadata:
        protocol = group.protocol_name
        return StoredGroupMetadata(
            group_id=group.group_id,
            protocol_type=group.protocol_type,
            generation_id=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp_ms=group.current_state_timestamp_ms,
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol is not None else b"",
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ),
        )

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode, now_ms: int) -> None:
        for member in group.members.values():
            if member.awaiting_sync is not None:
                self._reply(member.awaiting_sync, SyncGroupResult(error, member.assignment))
                member.awaiting_sync = None
                # Restart the session: a member waiting for its assignment could not heartbeat usefully.
                self._complete_and_schedule_next_heartbeat(group, member, now_ms)

    def _reset_and_propagate_assignment_error(
        self, group: GroupMetadata, error: ErrorCode, now_ms: int
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms)

    # ------------------------------------------------------------------------------ appends

    def on_append_completed(
        self, append_id: int, error: ErrorCode, base_offset: int | None, now_ms: int
    ) -> list[Effect]:
        """An append effect finished: replicated up to the HW (``error`` NONE, ``base_offset`` the first
        record's offset) or failed."""
        pending = self._pending_appends.pop(append_id, None)
        match pending:
            case None:
                pass
            case _PendingSyncStore(group=group, generation_id=generation_id, assignment=assignment):
                # Another member may have joined meanwhile: act only if this generation still awaits it.
                if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                    if error is ErrorCode.NONE:
                        for member in group.members.values():
                            member.assignment = assignment.get(member.member_id, b"")
                        self._propagate_assignment(group, ErrorCode.NONE, now_ms)
                        group.transition_to(GroupState.STABLE, now_ms)
                    else:
                        self._reset_and_propagate_assignment_error(group, _store_group_error(error), now_ms)
                        self._maybe_prepare_rebalance(group, now_ms)
            case _PendingEmptyStore(group=group):
                if error is not ErrorCode.NONE:
                    _log.warning(
                        "failed to write empty metadata for group %s: %s", group.group_id, error.name
                    )
            case _PendingCommit(group=group, reply_to=reply_to, requested=requested, stored=stored):
                if error is ErrorCode.NONE:
                    assert base_offset is not None, "a successful append has a base offset"
                    if not group.is_(GroupState.DEAD):
                        for tp, offset in stored.items():
                            group.on_offset_commit_append(
                                tp, CommitRecordMetadataAndOffset(base_offset, offset)
                            )
                    answer = ErrorCode.NONE
                else:
                    if not group.is_(GroupState.DEAD):
                        for tp, offset in stored.items():
                            group.fail_pending_offset_write(tp, offset)
                    answer = _store_offsets_error(error)
                errors = {
                    tp: answer if tp in stored else ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in requested
                }
                self._reply(reply_to, OffsetCommitResult(errors))
        return self._take()

    # ------------------------------------------------------------------------------ Heartbeat

    def handle_heartbeat(self, request: HeartbeatRequest, reply_to: ReplyTo, now_ms: int) -> list[Effect]:
        """Heartbeat (docs/consumer-groups.md §5): restarts the session; REBALANCE_IN_PROGRESS tells the
        member to rejoin."""
        self._reply(reply_to, HeartbeatResult(self._heartbeat(request, now_ms)))
        return self._take()

    def _heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        error = self._validate_group_status(request.group_id, _Api.HEARTBEAT)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member = group.members.get(request.member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        match group.state:
            case GroupState.EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            case GroupState.COMPLETING_REBALANCE:
                return ErrorCode.REBALANCE_IN_PROGRESS
            case GroupState.PREPARING_REBALANCE:
                self._complete_and_schedule_next_heartbeat(group, member, now_ms)
                return ErrorCode.REBALANCE_IN_PROGRESS
            case GroupState.STABLE:
                self._complete_and_schedule_next_heartbeat(group, member, now_ms)
                return ErrorCode.NONE
            case GroupState.DEAD:
                raise AssertionError("handled above")

    def _complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int
    ) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms, now_ms)

    def _complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int, now_ms: int
    ) -> None:
        member.latest_heartbeat_ms = now_ms
        member.heartbeat_deadline_ms = now_ms + timeout_ms
        self._start_timer(HeartbeatTimer(group.group_id, member.member_id), timeout_ms)

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.is_leaving = True
        if member.heartbeat_deadline_ms is not None:
            member.heartbeat_deadline_ms = None
            self._cancel_timer(HeartbeatTimer(group.group_id, member.member_id))

    def _on_heartbeat_deadline(self, group: GroupMetadata, member_id: str, now_ms: int) -> None:
        member = group.members.get(member_id)
        if group.is_(GroupState.DEAD) or member is None:
            return
        deadline = member.heartbeat_deadline_ms
        if deadline is None or now_ms < deadline:
            return  # stale wake-up
        member.heartbeat_deadline_ms = None
        if not member.should_keep_alive(deadline, self.config.new_member_join_timeout_ms):
            _log.info("member %s of group %s: session expired", member_id, group.group_id)
            self._remove_member_and_update_group(group, member, now_ms)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int
    ) -> None:
        """A member leaves or lapses. A parked join is answered UNKNOWN_MEMBER_ID (a live client rejoins);
        a Stable or CompletingRebalance group rebalances; a PreparingRebalance group may now complete."""
        if member.awaiting_join is not None:
            self._reply(member.awaiting_join, _join_error(NO_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self._reply(member.awaiting_sync, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        if member.heartbeat_deadline_ms is not None:
            member.heartbeat_deadline_ms = None
            self._cancel_timer(HeartbeatTimer(group.group_id, member.member_id))
        group.remove(member.member_id)
        match group.state:
            case GroupState.DEAD | GroupState.EMPTY:
                pass
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._maybe_prepare_rebalance(group, now_ms)
            case GroupState.PREPARING_REBALANCE:
                self._try_complete_join(group, now_ms)

    def _on_pending_member_deadline(self, group_id: str, member_id: str, now_ms: int) -> None:
        deadline = self._pending_member_deadlines.get((group_id, member_id))
        if deadline is None or now_ms < deadline:
            return
        del self._pending_member_deadlines[(group_id, member_id)]
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD) or group.has(member_id):
            return
        self._remove_pending_member_and_update_group(group, member_id, now_ms)

    def _remove_pending_member_and_update_group(
        self, group: GroupMetadata, member_id: str, now_ms: int
    ) -> None:
        group.pending_members.discard(member_id)
        if self._pending_member_deadlines.pop((group.group_id, member_id), None) is not None:
            self._cancel_timer(PendingMemberTimer(group.group_id, member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group, now_ms)

    # ------------------------------------------------------------------------------ LeaveGroup

    def handle_leave_group(self, request: LeaveGroupRequest, reply_to: ReplyTo, now_ms: int) -> list[Effect]:
        """LeaveGroup (docs/consumer-groups.md §5): the member is removed at once and the group rebalances."""
        error = self._validate_group_status(request.group_id, _Api.LEAVE_GROUP)
        if error is not None:
            self._reply(reply_to, LeaveGroupResult(error))
            return self._take()
        group = self.groups.get(request.group_id)
        if group is None:
            unknown = tuple((m, ErrorCode.UNKNOWN_MEMBER_ID) for m in request.member_ids)
            self._reply(reply_to, LeaveGroupResult(ErrorCode.NONE, unknown))
            return self._take()
        if group.is_(GroupState.DEAD):
            self._reply(reply_to, LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return self._take()
        results: list[tuple[str, ErrorCode]] = []
        for member_id in request.member_ids:
            member = group.members.get(member_id)
            if group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id, now_ms)
                results.append((member_id, ErrorCode.NONE))
            elif member is None:
                results.append((member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            else:
                self._remove_heartbeat_for_leaving_member(group, member)
                self._remove_member_and_update_group(group, member, now_ms)
                results.append((member_id, ErrorCode.NONE))
        self._reply(reply_to, LeaveGroupResult(ErrorCode.NONE, tuple(results)))
        return self._take()

    # ------------------------------------------------------------------------------ OffsetCommit

    def handle_commit_offsets(
        self, request: OffsetCommitRequest, reply_to: ReplyTo, now_ms: int
    ) -> list[Effect]:
        """OffsetCommit (docs/consumer-groups.md §6.1): validated, appended, answered once replicated."""
        requested = {
            tp: OffsetAndMetadata(
                offset=p.offset,
                leader_epoch=p.leader_epoch,
                metadata=p.metadata,
                commit_timestamp_ms=now_ms
                if p.commit_timestamp_ms == DEFAULT_TIMESTAMP
                else p.commit_timestamp_ms,
                expire_timestamp_ms=(
                    None
                    if request.retention_time_ms == DEFAULT_RETENTION_TIME
                    else now_ms + request.retention_time_ms
                ),
            )
            for tp, p in request.offsets.items()
        }
        error = self._validate_group_status(request.group_id, _Api.OFFSET_COMMIT)
        if error is not None:
            self._reply_commit(reply_to, requested, error)
            return self._take()
        group = self.groups.get(request.group_id)
        if group is None:
            if request.generation_id < 0:
                # Not using group management: a standalone commit creates an Empty group to hold offsets.
                group = self._add_group(GroupMetadata.new(request.group_id, now_ms))
            else:
                # A group that no longer exists here: a commit from an old generation.
                self._reply_commit(reply_to, requested, ErrorCode.ILLEGAL_GENERATION)
                return self._take()
        self._do_commit_offsets(group, request, requested, reply_to, now_ms)
        return self._take()

    def _reply_commit(
        self, reply_to: ReplyTo, requested: dict[TopicPartition, OffsetAndMetadata], error: ErrorCode
    ) -> None:
        self._reply(reply_to, OffsetCommitResult(dict.fromkeys(requested, error)))

    def _do_commit_offsets(
        self,
        group: GroupMetadata,
        request: OffsetCommitRequest,
        requested: dict[TopicPartition, OffsetAndMetadata],
        reply_to: ReplyTo,
        now_ms: int,
    ) -> None:
        member = group.members.get(request.member_id)
        if group.is_(GroupState.DEAD):
            self._reply_commit(reply_to, requested, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif request.generation_id < 0 and group.is_(GroupState.EMPTY):
            self._store_offsets(group, requested, reply_to)
        elif member is None:
            self._reply_commit(reply_to, requested, ErrorCode.UNKNOWN_MEMBER_ID)
        elif request.generation_id != group.generation_id:
            self._reply_commit(reply_to, requested, ErrorCode.ILLEGAL_GENERATION)
        else:
            match group.state:
                case GroupState.STABLE | GroupState.PREPARING_REBALANCE:
                    # Still allowed while preparing: the heartbeat will tell the member to rejoin.
                    self._complete_and_schedule_next_heartbeat(group, member, now_ms)
                    self._store_offsets(group, requested, reply_to)
                case GroupState.COMPLETING_REBALANCE:
                    # The member has the new generation but not its assignment yet.
                    self._reply_commit(reply_to, requested, ErrorCode.REBALANCE_IN_PROGRESS)
                case GroupState.EMPTY | GroupState.DEAD:
                    raise AssertionError(f"a member in a {group.state.value} group")

    def _store_offsets(
        self, group: GroupMetadata, requested: dict[TopicPartition, OffsetAndMetadata], reply_to: ReplyTo
    ) -> None:
        """Offsets whose metadata exceeds ``offset.metadata.max.bytes`` are refused
        (OFFSET_METADATA_TOO_LARGE); the rest are appended and become pending until acknowledged."""
        limit = self.config.offset_metadata_max_bytes
        stored = {tp: o for tp, o in requested.items() if len(o.metadata) <= limit}
        if not stored:
            self._reply_commit(reply_to, requested, ErrorCode.OFFSET_METADATA_TOO_LARGE)
            return
        group.prepare_offset_commit(stored)
        append_id = self._new_append_id(_PendingCommit(group, reply_to, requested, stored))
        records = tuple(
            StoredOffsetCommit(group_id=group.group_id, topic_partition=tp, offset_and_metadata=o)
            for tp, o in stored.items()
        )
        self._effects.append(AppendOffsetCommits(append_id, self.partition_for(group.group_id), records))

    # ------------------------------------------------------------------------------ reads

    def handle_fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> OffsetFetchResult:
        """OffsetFetch answers in any group state (a group may use Kafka only to store offsets);
        ``partitions`` None means every committed partition. Nothing committed: offset -1."""
        error = self._validate_group_status(group_id, _Api.OFFSET_FETCH)
        if error is not None:
            return OffsetFetchResult(error, {})
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return OffsetFetchResult(ErrorCode.NONE, {tp: FetchedOffset(-1) for tp in partitions or ()})
        if partitions is None:
            chosen = group.all_offsets()
            return OffsetFetchResult(
                ErrorCode.NONE,
                {tp: FetchedOffset(o.offset, o.leader_epoch, o.metadata) for tp, o in chosen.items()},
            )
        result: dict[TopicPartition, FetchedOffset] = {}
        for tp in partitions:
            offset = group.offset(tp)
            result[tp] = (
                FetchedOffset(-1)
                if offset is None
                else FetchedOffset(offset.offset, offset.leader_epoch, offset.metadata)
            )
        return OffsetFetchResult(ErrorCode.NONE, result)

    def handle_describe_group(self, group_id: str) -> DescribeGroupResult:
        error = self._validate_group_status(group_id, _Api.DESCRIBE_GROUPS)
        if error is not None:
            return DescribeGroupResult(group_id, error, GroupSummary("", "", "", ()))
        group = self.groups.get(group_id)
        if group is None:
            return DescribeGroupResult(
                group_id, ErrorCode.NONE, GroupSummary(GroupState.DEAD.value, "", "", ())
            )
        return DescribeGroupResult(group_id, ErrorCode.NONE, group.summary())

    def handle_list_groups(self) -> ListGroupsResult:
        """Every group this broker coordinates; COORDINATOR_LOAD_IN_PROGRESS (with what is loaded so far)
        while any offsets partition is loading."""
        if not self.is_active:
            return ListGroupsResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ())
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading_partitions else ErrorCode.NONE
        overviews: tuple[GroupOverview, ...] = tuple(g.overview() for g in self.groups.values())
        return ListGroupsResult(error, overviews)

    # ------------------------------------------------------------------------------ deletion and expiry

    def handle_delete_groups(
        self, group_ids: Iterable[str], now_ms: int
    ) -> tuple[dict[str, ErrorCode], list[Effect]]:
        """DeleteGroups: only an Empty group is deleted (with its offsets); a group with members answers
        NON_EMPTY_GROUP, a missing or Dead one GROUP_ID_NOT_FOUND."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, _Api.DELETE_GROUPS)
            group = self.groups.get(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, now_ms)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        self._cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets(), now_ms)
        for group in eligible:
            errors[group.group_id] = ErrorCode.NONE
        return errors, self._take()

    def _cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]],
        now_ms: int,
    ) -> int:
        """Remove the selected offsets; an Empty group left without offsets becomes Dead and leaves the
        cache. Tombstones go out for the removed offsets, and for the group's metadata record if it ever
        had a generation (a generation-0 group only stored offsets)."""
        removed_total = 0
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                group.transition_to(GroupState.DEAD, now_ms)
            dead = group.is_(GroupState.DEAD)
            if dead:
                self._forget_group(group)
            delete_metadata = dead and group.generation_id > 0
            if removed or delete_metadata:
                self._effects.append(
                    AppendTombstones(
                        self.partition_for(group.group_id), group.group_id, tuple(removed), delete_metadata
                    )
                )
            removed_total += len(removed)
        return removed_total

    # ------------------------------------------------------------------------------ timers

    def on_timer(self, key: TimerKey, now_ms: int) -> list[Effect]:
        """A timer armed by a ``StartTimer`` effect fired."""
        match key:
            case JoinTimer(group_id=group_id):
                group = self.groups.get(group_id)
                if group is not None:
                    self._on_join_deadline(group, now_ms)
            case HeartbeatTimer(group_id=group_id, member_id=member_id):
                group = self.groups.get(group_id)
                if group is not None:
                    self._on_heartbeat_deadline(group, member_id, now_ms)
            case PendingMemberTimer(group_id=group_id, member_id=member_id):
                self._on_pending_member_deadline(group_id, member_id, now_ms)
            case OffsetsRetentionTimer():
                if self.is_active:
                    retention = self.config.offsets_retention_ms
                    removed = self._cleanup_group_metadata(
                        list(self.groups.values()),
                        lambda g: g.remove_expired_offsets(now_ms, retention),
                        now_ms,
                    )
                    if removed:
                        _log.info("removed %d expired offsets", removed)
                    self._start_timer(
                        OffsetsRetentionTimer(), self.config.offsets_retention_check_interval_ms
                    )
        return self._take()

"""Pure metadata of one consumer group: members, generation, state, committed offsets.

House rules
-----------
1. This module holds what one group *is* (Kafka's ``GroupMetadata`` and ``MemberMetadata``); the
   rules that move it (join, sync, heartbeat, commit, expiry) live in
   ``actors.group.coordinator_logic``. Nothing here does I/O or reads a clock: time is ``now_ms``.
2. A request that must wait (a JoinGroup parked until the rebalance completes, a follower's
   SyncGroup parked until the leader's assignment is stored) is held as the caller's opaque
   ``ReplyTo`` handle on the member; the coordinator logic turns it into a reply effect later.

Theory of operation (docs/consumer-groups.md §2)
------------------------------------------------
A group moves Empty → PreparingRebalance → CompletingRebalance → Stable and back to
PreparingRebalance whenever membership or a member's protocols change; Dead is final (deleted,
expired or unloaded). ``VALID_PREVIOUS_STATES`` is Kafka's table of allowed transitions and
``transition_to`` enforces it. ``current_state_timestamp_ms`` records when the state last changed:
retention of an Empty group's offsets counts from it (KIP-211, docs/consumer-groups.md §6).

Offsets are kept as ``CommitRecordMetadataAndOffset``: the committed value plus the log offset of the
record that carried it, so that the latest record always wins. A commit in flight (appended, not yet
acknowledged) sits in ``pending_offset_commits`` and is never expired.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import TypeAlias

from actors.common.types import TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "NO_GENERATION",
    "NO_MEMBER_ID",
    "VALID_PREVIOUS_STATES",
    "CommitRecordMetadataAndOffset",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "MemberMetadata",
    "MemberSummary",
    "OffsetAndMetadata",
    "ReplyTo",
    "parse_subscription_topics",
]

# The caller's handle for a request whose reply is held (a Requester token, a correlation id...).
ReplyTo: TypeAlias = Hashable

NO_GENERATION = -1
NO_MEMBER_ID = ""
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """The five states, valued as Kafka names them in DescribeGroups and ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupMetadata.validPreviousStates: the states a group may enter each state from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetAndMetadata:
    """One committed offset. ``expire_timestamp_ms`` is set only by OffsetCommit v1-v4 with an explicit
    retention (the old per-commit expiry); otherwise retention follows KIP-211."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and the log offset of the batch that carried it (None while not appended)."""

    appended_batch_offset: int | None
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, that: CommitRecordMetadataAndOffset) -> bool:
        assert self.appended_batch_offset is not None
        assert that.appended_batch_offset is not None
        return self.appended_batch_offset < that.appended_batch_offset


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """What DescribeGroups shows: protocol and member metadata only when Stable (Kafka's rule)."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """What ListGroups shows of a group."""

    group_id: str
    protocol_type: str


@dataclass(slots=True, kw_only=True)
class MemberMetadata:
    """One member (Kafka's ``MemberMetadata``); static membership (KIP-345) is not modelled."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: ReplyTo | None = None
    awaiting_sync: ReplyTo | None = None
    latest_heartbeat_ms: int = -1
    # The deadline of the session (or new-member) timer armed for this member, if any.
    heartbeat_deadline_ms: int | None = None
    is_leaving: bool = False
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.supported_protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def should_keep_alive(self, deadline_ms: int, new_member_join_timeout_ms: int) -> bool:
        """Kafka's rule at a timer's deadline: a new member (never answered a join) gets the new-member
        timeout; a member with a parked join or sync is kept; otherwise the session decides."""
        if self.is_new:
            return self.latest_heartbeat_ms + new_member_join_timeout_ms > deadline_ms
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.latest_heartbeat_ms + self.session_timeout_ms > deadline_ms

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return protocols == self.supported_protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (its list is in preference order)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def parse_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a consumer-protocol subscription (read as version 0, the prefix of every
    version: int16 version, array of strings), or None if the bytes do not parse."""
    try:
        pos = 2
        count = int.from_bytes(metadata[pos : pos + 4], "big", signed=True)
        pos += 4
        if count < 0 or len(metadata) < pos:
            return None
        topics = set()
        for _ in range(count):
            if pos + 2 > len(metadata):
                return None
            length = int.from_bytes(metadata[pos : pos + 2], "big", signed=True)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        return frozenset(topics)
    except UnicodeDecodeError:
        return None


@dataclass(slots=True)
class GroupMetadata:
    """One group's membership, state and offsets (Kafka's ``GroupMetadata``)."""

    group_id: str
    state: GroupState
    current_state_timestamp_ms: int | None
    protocol_type: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    protocol_name: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = field(default_factory=dict)
    pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # Set when a member joins during the first rebalance: the initial delay is extended once more.
    new_member_added: bool = False
    # The union of the members' subscribed topics for a consumer group (None: unknown).
    subscribed_topics: frozenset[str] | None = None

    @classmethod
    def new(cls, group_id: str, now_ms: int) -> GroupMetadata:
        return cls(group_id=group_id, state=GroupState.EMPTY, current_state_timestamp_ms=now_ms)

    # ---------------------------------------------------------------------------- queries

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and member_id not in self.members

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    @property
    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of any member (0 for no members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        """Every known member has a parked JoinGroup and no MEMBER_ID_REQUIRED member is outstanding."""
        return all(m.is_awaiting_join for m in self.members.values()) and not self.pending_members

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def _protocol_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in member.protocol_names():
                counts[name] = counts.get(name, 0) + 1
        return counts

    def candidate_protocols(self) -> frozenset[str]:
        """The protocols every member supports."""
        counts = self._protocol_counts()
        return frozenset(name for name, count in counts.items() if count == len(self.members))

    def supports_protocols(self, member_protocol_type: str, member_protocols: frozenset[str]) -> bool:
        """An Empty group takes any non-empty type and protocol list; otherwise the type must match and at
        least one of the member's protocols must be supported by every current member."""
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        counts = self._protocol_counts()
        return self.protocol_type == member_protocol_type and any(
            counts.get(name, 0) == len(self.members) for name in member_protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; the most votes wins (ties: the first
        protocol to reach that count in member order, deterministic where Kafka's HashMap is not)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    # ---------------------------------------------------------------------------- changes

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise ValueError(f"group {self.group_id} cannot move to {state.value} from {self.state.value}")
        self.state = state
        self.current_state_timestamp_ms = now_ms

    def add(self, member: MemberMetadata) -> None:
        """Add a member; the first member fixes the protocol type, and a group without a leader takes
        the new member as leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Remove a member; if it led, the next member in join order leads (None if none is left)."""
        member = self.members.pop(member_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """At join completion: keep the leader if it rejoined, else pick any rejoined member. False if
        the group has no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation (the first completed rebalance makes it 1): with members, choose the
        protocol and await the leader's assignment; without, become Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> tuple[tuple[str, bytes], ...]:
        """(member id, metadata for the chosen protocol) of every member: what the leader receives."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise ValueError(f"no member metadata for group {self.group_id} in {self.state.value}")
        protocol = self.protocol_name
        return tuple((m.member_id, m.metadata(protocol)) for m in self.members.values())

    def summary(self) -> GroupSummary:
        if self.is_(GroupState.STABLE):
            protocol = self.protocol_name
            assert protocol is not None, "a Stable group has a protocol"
            members = tuple(
                MemberSummary(m.member_id, m.client_id, m.client_host, m.metadata(protocol), m.assignment)
                for m in self.members.values()
            )
            return GroupSummary(self.state.value, self.protocol_type or "", protocol, members)
        members = tuple(
            MemberSummary(m.member_id, m.client_id, m.client_host, b"", b"") for m in self.members.values()
        )
        return GroupSummary(self.state.value, self.protocol_type or "", "", members)

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "")

    # ---------------------------------------------------------------------------- offsets

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        stored = self.offsets.get(tp)
        return None if stored is None else stored.offset_and_metadata

    def all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: stored.offset_and_metadata for tp, stored in self.offsets.items()}

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, stored: CommitRecordMetadataAndOffset) -> None:
        """An appended commit becomes the committed offset unless a later record already is (the
        pending entry clears only if it is this very commit)."""
        if tp in self.pending_offset_commits:
            assert stored.appended_batch_offset is not None
            current = self.offsets.get(tp)
            if current is None or current.older_than(stored):
                self.offsets[tp] = stored
        if self.pending_offset_commits.get(tp) == stored.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def remove_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in list(tps):
            self.pending_offset_commits.pop(tp, None)
            stored = self.offsets.pop(tp, None)
            if stored is not None:
                removed[tp] = stored.offset_and_metadata
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, offsets_retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """KIP-211 (docs/consumer-groups.md §6). An offset with an explicit expire timestamp expires at
        it. Otherwise: in an Empty group that used group management, ``retention`` after the group
        became Empty; in a live consumer group that knows its subscriptions, offsets of topics nobody
        subscribes to expire ``retention`` after their commit; a standalone group's offsets expire
        ``retention`` after their commit. Offsets with a commit in flight never expire."""
        base: dict[TopicPartition, int] = {}
        excluded: frozenset[str] = frozenset()
        state_ts = self.current_state_timestamp_ms
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            for tp, stored in self.offsets.items():
                base[tp] = stored.offset_and_metadata.commit_timestamp_ms if state_ts is None else state_ts
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None:
            excluded = self.subscribed_topics
            base = {tp: s.offset_and_metadata.commit_timestamp_ms for tp, s in self.offsets.items()}
        elif self.protocol_type is None:
            base = {tp: s.offset_and_metadata.commit_timestamp_ms for tp, s in self.offsets.items()}
        expired: list[TopicPartition] = []
        for tp, base_ms in base.items():
            if tp.topic in excluded or tp in self.pending_offset_commits:
                continue
            offset = self.offsets[tp].offset_and_metadata
            if offset.expire_timestamp_ms is None:
                if now_ms - base_ms >= offsets_retention_ms:
                    expired.append(tp)
            elif now_ms >= offset.expire_timestamp_ms:
                expired.append(tp)
        return {tp: self.offsets.pop(tp).offset_and_metadata for tp in expired}

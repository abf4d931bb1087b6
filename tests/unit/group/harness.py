"""A driver for the pure group coordinator: virtual time, a timer table, replies by token, appends.

It plays the hosting actor's part: timers fire in deadline order as time advances, and appends are
acknowledged (as if the high watermark covered them) at once unless ``auto_ack`` is off.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.coordinator_logic import GroupConfig, GroupCoordinatorLogic
from actors.group.group_state import GroupMetadata, GroupState
from actors.group.protocol import (
    AppendGroupMetadata,
    AppendOffsetCommits,
    AppendTombstones,
    CancelTimer,
    Effect,
    HeartbeatRequest,
    HeartbeatResult,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveGroupResult,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResult,
    Reply,
    Response,
    StartTimer,
    SyncGroupRequest,
    SyncGroupResult,
    TimerKey,
)

GROUP = "g"
PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"r"), ("roundrobin", b"rr"))


def subscription(*topics: str) -> bytes:
    """A consumer-protocol v0 subscription (version, topics, empty user data)."""
    out = bytearray((0).to_bytes(2, "big") + len(topics).to_bytes(4, "big"))
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return bytes(out + (-1).to_bytes(4, "big", signed=True))


class Harness:
    def __init__(self, config: GroupConfig | None = None, *, own_all: bool = True) -> None:
        counter = itertools.count(1)
        self.config = config or GroupConfig(offsets_topic_num_partitions=4)
        self.logic = GroupCoordinatorLogic(config=self.config, generate_uuid=lambda: f"u{next(counter)}")
        self.now = 0
        self.timers: dict[TimerKey, int] = {}
        self.replies: dict[Hashable, Response] = {}
        self.appends: list[AppendGroupMetadata | AppendOffsetCommits] = []
        self.tombstones: list[AppendTombstones] = []
        self.auto_ack = True
        self.log_end_offset = 0
        self._tokens = itertools.count(1)
        self.apply(self.logic.startup(self.now))
        if own_all:
            for partition in range(self.config.offsets_topic_num_partitions):
                self.apply(self.logic.on_election(partition))
                self.apply(self.logic.complete_loading(partition, [], self.now))

    # ------------------------------------------------------------------ plumbing

    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Reply(reply_to=reply_to, response=response):
                    assert reply_to not in self.replies, f"{reply_to} answered twice"
                    self.replies[reply_to] = response
                case StartTimer(key=key, delay_ms=delay_ms):
                    self.timers[key] = self.now + delay_ms
                case CancelTimer(key=key):
                    self.timers.pop(key, None)
                case AppendGroupMetadata() | AppendOffsetCommits():
                    self.appends.append(effect)
                case AppendTombstones():
                    self.tombstones.append(effect)
        if self.auto_ack:
            self.ack_all()

    def ack_all(self, error: ErrorCode = ErrorCode.NONE) -> None:
        while self.appends:
            append = self.appends.pop(0)
            base = self.log_end_offset
            self.log_end_offset += len(append.records) if isinstance(append, AppendOffsetCommits) else 1
            self.apply(self.logic.on_append_completed(append.append_id, error, base, self.now))

    def advance(self, ms: int) -> None:
        """Move time forward, firing due timers in deadline order."""
        target = self.now + ms
        while True:
            due = [(deadline, str(key), key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, _, key = min(due)
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(self.logic.on_timer(key, self.now))
        self.now = target

    def token(self, kind: str) -> str:
        return f"{kind}-{next(self._tokens)}"

    @property
    def group(self) -> GroupMetadata:
        return self.logic.groups[GROUP]

    def state(self) -> GroupState:
        """A method, not a property: mypy would narrow a property across the calls that change it."""
        return self.group.state

    # ------------------------------------------------------------------ requests

    def join(
        self,
        member_id: str = "",
        *,
        client_id: str = "c",
        v4: bool = False,
        protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        protocol_type: str = "consumer",
        group_id: str = GROUP,
    ) -> str:
        """Send a JoinGroup; returns its token (look the reply up with ``reply``)."""
        token = self.token("join")
        request = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            require_known_member_id=v4,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
        )
        self.apply(self.logic.handle_join_group(request, token, self.now))
        return token

    def join_reply(self, token: str) -> JoinGroupResult:
        reply = self.replies[token]
        assert isinstance(reply, JoinGroupResult)
        return reply

    def sync(self, member_id: str, generation_id: int, assignments: dict[str, bytes] | None = None) -> str:
        token = self.token("sync")
        request = SyncGroupRequest(
            group_id=GROUP, generation_id=generation_id, member_id=member_id, assignments=assignments or {}
        )
        self.apply(self.logic.handle_sync_group(request, token, self.now))
        return token

    def sync_reply(self, token: str) -> SyncGroupResult:
        reply = self.replies[token]
        assert isinstance(reply, SyncGroupResult)
        return reply

    def heartbeat(self, member_id: str, generation_id: int, group_id: str = GROUP) -> ErrorCode:
        token = self.token("heartbeat")
        request = HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member_id)
        self.apply(self.logic.handle_heartbeat(request, token, self.now))
        reply = self.replies[token]
        assert isinstance(reply, HeartbeatResult)
        return reply.error

    def leave(self, member_id: str) -> LeaveGroupResult:
        token = self.token("leave")
        self.apply(
            self.logic.handle_leave_group(
                LeaveGroupRequest(group_id=GROUP, member_ids=(member_id,)), token, self.now
            )
        )
        reply = self.replies[token]
        assert isinstance(reply, LeaveGroupResult)
        return reply

    def commit(
        self,
        offsets: dict[TopicPartition, int],
        *,
        member_id: str = "",
        generation_id: int = -1,
        metadata: str = "",
        group_id: str = GROUP,
    ) -> str:
        token = self.token("commit")
        request = OffsetCommitRequest(
            group_id=group_id,
            member_id=member_id,
            generation_id=generation_id,
            offsets={tp: OffsetCommitPartition(offset=o, metadata=metadata) for tp, o in offsets.items()},
        )
        self.apply(self.logic.handle_commit_offsets(request, token, self.now))
        return token

    def commit_errors(self, token: str) -> dict[TopicPartition, ErrorCode]:
        reply = self.replies[token]
        assert isinstance(reply, OffsetCommitResult)
        return reply.errors

    # ------------------------------------------------------------------ scenarios

    def stable_group(self, count: int) -> tuple[list[str], int]:
        """``count`` members joined (pre-KIP-394) in the initial delay, synced: (member ids, generation)."""
        tokens = [self.join(client_id=f"c{i}") for i in range(count)]
        self.advance(self.config.group_initial_rebalance_delay_ms * (count + 1))
        results = [self.join_reply(t) for t in tokens]
        members = [r.member_id for r in results]
        generation = results[0].generation_id
        leader = results[0].leader_id
        syncs = [
            self.sync(m, generation, {x: f"assign-{x}".encode() for x in members} if m == leader else None)
            for m in members
        ]
        for s in syncs:
            assert self.sync_reply(s).error is ErrorCode.NONE
        assert self.state() is GroupState.STABLE
        return members, generation

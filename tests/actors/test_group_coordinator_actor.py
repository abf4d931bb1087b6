"""The group coordinator actor (docs/consumer-groups.md §10) under the behaviour test kit, on virtual time.

A fake offsets log plays both ports: appends are held until the test (or the driver's auto mode)
acknowledges them, which assigns offsets as a leader would and keeps the batch, so that another
coordinator can load it back; reads hand out the kept batches a few at a time. The groups' rules
themselves are tested in ``tests/unit/group``; here: that the actor carries out what the logic
decides (replies to parked asks, timers, encoded appends, loading, unloading).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.coordinator_actor import (
    LOAD_RETRY_BACKOFF_MS,
    AppendOutcome,
    DeleteGroupsRequest,
    DeleteGroupsResult,
    DescribeGroupsRequest,
    DescribeGroupsResult,
    GroupCoordinatorActor,
    GroupCoordinatorMessage,
    ListGroupsRequest,
    OffsetFetchRequest,
    OffsetsPartitionElected,
    OffsetsPartitionResigned,
    ReadOutcome,
    ask_failure_error,
)
from actors.group.coordinator_logic import GroupConfig, partition_for
from actors.group.protocol import (
    FetchedOffset,
    HeartbeatRequest,
    HeartbeatResult,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveGroupResult,
    ListGroupsResult,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetFetchResult,
    OffsetsRetentionTimer,
    SyncGroupRequest,
    SyncGroupResult,
)
from actors.group.records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitRecord,
    build_group_batch,
    iterate_group_records,
    offset_commit_value,
)
from runtime.activity import Activity
from runtime.actor import Actor
from runtime.clock import ManualClock
from runtime.context import Context
from runtime.effects import Effect
from runtime.messages import AskTimedOut, PeerUnavailable, Requester, UnknownActor
from runtime.ref import ActorRef
from runtime.storage.records import iterate_batches
from runtime.system import ActorSystem
from runtime.testkit import BehaviorTestKit, advance

GROUP = "g"
SESSION_MS = 10_000
INITIAL_DELAY_MS = 3_000
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"r"),)


# ------------------------------------------------------------------------------------ the fake log


@dataclass
class PendingAppend:
    partition: int
    batch: bytes
    on_complete: Callable[[AppendOutcome], GroupCoordinatorMessage]

    def records(self) -> list[GroupRecord]:
        return [r.record for r in iterate_group_records(self.batch)]


@dataclass
class PendingRead:
    partition: int
    start_offset: int
    on_complete: Callable[[ReadOutcome], GroupCoordinatorMessage]


class FakeOffsetsLog:
    """Both ports over per-partition lists of batches, with offsets assigned on acknowledgement."""

    def __init__(self, *, batches_per_read: int = 2) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.appends: list[PendingAppend] = []
        self.reads: list[PendingRead] = []
        self.batches_per_read = batches_per_read

    # OffsetsLogWriter
    def append(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        batch: bytes,
        on_complete: Callable[[AppendOutcome], GroupCoordinatorMessage],
    ) -> None:
        self.appends.append(PendingAppend(partition, batch, on_complete))

    # OffsetsLogReader
    def read(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        start_offset: int,
        on_complete: Callable[[ReadOutcome], GroupCoordinatorMessage],
    ) -> None:
        self.reads.append(PendingRead(partition, start_offset, on_complete))

    def log_end_offset(self, partition: int) -> int:
        batches = self.batches.get(partition, [])
        return next(iterate_batches(batches[-1])).header.next_offset if batches else 0

    def write(self, partition: int, batch: bytes) -> int:
        """Keep ``batch`` at the log end (its base offset rewritten; v2's CRC does not cover it)."""
        base = self.log_end_offset(partition)
        self.batches.setdefault(partition, []).append(struct.pack(">q", base) + batch[8:])
        return base

    def ack(self, pending: PendingAppend, error: ErrorCode = ErrorCode.NONE) -> GroupCoordinatorMessage:
        self.appends.remove(pending)
        if error is not ErrorCode.NONE:
            return pending.on_complete(AppendOutcome(error))
        return pending.on_complete(
            AppendOutcome(ErrorCode.NONE, self.write(pending.partition, pending.batch))
        )

    def answer_read(self, pending: PendingRead, error: ErrorCode = ErrorCode.NONE) -> GroupCoordinatorMessage:
        self.reads.remove(pending)
        if error is not ErrorCode.NONE:
            return pending.on_complete(ReadOutcome(error))
        chosen = [
            b
            for b in self.batches.get(pending.partition, [])
            if next(iterate_batches(b)).header.next_offset > pending.start_offset
        ][: self.batches_per_read]
        return pending.on_complete(
            ReadOutcome(ErrorCode.NONE, b"".join(chosen), self.log_end_offset(pending.partition))
        )


# ------------------------------------------------------------------------------------ the driver


class Coordinator:
    """One GroupCoordinatorActor under the behaviour kit; replies collected by requester. With
    ``auto`` on, every append is acknowledged and every read answered after each step."""

    def __init__(
        self, log: FakeOffsetsLog, *, partitions: int = 4, clock: ManualClock | None = None, seed: int = 0
    ) -> None:
        self.log = log
        self.config = GroupConfig(offsets_topic_num_partitions=partitions)
        self.actor = GroupCoordinatorActor(config=self.config, writer=log, reader=log)
        self.kit: BehaviorTestKit[GroupCoordinatorMessage] = BehaviorTestKit(
            self.actor, name="group-coordinator", clock=clock, seed=seed
        )
        self.replies: dict[Requester, Any] = {}
        self.auto = True

    def _record(self, effects: list[Effect]) -> None:
        for reply in self.kit.replies(effects):
            assert reply.requester not in self.replies, f"{reply.requester} answered twice"
            self.replies[reply.requester] = reply.message

    def settle(self) -> None:
        while self.auto and (self.log.appends or self.log.reads):
            if self.log.appends:
                self.deliver(self.log.ack(self.log.appends[0]))
            else:
                self.deliver(self.log.answer_read(self.log.reads[0]))

    def deliver(self, message: GroupCoordinatorMessage) -> None:
        self._record(self.kit.tell(message))

    def tell(self, message: GroupCoordinatorMessage) -> None:
        self.deliver(message)
        self.settle()

    def ask(self, message: GroupCoordinatorMessage) -> Requester:
        requester, effects = self.kit.ask(message)
        self._record(effects)
        self.settle()
        return requester

    def answer(self, message: GroupCoordinatorMessage) -> Any:
        """Ask and return the answer, which must come at once."""
        requester = self.ask(message)
        assert requester in self.replies, f"{type(message).__name__} not answered"
        return self.replies[requester]

    def advance(self, ms: int) -> None:
        self._record(self.kit.advance(ms))
        self.settle()

    def elect(self, *partitions: int, epoch: int = 1) -> None:
        for partition in partitions or range(self.config.offsets_topic_num_partitions):
            self.tell(OffsetsPartitionElected(partition=partition, leader_epoch=epoch))

    # ---------------------------------------------------------------- requests

    def join(self, member_id: str = "", *, client_id: str = "c", v4: bool = False) -> Requester:
        return self.ask(
            JoinGroupRequest(
                group_id=GROUP,
                member_id=member_id,
                require_known_member_id=v4,
                client_id=client_id,
                client_host="/127.0.0.1",
                rebalance_timeout_ms=30_000,
                session_timeout_ms=SESSION_MS,
                protocol_type="consumer",
                protocols=PROTOCOLS,
            )
        )

    def join_result(self, requester: Requester) -> JoinGroupResult:
        result = self.replies[requester]
        assert isinstance(result, JoinGroupResult)
        return result

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> Requester:
        return self.ask(
            SyncGroupRequest(
                group_id=GROUP, generation_id=generation, member_id=member_id, assignments=assignments or {}
            )
        )

    def heartbeat(self, member_id: str, generation: int) -> ErrorCode:
        result = self.answer(HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member_id))
        assert isinstance(result, HeartbeatResult)
        return result.error

    def commit(
        self, offsets: dict[TopicPartition, int], *, member_id: str = "", generation: int = -1
    ) -> Requester:
        return self.ask(
            OffsetCommitRequest(
                group_id=GROUP,
                member_id=member_id,
                generation_id=generation,
                offsets={tp: OffsetCommitPartition(offset=o, metadata=f"m{o}") for tp, o in offsets.items()},
            )
        )

    def fetch(self, group_id: str = GROUP, *partitions: TopicPartition) -> OffsetFetchResult:
        result = self.answer(OffsetFetchRequest(group_id=group_id, partitions=partitions or None))
        assert isinstance(result, OffsetFetchResult)
        return result

    def describe(self, group_id: str = GROUP) -> tuple[str, tuple[str, ...]]:
        result = self.answer(DescribeGroupsRequest(group_ids=(group_id,)))
        assert isinstance(result, DescribeGroupsResult)
        (described,) = result.groups
        assert described.error is ErrorCode.NONE, described
        return described.summary.state, tuple(m.member_id for m in described.summary.members)


def stable_pair(c: Coordinator) -> tuple[str, str]:
    """Two members through JoinGroup (v4 for the first: MEMBER_ID_REQUIRED) and SyncGroup: Stable,
    generation 1, at 6 s (b joined during the initial delay, which therefore ran twice)."""
    first = c.join(client_id="a", v4=True)
    required = c.join_result(first)
    assert required.error is ErrorCode.MEMBER_ID_REQUIRED
    a_join = c.join(required.member_id, client_id="a", v4=True)
    b_join = c.join(client_id="b")
    assert a_join not in c.replies, "the initial rebalance delay holds the joins"
    assert b_join not in c.replies
    c.advance(INITIAL_DELAY_MS)
    assert a_join not in c.replies, "a member arrived during the initial delay: it runs again"
    c.advance(INITIAL_DELAY_MS)
    a, b = c.join_result(a_join), c.join_result(b_join)
    assert (a.error, b.error) == (ErrorCode.NONE, ErrorCode.NONE)
    assert a.generation_id == b.generation_id == 1
    assert a.leader_id == a.member_id == required.member_id
    assert {m for m, _ in a.members} == {a.member_id, b.member_id}
    assert b.members == ()
    b_sync = c.sync(b.member_id, 1)
    assert b_sync not in c.replies, "a follower's sync waits for the leader's assignment"
    a_sync = c.sync(a.member_id, 1, {a.member_id: b"A", b.member_id: b"B"})
    assert c.replies[a_sync] == SyncGroupResult(ErrorCode.NONE, b"A")
    assert c.replies[b_sync] == SyncGroupResult(ErrorCode.NONE, b"B")
    return a.member_id, b.member_id


# ------------------------------------------------------------------------------------ the flows


def test_two_members_join_sync_heartbeat_commit_and_fetch() -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log)
    c.elect()
    a, b = stable_pair(c)
    partition = partition_for(GROUP, 4)
    (metadata_batch,) = log.batches[partition]
    (record,) = [r.record for r in iterate_group_records(metadata_batch)]
    assert isinstance(record, GroupMetadataRecord)
    assert record.value is not None
    assert record.key == GroupMetadataKey(GROUP)
    assert (record.value.generation, record.value.protocol, record.value.leader) == (1, "range", a)
    assert {(m.member_id, m.assignment) for m in record.value.members} == {(a, b"A"), (b, b"B")}

    assert c.heartbeat(a, 1) is ErrorCode.NONE
    assert c.heartbeat(b, 1) is ErrorCode.NONE
    assert c.heartbeat(b, 0) is ErrorCode.ILLEGAL_GENERATION
    commit = c.commit({TP0: 5, TP1: 7}, member_id=a, generation=1)
    assert c.replies[commit] == OffsetCommitResult({TP0: ErrorCode.NONE, TP1: ErrorCode.NONE})
    assert c.fetch(GROUP, TP0, TP1) == OffsetFetchResult(
        ErrorCode.NONE, {TP0: FetchedOffset(5, None, "m5"), TP1: FetchedOffset(7, None, "m7")}
    )
    assert c.describe() == ("Stable", (a, b))
    listed = c.answer(ListGroupsRequest())
    assert isinstance(listed, ListGroupsResult)
    assert listed.error is ErrorCode.NONE
    assert [g.group_id for g in listed.groups] == [GROUP]
    stats = c.actor.statistics()
    assert stats.groups_by_state["Stable"] == 1
    assert stats.appends_in_flight == 0
    assert stats.owned_partitions == (0, 1, 2, 3)


def test_session_expiry_on_the_clock_rebalances_the_survivor() -> None:
    c = Coordinator(FakeOffsetsLog())
    c.elect()
    a, b = stable_pair(c)
    for _ in range(3):  # b heartbeats every 3 s; a is silent
        c.advance(3_000)
        assert c.heartbeat(b, 1) is ErrorCode.NONE
    c.advance(SESSION_MS - 9_000 - 1)
    assert c.describe() == ("Stable", (a, b)), "a's session has 1 ms left"
    c.advance(1)
    assert c.heartbeat(b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = c.join(b, client_id="b")
    result = c.join_result(rejoin)  # every remaining member has joined: completes at once
    assert (result.error, result.generation_id, result.leader_id) == (ErrorCode.NONE, 2, b)
    assert c.describe() == ("CompletingRebalance", (b,))


def test_commit_is_answered_only_after_its_append_completes() -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log)
    c.elect()
    c.auto = False
    commit = c.commit({TP0: 42})
    assert commit not in c.replies
    (pending,) = log.appends
    assert pending.partition == partition_for(GROUP, 4)
    (record,) = pending.records()
    assert isinstance(record, OffsetCommitRecord)
    assert record.key == OffsetCommitKey(GROUP, "t", 0)
    assert record.value is not None
    assert (record.value.offset, record.value.metadata) == (42, "m42")
    assert c.fetch(GROUP, TP0).offsets[TP0].offset == -1, "pending offsets are not fetched"
    assert c.actor.statistics().appends_in_flight == 1
    c.deliver(log.ack(pending))
    assert c.replies[commit] == OffsetCommitResult({TP0: ErrorCode.NONE})
    assert c.fetch(GROUP, TP0).offsets[TP0].offset == 42


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),
    ],
)
def test_a_failed_commit_append_reaches_the_client_mapped(
    append_error: ErrorCode, client_error: ErrorCode
) -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log)
    c.elect()
    c.auto = False
    commit = c.commit({TP0: 1})
    c.deliver(log.ack(log.appends[0], append_error))
    assert c.replies[commit] == OffsetCommitResult({TP0: client_error})
    assert c.fetch(GROUP, TP0).offsets[TP0].offset == -1
    assert c.actor.statistics().append_errors_total == 1


def test_a_group_metadata_append_failing_with_not_enough_replicas_fails_the_syncs() -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log)
    c.elect()
    a_join, b_join = c.join(client_id="a"), c.join(client_id="b")
    c.advance(2 * INITIAL_DELAY_MS)  # b arrived during the initial delay: it runs twice
    a, b = c.join_result(a_join).member_id, c.join_result(b_join).member_id
    c.auto = False
    b_sync = c.sync(b, 1)
    a_sync = c.sync(a, 1, {a: b"A", b: b"B"})
    c.deliver(log.ack(log.appends[0], ErrorCode.NOT_ENOUGH_REPLICAS))
    assert c.replies[a_sync] == SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert c.replies[b_sync] == SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert c.describe()[0] == "PreparingRebalance"


def test_ask_failures_map_to_produce_errors() -> None:
    assert ask_failure_error(AskTimedOut(target="p", timeout_ms=5)) is ErrorCode.REQUEST_TIMED_OUT
    assert ask_failure_error(PeerUnavailable(node_id="b2", reason="down")) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ask_failure_error(UnknownActor(target="p")) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_delete_groups_appends_tombstones() -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log)
    c.elect()
    c.commit({TP0: 3, TP1: 4})
    c.auto = False
    result = c.answer(DeleteGroupsRequest(group_ids=(GROUP, "missing")))
    assert result == DeleteGroupsResult({GROUP: ErrorCode.NONE, "missing": ErrorCode.GROUP_ID_NOT_FOUND})
    (tombstones,) = log.appends
    records = tombstones.records()
    assert {(type(r), r.value) for r in records} == {(OffsetCommitRecord, None)}
    assert {(r.key.topic, r.key.partition) for r in records if isinstance(r, OffsetCommitRecord)} == {
        ("t", 0),
        ("t", 1),
    }
    c.deliver(log.ack(tombstones, ErrorCode.NOT_ENOUGH_REPLICAS))  # nobody waits; counted
    assert c.actor.statistics().append_errors_total == 1
    assert c.fetch(GROUP, TP0).offsets[TP0].offset == -1


# ------------------------------------------------------------------------------------ loading


def _commit(group: str, tp: TopicPartition, offset: int | None) -> OffsetCommitRecord:
    value = None if offset is None else offset_commit_value(offset, f"m{offset}", 1_000 + offset)
    return OffsetCommitRecord(OffsetCommitKey(group, tp.topic, tp.partition), value)


def _metadata(group: str, generation: int | None, *members: str) -> GroupMetadataRecord:
    if generation is None:
        return GroupMetadataRecord(GroupMetadataKey(group), None)
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=generation,
        protocol="range" if members else None,
        leader=members[0] if members else None,
        members=tuple(
            MemberMetadata(
                member_id=m,
                client_id=m.split("-")[0],
                client_host="/10.0.0.1",
                rebalance_timeout=30_000,
                session_timeout=SESSION_MS,
                subscription=b"r",
                assignment=m.encode(),
            )
            for m in members
        ),
        current_state_timestamp=500,
    )
    return GroupMetadataRecord(GroupMetadataKey(group), value)


def _written_log() -> FakeOffsetsLog:
    """Partition 0 of a one-partition offsets topic, as an earlier coordinator left it."""
    log = FakeOffsetsLog(batches_per_read=2)
    batches: list[list[GroupRecord]] = [
        [_metadata("g", 1, "a-1"), _commit("g", TP0, 10)],
        [_commit("g", TP1, 20), _commit("h", TP0, 1)],
        [_metadata("g", 2, "a-1", "b-1"), _commit("g", TP0, 11)],  # metadata written twice; offset too
        [_commit("g", TP1, None)],  # tombstone
        [_metadata("h", 1), _metadata("h", None)],  # h's metadata deleted, its offset stays
        # x: nothing left; y: an emptied group deleted
        [_commit("x", TP0, 5), _commit("x", TP0, None), _metadata("y", 1), _metadata("y", None)],
    ]
    for records in batches:
        log.write(0, build_group_batch(records, timestamp_ms=1_000))
    return log


def test_election_loads_the_partition_then_serves_the_loaded_groups() -> None:
    log = _written_log()
    c = Coordinator(log, partitions=1)
    c.auto = False
    c.elect(0)
    assert c.fetch("g", TP0).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert c.answer(ListGroupsRequest()).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert c.actor.statistics().loading_partitions == (0,)
    reads = 0
    while log.reads:
        c.deliver(log.answer_read(log.reads[0]))
        reads += 1
    assert reads == 3, "six batches, two per read"
    assert c.fetch("g", TP0, TP1) == OffsetFetchResult(
        ErrorCode.NONE, {TP0: FetchedOffset(11, None, "m11"), TP1: FetchedOffset(-1)}
    )
    assert c.fetch("h", TP0).offsets[TP0] == FetchedOffset(1, None, "m1")
    assert c.describe("g") == ("Stable", ("a-1", "b-1"))
    assert c.describe("h") == ("Empty", ())
    listed = c.answer(ListGroupsRequest())
    assert listed.error is ErrorCode.NONE
    assert sorted(g.group_id for g in listed.groups) == ["g", "h"]
    assert c.heartbeat("b-1", 2) is ErrorCode.NONE, "loaded members have sessions"
    stats = c.actor.statistics()
    assert (stats.owned_partitions, stats.loads_completed_total, stats.records_loaded_total) == ((0,), 1, 13)


def test_a_loaded_member_that_never_heartbeats_expires() -> None:
    c = Coordinator(_written_log(), partitions=1)
    c.elect(0)
    assert c.describe("g") == ("Stable", ("a-1", "b-1"))
    c.advance(SESSION_MS - 1)
    assert c.heartbeat("a-1", 2) is ErrorCode.NONE
    c.advance(1)  # b-1's session (from loading) ends
    assert c.heartbeat("a-1", 2) is ErrorCode.REBALANCE_IN_PROGRESS


def test_failover_a_second_coordinator_loads_what_the_first_wrote() -> None:
    log = FakeOffsetsLog()
    first = Coordinator(log)
    first.elect()
    a, b = stable_pair(first)
    first.commit({TP0: 100}, member_id=b, generation=1)
    first.tell(OffsetsPartitionResigned(partition=partition_for(GROUP, 4)))
    assert first.fetch(GROUP, TP0).error is ErrorCode.NOT_COORDINATOR

    second = Coordinator(log, seed=1)
    second.elect(epoch=2)
    assert second.fetch(GROUP, TP0).offsets[TP0] == FetchedOffset(100, None, "m100")
    assert second.describe() == ("Stable", (a, b))
    assert second.heartbeat(a, 1) is ErrorCode.NONE
    assert second.heartbeat(b, 0) is ErrorCode.ILLEGAL_GENERATION


def test_a_failed_read_is_retried_after_the_backoff() -> None:
    log = _written_log()
    c = Coordinator(log, partitions=1)
    c.auto = False
    c.elect(0)
    c.deliver(log.answer_read(log.reads[0], ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert not log.reads
    c.advance(LOAD_RETRY_BACKOFF_MS - 1)
    assert not log.reads
    c.advance(1)
    assert [r.start_offset for r in log.reads] == [0]
    c.auto = True
    c.settle()
    assert c.fetch("g", TP0).offsets[TP0].offset == 11
    assert c.actor.statistics().load_read_errors_total == 1


def test_a_corrupt_batch_keeps_the_partition_loading() -> None:
    log = _written_log()
    original = log.batches[0][1]
    broken = bytearray(original)
    broken[-1] ^= 0xFF  # the CRC no longer matches
    log.batches[0][1] = bytes(broken)
    c = Coordinator(log, partitions=1)
    c.elect(0)
    assert c.fetch("g", TP0).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert c.actor.statistics().load_corrupt_total == 1
    assert not log.reads, "no retry: the same bytes would fail again"
    log.batches[0][1] = original
    c.elect(0, epoch=2)  # a new election reads afresh
    assert c.fetch("g", TP0).offsets[TP0].offset == 11


# ------------------------------------------------------------------------------------ resignation


def test_resignation_answers_parked_requests_not_coordinator() -> None:
    c = Coordinator(FakeOffsetsLog())
    c.elect()
    a_join, b_join = c.join(client_id="a"), c.join(client_id="b")
    c.advance(2 * INITIAL_DELAY_MS)  # b arrived during the initial delay: it runs twice
    a, b = c.join_result(a_join).member_id, c.join_result(b_join).member_id
    b_sync = c.sync(b, 1)  # parked in CompletingRebalance
    c_join = c.join(client_id="c")  # a newcomer: PreparingRebalance, b's sync answered, c's join parked
    assert c.replies[b_sync] == SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
    a_rejoin = c.join(a, client_id="a")
    assert c_join not in c.replies
    assert a_rejoin not in c.replies
    c.tell(OffsetsPartitionResigned(partition=partition_for(GROUP, 4)))
    for parked in (c_join, a_rejoin):
        assert c.join_result(parked).error is ErrorCode.NOT_COORDINATOR
    assert c.heartbeat(b, 1) is ErrorCode.NOT_COORDINATOR
    assert c.fetch(GROUP, TP0).error is ErrorCode.NOT_COORDINATOR
    left = c.answer(LeaveGroupRequest(group_id=GROUP, member_ids=(b,)))
    assert left == LeaveGroupResult(ErrorCode.NOT_COORDINATOR)
    assert c.actor.statistics().groups == 0
    assert set(c.kit.timers) == {("group", OffsetsRetentionTimer())}, "the group's timers went with it"


def test_resignation_while_loading_abandons_the_load() -> None:
    log = _written_log()
    c = Coordinator(log, partitions=1)
    c.auto = False
    c.elect(0)
    stale = log.reads[0]
    c.tell(OffsetsPartitionResigned(partition=0))
    c.deliver(log.answer_read(stale))
    assert not log.reads, "the abandoned load reads no further"
    assert c.fetch("g", TP0).error is ErrorCode.NOT_COORDINATOR
    assert c.actor.statistics().loading_partitions == ()
    c.elect(0, epoch=2)  # leader again: a fresh load from the start
    assert [r.start_offset for r in log.reads] == [0]


def test_a_stale_election_is_ignored() -> None:
    log = FakeOffsetsLog()
    c = Coordinator(log, partitions=1)
    c.auto = False
    c.elect(0, epoch=5)
    c.deliver(log.answer_read(log.reads[0]))
    c.tell(OffsetsPartitionResigned(partition=0))
    c.elect(0, epoch=4)
    assert not log.reads
    assert c.fetch("g", TP0).error is ErrorCode.NOT_COORDINATOR


def test_member_ids_come_from_the_nodes_seeded_generator() -> None:
    ids = []
    for _ in range(2):
        c = Coordinator(FakeOffsetsLog(), seed=7)
        c.elect()
        ids.append(c.join_result(c.join(client_id="a", v4=True)).member_id)
    assert ids[0] == ids[1]
    assert ids[0].startswith("a-")
    assert len(ids[0]) == len("a-") + 36


# ------------------------------------------------------------------------------------ on a real actor system


@dataclass(frozen=True, slots=True)
class _Append:
    batch: bytes


@dataclass(frozen=True, slots=True)
class _Read:
    start_offset: int


class OffsetsPartitionStub(Actor[_Append | _Read]):
    """Plays a local offsets partition leader: answers appends with their base offset (or holds them
    unanswered) and reads with everything from the offset asked."""

    def __init__(self, log: FakeOffsetsLog, *, hold_appends: bool = False) -> None:
        self.log = log
        self.hold_appends = hold_appends

    def receive(self, ctx: Context[_Append | _Read], message: _Append | _Read) -> None:
        match message:
            case _Append(batch=batch):
                if not self.hold_appends:
                    ctx.reply(self.log.write(0, batch))
            case _Read(start_offset=start):
                chosen = [
                    b
                    for b in self.log.batches.get(0, [])
                    if next(iterate_batches(b)).header.next_offset > start
                ]
                ctx.reply(ReadOutcome(ErrorCode.NONE, b"".join(chosen), self.log.log_end_offset(0)))


class AskingPorts:
    """The ports as the wiring will build them: one ask each, failures mapped by ``ask_failure_error``."""

    def __init__(self, partition: ActorRef) -> None:
        self.partition = partition

    def append(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        batch: bytes,
        on_complete: Callable[[AppendOutcome], GroupCoordinatorMessage],
    ) -> None:
        ctx.ask(
            self.partition,
            _Append(batch),
            timeout_ms=5_000,
            on_reply=lambda base_offset: on_complete(AppendOutcome(ErrorCode.NONE, base_offset)),
            on_failure=lambda failure: on_complete(AppendOutcome(ask_failure_error(failure))),
        )

    def read(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        start_offset: int,
        on_complete: Callable[[ReadOutcome], GroupCoordinatorMessage],
    ) -> None:
        ctx.ask(
            self.partition,
            _Read(start_offset),
            timeout_ms=5_000,
            on_reply=on_complete,
            on_failure=lambda failure: on_complete(ReadOutcome(ask_failure_error(failure))),
        )


@pytest.mark.asyncio
async def test_on_an_actor_system_ports_as_asks_load_commit_and_time_out() -> None:
    clock, activity = ManualClock(), Activity()
    log = _written_log()
    config = GroupConfig(offsets_topic_num_partitions=1)
    async with ActorSystem("b1", clock=clock, activity=activity) as system:
        stub = OffsetsPartitionStub(log)
        partition = system.spawn("offsets-0", lambda: stub)
        ports = AskingPorts(partition)
        coordinator = system.spawn(
            "group-coordinator", lambda: GroupCoordinatorActor(config=config, writer=ports, reader=ports)
        )
        system.tell(coordinator, OffsetsPartitionElected(partition=0, leader_epoch=1))
        await system.wait_idle()
        fetched = await system.ask(
            coordinator, OffsetFetchRequest(group_id="g", partitions=(TP0,)), timeout_ms=1_000
        )
        assert fetched == OffsetFetchResult(ErrorCode.NONE, {TP0: FetchedOffset(11, None, "m11")})

        commit = OffsetCommitRequest(
            group_id="g", member_id="a-1", generation_id=2, offsets={TP0: OffsetCommitPartition(offset=12)}
        )
        assert await system.ask(coordinator, commit, timeout_ms=1_000) == OffsetCommitResult(
            {TP0: ErrorCode.NONE}
        )

        stub.hold_appends = True  # the partition never answers: the ask times out, outcome unknown
        held = asyncio.ensure_future(system.ask(coordinator, commit, timeout_ms=10_000))
        await advance(clock, activity, 5_000)
        assert await held == OffsetCommitResult({TP0: ErrorCode.REQUEST_TIMED_OUT})
        fetched = await system.ask(
            coordinator, OffsetFetchRequest(group_id="g", partitions=(TP0,)), timeout_ms=1_000
        )
        assert fetched.offsets[TP0].offset == 12

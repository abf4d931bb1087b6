"""The group coordinator's rules (docs/consumer-groups.md), driven on virtual time through the harness."""

from __future__ import annotations

import pytest

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from actors.group.coordinator_logic import GroupConfig, partition_for
from actors.group.group_state import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
)
from actors.group.protocol import (
    AppendGroupMetadata,
    HeartbeatTimer,
    JoinGroupResult,
    JoinTimer,
    LoadedGroup,
    OffsetCommitResult,
    PendingMemberTimer,
    StoredGroupMetadata,
    StoredMember,
    SyncGroupResult,
)
from tests.unit.group.harness import GROUP, PROTOCOLS, Harness, subscription

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
DELAY = 3_000  # group.initial.rebalance.delay.ms


# ------------------------------------------------------------------------------------------ states


def test_transition_table_is_kafkas() -> None:
    group = GroupMetadata.new(GROUP, 0)
    with pytest.raises(ValueError, match="cannot move to Stable from Empty"):
        group.transition_to(GroupState.STABLE, 1)
    with pytest.raises(ValueError, match="CompletingRebalance from Empty"):
        group.transition_to(GroupState.COMPLETING_REBALANCE, 1)
    path = [
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.EMPTY,
        GroupState.DEAD,
    ]
    for at, state in enumerate(path, start=1):
        group.transition_to(state, at * 10)
        assert group.state is state
        assert group.current_state_timestamp_ms == at * 10
    assert VALID_PREVIOUS_STATES[GroupState.DEAD] == frozenset(GroupState)
    for state in (GroupState.EMPTY, GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        with pytest.raises(ValueError, match="from Dead"):
            group.transition_to(state, 100)


# ------------------------------------------------------------------------------------ join and sync


def test_one_member_join_waits_for_the_initial_delay_then_sync_completes_generation_1() -> None:
    h = Harness()
    token = h.join(client_id="solo")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert token not in h.replies, "the first rebalance waits for group.initial.rebalance.delay.ms"
    h.advance(DELAY - 1)
    assert token not in h.replies
    h.advance(1)
    result = h.join_reply(token)
    assert result.error is ErrorCode.NONE
    assert result.generation_id == 1
    assert result.member_id == "solo-u1"
    assert result.leader_id == result.member_id
    assert result.protocol_name == "range"
    assert result.members == ((result.member_id, b"r"),)
    assert h.state() is GroupState.COMPLETING_REBALANCE

    h.auto_ack = False
    sync = h.sync(result.member_id, 1, {result.member_id: b"a"})
    assert sync not in h.replies
    assert len(h.appends) == 1
    stored = h.appends[0]
    assert isinstance(stored, AppendGroupMetadata)
    assert stored.offsets_partition == partition_for(GROUP, 4)
    assert stored.record.generation_id == 1
    assert stored.record.members[0].assignment == b"a"
    assert stored.record.members[0].subscription == b"r"
    assert h.state() is GroupState.COMPLETING_REBALANCE, "Stable only once the metadata is replicated"
    h.ack_all()
    assert h.sync_reply(sync) == SyncGroupResult(ErrorCode.NONE, b"a")
    assert h.state() is GroupState.STABLE
    assert h.heartbeat(result.member_id, 1) is ErrorCode.NONE


def test_three_members_the_initial_delay_extends_while_members_arrive() -> None:
    h = Harness()
    a = h.join(client_id="a")
    h.advance(1_000)
    b = h.join(client_id="b")
    h.advance(1_000)
    c = h.join(client_id="c")
    h.advance(1_000)  # t=3000: a member arrived during the delay, so wait min(3000, remaining) more
    assert a not in h.replies
    assert h.timers[JoinTimer(GROUP)] == 6_000
    h.advance(3_000)
    results = [h.join_reply(t) for t in (a, b, c)]
    ids = [r.member_id for r in results]
    assert ids == ["a-u1", "b-u2", "c-u3"]
    assert {r.generation_id for r in results} == {1}
    assert {r.leader_id for r in results} == {"a-u1"}
    assert [len(r.members) for r in results] == [3, 0, 0], "only the leader gets the members"

    b_sync = h.sync("b-u2", 1)
    c_sync = h.sync("c-u3", 1)
    assert b_sync not in h.replies
    assert c_sync not in h.replies, "followers wait for the leader's assignment"
    a_sync = h.sync("a-u1", 1, {"a-u1": b"A", "b-u2": b"B"})  # c left out: gets an empty assignment
    assert h.sync_reply(a_sync).assignment == b"A"
    assert h.sync_reply(b_sync).assignment == b"B"
    assert h.sync_reply(c_sync) == SyncGroupResult(ErrorCode.NONE, b"")
    assert h.state() is GroupState.STABLE
    # A repeated sync in Stable answers the current assignment.
    assert h.sync_reply(h.sync("b-u2", 1)).assignment == b"B"


def test_initial_delay_is_capped_by_the_rebalance_timeout() -> None:
    h = Harness()
    first = h.join(client_id="a", rebalance_timeout_ms=4_000)  # remaining = 4000 - 3000 = 1000
    h.advance(2_000)
    h.join(client_id="b", rebalance_timeout_ms=4_000)
    h.advance(1_000)
    assert h.timers[JoinTimer(GROUP)] == 4_000, "extended by min(delay, remaining) = 1000"
    h.advance(1_000)
    assert h.join_reply(first).generation_id == 1


def test_member_id_required_from_join_group_v4() -> None:
    h = Harness()
    first = h.join(client_id="c", v4=True)
    reply = h.join_reply(first)
    assert reply.error is ErrorCode.MEMBER_ID_REQUIRED
    assert reply.member_id == "c-u1"
    assert h.state() is GroupState.EMPTY
    assert h.group.pending_members == {"c-u1"}
    assert h.timers[PendingMemberTimer(GROUP, "c-u1")] == 10_000
    second = h.join("c-u1", v4=True)
    assert PendingMemberTimer(GROUP, "c-u1") not in h.timers
    assert h.group.pending_members == set()
    h.advance(DELAY)
    assert h.join_reply(second).generation_id == 1
    assert h.join_reply(second).member_id == "c-u1"


def test_a_pending_member_that_never_rejoins_expires_and_stops_blocking_the_rebalance() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1)
    newcomer = h.join_reply(h.join(client_id="n", v4=True))
    assert newcomer.error is ErrorCode.MEMBER_ID_REQUIRED
    assert h.state() is GroupState.STABLE, "a pending member alone does not start a rebalance"
    rejoin = h.join(a)  # the leader rejoins: rebalance, but the pending member is still expected
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert rejoin not in h.replies
    h.advance(10_000)  # the pending member's session timeout
    assert h.group.pending_members == set()
    result = h.join_reply(rejoin)
    assert result.generation_id == generation + 1
    assert [m for m, _ in result.members] == [a]


def test_a_pending_member_that_rejoins_completes_the_rebalance() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1)
    newcomer = h.join_reply(h.join(client_id="n", v4=True)).member_id
    rejoin_a = h.join(a)
    join_n = h.join(newcomer, v4=True)
    result = h.join_reply(rejoin_a)
    assert result.generation_id == generation + 1
    assert sorted(m for m, _ in result.members) == sorted([a, newcomer])
    assert h.join_reply(join_n).leader_id == a


def test_a_member_joining_a_stable_group_rebalances_it() -> None:
    h = Harness()
    members, generation = h.stable_group(3)
    newcomer = h.join(client_id="d")
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.timers[JoinTimer(GROUP)] == h.now + 60_000, "a DelayedJoin: the rebalance timeout"
    for m in members:
        assert h.heartbeat(m, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    # A sync of the old generation is refused while preparing.
    assert h.sync_reply(h.sync(members[1], generation)).error is ErrorCode.REBALANCE_IN_PROGRESS
    rejoins = [h.join(m) for m in members[:2]]
    assert newcomer not in h.replies
    rejoins.append(h.join(members[2]))  # the last known member: completes at once
    results = [h.join_reply(t) for t in [newcomer, *rejoins]]
    assert {r.generation_id for r in results} == {generation + 1}
    assert len({r.member_id for r in results}) == 4
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert JoinTimer(GROUP) not in h.timers


def test_a_leaving_member_rebalances_the_group() -> None:
    h = Harness()
    (a, b, c), generation = h.stable_group(3)
    assert h.leave(b).members == ((b, ErrorCode.NONE),)
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    ja, jc = h.join(a), h.join(c)
    assert h.join_reply(ja).generation_id == generation + 1
    assert sorted(m for m, _ in h.join_reply(ja).members) == sorted([a, c])
    assert h.join_reply(jc).leader_id == a
    assert h.leave("nobody").members == (("nobody", ErrorCode.UNKNOWN_MEMBER_ID),)


def test_last_member_leaving_empties_the_group_and_stores_the_empty_generation() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1)
    h.auto_ack = False
    h.leave(a)
    # The DelayedJoin completes at once: nobody is expected; the group is Empty, generation bumped.
    assert h.state() is GroupState.EMPTY
    assert h.group.generation_id == generation + 1
    (stored,) = h.appends
    assert isinstance(stored, AppendGroupMetadata)
    assert stored.record.members == ()
    assert stored.record.protocol is None
    assert stored.record.generation_id == generation + 1


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    rejoin_b = h.join(b, protocols=(("range", b"new"),))  # new metadata: rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.advance(5_000)
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(55_000)  # rebalance timeout: a never rejoined
    result = h.join_reply(rejoin_b)
    assert result.generation_id == generation + 1
    assert result.leader_id == b, "the old leader did not rejoin: a rejoined member leads"
    assert result.members == ((b, b"new"),)
    assert h.heartbeat(a, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.join_reply(h.join(a)).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_follower_join_in_stable_with_same_metadata_gets_the_current_generation() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    result = h.join_reply(h.join(b))
    assert (result.error, result.generation_id, result.leader_id, result.members) == (
        ErrorCode.NONE,
        generation,
        a,
        (),
    )
    assert h.state() is GroupState.STABLE
    h.join(a)  # the leader's join forces a rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_a_new_join_during_completing_rebalance_answers_parked_syncs_rebalance_in_progress() -> None:
    h = Harness()
    tokens = [h.join(client_id=c) for c in ("a", "b")]
    h.advance(2 * DELAY)
    a, b = (h.join_reply(t).member_id for t in tokens)
    parked = h.sync(b, 1)
    assert parked not in h.replies
    h.join(client_id="c")
    assert h.sync_reply(parked).error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.state() is GroupState.PREPARING_REBALANCE
    # A commit during CompletingRebalance is refused, during PreparingRebalance accepted.
    accepted = h.commit({TP0: 5}, member_id=a, generation_id=1)
    assert h.commit_errors(accepted) == {TP0: ErrorCode.NONE}


def test_failed_metadata_append_fails_the_syncs_and_rebalances() -> None:
    h = Harness()
    tokens = [h.join(client_id=c) for c in ("a", "b")]
    h.advance(2 * DELAY)
    a, b = (h.join_reply(t).member_id for t in tokens)
    h.auto_ack = False
    sb = h.sync(b, 1)
    sa = h.sync(a, 1, {a: b"A", b: b"B"})
    h.ack_all(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert h.sync_reply(sa) == SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
    assert h.sync_reply(sb) == SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_sync_and_heartbeat_errors() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    assert h.sync_reply(h.sync("ghost", generation)).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync_reply(h.sync(a, generation + 1)).error is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(a, generation - 1) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation, group_id="missing") is ErrorCode.UNKNOWN_MEMBER_ID
    h.join(client_id="c")
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    h.join(a)
    h.join(b)  # complete: CompletingRebalance, generation + 1
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.heartbeat(a, generation + 1) is ErrorCode.REBALANCE_IN_PROGRESS


def test_join_validation() -> None:
    h = Harness()
    assert h.join_reply(h.join(session_timeout_ms=5_999)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_reply(h.join(session_timeout_ms=1_800_001)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_reply(h.join(group_id="")).error is ErrorCode.INVALID_GROUP_ID
    assert h.join_reply(h.join("stale-id")).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.join_reply(h.join(protocol_type="")).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert GROUP in h.logic.groups  # the empty group it created stays, as in Kafka
    h.stable_group(1)
    assert h.join_reply(h.join(protocols=(("sticky", b""),))).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_reply(h.join(protocol_type="connect")).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_group_max_size_refuses_newcomers() -> None:
    h = Harness(GroupConfig(offsets_topic_num_partitions=4, group_max_size=2))
    h.stable_group(2)
    reply = h.join_reply(h.join(client_id="third"))
    assert (reply.error, reply.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert h.state() is GroupState.STABLE


def test_protocol_selection_by_vote() -> None:
    h = Harness()
    t1 = h.join(client_id="a", protocols=(("roundrobin", b"1"), ("range", b"1")))
    t2 = h.join(client_id="b", protocols=(("roundrobin", b"2"), ("range", b"2")))
    t3 = h.join(client_id="c", protocols=(("range", b"3"), ("roundrobin", b"3")))
    h.advance(3 * DELAY)
    assert {h.join_reply(t).protocol_name for t in (t1, t2, t3)} == {"roundrobin"}
    assert h.join_reply(t1).members == (("a-u1", b"1"), ("b-u2", b"2"), ("c-u3", b"3"))


# ------------------------------------------------------------------------------------ liveness


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    synced_at = h.now
    for _ in range(3):
        h.advance(3_000)
        assert h.heartbeat(a, generation) is ErrorCode.NONE
    h.advance(synced_at + 10_000 - h.now - 1)
    assert b in h.group.members
    h.advance(1)
    # b has been silent for its 10 s session timeout since its sync: gone, and the group rebalances.
    assert b not in h.group.members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert HeartbeatTimer(GROUP, b) not in h.timers
    assert h.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    result = h.join_reply(h.join(a))
    assert result.generation_id == generation + 1
    assert result.members == ((a, b"r"),)


def test_heartbeat_restarts_the_session() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1)
    h.advance(9_999)
    assert h.heartbeat(a, generation) is ErrorCode.NONE
    h.advance(9_999)
    assert a in h.group.members
    h.advance(1)
    assert a not in h.group.members
    assert h.state() is GroupState.EMPTY


def test_a_parked_join_of_a_new_member_lapses_after_the_new_member_timeout() -> None:
    h = Harness()
    (a,), generation = h.stable_group(1)
    h.advance(1_000)
    newcomer = h.join(client_id="n")  # PreparingRebalance; a never rejoins but keeps heartbeating
    for _ in range(40):
        h.advance(5_000)
        h.heartbeat(a, generation)
    # The rebalance timeout (60 s) dropped a; the newcomer's generation completed.
    assert h.join_reply(newcomer).generation_id == generation + 1


# ------------------------------------------------------------------------------------ offsets


def test_standalone_commit_for_an_unknown_group_is_accepted() -> None:
    h = Harness()
    token = h.commit({TP0: 42})
    assert h.commit_errors(token) == {TP0: ErrorCode.NONE}
    assert h.state() is GroupState.EMPTY
    assert h.group.protocol_type is None
    fetched = h.logic.handle_fetch_offsets(GROUP, [TP0, TP1])
    assert fetched.error is ErrorCode.NONE
    assert fetched.offsets[TP0].offset == 42
    assert fetched.offsets[TP1].offset == -1
    assert h.logic.handle_fetch_offsets(GROUP).offsets.keys() == {TP0}


def test_commit_to_an_unknown_group_with_a_generation_is_illegal_generation() -> None:
    h = Harness()
    assert h.commit_errors(h.commit({TP0: 1}, member_id="m", generation_id=3)) == {
        TP0: ErrorCode.ILLEGAL_GENERATION
    }
    assert GROUP not in h.logic.groups


def test_commit_validation_against_a_live_group() -> None:
    h = Harness()
    (a, b), generation = h.stable_group(2)
    assert h.commit_errors(h.commit({TP0: 1}, member_id=a, generation_id=generation - 1)) == {
        TP0: ErrorCode.ILLEGAL_GENERATION
    }
    assert h.commit_errors(h.commit({TP0: 1}, member_id="ghost", generation_id=generation)) == {
        TP0: ErrorCode.UNKNOWN_MEMBER_ID
    }
    # A standalone commit (generation -1) to a group with members is not a member's commit.
    assert h.commit_errors(h.commit({TP0: 1})) == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit_errors(h.commit({TP0: 7}, member_id=b, generation_id=generation)) == {TP0: ErrorCode.NONE}
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 7


def test_commit_from_a_fenced_generation_after_a_rebalance_is_rejected() -> None:
    h = Harness()
    (a, b), old = h.stable_group(2)
    h.leave(b)
    h.join(a)  # generation old + 1, CompletingRebalance
    assert h.commit_errors(h.commit({TP0: 1}, member_id=a, generation_id=old + 1)) == {
        TP0: ErrorCode.REBALANCE_IN_PROGRESS
    }
    assert h.commit_errors(h.commit({TP0: 1}, member_id=b, generation_id=old)) == {
        TP0: ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert h.commit_errors(h.commit({TP0: 1}, member_id=a, generation_id=old)) == {
        TP0: ErrorCode.ILLEGAL_GENERATION
    }
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == -1


def test_a_commit_is_answered_only_once_replicated_and_errors_map_to_group_errors() -> None:
    h = Harness()
    h.auto_ack = False
    token = h.commit({TP0: 10, TP1: 11})
    assert token not in h.replies
    assert h.group.pending_offset_commits.keys() == {TP0, TP1}
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == -1, "not committed yet"
    h.ack_all()
    assert h.commit_errors(token) == {TP0: ErrorCode.NONE, TP1: ErrorCode.NONE}
    assert h.group.pending_offset_commits == {}
    failed = h.commit({TP0: 20})
    h.ack_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.commit_errors(failed) == {TP0: ErrorCode.NOT_COORDINATOR}
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 10
    assert h.group.pending_offset_commits == {}
    too_big = h.commit({TP0: 30}, metadata="x" * 5_000)
    assert h.commit_errors(too_big) == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert h.appends == []


def test_offset_fetch_answers_in_every_state() -> None:
    h = Harness()
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == -1, "unknown group"
    h.commit({TP0: 3})  # Empty: a standalone commit
    seen = {h.state()}
    tokens = [h.join(client_id=c) for c in ("a", "b")]
    seen.add(h.state())
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 3
    h.advance(2 * DELAY)
    seen.add(h.state())
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 3
    a, b = (h.join_reply(t).member_id for t in tokens)
    h.sync(a, 1, {a: b"A", b: b"B"})
    seen.add(h.state())
    assert h.logic.handle_fetch_offsets(GROUP).offsets[TP0].offset == 3
    assert seen == set(GroupState) - {GroupState.DEAD}


# ------------------------------------------------------------------------------------ retention


def test_offsets_expire_a_retention_period_after_the_group_became_empty() -> None:
    retention = 100_000
    config = GroupConfig(
        offsets_topic_num_partitions=4,
        offsets_retention_ms=retention,
        offsets_retention_check_interval_ms=10_000,
    )
    h = Harness(config)
    (a,), generation = h.stable_group(1)
    h.commit({TP0: 5}, member_id=a, generation_id=generation)
    while h.now < 150_000:  # past the retention counted from the commit, but the group is live
        h.advance(5_000)
        assert h.heartbeat(a, generation) is ErrorCode.NONE
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 5
    h.leave(a)
    assert h.state() is GroupState.EMPTY
    emptied_at = h.group.current_state_timestamp_ms
    assert emptied_at == h.now
    h.advance(retention - 1)
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 5, "kept until empty + retention"
    assert h.tombstones == []
    h.advance(10_000)  # the next check of the 10 s interval
    assert GROUP not in h.logic.groups, "expired offsets, then the Empty group without offsets is Dead"
    (tombstones,) = h.tombstones
    assert tombstones.offsets == (TP0,)
    assert tombstones.group_metadata, "the group had a generation: its metadata record is deleted too"
    assert h.logic.handle_describe_group(GROUP).summary.state == "Dead"


def test_subscribed_consumer_group_offsets_do_not_expire_but_unsubscribed_do() -> None:
    config = GroupConfig(offsets_topic_num_partitions=4, offsets_retention_ms=50_000)
    h = Harness(config)
    token = h.join(client_id="a", protocols=(("range", subscription("t")),))
    h.advance(DELAY)
    a = h.join_reply(token).member_id
    h.sync(a, 1, {a: b"A"})
    h.commit({TP0: 1, TopicPartition("old", 0): 2}, member_id=a, generation_id=1)
    assert h.group.subscribed_topics == frozenset({"t"})
    expired = h.group.remove_expired_offsets(h.now + 50_000, 50_000)
    assert expired.keys() == {TopicPartition("old", 0)}
    assert h.group.offsets.keys() == {TP0}


def test_standalone_offsets_expire_by_commit_time() -> None:
    h = Harness(GroupConfig(offsets_topic_num_partitions=4, offsets_retention_ms=30_000))
    h.commit({TP0: 1})
    h.advance(20_000)
    h.commit({TP1: 2})
    group = h.group
    assert group.remove_expired_offsets(h.now + 10_000, 30_000).keys() == {TP0}
    assert group.remove_expired_offsets(h.now + 29_999, 30_000) == {}
    assert group.remove_expired_offsets(h.now + 30_000, 30_000).keys() == {TP1}


def test_pending_commits_never_expire() -> None:
    group = GroupMetadata.new(GROUP, 0)
    stored = OffsetAndMetadata(offset=1, commit_timestamp_ms=0)
    group.prepare_offset_commit({TP0: stored})
    assert group.remove_expired_offsets(10**9, 1) == {}


# ------------------------------------------------------------------------------------ deletion, reads


def test_delete_groups_only_empty_groups() -> None:
    h = Harness()
    h.stable_group(1)
    h.commit({TP0: 1}, group_id="standalone")
    errors, effects = h.logic.handle_delete_groups([GROUP, "standalone", "missing"], h.now)
    h.apply(effects)
    assert errors == {
        GROUP: ErrorCode.NON_EMPTY_GROUP,
        "standalone": ErrorCode.NONE,
        "missing": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert "standalone" not in h.logic.groups
    (tombstones,) = h.tombstones
    assert (tombstones.group_id, tombstones.offsets, tombstones.group_metadata) == (
        "standalone",
        (TP0,),
        False,
    )
    assert h.logic.handle_fetch_offsets("standalone", [TP0]).offsets[TP0].offset == -1
    errors, _ = h.logic.handle_delete_groups(["standalone"], h.now)
    assert errors == {"standalone": ErrorCode.GROUP_ID_NOT_FOUND}


def test_describe_and_list_groups() -> None:
    h = Harness()
    (a, b), _ = h.stable_group(2)
    described = h.logic.handle_describe_group(GROUP)
    assert described.error is ErrorCode.NONE
    assert (described.summary.state, described.summary.protocol_type, described.summary.protocol) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.metadata, m.assignment) for m in described.summary.members] == [
        (a, b"r", f"assign-{a}".encode()),
        (b, b"r", f"assign-{b}".encode()),
    ]
    h.leave(a)
    preparing = h.logic.handle_describe_group(GROUP).summary
    assert (preparing.state, preparing.protocol, preparing.members[0].metadata) == (
        "PreparingRebalance",
        "",
        b"",
    )
    h.commit({TP0: 1}, group_id="other")
    listed = h.logic.handle_list_groups()
    assert listed.error is ErrorCode.NONE
    assert sorted((g.group_id, g.protocol_type) for g in listed.groups) == [
        (GROUP, "consumer"),
        ("other", ""),
    ]


# ------------------------------------------------------------------------------------ coordinator status


def test_loading_not_coordinator_and_resignation() -> None:
    h = Harness(own_all=False)
    partition = partition_for(GROUP, 4)
    assert h.join_reply(h.join()).error is ErrorCode.NOT_COORDINATOR
    h.apply(h.logic.on_election(partition))
    assert h.join_reply(h.join()).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("m", 1) is ErrorCode.NONE, "heartbeats are answered blindly while loading"
    assert h.sync_reply(h.sync("m", 1)).error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.commit_errors(h.commit({TP0: 1})) == {TP0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.logic.handle_list_groups().error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    stored = StoredGroupMetadata(
        group_id=GROUP,
        protocol_type="consumer",
        generation_id=4,
        protocol="range",
        leader="m",
        current_state_timestamp_ms=0,
        members=(
            StoredMember(
                member_id="m",
                client_id="c",
                client_host="h",
                rebalance_timeout_ms=60_000,
                session_timeout_ms=10_000,
                subscription=b"r",
                assignment=b"A",
            ),
        ),
    )
    offset = OffsetAndMetadata(offset=9, commit_timestamp_ms=0)
    h.apply(
        h.logic.complete_loading(
            partition, [LoadedGroup(group_id=GROUP, metadata=stored, offsets={TP0: (3, offset)})], h.now
        )
    )
    assert h.state() is GroupState.STABLE
    assert h.group.generation_id == 4
    assert h.timers[HeartbeatTimer(GROUP, "m")] == h.now + 10_000, "loaded members get a fresh session"
    assert h.heartbeat("m", 4) is ErrorCode.NONE
    assert h.sync_reply(h.sync("m", 4)).assignment == b"A"
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 9

    rejoin = h.join("m")  # the leader's join: a rebalance; the join stays parked
    assert rejoin not in h.replies or h.join_reply(rejoin).generation_id == 5
    joining = h.join(client_id="new")
    assert joining not in h.replies
    h.apply(h.logic.on_resignation(partition, h.now))
    assert h.join_reply(joining).error is ErrorCode.NOT_COORDINATOR
    assert GROUP not in h.logic.groups
    assert not any(getattr(k, "group_id", None) == GROUP for k in h.timers), "no timer outlives the group"
    assert h.join_reply(h.join()).error is ErrorCode.NOT_COORDINATOR


def test_partition_for_is_kafkas() -> None:
    # Java: "my-group".hashCode() == -1906497762 (over UTF-16 code units with int overflow).
    assert partition_for("my-group", 50) == 1906497762 % 50
    assert partition_for("", 50) == 0


def test_results_carry_kafkas_join_error_shape() -> None:
    h = Harness()
    reply = h.join_reply(h.join("stale"))
    assert reply == JoinGroupResult(error=ErrorCode.UNKNOWN_MEMBER_ID, member_id="stale")
    assert isinstance(h.replies[h.commit({TP0: 1})], OffsetCommitResult)
    assert PROTOCOLS[0][0] == "range"


def test_a_removed_group_starts_again_at_generation_zero_and_its_old_generation_is_refused() -> None:
    """Met by the stateful test: an Empty group without offsets is removed at the next retention
    check; a later simple commit makes a new group at generation 0, and a commit still carrying
    the removed group's generation is refused (ILLEGAL_GENERATION, as Kafka answers for a group
    it does not have)."""
    config = GroupConfig(offsets_topic_num_partitions=4, offsets_retention_check_interval_ms=10_000)
    h = Harness(config)
    (a,), generation = h.stable_group(1)
    assert generation >= 1
    h.leave(a)
    h.advance(10_000)
    assert GROUP not in h.logic.groups
    stale = h.commit({TP0: 3}, member_id=a, generation_id=generation)
    assert h.commit_errors(stale) == {TP0: ErrorCode.ILLEGAL_GENERATION}
    assert GROUP not in h.logic.groups
    h.commit({TP0: 4})
    assert h.group.generation_id == 0
    assert h.logic.handle_fetch_offsets(GROUP, [TP0]).offsets[TP0].offset == 4

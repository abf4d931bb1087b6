"""The pure ISR/HW rules, on the scenarios of docs/scenarios.md §1 (items 1–9).

A tiny stand-in for the leader's log keeps the LEO and a monotonic HW, exactly what the rules read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from actors.common.types import TopicPartition
from actors.server.replica.partition_state import (
    CommittedIsr,
    PartitionState,
    PendingExpandIsr,
    PendingShrinkIsr,
    ReplicaProgress,
    Role,
)

TP = TopicPartition("t", 0)
L, F, F2 = 0, 1, 2


@dataclass
class LeaderLog:
    log_end_offset: int
    high_watermark: int = 0

    def maybe_increment_high_watermark(self, candidate: int) -> bool:
        if candidate > self.high_watermark:
            assert candidate <= self.log_end_offset
            self.high_watermark = candidate
            return True
        return False


def fetch(
    state: PartitionState, log: LeaderLog, follower: int, offset: int, now_ms: int, lag_ms: int
) -> None:
    """A follower fetch on the leader, in Kafka 2.4's order (docs/replication.md §3): progress, expand check,
    HW."""
    replica = state.remote_replicas[follower]
    replica.update_fetch_state(
        fetch_offset=offset,
        follower_log_start_offset=0,
        leader_end_offset=log.log_end_offset,
        fetch_time_ms=now_ms,
        high_watermark_sent=log.high_watermark,
    )
    log.maybe_increment_high_watermark(state.high_watermark_candidate(log.log_end_offset, now_ms, lag_ms))


def leader(
    isr: set[int], replicas: tuple[int, ...], log: LeaderLog, now_ms: int, epoch: int = 5
) -> PartitionState:
    state = PartitionState(TP, L)
    state.make_leader(
        controller_epoch=1,
        leader_epoch=epoch,
        isr=frozenset(isr),
        assigned_replicas=replicas,
        zk_version=1,
        leader_log_end_offset=log.log_end_offset,
        now_ms=now_ms,
    )
    return state


class TestIsrExpiration:
    """IsrExpirationTest: lag 100 ms, leader LEO 20, followers initialised by a fetch at 0 when LEO was 0."""

    LAG = 100

    def setup_state(self) -> tuple[PartitionState, LeaderLog]:
        log = LeaderLog(log_end_offset=0)
        state = leader({L, F}, (L, F), log, now_ms=0)
        fetch(state, log, F, 0, now_ms=0, lag_ms=self.LAG)
        log.log_end_offset = 20
        return state, log

    def test_stuck_follower_goes_out_of_sync_after_the_lag(self) -> None:
        state, log = self.setup_state()
        fetch(state, log, F, 19, now_ms=0, lag_ms=self.LAG)
        assert state.out_of_sync_replicas(20, now_ms=0, replica_lag_time_max_ms=self.LAG) == frozenset()
        assert state.out_of_sync_replicas(20, now_ms=150, replica_lag_time_max_ms=self.LAG) == {F}

    def test_follower_that_never_fetches_again_goes_out_of_sync(self) -> None:
        state, _ = self.setup_state()
        assert state.out_of_sync_replicas(20, now_ms=150, replica_lag_time_max_ms=self.LAG) == {F}

    def test_slow_follower_uses_the_previous_fetch_rule(self) -> None:
        state, log = self.setup_state()
        fetch(state, log, F, 18, now_ms=0, lag_ms=self.LAG)
        fetch(state, log, F, 19, now_ms=75, lag_ms=self.LAG)  # < leader LEO now and at the last fetch
        assert state.out_of_sync_replicas(20, now_ms=75, replica_lag_time_max_ms=self.LAG) == frozenset()
        assert state.out_of_sync_replicas(20, now_ms=150, replica_lag_time_max_ms=self.LAG) == {F}
        fetch(state, log, F, 20, now_ms=150, lag_ms=self.LAG)
        assert state.remote_replicas[F].last_caught_up_time_ms == 150
        assert state.out_of_sync_replicas(20, now_ms=150, replica_lag_time_max_ms=self.LAG) == frozenset()

    def test_caught_up_idle_follower_stays_in_sync(self) -> None:
        state, log = self.setup_state()
        fetch(state, log, F, 20, now_ms=0, lag_ms=self.LAG)
        assert state.out_of_sync_replicas(20, now_ms=150, replica_lag_time_max_ms=self.LAG) == frozenset()


def test_update_follower_fetch_state_two_step_rule() -> None:
    """PartitionTest.testUpdateFollowerFetchState (#4)."""
    start = 1_000
    log = LeaderLog(log_end_offset=6)
    state = leader({L, F}, (L, F), log, now_ms=start)
    replica = state.remote_replicas[F]
    assert (replica.last_caught_up_time_ms, replica.log_end_offset, replica.log_start_offset) == (
        start,
        -1,
        -1,
    )
    fetch(state, log, F, 3, now_ms=start + 500, lag_ms=10_000)
    assert (replica.last_caught_up_time_ms, replica.log_end_offset, replica.log_start_offset) == (start, 3, 0)
    fetch(state, log, F, 6, now_ms=start + 1000, lag_ms=10_000)
    assert (replica.last_caught_up_time_ms, replica.log_end_offset) == (start + 1000, 6)


@pytest.mark.parametrize("write_succeeds", [True, False])
def test_maybe_shrink_isr_and_hw_jump(write_succeeds: bool) -> None:
    """PartitionTest.testMaybeShrinkIsr / testIsrNotShrunkIfUpdateFails (#5)."""
    log = LeaderLog(log_end_offset=10)
    state = leader({L, F}, (L, F), log, now_ms=0)
    log.maybe_increment_high_watermark(state.high_watermark_candidate(10, 0, 10_000))
    assert log.high_watermark == 0  # F's LEO is unknown and F is in the ISR
    assert state.out_of_sync_replicas(10, now_ms=0, replica_lag_time_max_ms=10_000) == frozenset()
    out_of_sync = state.out_of_sync_replicas(10, now_ms=10_001, replica_lag_time_max_ms=10_000)
    assert out_of_sync == {F}
    proposal = state.begin_shrink(out_of_sync)
    assert (proposal.leader, proposal.leader_epoch, proposal.isr, proposal.zk_version) == (L, 5, (L,), 1)
    # While the write is in flight the HW does not move past the replicas being removed.
    assert isinstance(state.isr_state, PendingShrinkIsr)
    assert state.high_watermark_candidate(10, 10_001, 10_000) == -1
    if write_succeeds:
        state.complete_isr_change(proposal, new_zk_version=2)
        assert state.isr == {L}
        assert state.zk_version == 2
    else:
        state.abort_isr_change()
        assert state.isr == {L, F}
        assert state.zk_version == 1
    log.maybe_increment_high_watermark(state.high_watermark_candidate(10, 10_001, 10_000))
    assert log.high_watermark == (10 if write_succeeds else 0)


def test_no_shrink_if_previous_fetch_was_caught_up() -> None:
    """PartitionTest.testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp (#6)."""
    log = LeaderLog(log_end_offset=10)
    state = leader({L, F}, (L, F), log, now_ms=0)
    fetch(state, log, F, 5, now_ms=5_000, lag_ms=10_000)
    assert log.high_watermark == 5
    log.log_end_offset = 15
    fetch(state, log, F, 10, now_ms=10_001, lag_ms=10_000)
    assert state.remote_replicas[F].last_caught_up_time_ms == 5_000
    assert log.high_watermark == 10
    assert state.out_of_sync_replicas(15, now_ms=10_001, replica_lag_time_max_ms=10_000) == frozenset()


def test_no_shrink_if_follower_caught_up_to_log_end() -> None:
    """PartitionTest.testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd (#7)."""
    log = LeaderLog(log_end_offset=10)
    state = leader({L, F}, (L, F), log, now_ms=0)
    fetch(state, log, F, 10, now_ms=0, lag_ms=10_000)
    assert log.high_watermark == 10
    assert state.out_of_sync_replicas(10, now_ms=10_001, replica_lag_time_max_ms=10_000) == frozenset()


@pytest.mark.parametrize("write_succeeds", [True, False])
def test_isr_expansion(write_succeeds: bool) -> None:
    """PartitionTest.testIsrExpansion / testIsrNotExpandedIfUpdateFails (#8)."""
    log = LeaderLog(log_end_offset=10, high_watermark=10)
    state = leader({L}, (L, F), log, now_ms=0)
    assert state.leader_epoch_start_offset == 10
    fetch(state, log, F, 3, now_ms=1, lag_ms=10_000)
    assert not state.expansion_candidate(F, log.high_watermark)
    fetch(state, log, F, 10, now_ms=2, lag_ms=10_000)
    assert state.expansion_candidate(F, log.high_watermark)
    proposal = state.begin_expand(F)
    assert (proposal.leader, proposal.leader_epoch, proposal.isr, proposal.zk_version) == (L, 5, (L, F), 1)
    assert isinstance(state.isr_state, PendingExpandIsr)
    assert state.maximal_isr == {L, F}
    assert not state.expansion_candidate(F, log.high_watermark)  # one change at a time
    if write_succeeds:
        state.complete_isr_change(proposal, 2)
        assert state.isr == {L, F}
    else:
        state.abort_isr_change()
        assert state.isr == {L}
        assert state.remote_replicas[F].log_end_offset == 10


def test_follower_joins_isr_only_after_reaching_the_current_epoch_start() -> None:
    """PartitionTest.testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch (#9)."""
    log = LeaderLog(log_end_offset=0)
    state = leader({L, F2}, (L, F, F2), log, now_ms=0, epoch=8)
    log.log_end_offset = 5  # L appends 2 + 3 records
    fetch(state, log, F2, 0, now_ms=1, lag_ms=10_000)
    fetch(state, log, F2, 1, now_ms=2, lag_ms=10_000)
    assert log.high_watermark == 1
    state.make_follower(
        controller_epoch=1, leader_id=F2, leader_epoch=9, assigned_replicas=(L, F, F2), zk_version=2
    )
    state.make_leader(
        controller_epoch=1,
        leader_epoch=10,
        isr=frozenset({L, F2}),
        assigned_replicas=(L, F, F2),
        zk_version=3,
        leader_log_end_offset=5,
        now_ms=3,
    )
    assert state.leader_epoch_start_offset == 5
    log.log_end_offset = 7
    fetch(state, log, F, 0, now_ms=4, lag_ms=10_000)
    fetch(state, log, F, 1, now_ms=5, lag_ms=10_000)
    assert not state.expansion_candidate(F, log.high_watermark)  # ≥ HW 1, but < epoch start 5
    fetch(state, log, F, 5, now_ms=6, lag_ms=10_000)
    assert state.expansion_candidate(F, log.high_watermark)
    proposal = state.begin_expand(F)
    state.complete_isr_change(proposal, 4)
    assert state.isr == {L, F, F2}


def test_make_follower_is_a_no_op_for_the_same_leader_and_epoch() -> None:
    """PartitionTest.testMakeFollowerWithNoLeaderIdChange (#11, state part)."""
    state = PartitionState(TP, F)
    assert state.make_follower(
        controller_epoch=1, leader_id=L, leader_epoch=1, assigned_replicas=(L, F), zk_version=1
    )
    assert state.make_follower(
        controller_epoch=1, leader_id=L, leader_epoch=4, assigned_replicas=(L, F), zk_version=2
    )
    assert not state.make_follower(
        controller_epoch=1, leader_id=L, leader_epoch=4, assigned_replicas=(L, F), zk_version=2
    )
    assert state.role is Role.FOLLOWER


def test_new_leader_resets_follower_progress_but_keeps_the_isr_lag_window() -> None:
    log = LeaderLog(log_end_offset=10)
    state = leader({L, F}, (L, F, F2), log, now_ms=100)
    for broker_id, caught_up in ((F, 100), (F2, None)):
        replica = state.remote_replicas[broker_id]
        assert replica == ReplicaProgress(broker_id, -1, -1, -1, None, caught_up, 0)


def test_re_election_of_the_same_leader_keeps_follower_logs() -> None:
    log = LeaderLog(log_end_offset=10)
    state = leader({L, F}, (L, F), log, now_ms=0)
    fetch(state, log, F, 10, now_ms=1, lag_ms=10_000)
    assert not state.make_leader(
        controller_epoch=2,
        leader_epoch=6,
        isr=frozenset({L, F}),
        assigned_replicas=(L, F),
        zk_version=2,
        leader_log_end_offset=10,
        now_ms=2,
    )
    assert state.remote_replicas[F].log_end_offset == 10


def test_leader_always_stays_in_the_isr() -> None:
    state = leader({L, F}, (L, F), LeaderLog(10), now_ms=0)
    with pytest.raises(AssertionError, match="leader stays in the ISR"):
        state.begin_shrink(frozenset({L}))


def test_isr_lists_are_written_in_assignment_order() -> None:
    state = leader({L, F, F2}, (F2, L, F), LeaderLog(10), now_ms=0)
    assert state.begin_shrink(frozenset({F})).isr == (F2, L)


def test_gauges_only_count_led_partitions() -> None:
    state = leader({L}, (L, F, F2), LeaderLog(10), now_ms=0)
    assert state.is_under_replicated()
    assert state.is_under_min_isr(2)
    assert not state.is_at_min_isr(2)
    state.make_follower(
        controller_epoch=1, leader_id=F, leader_epoch=6, assigned_replicas=(L, F, F2), zk_version=2
    )
    assert not state.is_under_replicated()
    assert isinstance(state.isr_state, CommittedIsr)


def test_replicas_being_added_are_not_counted_as_under_replicated() -> None:
    """KIP-352: a reassignment from [L, F] to [L, F2] lists RS = [L, F2, F] with F2 adding."""
    log = LeaderLog(10)
    state = PartitionState(TP, L)
    state.make_leader(
        controller_epoch=1, leader_epoch=5, isr=frozenset({L, F}), assigned_replicas=(L, F2, F),
        zk_version=1, leader_log_end_offset=log.log_end_offset, now_ms=0,
        adding_replicas=(F2,), removing_replicas=(F,),
    )  # fmt: skip
    assert state.is_reassigning
    assert not state.is_under_replicated()
    # F out of the ISR as well: now one of the replicas that should be in sync is missing.
    state.make_leader(
        controller_epoch=1, leader_epoch=6, isr=frozenset({L}), assigned_replicas=(L, F2, F),
        zk_version=2, leader_log_end_offset=log.log_end_offset, now_ms=0,
        adding_replicas=(F2,), removing_replicas=(F,),
    )  # fmt: skip
    assert state.is_under_replicated()
    # Completed: RS = [L, F2], nothing adding, F2 not yet in the ISR counts again.
    state.make_leader(
        controller_epoch=1, leader_epoch=7, isr=frozenset({L}), assigned_replicas=(L, F2),
        zk_version=3, leader_log_end_offset=log.log_end_offset, now_ms=0,
    )  # fmt: skip
    assert (state.adding_replicas, state.removing_replicas) == ((), ())
    assert state.is_under_replicated()

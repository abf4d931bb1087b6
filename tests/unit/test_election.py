"""Leader election algorithms (docs/controller.md §4), on small assignments."""

from __future__ import annotations

from actors.controller.election import (
    ElectionResult,
    controlled_shutdown_leader,
    new_partition_leader,
    offline_partition_leader,
    preferred_replica_leader,
)


def live(*brokers: int):
    return lambda broker: broker in brokers


def test_offline_election_picks_the_first_live_isr_member_in_assignment_order() -> None:
    assert offline_partition_leader(
        (3, 1, 2), (1, 2, 3), live(1, 2), unclean_leader_election_enable=False
    ) == (ElectionResult(1, (1, 2)))


def test_offline_election_without_a_live_isr_member_stays_leaderless_unless_unclean() -> None:
    assert offline_partition_leader((1, 2, 3), (1,), live(2, 3), unclean_leader_election_enable=False) is None
    assert offline_partition_leader((1, 2, 3), (1,), live(2, 3), unclean_leader_election_enable=True) == (
        ElectionResult(2, (2,), unclean=True)
    )
    assert offline_partition_leader((1,), (1,), live(), unclean_leader_election_enable=True) is None


def test_new_partition_leader_is_the_first_live_replica_with_every_live_replica_in_sync() -> None:
    assert new_partition_leader((2, 3, 1), live(1, 3)) == ElectionResult(3, (3, 1))
    assert new_partition_leader((2,), live()) is None


def test_preferred_election_needs_the_head_live_and_in_sync() -> None:
    assert preferred_replica_leader((2, 1), (1, 2), live(1, 2)) == ElectionResult(2, (1, 2))
    assert preferred_replica_leader((2, 1), (1,), live(1, 2)) is None
    assert preferred_replica_leader((2, 1), (1, 2), live(1)) is None


def test_controlled_shutdown_moves_leadership_off_the_shutting_down_broker() -> None:
    result = controlled_shutdown_leader((0, 1, 2), (0, 1, 2), live(0, 1, 2), lambda b: b == 0)
    assert result == ElectionResult(1, (1, 2))
    assert controlled_shutdown_leader((0, 1), (0,), live(0, 1), lambda b: b == 0) is None

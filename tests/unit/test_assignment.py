"""Kafka's rack-unaware replica assignment (docs/controller.md §8)."""

from __future__ import annotations

import random

import pytest

from actors.server.admin.assignment import AssignmentError, assign_replicas_to_brokers


def test_the_example_of_the_specification() -> None:
    """n = 5, rf = 3, startIndex = 0, shift = 0: p0 → [0,1,2], p1 → [1,2,3], p4 → [4,0,1],
    p5 (shift becomes 1) → [0,2,3], p6 → [1,3,4]."""
    assignment = assign_replicas_to_brokers(range(5), 10, 3, rng=random.Random(0), fixed_start_index=0)
    assert assignment[0] == (0, 1, 2)
    assert assignment[1] == (1, 2, 3)
    assert assignment[4] == (4, 0, 1)
    assert assignment[5] == (0, 2, 3)
    assert assignment[6] == (1, 3, 4)


def test_leaders_round_robin_and_replicas_are_distinct() -> None:
    assignment = assign_replicas_to_brokers([3, 1, 2], 6, 3, rng=random.Random(7))
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    leaders = [assignment[p][0] for p in range(6)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]


def test_the_seed_makes_it_reproducible() -> None:
    assert assign_replicas_to_brokers([1, 2, 3], 5, 2, rng=random.Random(3)) == assign_replicas_to_brokers(
        [1, 2, 3], 5, 2, rng=random.Random(3)
    )


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "error"),
    [
        (0, 1, "INVALID_PARTITIONS"),
        (1, 0, "INVALID_REPLICATION_FACTOR"),
        (1, 4, "INVALID_REPLICATION_FACTOR"),
    ],
)
def test_impossible_requests_are_refused(partitions: int, replication_factor: int, error: str) -> None:
    with pytest.raises(AssignmentError) as raised:
        assign_replicas_to_brokers([1, 2, 3], partitions, replication_factor, rng=random.Random(0))
    assert raised.value.error_name == error

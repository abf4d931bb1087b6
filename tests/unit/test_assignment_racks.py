"""Kafka's rack-aware replica assignment (docs/controller.md §8): the same placement as Kafka's
``AdminUtils`` for the same start index and shift, worked out by hand from its algorithm, and the
distribution properties of Kafka's ``AdminRackAwareTest`` re-derived."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest

from actors.common.racks import rack_constraint_broken
from actors.server.admin.assignment import (
    MIXED_RACKS_MESSAGE,
    AssignmentError,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
)

# Kafka's example (AdminUtils' comment): racks 1, 3, 3, 2, 2, 1 for brokers 0..5.
SIX = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
# Three racks of two brokers each, the shape most of Kafka's tests use.
EVEN = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def assign(
    racks: Mapping[int, str | None], partitions: int, replication_factor: int, **kwargs: int
) -> dict[int, tuple[int, ...]]:
    return assign_replicas_to_brokers(
        list(racks), partitions, replication_factor, rng=random.Random(0), racks=racks, **kwargs
    )


# ------------------------------------------------------------------------- the broker list


def test_brokers_alternate_over_the_sorted_racks() -> None:
    # rack1: 0, 5; rack2: 3, 4; rack3: 1, 2 → one of each in turn.
    assert rack_alternated_brokers(SIX) == [0, 3, 1, 5, 4, 2]
    # Without broker 5 rack1 runs out first and is skipped in the second round.
    assert rack_alternated_brokers({b: r for b, r in SIX.items() if b != 5}) == [0, 3, 1, 4, 2]
    # Rack names order as strings, broker ids as numbers within a rack.
    assert rack_alternated_brokers({10: "b", 9: "a", 2: "b", 30: "a", 4: "c"}) == [9, 2, 4, 30, 10]


def test_racks_order_as_java_strings_beyond_the_basic_plane() -> None:
    # U+FF5E sorts before U+1F600 by code point but after it by UTF-16 code unit (0xD83D), as
    # Java's String.compareTo orders them.
    assert rack_alternated_brokers({1: "\uff5e", 2: "\U0001f600"}) == [2, 1]


# ------------------------------------------------------------------ placements, by hand


def test_kafkas_example_seven_partitions_from_index_zero() -> None:
    """List [0,3,1,5,4,2], 3 racks, start 0, shift 0. Partitions 0-5 take the list round-robin
    (each window of three covers the three racks); partition 6 is past one round, so the shift
    becomes 1 (3 positions in the list): 0, then index 1+(3+0)%5 = 4 → 4, then 1+(3+1)%5 = 5 → 2."""
    assert assign(SIX, 7, 3, fixed_start_index=0) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_a_broker_on_a_rack_already_used_is_skipped_until_every_rack_has_a_replica() -> None:
    """Racks a: 0, 3, 4; b: 1; c: 2 → list [0,1,2,3,4]; 3 racks, rf 4, start index = shift = 2, so
    candidates sit at 1 + (2·3 + k) % 4 after the first replica, k counting over the partition.
    Partition 2 (leader 4, rack a): k0 → 2 (c), k1 → 3 and k2 → 0 are on rack a while b has no
    replica yet, k3 → 1 (b); now every rack has one, but k4 → 2 already holds a replica, k5 → 3.
    Partition 5 starts a new round: the shift becomes 3 (9 positions)."""
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assert assign(racks, 6, 4, fixed_start_index=2) == {
        0: (2, 0, 1, 3),
        1: (3, 1, 2, 4),
        2: (4, 2, 1, 3),
        3: (0, 1, 2, 3),
        4: (1, 4, 2, 3),
        5: (2, 4, 1, 3),
    }


def test_added_partitions_continue_from_the_existing_count() -> None:
    """Kafka's expansion case: brokers 6..11, list [6,7,9,11,8,10]. Partition 12 is a multiple of
    6, so the shift is already 1 (3 positions): 6 then 1 + 3 % 5 = 4 → 8; partition 13: 7 then
    (1 + 1 + 3) % 6 = 5 → 10."""
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assert assign(racks, 2, 2, fixed_start_index=0, start_partition_id=12) == {12: (6, 8), 13: (7, 10)}


def test_without_racks_the_rack_unaware_placement_is_unchanged() -> None:
    """Kafka's testReplicaAssignment: five brokers without racks, rf 3, start 0."""
    expected = {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }  # fmt: skip
    assert assign(dict.fromkeys(range(5)), 10, 3, fixed_start_index=0) == expected
    assert assign_replicas_to_brokers(range(5), 10, 3, rng=random.Random(0), fixed_start_index=0) == expected


def test_a_single_rack_places_as_without_racks() -> None:
    # Every rack is used once the leader is placed, so no candidate is skipped for its rack.
    for seed in range(20):
        racked = assign_replicas_to_brokers(
            range(6), 12, 3, rng=random.Random(seed), racks=dict.fromkeys(range(6), "rack1")
        )
        plain = assign_replicas_to_brokers(range(6), 12, 3, rng=random.Random(seed))
        assert racked == plain


def test_the_random_start_draws_as_many_numbers_as_without_racks() -> None:
    rng_racked, rng_plain = random.Random(5), random.Random(5)
    assign_replicas_to_brokers(range(6), 4, 2, rng=rng_racked, racks=EVEN)
    assign_replicas_to_brokers(range(6), 4, 2, rng=rng_plain)
    assert rng_racked.random() == rng_plain.random()


# -------------------------------------------------------------------------- distribution


def distribution(assignment: Mapping[int, tuple[int, ...]]) -> tuple[Counter[int], Counter[int]]:
    leaders = Counter(replicas[0] for replicas in assignment.values())
    replicas = Counter(b for replicas in assignment.values() for b in replicas)
    return leaders, replicas


@pytest.mark.parametrize(
    ("racks", "partitions", "replication_factor", "even_leaders", "even_replicas"),
    [
        (EVEN, 6, 3, True, True),
        (EVEN, 13, 3, False, False),
        ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, True, False),
        (EVEN, 12, 2, True, True),
        (EVEN, 6, 2, True, True),
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, True, True),
        (
            {
                0: "rack1",
                1: "rack2",
                2: "rack2",
                3: "rack3",
                4: "rack3",
                5: "rack1",
                6: "rack1",
                7: "rack2",
                8: "rack2",
                9: "rack3",
                10: "rack1",
                11: "rack3",
            },
            96,
            3,
            True,
            True,
        ),
    ],
)
def test_replicas_land_on_distinct_racks_and_spread_evenly(
    racks: dict[int, str], partitions: int, replication_factor: int, even_leaders: bool, even_replicas: bool
) -> None:
    """Kafka's AdminRackAwareTest cases, for every start index and shift Kafka could draw."""
    for seed in range(25):
        assignment = assign_replicas_to_brokers(
            list(racks), partitions, replication_factor, rng=random.Random(seed), racks=racks
        )
        assert sorted(assignment) == list(range(partitions))
        for replicas in assignment.values():
            assert len(set(replicas)) == replication_factor
            assert len({racks[b] for b in replicas}) == replication_factor
        leaders, replicas_per_broker = distribution(assignment)
        if even_leaders:
            assert set(leaders.values()) == {partitions // len(racks)}
            assert set(leaders) == set(racks)
        if even_replicas:
            assert set(replicas_per_broker.values()) == {partitions * replication_factor // len(racks)}


@pytest.mark.parametrize(("replication_factor", "expected_racks"), [(5, 3), (2, 2)])
def test_more_or_fewer_replicas_than_racks(replication_factor: int, expected_racks: int) -> None:
    """Three racks: five replicas cover all three, two replicas two distinct racks."""
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for seed in range(25):
        assignment = assign_replicas_to_brokers(
            range(6), 6, replication_factor, rng=random.Random(seed), racks=racks
        )
        for replicas in assignment.values():
            assert len(replicas) == len(set(replicas)) == replication_factor
            assert len({racks[b] for b in replicas}) == expected_racks


def test_a_placement_never_breaks_the_rack_constraint() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        brokers = rng.sample(range(1, 40), rng.randint(1, 9))
        names = [f"zone-{i}" for i in range(rng.randint(1, 4))]
        racks = {b: rng.choice(names) for b in brokers}
        rf = rng.randint(1, len(brokers))
        start = rng.choice([None, rng.randrange(len(brokers))])
        assignment = assign_replicas_to_brokers(
            brokers, rng.randint(1, 30), rf, rng=rng, fixed_start_index=start,
            start_partition_id=rng.choice([0, rng.randint(1, 20)]), racks=racks,
        )  # fmt: skip
        for replicas in assignment.values():
            assert len(set(replicas)) == rf
            assert not rack_constraint_broken(replicas, racks), (racks, replicas)


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "racks",
    [{1: "a", 2: None, 3: "b"}, {1: "a", 2: "b"}],
    ids=["a broker with no rack", "a broker missing from the map"],
)
def test_some_brokers_with_racks_and_others_without_are_refused(racks: dict[int, str | None]) -> None:
    with pytest.raises(AssignmentError) as raised:
        assign_replicas_to_brokers([1, 2, 3], 3, 2, rng=random.Random(0), racks=racks)
    assert raised.value.error_name == "INVALID_REPLICA_ASSIGNMENT"
    assert (
        str(raised.value)
        == MIXED_RACKS_MESSAGE
        == ("Not all brokers have rack information for replica rack aware assignment.")
    )


def test_racks_of_brokers_not_offered_do_not_count() -> None:
    # Broker 9 has a rack but is not among the candidates: the three offered have none.
    assignment = assign_replicas_to_brokers(
        [1, 2, 3], 3, 2, rng=random.Random(0), fixed_start_index=0, racks={9: "a"}
    )
    assert assignment == {0: (1, 2), 1: (2, 3), 2: (3, 1)}


def test_the_size_checks_come_first() -> None:
    with pytest.raises(AssignmentError) as raised:
        assign_replicas_to_brokers([1, 2], 1, 3, rng=random.Random(0), racks={1: "a"})
    assert raised.value.error_name == "INVALID_REPLICATION_FACTOR"
